/* Host Unix sockets relayed into a one-shot's container (gantry wrap
 * -socket): the guest listens at each socket's path and carries every
 * connection to PROTO_SOCKET_PORT (guest/sockets.c); here, on threads of
 * the `gantry` process, each is joined to a connection to the host's
 * socket. The guest names a socket only by its index in the list it was
 * given; a connection that does not name one within a few seconds is
 * dropped. */
#ifndef GANTRY_SANDBOX_ONESHOT_SOCKETS_H
#define GANTRY_SANDBOX_ONESHOT_SOCKETS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/acceptor.h"
#include "common/error.h"

#define ONESHOT_SOCKETS_MAX 16 /* as the guest takes (guest/shares.h) */
#define ONESHOT_SOCKET_CONNS 64 /* joined at once */

struct oneshot_sockets {
	struct acceptor acc; /* a thread per stream */
	char *const *paths;  /* borrowed */
	size_t n;
};

/* Open its door in doors when paths has any (else nothing is started). */
struct doors;
int oneshot_sockets_start(struct oneshot_sockets *s, struct doors *doors, char *const *paths,
			  size_t n, gantry_error_t *err);
/* Serve, on a thread (once the VM's workers are spawned). */
int oneshot_sockets_run(struct oneshot_sockets *s, gantry_error_t *err);
/* End every joined connection and the thread. */
void oneshot_sockets_stop(struct oneshot_sockets *s);

#endif
