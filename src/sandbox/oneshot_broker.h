/* A one-shot exec's credential broker: where its secrets include some
 * bound to hosts (NAME@HOST), the `gantry exec` process serves them to the
 * container's git credential helper as a sandbox's supervisor does
 * (docs/secrets.md), on a thread of its own, through the door of
 * PROTO_BROKER_PORT (common/door.h). */
#ifndef GANTRY_SANDBOX_ONESHOT_BROKER_H
#define GANTRY_SANDBOX_ONESHOT_BROKER_H

#include <pthread.h>
#include <stdbool.h>

#include "common/acceptor.h"
#include "common/error.h"
#include "sandbox/state.h"
#include "secret/store.h"

struct oneshot_broker {
	struct acceptor acc;
	struct secret_store *store;
	const struct sandbox *sb; /* its network and egress policy */
};

/* Open its door in doors, when st has a host-bound secret (else nothing
 * is started); st and sb must outlive oneshot_broker_stop(). */
struct doors;
int oneshot_broker_start(struct oneshot_broker *b, struct doors *doors, struct secret_store *st,
			 const struct sandbox *sb, gantry_error_t *err);
/* Serve, on a thread: once the VM's workers are spawned (a process
 * forking confined workers has no other thread), before the guest asks
 * (its dials wait in the door meanwhile). */
int oneshot_broker_run(struct oneshot_broker *b, gantry_error_t *err);
void oneshot_broker_stop(struct oneshot_broker *b);

#endif
