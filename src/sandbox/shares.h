/* A sandbox's shares changed after it was created: `gantry share add|rm|ls`.
 * On a running sandbox through its supervisor (sharelive.c), live in the
 * container and saved in sandbox.json unless ephemeral; on a stopped one
 * in its sandbox.json, under its lock, for the next boot. */
#ifndef GANTRY_SANDBOX_SHARES_H
#define GANTRY_SANDBOX_SHARES_H

#include <jansson.h>
#include <stdbool.h>

#include "common/error.h"

/* {"spec","tag","host","path","ro"[,"uid","gid"]} of a canonical spec. */
json_t *share_json(const char *spec);

/* Add spec (a relative host path is taken from the current directory);
 * replace: in place of the share with its tag. *canonical (optional)
 * gets the share as kept. */
int sandbox_share_add(const char *name, const char *spec, bool replace, bool ephemeral,
		      char **canonical, gantry_error_t *err);
/* Remove the share tag; on a running sandbox, once the guest has no file
 * of it open (force: at once, cutting them). waiting (optional) is told
 * how many are open before the wait begins. */
int sandbox_share_rm(const char *name, const char *tag, bool force, bool ephemeral,
		     void (*waiting)(const char *tag, long open), gantry_error_t *err);
/* {"name","running","shares":[share_json + "live","saved"[,"open"]]} */
int sandbox_shares_list(const char *name, json_t **out, gantry_error_t *err);

#endif
