/* `gantry logs [-f] [-tail N] [-console|-net] [-previous] NAME`: a
 * sandbox's logs (sandbox/logs.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/log.h"
#include "sandbox/lifecycle.h"

static void logs_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry logs [-f] [-tail N] [-console | -net] [-previous] NAME\n\n"
		"Print a sandbox's log: by default the supervisor's (daemon.log: boots, stops and\n"
		"errors of the supervisor and its VMM and share workers), with -console the\n"
		"guest's serial console (the kernel's and gantry-init's messages), with -net the\n"
		"network worker's.\n"
		"Control characters and bytes that are not UTF-8 are shown as '?'. With -f it\n"
		"follows the log as it grows, across a new boot, until the sandbox stops.\n\n"
		"Flags:\n");
	flags_usage(out, flags);
}

static void print_line(void *opaque, const char *text, size_t len)
{
	bool follow = *(bool *)opaque;

	fwrite(text, 1, len, stdout);
	putchar('\n');
	if (follow)
		fflush(stdout);
}

static int parse_tail(const char *s, long *tail)
{
	char *end;
	long v;

	if (s == NULL || strcmp(s, "all") == 0) {
		*tail = -1;
		return 0;
	}
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0) {
		log_error("logs: -tail: want a number of lines or `all`, not `%s`", s);
		return -1;
	}
	*tail = v;
	return 0;
}

int cmd_logs(int argc, char **argv)
{
	struct sandbox_logs_opts o = { .which = SANDBOX_LOG_DAEMON };
	bool help = false, console = false, net = false;
	const char *tail = NULL;
	gantry_error_t err = NULL;
	char *name;
	int n, r;
	const struct flag flags[] = {
		{ "f", FLAG_BOOL, &o.follow, NULL, NULL, "follow the log until the sandbox stops", 0 },
		{ "follow", FLAG_BOOL, &o.follow, NULL, NULL, "same as -f", 0 },
		{ "tail", FLAG_STRING, &tail, NULL, "N", "only the last N lines (default all)", 0 },
		{ "n", FLAG_STRING, &tail, NULL, "N", "same as -tail", 0 },
		{ "console", FLAG_BOOL, &console, NULL, NULL, "the guest's serial console", 0 },
		{ "net", FLAG_BOOL, &net, NULL, NULL, "the network worker's log", 0 },
		{ "previous", FLAG_BOOL, &o.previous, NULL, NULL,
		  "the last boot's log, not this one's", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	r = flags_parse_mixed("logs", flags, argc, argv, &name, 1, &n, logs_usage);
	if (r <= 0)
		return -r;
	if (n != 1) {
		log_error("logs: want one sandbox NAME (see gantry logs -help)");
		return 2;
	}
	if (console && net) {
		log_error("logs: -console and -net: one log at a time");
		return 2;
	}
	if (parse_tail(tail, &o.tail) < 0)
		return 2;
	o.which = console ? SANDBOX_LOG_CONSOLE : net ? SANDBOX_LOG_NET : SANDBOX_LOG_DAEMON;
	r = sandbox_logs(name, &o, print_line, &o.follow, NULL, &err);
	return cli_finish(&err, r);
}
