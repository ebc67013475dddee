/* The seal on a snapshot's configuration: an HMAC-SHA256 of its
 * sandbox.json under a key of this Gantry home ($GANTRY_HOME/snapshot.key,
 * 32 random bytes, the user's, mode 0600, made by the first snapshot).
 *
 * A snapshot's sandbox.json is a sandbox's whole recipe: secrets read from
 * host files or made by host commands, host directories shared, a host
 * root. One copied in from elsewhere would have the clone's supervisor run
 * those commands and read those files as the user, so `start -from` takes
 * a snapshot only with a seal this home made (snapshots.c). */
#ifndef GANTRY_SANDBOX_SNAPSEAL_H
#define GANTRY_SANDBOX_SNAPSEAL_H

#include <stddef.h>

#include "common/error.h"

#define SNAP_SEAL	"sandbox.json.seal"
#define SNAP_SEAL_HEX	64

/* The seal of config (len bytes), in lower-case hex, NUL-terminated. */
int snap_seal_make(const void *config, size_t len, char hex[SNAP_SEAL_HEX + 1],
		   gantry_error_t *err);
/* 0 where snapshot directory sdir's config (the file named config in it)
 * is what its seal says; else -1 with one line saying so. */
int snap_seal_check(const char *sdir, const char *config, size_t max, gantry_error_t *err);

#endif
