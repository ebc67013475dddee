/* The process a session runs, as one-shot `gantry exec` and `gantry exec
 * NAME` both build it: the image's Entrypoint and Cmd (a command after `--`
 * replaces Cmd), Env, WorkingDir and User, with this process's stdio and
 * terminal, signals forwarded. */
#ifndef GANTRY_SANDBOX_PROCESS_H
#define GANTRY_SANDBOX_PROCESS_H

#include <stddef.h>

#include "agent/session.h"
#include "common/error.h"
#include "image/config.h"
#include "sandbox/state.h"

struct sandbox_process {
	struct agent_process p;
	struct image_user user;
	char **argv;
	char **env; /* the image's with sb's proxy variables, when it has a proxy */
};

/* cfg may be NULL (a prebuilt .erofs: /bin/sh or the command given); the
 * proxy variables of sb (-proxy) replace the image's. */
int sandbox_process_init(struct sandbox_process *sp, const struct image_config *cfg,
			 char *const *args, size_t nargs, const struct sandbox *sb,
			 gantry_error_t *err);
void sandbox_process_free(struct sandbox_process *sp);

#endif
