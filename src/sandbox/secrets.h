/* A sandbox's secrets on their way to its supervisor: what sandbox.json
 * keeps of them (specs without values) and, at a resume, their values
 * from the caller's environment. The supervisor holds the values
 * (secret/store.h); the lifecycle only hands them over. This is the
 * lifecycle's and the supervisor's side: the calls front ends make (set,
 * rm, list, audit) are sandbox/lifecycle.h's, which this header includes;
 * no front end includes it. */
#ifndef GANTRY_SANDBOX_SECRETS_H
#define GANTRY_SANDBOX_SECRETS_H

#include "common/error.h"
#include "sandbox/lifecycle.h"
#include "secret/store.h"

/* A session's own secrets: host-bound ones refused (its sandbox's
 * supervisor serves the sandbox's); st may be NULL. */
int sandbox_secrets_check(struct secret_store *st, gantry_error_t *err);
/* st's secrets as sb keeps them (sb->secrets): specs without values
 * (its supervisor reads their sources). */
int sandbox_secrets_describe(struct secret_store *st, struct sandbox *sb, gantry_error_t *err);
/* The values of sb's secrets from the environment, from env (*out NULL
 * when it has none); -1 when one is not set there. */
int sandbox_secrets_from_env(const struct sandbox *sb, sandbox_env_fn env,
			     struct secret_store **out, gantry_error_t *err);
/* sb keeps spec (valueless, canonical) in place of its secret of that
 * name, or beside the others. */
int sandbox_secret_keep(struct sandbox *sb, const char *spec, gantry_error_t *err);
/* sb no longer keeps the secret named name; false: it had none. */
bool sandbox_secret_drop(struct sandbox *sb, const char *name);
/* Free *st (may be NULL) and clear it. */
void sandbox_secrets_free(struct secret_store **st);

#endif
