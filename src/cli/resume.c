/* `gantry resume NAME...`: boot stopped or crashed sandboxes again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/signals.h"
#include "sandbox/lifecycle.h"

static struct gantry_cancel cancel;

/* A sandbox's secrets from the environment come from this one. */
static const char *cli_getenv(const char *name)
{
	return getenv(name);
}

static int resume_one(const char *name, gantry_error_t *err)
{
	return sandbox_resume(name, cli_getenv, &cancel, err);
}

int cmd_resume(int argc, char **argv)
{
	gantry_error_t err = NULL;
	int r = flags_names("resume",
			    "Boot stopped (or crashed) sandboxes again, with the files they had.\n"
			    "Returns once gantry exec NAME can run commands in each.",
			    argc, argv);

	if (r <= 0)
		return -r * 2;
	/* Ctrl-C while one boots ends that boot (it stays stopped) and the
	 * round. */
	if (cli_signals_cancel(&cancel, &err) < 0)
		return cli_finish(&err, -1);
	return cli_each_name(argc, argv, resume_one);
}
