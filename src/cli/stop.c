/* `gantry stop [-snapshot] NAME...`: each guest syncs and powers off, or
 * with -snapshot is saved as it runs, for `gantry resume` to go on from;
 * its files stay. And `gantry pause`/`unpause NAME...`: its vCPUs held
 * still, nothing saved. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/log.h"
#include "sandbox/lifecycle.h"

static bool snapshot, with_secrets;

static int stop_one(const char *name, gantry_error_t *err)
{
	return snapshot ? sandbox_pause(name, with_secrets, err) : sandbox_stop(name, err);
}

static void stop_usage(FILE *out, const struct flag *flags)
{
	fprintf(out, "Usage: gantry stop [-snapshot] NAME...\n\n"
		     "Stop running sandboxes: each guest syncs and powers off, its processes\n"
		     "end. Their configuration and writable layers stay for gantry resume.\n"
		     "A sandbox that is not running is left as it is.\n\n"
		     "With -snapshot, each is saved instead (its vCPUs, devices and memory,\n"
		     "in its directory) and gantry resume goes on from the save without a\n"
		     "boot: its processes keep running with their memory. A sandbox with an\n"
		     "exec session running, or with secrets in its memory (without\n"
		     "-with-secrets), is not saved: the error says why (docs/snapshots.md).\n"
		     "\nFlags:\n");
	flags_usage(out, flags);
}

int cmd_stop(int argc, char **argv)
{
	bool help = false, dashdash;
	int rest, r;
	const struct flag flags[] = {
		{ "snapshot", FLAG_BOOL, &snapshot, NULL, NULL,
		  "save each sandbox as it runs, for gantry resume to go on from", 0 },
		{ "with-secrets", FLAG_BOOL, &with_secrets, NULL, NULL,
		  "-snapshot: save one that holds secrets too (their values go to disk with its "
		  "memory)",
		  0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	r = flags_parse_cmd("stop", flags, argc, argv, &rest, &dashdash, stop_usage);
	if (r <= 0)
		return -r;
	if (rest >= argc) {
		log_error("stop: want one NAME or more (see gantry stop -help)");
		return 2;
	}
	if (with_secrets && !snapshot) {
		log_error("stop: -with-secrets goes with -snapshot");
		return 2;
	}
	return cli_each_name(argc - rest, argv + rest, stop_one);
}

static int pause_one(const char *name, gantry_error_t *err)
{
	return sandbox_freeze(name, true, err);
}

static int unpause_one(const char *name, gantry_error_t *err)
{
	return sandbox_freeze(name, false, err);
}

static void pause_usage(FILE *out, const struct flag *flags)
{
	fprintf(out, "Usage: gantry pause NAME...\n       gantry unpause NAME...\n\n"
		     "Pause running sandboxes: each VM's vCPUs stop where they are, nothing is\n"
		     "saved and no memory is given back; its host side (network, shares) stays\n"
		     "up, and gantry exec is refused until gantry unpause lets it run on. A\n"
		     "paused sandbox lists as paused; gantry stop ends it as it would a running\n"
		     "one. (gantry stop -snapshot saves one and frees its memory instead.)\n"
		     "\nFlags:\n");
	flags_usage(out, flags);
}

static int pause_cmd(const char *cmd, int argc, char **argv,
		     int (*one)(const char *name, gantry_error_t *err))
{
	bool help = false, dashdash;
	int rest, r;
	const struct flag flags[] = {
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	r = flags_parse_cmd(cmd, flags, argc, argv, &rest, &dashdash, pause_usage);
	if (r <= 0)
		return -r;
	if (rest >= argc) {
		log_error("%s: want one NAME or more (see gantry %s -help)", cmd, cmd);
		return 2;
	}
	return cli_each_name(argc - rest, argv + rest, one);
}

int cmd_pause(int argc, char **argv)
{
	return pause_cmd("pause", argc, argv, pause_one);
}

int cmd_unpause(int argc, char **argv)
{
	return pause_cmd("unpause", argc, argv, unpause_one);
}
