/* What the lifecycle's files share (lifecycle.c, teardown.c), not the
 * API: opening a sandbox by name, and what a one-shot's or a creator's
 * leftovers are. */
#ifndef GANTRY_SANDBOX_LIFECYCLE_PRIV_H
#define GANTRY_SANDBOX_LIFECYCLE_PRIV_H

#include <stdbool.h>

#include "common/error.h"
#include "sandbox/state.h"

/* The sandbox's directory and state, checked to exist; stale leftovers of
 * a supervisor that died are cleaned up. A running one-shot exec's entry
 * is opened only with oneshot_ok (to look at it, stop or delete it); a
 * dead one's is removed and counts as none. */
int lifecycle_open_as(const char *name, bool oneshot_ok, char **dir, struct sandbox *sb,
		      gantry_error_t *err);
/* A one-shot's entry whose process is gone (killed): removed under its
 * lock; false when its process still holds it. */
bool lifecycle_oneshot_gone(const char *name, const char *dir);
/* Whether a `gantry start` is still making this sandbox. */
bool lifecycle_creator_alive(const struct sandbox *sb);

#endif
