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
#include "sandbox/lifecycle.h"
#include "sandbox/network.h"

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

/* This process's stdio and terminal, and its signals forwarded while the
 * session runs. */
static int exec_stdio(struct sandbox_stdio *io, gantry_error_t *err)
{
	*io = (struct sandbox_stdio){ .in = STDIN_FILENO,
				      .out = STDOUT_FILENO,
				      .err = STDERR_FILENO,
				      .tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO),
				      .catch_signals = cli_signals_catch };
	io->signal_fd = cli_signals_fd(err);
	return io->signal_fd < 0 ? -1 : 0;
}

/* `gantry exec NAME [-- CMD...]`. */
static int exec_sandbox(const char *name, char *const *args, size_t nargs)
{
	struct agent_result res = { 0 };
	struct sandbox_stdio io;
	gantry_error_t err = NULL;
	int r;

	if (exec_stdio(&io, &err) < 0) {
		gantry_error_print(&err);
		return EXEC_VM_FAILED;
	}
	r = sandbox_exec(name, args, nargs, &io, NULL, &res, &err); /* signals are forwarded */
	if (r < 0) {
		gantry_error_print(&err);
		return EXEC_VM_FAILED;
	}
	return exec_result(&res);
}

static void exec_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry exec NAME [-- CMD ARG...]\n"
		"       gantry exec [-image SRC] [-cpus N] [-mem MiB] [-net=false] [-p SPEC]...\n"
		"                   [-console] [-- CMD...]\n\n"
		"With NAME: run CMD in the running sandbox NAME (gantry start), in its one\n"
		"long-lived container; many sessions may run at once.\n"
		"Without: boot a fresh microVM on an image, run CMD in it (else the image's\n"
		"Entrypoint and Cmd, else /bin/sh) with the terminal relayed, and return its\n"
		"exit status.\n"
		"SRC is an OCI image layout directory, a docker-save tar, a .erofs image or\n"
		"a registry reference (pulled on first use, then taken from the cache; see\n"
		"gantry image -help); without -image, Gantry's built-in busybox image.\n"
		"Exit status: the process's own, 128+N for signal N, 127 when the command\n"
		"is not in the image, 125 when the VM itself failed. Signals go to the\n"
		"process; without a terminal the third Ctrl-C kills it.\n"
		"The fresh microVM has a network (NAT through the host; -net=false: only lo);\n"
		"-p SPEC publishes a port while it runs, as for gantry start.\n\nFlags:\n");
	flags_usage(out, flags);
}

int cmd_exec(int argc, char **argv)
{
	struct sandbox_opts o;
	struct agent_result res = { 0 };
	static struct gantry_cancel cancel;
	struct sandbox_stdio io;
	gantry_error_t err = NULL;
	bool help = false, show_console = false, dashdash;
	int rest, r;
	const struct flag flags[] = {
		FLAGS_SANDBOX(&o),
		{ "console", FLAG_BOOL, &show_console, NULL, NULL, "guest console to stderr", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	sandbox_opts_init(&o);
	o.writable = false; /* no layer: its writes live in guest memory */
	r = flags_parse_cmd("exec", flags, argc, argv, &rest, &dashdash, exec_usage);
	if (r <= 0) {
		sandbox_opts_free(&o);
		return -r;
	}
	if (sandbox_opts_check(&o, &err) < 0) {
		gantry_error_prefix(&err, "exec");
		gantry_error_print(&err);
		sandbox_opts_free(&o);
		return 2;
	}
	if (!dashdash && rest < argc) {
		sandbox_opts_free(&o);
		if (rest > 0) {
			log_error("exec: flags are for a fresh microVM, not for the "
				  "sandbox `%s` (gantry exec NAME -- CMD)",
				  argv[rest]);
			return 2;
		}
		if (rest + 1 < argc && strcmp(argv[rest + 1], "--") != 0) {
			log_error("exec: unexpected argument `%s` (put the command "
				  "after --)",
				  argv[rest + 1]);
			return 2;
		}
		return exec_sandbox(argv[rest], argv + rest + 2,
				    rest + 2 <= argc ? (size_t)(argc - rest - 2) : 0);
	}
	/* Ctrl-C while the VM boots ends it; once the command runs, the
	 * session forwards signals to it instead. */
	if (exec_stdio(&io, &err) == 0 && cli_signals_cancel(&cancel, &err) == 0)
		r = sandbox_run_once(&o, show_console, argv + rest, (size_t)(argc - rest), &io,
				     &cancel, &res, &err);
	else
		r = -1;
	sandbox_opts_free(&o);
	if (r < 0)
		return cli_fail(&err, EXEC_VM_FAILED);
	return exec_result(&res);
}
