/* `gantry wrap [FLAGS] [--] CMD ARG...`: CMD in a one-shot microVM as if it
 * were a plain child process (src/wrap/ plans what it sees). Flags,
 * settings and the caller's lifeline only; the run is sandbox_run_once's. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "agent/session.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/signals.h"
#include "common/child.h"
#include "common/log.h"
#include "common/util.h"
#include "mcp/gateway.h"
#include "oauth/custody.h"
#include "proto/agent.h"
#include "sandbox/lifecycle.h"
#include "wrap/wrap.h"

#define WRAP_FAILED 125 /* the VM or Gantry failed, not the command */

extern char **environ;

static void wrap_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry wrap [FLAGS] [--] CMD ARG...\n\n"
		"Run CMD in a fresh microVM as if it were a plain child process: the\n"
		"same argv, working directory, user, environment, stdio and terminal;\n"
		"signals forwarded, its exit status returned (128+N for signal N), and\n"
		"no VM left once it ends or the caller dies. For an agent orchestrator:\n"
		"  export GANTRY_SANDBOX_CMD=\"gantry wrap --\"\n"
		"What the VM sees, at the host's own paths: the host's root read-only\n"
		"($HOME and Gantry's state hidden), the git worktree around the working\n"
		"directory read-write, its main checkout read-only, the repository's .git\n"
		"read-write but for hooks/ and config, .gantry/ read-write, an empty\n"
		"$HOME with the agent harnesses' installs (read-only) and logins\n"
		"(read-write), and /tmp, /var/tmp and /run of its own. Token variables of\n"
		"the harnesses (ANTHROPIC_API_KEY, OPENAI_API_KEY, ...) are injected at\n"
		"egress into their API's requests, the guest holding a placeholder; the\n"
		"rest of the environment passes as it is, but for the host's sockets and\n"
		"displays (SSH_AUTH_SOCK, DISPLAY, ...).\n"
		"Defaults come from ~/.config/gantry/wrap.json, a key for each flag (image,\n"
		"cpus, memMiB, net, netPolicy, allowLocalNet, shares, sockets, secrets,\n"
		"secretFiles, mcpRemotes, mcp, mcpFsRoot, mcpFsUser, oauthBridge,\n"
		"oauthCustody, injectTokens); flags win. See docs/agents.md.\n"
		"Exit status: CMD's; 125 when the VM or Gantry failed; 2 bad usage.\n\n"
		"Flags:\n");
	flags_usage(out, flags);
}

/* The caller's death ends us, and with us the VM (its workers die with
 * their parent): a thread waits on the parent's pidfd, which, unlike
 * PR_SET_PDEATHSIG, does not fire when only the thread that forked us
 * ends. */
static void *lifeline(void *arg)
{
	struct pollfd p = { .fd = (int)(intptr_t)arg, .events = POLLIN };

	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
	kill(getpid(), SIGKILL);
	return NULL;
}

static int lifeline_start(gantry_error_t *err)
{
	pid_t parent = getppid();
	pthread_t t;
	int fd;

	if (parent <= 1)
		return gantry_error(err, 0, "its parent is gone");
	fd = child_pidfd(parent);
	if (fd < 0)
		return gantry_error_errno(err, "pidfd_open(parent %d)", (int)parent);
	/* The parent may have died before the pidfd named it. */
	if (getppid() != parent) {
		close(fd);
		return gantry_error(err, 0, "its parent is gone");
	}
	if (pthread_create(&t, NULL, lifeline, (void *)(intptr_t)fd) != 0) {
		close(fd);
		return gantry_error(err, 0, "cannot start the lifeline thread");
	}
	pthread_detach(t);
	return 0;
}

/* The harnesses' token variables set here, taken as secrets: injected at
 * egress into their API's requests, the guest holding a placeholder, or
 * (inject false) their values in the process's environment; never onto
 * a host command line or file. */
static int take_tokens(struct sandbox_opts *o, bool inject, gantry_error_t *err)
{
	for (const struct wrap_harness *h = wrap_harnesses; h->name; h++)
		for (size_t i = 0; h->tokens[i]; i++) {
			char name[128];

			wrap_token_name(h->tokens[i], name, sizeof(name));
			if (getenv(name) && cli_flag_secret(o, inject ? h->tokens[i] : name, err) < 0)
				return -1;
		}
	return 0;
}

/* wrap.json's remotes and secrets, as their flags would give them. */
static int apply_config(const struct wrap_config *c, struct sandbox_opts *o,
			struct mcp_gateway *gw, gantry_error_t *err)
{
	for (size_t i = 0; c->mcp_remotes && c->mcp_remotes[i]; i++)
		if (mcp_gateway_add(gw, c->mcp_remotes[i], err) < 0)
			return gantry_error_prefix(err, "mcpRemotes");
	for (size_t i = 0; c->secrets && c->secrets[i]; i++)
		if (cli_flag_secret(o, c->secrets[i], err) < 0)
			return gantry_error_prefix(err, "secrets");
	for (size_t i = 0; c->secret_files && c->secret_files[i]; i++)
		if (cli_flag_secret_file(o, c->secret_files[i], err) < 0)
			return gantry_error_prefix(err, "secretFiles");
	return 0;
}

int cmd_wrap(int argc, char **argv)
{
	struct sandbox_process_opts po = { 0 };
	struct sandbox_opts o;
	struct mcp_gateway gw;
	struct agent_result res = { 0 };
	static struct gantry_cancel cancel;
	struct sandbox_stdio io;
	gantry_error_t err = NULL;
	cleanup_free char *cwd = NULL, *config = cli_config_path("wrap.json");
	struct oauth_custody custody = { 0 };
	struct cli_mcp_fs mcpfs = { 0 };
	struct wrap_config wc;
	cleanup_free char **init_argv = NULL;
	bool help = false, dashdash, inject = true, oauth = true, custody_on = false;
	int rest, r;
	const struct flag flags[] = {
		{ "image", FLAG_STRING, &o.image, NULL, "SRC",
		  "an image as the root instead of the host's (as for gantry exec)", 0 },
		{ "cpus", FLAG_UINT, &o.cpus, NULL, "N", "vCPUs (default 1)", 1024 },
		{ "mem", FLAG_UINT, &o.mem_mib, NULL, "MiB", "guest memory (default 512)", 0 },
		{ "net", FLAG_BOOL, &o.net, NULL, NULL,
		  "guest network (default true; -net=false: only lo)", 0 },
		{ "net-policy", FLAG_STRING, &o.net_policy, NULL, "FILE",
		  "egress policy, JSON (see docs/network.md; default: allow, local wall)", 0 },
		{ "allow-local-net", FLAG_BOOL, &o.allow_local_net, NULL, NULL,
		  "let the guest reach local networks and the host", 0 },
		{ "socket", FLAG_FUNC, &o, wrap_opts_socket, "PATH",
		  "relay a host Unix socket into the VM at the same path (repeatable; those "
		  "under the checkout's .gantry/ are relayed anyway)",
		  0 },
		{ "share", FLAG_FUNC, &o, sandbox_opts_share, "SPEC",
		  "share another host directory: TAG=HOST_PATH[@CTR_PATH][,ro] (repeatable)", 0 },
		FLAGS_SECRETS(&o),
		FLAG_MCP_REMOTE(&gw),
		{ "oauth-bridge", FLAG_BOOL, &oauth, NULL, NULL,
		  "a login's browser URL shown here and its localhost callback carried into "
		  "the VM (default true)",
		  0 },
		FLAGS_MCP_FS(&mcpfs),
		FLAG_OAUTH_CUSTODY(&custody_on),
		{ "template", FLAG_BOOL, &o.template, NULL, NULL,
		  "start the VM from a template snapshot of its machine, which the first run "
		  "writes (default true; see docs/agents.md)",
		  0 },
		{ "inject-tokens", FLAG_BOOL, &inject, NULL, NULL,
		  "the harnesses' API tokens injected at egress, a placeholder in the guest "
		  "(default true; false: their values in its environment)",
		  0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	sandbox_opts_init(&o);
	o.progress_fd = STDERR_FILENO; /* -image: a pull draws its layers on a terminal */
	mcp_gateway_init(&gw);
	wrap_config_init(&wc);
	o.writable = false;
	/* wrap.json first, then the flags over it. */
	if ((config && wrap_config_load(config, &o, &wc, &err) < 0) ||
	    apply_config(&wc, &o, &gw, &err) < 0) {
		gantry_error_prefix(&err, "wrap");
		gantry_error_print(&err);
		r = 2;
		goto done;
	}
	inject = wc.inject_tokens;
	o.template = wc.template;
	oauth = wc.oauth_bridge;
	custody_on = wc.oauth_custody;
	mcpfs = (struct cli_mcp_fs){ .on = wc.mcp, .root = wc.mcp_fs_root, .user = wc.mcp_fs_user };
	r = flags_parse_cmd("wrap", flags, argc, argv, &rest, &dashdash, wrap_usage);
	if (r <= 0)
		goto done;
	if (rest >= argc) {
		log_error("wrap: no command (gantry wrap [FLAGS] -- CMD ARG...)");
		r = 2;
		goto done;
	}
	cwd = getcwd(NULL, 0);
	if (cwd == NULL) {
		log_error("wrap: the working directory is gone");
		r = 2;
		goto done;
	}
	/* CMD as PID 1's child, as on the host (guest/reaper.c), and only
	 * CMD: an image's Entrypoint is not put before it. */
	init_argv = xzalloc(((size_t)(argc - rest) + 4) * sizeof(*init_argv));
	init_argv[0] = PROTO_HELPER_PATH;
	init_argv[1] = PROTO_INIT_ARG;
	init_argv[2] = "--";
	memcpy(init_argv + 3, argv + rest, (size_t)(argc - rest) * sizeof(*init_argv));
	/* The file's fs root and user go with its mcp: -mcp=false drops them. */
	if (wc.mcp && !mcpfs.on && mcpfs.root == wc.mcp_fs_root)
		mcpfs.root = NULL;
	if (wc.mcp && !mcpfs.on && mcpfs.user == wc.mcp_fs_user)
		mcpfs.user = NULL;
	if (cli_mcp_fs(&gw, &mcpfs, &err) < 0) {
		gantry_error_prefix(&err, "wrap");
		gantry_error_print(&err);
		r = 2;
		goto done;
	}
	if (gw.n || gw.fs)
		o.mcp = &gw;
	o.oauth_bridge = oauth;
	po.args = init_argv;
	po.nargs = (size_t)(argc - rest) + 3;
	po.entrypoint = "";
	if (take_tokens(&o, inject, &err) < 0 ||
	    cli_oauth_custody(&custody, custody_on, &gw, &o, &err) < 0 ||
	    wrap_plan(&(struct wrap_host){ .cwd = cwd,
					   .home = getenv("HOME"),
					   .uid = getuid(),
					   .gid = getgid(),
					   .environ = environ },
		      &o, &po, &err) < 0 ||
	    /* A login's browser is the host's, through the bridge. */
	    (oauth && sandbox_process_opts_env(&po, "BROWSER=" PROTO_HELPER_PATH " " PROTO_OPEN_URL_ARG,
					       &err) < 0) ||
	    sandbox_opts_check(&o, &err) < 0 || sandbox_process_opts_check(&po, &err) < 0) {
		gantry_error_prefix(&err, "wrap");
		gantry_error_print(&err);
		r = 2;
		goto done;
	}
	if (cli_session_stdio(&io, &err) < 0 || cli_signals_cancel(&cancel, &err) < 0 ||
	    lifeline_start(&err) < 0)
		r = -1;
	else
		r = sandbox_run_once(&o, false, &po, &io, &cancel, &res, &err);
	if (r < 0) {
		gantry_error_prefix(&err, "wrap");
		r = cli_fail(&err, WRAP_FAILED);
	} else {
		r = agent_result_status(&res);
		if (res.error)
			log_error("wrap: %s", res.message ? res.message : "cannot run");
		agent_result_free(&res);
	}
done:
	mcp_gateway_free(&gw);
	wrap_config_free(&wc);
	oauth_custody_close(&custody);
	sandbox_process_opts_free(&po);
	sandbox_opts_free(&o);
	return r < 0 ? -r : r;
}
