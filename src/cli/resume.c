/* `gantry resume NAME...`: boot stopped or crashed sandboxes again. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/signals.h"
#include "common/log.h"
#include "sandbox/lifecycle.h"

static struct gantry_cancel cancel;

static bool fresh;

static int resume_one(const char *name, gantry_error_t *err)
{
	if (fresh && sandbox_discard_save(name, err) < 0)
		return -1;
	return sandbox_resume(name, cli_getenv, &cancel, err);
}

static void resume_usage(FILE *out, const struct flag *flags)
{
	fprintf(out, "Usage: gantry resume [-fresh] NAME...\n\n"
		     "Boot stopped (or crashed) sandboxes again, with the files they had;\n"
		     "one stopped with gantry stop -snapshot is restored from its save\n"
		     "instead, its processes running on where they were. Returns once\n"
		     "gantry exec NAME can run commands in each.\n\nFlags:\n");
	flags_usage(out, flags);
}

int cmd_resume(int argc, char **argv)
{
	gantry_error_t err = NULL;
	bool help = false, dashdash;
	int rest, r;
	const struct flag flags[] = {
		{ "fresh", FLAG_BOOL, &fresh, NULL, NULL,
		  "drop the save of gantry stop -snapshot and boot", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	r = flags_parse_cmd("resume", flags, argc, argv, &rest, &dashdash, resume_usage);
	if (r <= 0)
		return -r;
	if (rest >= argc) {
		log_error("resume: want one NAME or more (see gantry resume -help)");
		return 2;
	}
	argc -= rest;
	argv += rest;
	/* Ctrl-C while one boots ends that boot (it stays stopped) and the
	 * round. */
	if (cli_signals_cancel(&cancel, &err) < 0)
		return cli_finish(&err, -1);
	return cli_each_name(argc, argv, resume_one);
}
