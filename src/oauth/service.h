/* OAuth custody served to a guest: the guest's dials to
 * PROTO_CUSTODY_PORT, through a door here, each one request line
 * from `gantry-guest oauth` ("login NAME" or "token NAME") answered with
 * custody's JSON line (oauth/custody.h), or why not, one line. Where the
 * process serving it has no terminal of the user's (a sandbox's
 * supervisor), a login's URL goes to the guest first as a line "open URL",
 * which its tool shows on its stderr; otherwise it is shown on this
 * process's stderr. OAUTH_SERVICE_CONNS requests at once. */
#ifndef GANTRY_OAUTH_SERVICE_H
#define GANTRY_OAUTH_SERVICE_H

#include <stdbool.h>

#include "common/acceptor.h"
#include "common/error.h"

#define OAUTH_SERVICE_CONNS 4
#define OAUTH_REQUEST_MS    5000 /* to say what it wants */

struct oauth_custody;

struct oauth_service {
	struct acceptor acc;
	struct oauth_custody *custody; /* borrowed */
	bool url_to_guest;
};

#define OAUTH_SERVICE_NONE ((struct oauth_service){ .acc = ACCEPTOR_NONE })

/* Open PROTO_CUSTODY_PORT's door in doors (common/door.h) and serve it. */
struct doors;
int oauth_service_open(struct oauth_service *s, struct doors *doors,
		       struct oauth_custody *custody, bool url_to_guest, gantry_error_t *err);
/* Serve, on threads; nothing when it does not listen. */
int oauth_service_run(struct oauth_service *s, gantry_error_t *err);
void oauth_service_stop(struct oauth_service *s);

#endif
