/* `gantry exec`: one-shot, a transient sandbox (sandbox_run_once), or
 * `gantry exec NAME`, a session in a running persistent sandbox
 * (sandbox_exec). Flags and printing only; the work is src/sandbox/. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/session.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/signals.h"
#include "common/log.h"
#include "mcp/gateway.h"
#include "oauth/custody.h"
#include "sandbox/lifecycle.h"

#define EXEC_VM_FAILED 125 /* the VM or Gantry failed, not the process */

/* A result's status, with the guest's reason when the process never ran. */
static int exec_result(struct agent_result *res)
{
	int status = agent_result_status(res);

	if (res->error)
		log_error("exec: %s", res->message ? res->message : "cannot run");
	agent_result_free(res);
	return status;
}

/* `gantry exec [PROCESS FLAGS] NAME [-- CMD...]`. */
static int exec_sandbox(const char *name, const struct sandbox_process_opts *po)
{
	struct agent_result res = { 0 };
	struct sandbox_stdio io;
	gantry_error_t err = NULL;
	int r;

	if (cli_session_stdio(&io, &err) < 0) {
		gantry_error_print(&err);
		return EXEC_VM_FAILED;
	}
	r = sandbox_exec(name, po, &io, NULL, &res, &err); /* signals are forwarded */
	if (r < 0) {
		gantry_error_print(&err);
		return EXEC_VM_FAILED;
	}
	return exec_result(&res);
}

static void exec_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry exec [-e NAME=VALUE]... [-w DIR] [-u USER] [-entrypoint CMD]\n"
		"                   [-secret SPEC]... NAME [-- CMD ARG...]\n"
		"       gantry exec [-name NAME] [-image SRC] [-cpus N] [-mem MiB] [-net=false]\n"
		"                   [-p SPEC]... [-e ...] [-w DIR] [-u USER] [-console]\n"
		"                   [-secret SPEC]... [-secret-file FILE] [-- CMD...]\n"
		"       gantry exec -from SNAP [-name NAME] [-p SPEC]... [-e ...] [-w DIR]\n"
		"                   [-u USER] [-- CMD...]\n\n"
		"With NAME: run CMD in the running sandbox NAME (gantry start), in its one\n"
		"long-lived container, as given (as docker exec: the image's Entrypoint is\n"
		"not put before it; without CMD, its Entrypoint and Cmd, else /bin/sh);\n"
		"many sessions may run at once.\n"
		"Without: boot a fresh microVM on an image, run CMD in it (else the image's\n"
		"Entrypoint and Cmd, else /bin/sh) with the terminal relayed, and return its\n"
		"exit status.\n"
		"With -from SNAP: a sandbox started from snapshot SNAP instead of a boot (as\n"
		"gantry start NAME -from SNAP: its processes, memory and files as they were,\n"
		"the machine the snapshot's), CMD run in it, and the sandbox deleted.\n"
		"SRC is an OCI image layout directory, a docker-save tar, a .erofs image or\n"
		"a registry reference (pulled on first use, then taken from the cache; see\n"
		"gantry image -help); without -image, Gantry's built-in busybox image.\n"
		"While it runs it is listed by gantry ls (as -name NAME, else exec-XXXXXXXX)\n"
		"and gantry stop NAME ends it (SIGTERM to the command, SIGKILL after 10 s).\n"
		"Exit status: the process's own, 128+N for signal N, 127 when the command\n"
		"is not in the image, 125 when the VM itself failed, 2 for a bad flag or\n"
		"value (checked before any image is pulled). Signals go to the\n"
		"process; without a terminal the third Ctrl-C kills it.\n"
		"The fresh microVM has a network (NAT through the host; -net=false: only lo);\n"
		"-p SPEC publishes a port while it runs, as for gantry start.\n"
		"-e, -env-file, -w, -u and -entrypoint set the process's environment, working\n"
		"directory, user and command over the image's Env, WorkingDir, User and\n"
		"Entrypoint, as docker run does (-entrypoint drops the image's Cmd too); they\n"
		"and -secret go before NAME, the other flags only without one.\n"
		"-secret and -secret-file put secrets in the process's environment, never in\n"
		"a host command line, environment or file (see docs/secrets.md).\n\nFlags:\n");
	flags_usage(out, flags);
}

/* Any flag that shapes a fresh microVM: none is for a running sandbox. */
static bool vm_flags_set(const struct sandbox_opts *o, bool show_console)
{
	struct sandbox_opts d;
	bool same;

	sandbox_opts_init(&d);
	same = o->name == NULL && o->image == d.image && o->cpus == d.cpus &&
	       o->mem_mib == d.mem_mib && o->net == d.net && o->nr_ports == 0 &&
	       o->net_policy == NULL && o->allow_local_net == d.allow_local_net &&
	       o->proxy == NULL && o->no_proxy == NULL && o->proxy_enforce == d.proxy_enforce &&
	       o->nr_shares == 0 && o->isolation == d.isolation && !show_console;
	sandbox_opts_free(&d);
	return !same;
}

/* -from: the machine is the snapshot's; a name and ports are its own. */
static bool from_flags_refused(struct sandbox_opts *o, bool show_console)
{
	const char *name = o->name;
	char **ports = o->ports;
	size_t nr = o->nr_ports;
	bool refused;

	o->name = NULL;
	o->ports = NULL;
	o->nr_ports = 0;
	refused = vm_flags_set(o, show_console) || o->secrets;
	o->name = name;
	o->ports = ports;
	o->nr_ports = nr;
	if (refused)
		log_error("exec: -from: the machine is the snapshot's (gantry start -from "
			  "takes the same): with it only -name, -p and the process's -e, "
			  "-env-file, -w, -u and -entrypoint, no -secret");
	return refused;
}

int cmd_exec(int argc, char **argv)
{
	struct sandbox_process_opts po = { 0 };
	struct sandbox_opts o;
	struct mcp_gateway gw;
	struct agent_result res = { 0 };
	static struct gantry_cancel cancel;
	struct sandbox_stdio io;
	gantry_error_t err = NULL;
	bool help = false, show_console = false, dashdash, docker = false, detach = false;
	bool custody_on = false;
	struct oauth_custody custody = { 0 };
	struct cli_mcp_fs mcpfs = { 0 };
	const char *from = NULL;
	int rest, r;
	const struct flag flags[] = {
		FLAGS_SANDBOX(&o),
		FLAGS_PROCESS(&po),
		FLAGS_SECRETS(&o),
		FLAG_MCP_REMOTE(&gw),
		FLAGS_MCP_FS(&mcpfs),
		FLAG_OAUTH_CUSTODY(&custody_on),
		{ "name", FLAG_STRING, &o.name, NULL, "NAME",
		  "its name in gantry ls while it runs (default exec-XXXXXXXX)", 0 },
		{ "from", FLAG_STRING, &from, NULL, "SNAP",
		  "start from snapshot SNAP (gantry snapshot) instead of booting", 0 },
		{ "console", FLAG_BOOL, &show_console, NULL, NULL, "guest console to stderr", 0 },
		/* Docker's, for what gantry exec does anyway. */
		{ "i", FLAG_BOOL, &docker, NULL, NULL, "accepted: stdin is always relayed", 0 },
		{ "t", FLAG_BOOL, &docker, NULL, NULL,
		  "accepted: a terminal is given when stdin and stdout are one", 0 },
		{ "it", FLAG_BOOL, &docker, NULL, NULL, "accepted: -i and -t", 0 },
		{ "ti", FLAG_BOOL, &docker, NULL, NULL, "accepted: -i and -t", 0 },
		{ "rm", FLAG_BOOL, &docker, NULL, NULL,
		  "accepted: a one-shot microVM leaves nothing behind", 0 },
		{ "d", FLAG_BOOL, &detach, NULL, NULL,
		  "refused: exec runs in the foreground (gantry start NAME keeps one)", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	sandbox_opts_init(&o);
	o.progress_fd = STDERR_FILENO; /* a pull draws its layers on a terminal */
	mcp_gateway_init(&gw);
	o.writable = false; /* no layer: its writes live in guest memory */
	r = flags_parse_cmd("exec", flags, argc, argv, &rest, &dashdash, exec_usage);
	if (r <= 0)
		goto done;
	if (detach) {
		log_error("exec: -d: exec runs in the foreground; gantry start NAME keeps a sandbox "
			  "running, and gantry exec NAME -- CMD runs in it");
		r = 2;
		goto done;
	}
	if (!dashdash && rest < argc) {
		r = 2;
		if (cli_image_like(argv[rest])) {
			log_error("exec: `%s` is an image, not a sandbox name: gantry exec -image %s "
				  "-- CMD runs it once",
				  argv[rest], argv[rest]);
			goto done;
		}
		if (from || gw.n || mcpfs.on || custody_on || vm_flags_set(&o, show_console)) {
			log_error("exec: -from, -name, -image, -cpus, -mem, -net, -p, -share, "
				  "-proxy, -process-isolation, -mcp, -mcp-remote, -oauth-custody "
				  "and -console are for a "
				  "fresh microVM, "
				  "not for the sandbox `%s` (gantry exec [-e ...] NAME -- CMD)",
				  argv[rest]);
			goto done;
		}
		if (rest + 1 < argc && strcmp(argv[rest + 1], "--") != 0) {
			log_error("exec: unexpected argument `%s` (put the command "
				  "after --)",
				  argv[rest + 1]);
			goto done;
		}
		po.args = argv + rest + 2;
		po.nargs = rest + 2 <= argc ? (size_t)(argc - rest - 2) : 0;
		po.secrets = o.secrets; /* the session's own, with the sandbox's */
		if (sandbox_process_opts_check(&po, &err) < 0) {
			gantry_error_prefix(&err, "exec");
			gantry_error_print(&err);
			goto done;
		}
		r = exec_sandbox(argv[rest], &po);
		goto done;
	}
	po.args = argv + rest;
	po.nargs = (size_t)(argc - rest);
	if (cli_mcp_fs(&gw, &mcpfs, &err) < 0) {
		gantry_error_prefix(&err, "exec");
		gantry_error_print(&err);
		r = 2;
		goto done;
	}
	if (gw.n || gw.fs)
		o.mcp = &gw;
	if (sandbox_opts_check(&o, &err) < 0 || sandbox_process_opts_check(&po, &err) < 0) {
		gantry_error_prefix(&err, "exec");
		gantry_error_print(&err);
		r = 2;
		goto done;
	}
	if (from && (gw.n || gw.fs || custody_on)) {
		log_error("exec: -from: -mcp, -mcp-remote and -oauth-custody are for a fresh "
			  "microVM");
		r = 2;
		goto done;
	}
	if (cli_oauth_custody(&custody, custody_on, &gw, &o, &err) < 0) {
		gantry_error_prefix(&err, "exec");
		gantry_error_print(&err);
		r = 2;
		goto done;
	}
	if (from && from_flags_refused(&o, show_console)) {
		r = 2;
		goto done;
	}
	/* Ctrl-C while the VM boots ends it; once the command runs, the
	 * session forwards signals to it instead. */
	if (cli_session_stdio(&io, &err) < 0 || cli_signals_cancel(&cancel, &err) < 0)
		r = -1;
	else if (from)
		r = sandbox_exec_from(from, o.name, o.ports, o.nr_ports, cli_getenv, &po, &io,
				      &cancel, &res, &err);
	else
		r = sandbox_run_once(&o, show_console, &po, &io, &cancel, &res, &err);
	r = r < 0 ? cli_fail(&err, EXEC_VM_FAILED) : exec_result(&res);
done:
	mcp_gateway_free(&gw);
	oauth_custody_close(&custody);
	sandbox_process_opts_free(&po);
	sandbox_opts_free(&o);
	return r < 0 ? -r : r;
}
