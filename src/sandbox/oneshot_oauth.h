/* The OAuth bridge of a one-shot run (gantry wrap): a login tool in the
 * guest opens its authorization URL through `gantry-guest open-url` (the
 * guest's BROWSER), which sends it here (PROTO_OAUTH_PORT). The URL is
 * shown on the run's stderr for the user to open; when it names a
 * loopback callback (redirect_uri=http://localhost:PORT/..., 127.0.0.1 or
 * [::1]), this process listens on the host's 127.0.0.1:PORT, and each
 * connection the browser makes there is carried into the guest's own
 * 127.0.0.1:PORT (PROTO_OAUTH_REPLAY_PORT), where the tool waits for it.
 * At most ONESHOT_OAUTH_PORTS ports, each for the rest of the run.
 *
 * With custody (oauth/custody.h), `gantry-guest oauth login|token NAME`
 * reaches it on PROTO_CUSTODY_PORT (oauth/service.h). */
#ifndef GANTRY_SANDBOX_ONESHOT_OAUTH_H
#define GANTRY_SANDBOX_ONESHOT_OAUTH_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/acceptor.h"
#include "common/error.h"
#include "oauth/service.h"

#define ONESHOT_OAUTH_PORTS 4
#define ONESHOT_OAUTH_CONNS 8 /* a callback's connections at once */

struct oauth_custody;

struct oneshot_oauth;

struct oauth_bridge;

/* One of a bridge's listeners: each connection's handler joins on the
 * acceptor that took it. */
struct oauth_bridge_listener {
	struct oauth_bridge *b;
	struct acceptor acc;
};

struct oauth_bridge {
	struct oneshot_oauth *o;
	uint16_t port;
	struct oauth_bridge_listener l4, l6; /* 127.0.0.1:port, [::1]:port */
};

struct oneshot_oauth {
	struct acceptor acc; /* the guest's open-url requests, one at a time */
	char *dir;	     /* the run directory: the VMM's vsock.sock */
	pthread_mutex_t lock;
	struct oauth_bridge bridges[ONESHOT_OAUTH_PORTS];
	unsigned int nr;
	struct oauth_service custody; /* custody's requests */
};

/* Open the bridge's door in doors when on, and custody's when custody is
 * not NULL (else nothing is started); dir is the run directory. o's lock
 * is PTHREAD_MUTEX_INITIALIZER from its declaration on, so that a stop
 * without a start is sound. */
struct doors;
int oneshot_oauth_start(struct oneshot_oauth *o, const char *dir, struct doors *doors, bool on,
			struct oauth_custody *custody, gantry_error_t *err);
int oneshot_oauth_run(struct oneshot_oauth *o, gantry_error_t *err);
void oneshot_oauth_stop(struct oneshot_oauth *o);

/* The loopback port of url's redirect_uri (http://localhost:PORT/...,
 * 127.0.0.1 or [::1]), 1024 or above, or 0. Pure, for the tests. */
uint16_t oauth_callback_port(const char *url);

#endif
