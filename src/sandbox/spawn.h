/* Starting a sandbox's supervisor (src/supervisor/), from the side of the
 * call that boots it: the gantry binary executed afresh in a hidden role
 * (`gantry __supervisor NAME`), detached from any terminal and logging to
 * daemon.log, and a pipe on which it says when it is ready. */
#ifndef GANTRY_SANDBOX_SPAWN_H
#define GANTRY_SANDBOX_SPAWN_H

#include "common/cancel.h"
#include "common/error.h"
#include "secret/store.h"

#define SUPERVISOR_ROLE	    "__supervisor"
#define SUPERVISOR_READY_FD 3 /* "pid N\n", then "ok\n" once ready, else "error: ...\n" */
#define SUPERVISOR_SECRETS_FD 4 /* with --secrets: the values (secret_store_send) */

/* Start a detached supervisor for the sandbox in dir and wait until its
 * guest agent and ctl.sock accept work, or say why it could not. secrets
 * (may be NULL) are the values of its secrets from the caller's
 * environment or a dotenv, handed over on a socket of its own. Once
 * cancel (may be NULL) fires, the supervisor is ended and its VM with it,
 * and this fails with ECANCELED. */
int supervisor_spawn(const char *name, const char *dir, struct secret_store *secrets,
		     const struct gantry_cancel *cancel, gantry_error_t *err);

#endif
