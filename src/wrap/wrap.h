/* `gantry wrap`: a command run in a one-shot microVM as if it were a plain
 * child process, for an agent orchestrator's GANTRY_SANDBOX_CMD. This is
 * the plan: what of the host the VM sees (the host's root read-only, the
 * git worktree and its repository's metadata at their own paths, the
 * harnesses' files), and the process (argv, cwd, identity, environment).
 * The run is sandbox_run_once's. */
#ifndef GANTRY_WRAP_H
#define GANTRY_WRAP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"
#include "sandbox/lifecycle.h"

/* A harness an orchestrator may spawn (harness.c, kept as data): paths
 * under $HOME, NULL-ended, and its token variables. */
struct wrap_harness {
	const char *name;
	const char *const *installs; /* read-only: where it is installed */
	const char *const *auth;     /* read-write: its config and tokens */
	/* read-only inside those (kept so by the share server): what the
	 * harness on the host would run, hooks, MCP server commands, notify
	 * commands, and its installs */
	const char *const *protect;
	const char *const *tokens;   /* -secret specs: NAME@HOST,header=H (injected) */
};

extern const struct wrap_harness wrap_harnesses[];

/* Environment variables never passed in: they name the host's sockets and
 * displays, which the VM does not have, or Gantry's own settings. */
bool wrap_env_dropped(const char *entry);

/* The variable a harness token's spec names (its text before `@`), into
 * buf. */
const char *wrap_token_name(const char *spec, char *buf, size_t size);

/* What the plan is made from. */
struct wrap_host {
	const char *cwd;  /* the working directory, resolved */
	const char *home; /* $HOME, NULL: none */
	uid_t uid;
	gid_t gid;
	char *const *environ;
};

/* Fill o (its root, shares, tmpfs) and po (cwd, user, environment) for
 * running in a microVM what would have run on the host in h; o's image, if
 * set, replaces the host's root. */
int wrap_plan(const struct wrap_host *h, struct sandbox_opts *o, struct sandbox_process_opts *po,
	      gantry_error_t *err);

/* -socket PATH (a FLAG_FUNC for opaque = struct sandbox_opts *): a host
 * Unix socket, relayed into the VM at its own path; at most
 * WRAP_SOCKETS_MAX, with those found under the checkout's .gantry/. */
#define WRAP_SOCKETS_MAX 16
int wrap_opts_socket(void *opaque, const char *path, gantry_error_t *err);

/* What wrap.json sets beyond o, for the caller to apply before its flags
 * (which win): wrap_config_init's defaults are the flags' own. */
struct wrap_config {
	bool oauth_bridge, oauth_custody, inject_tokens, mcp, template;
	char *mcp_fs_root, *mcp_fs_user;
	char **mcp_remotes, **secrets, **secret_files; /* specs, NULL-terminated */
};
void wrap_config_init(struct wrap_config *c);
void wrap_config_free(struct wrap_config *c);

/* Read ~/.config/gantry/wrap.json (or $XDG_CONFIG_HOME's): image, cpus,
 * memMiB, net, netPolicy, allowLocalNet, shares and sockets into o; the
 * rest (oauthBridge, oauthCustody, injectTokens, template, mcp,
 * mcpFsRoot, mcpFsUser, mcpRemotes, secrets, secretFiles) into c. A missing file is
 * no error; a key it does not know, or a value of another type, is. */
int wrap_config_load(const char *path, struct sandbox_opts *o, struct wrap_config *c,
		     gantry_error_t *err);

#endif
