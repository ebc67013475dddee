/* The process a session runs, as one-shot `gantry exec` and `gantry exec
 * NAME` both build it: the image's Entrypoint and Cmd (a command after `--`
 * replaces Cmd), Env, WorkingDir and User, each overridden as the caller
 * asks the way Docker merges them, with the caller's stdio, terminal and
 * signals. */
#ifndef GANTRY_SANDBOX_PROCESS_H
#define GANTRY_SANDBOX_PROCESS_H

#include <stdbool.h>
#include <stddef.h>

#include "agent/session.h"
#include "common/error.h"
#include "image/config.h"
#include "sandbox/state.h"
#include "secret/store.h"

/* Where a session meets its caller: the descriptors its stdio goes to
 * and comes from (in -1: none; out and err -1: dropped), whether it gets
 * a terminal (raw mode on `in` while it runs, when that is one), and the
 * caller's signals to forward (agent/session.h's signal_fd; 0 or -1: none).
 * The caller's to close; they must outlive the call. catch_signals, when
 * set, is called with on true as the session starts and false as it ends:
 * a CLI catches its signals only then, so that one before (during a boot)
 * still ends it. */
struct sandbox_stdio {
	int in, out, err;
	bool tty;
	int signal_fd;
	int (*catch_signals)(bool on, gantry_error_t *err);
	/* Called once the process runs in the guest (may be NULL). */
	void (*started)(void *opaque);
	void *started_opaque;
};

/* What the caller sets on the process, over the image's config. */
struct sandbox_process_opts {
	char *const *args; /* a command (after `--`): replaces Cmd */
	size_t nargs;
	char **env; /* NAME=VALUE, over the image's Env (a later one wins) */
	size_t nr_env;
	const char *workdir;	/* an absolute path; NULL: WorkingDir, else / */
	const char *user;	/* user[:group] or uid[:gid]; NULL: User */
	const char *entrypoint; /* NULL: Entrypoint; else replaces it (""
				 * leaves none) and Cmd with it */
	struct secret_store *secrets; /* -secret: into its environment, over
				       * the rest (borrowed; NULL: none) */
	bool serves_bound;	      /* host-bound secrets are served to it (a
				       * one-shot's broker); else refused */
	/* An OCI process's (gantry-oci): its additional groups instead of
	 * /etc/group's, its resource limits and capability sets instead of
	 * the guest's defaults (agent_process's). */
	const uint32_t *groups;
	size_t ngroups;
	bool has_groups;
	const struct proto_rlimit *rlimits;
	size_t nrlimits;
	bool has_rlimits;
	const uint64_t *caps;
	bool container_init; /* its end ends the container (PROTO_EXEC_INIT) */
};

/* -e NAME=VALUE: checked (a name, no NUL) and added to o->env. */
int sandbox_process_opts_env(struct sandbox_process_opts *o, const char *spec,
			     gantry_error_t *err);
/* What can be checked before any image is at hand: the working
 * directory, a command to run at all. */
int sandbox_process_opts_check(const struct sandbox_process_opts *o, gantry_error_t *err);
void sandbox_process_opts_free(struct sandbox_process_opts *o);
/* `gantry start`'s: o's environment, working directory, user and
 * entrypoint made the sandbox's own, written over its image's config
 * (*cfg; NULL for a prebuilt .erofs: one is made), as docker run makes
 * them the container's: every session starts from them. The user is
 * checked against the image's /etc/passwd and /etc/group. */
int sandbox_process_apply(struct image_config **cfg, const struct sandbox_process_opts *o,
			  gantry_error_t *err);

struct sandbox_process {
	struct agent_process p;
	struct image_user user;
	char **argv;
	char **env;  /* the image's with sb's proxy variables, when it has a proxy */
	char **envp; /* with secrets: the environment's pointers, none owned */
	struct secret_env secrets; /* o->secrets' values, read at init */
};

/* cfg may be NULL (a prebuilt .erofs: /bin/sh or the command given); the
 * proxy variables of sb (-proxy) replace the image's, o's variables both,
 * and o's secrets (read now: a source that fails fails this) all three.
 * Errors name the option that was wrong. */
int sandbox_process_init(struct sandbox_process *sp, const struct image_config *cfg,
			 const struct sandbox_process_opts *o, const struct sandbox *sb,
			 const struct sandbox_stdio *io, gantry_error_t *err);
/* base's NAME=VALUE strings but those whose names over has, then over's:
 * a new array of the same pointers (free the array only). */
char **sandbox_env_overlay(char *const *base, char *const *over);
/* Secrets (NAME=VALUE, the caller's: they must outlive sp) into the
 * process's environment, over any variable of their names. */
void sandbox_process_secrets(struct sandbox_process *sp, char *const *secrets);
void sandbox_process_free(struct sandbox_process *sp);
/* Run it through a's link (agent_run), the caller's signals caught
 * meanwhile (io->catch_signals). */
int sandbox_process_run(struct agent *a, struct sandbox_process *sp,
			const struct sandbox_stdio *io, struct agent_result *res,
			gantry_error_t *err);

#endif
