/* `gantry resume NAME`: boot a stopped or crashed sandbox again. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "sandbox/lifecycle.h"

int cmd_resume(int argc, char **argv)
{
	gantry_error_t err = NULL;
	const char *name;
	int r = flags_one_name("resume",
			       "Boot a stopped (or crashed) sandbox again, with the files it had.\n"
			       "Returns once gantry exec NAME can run commands in it.",
			       argc, argv, &name);

	return r <= 0 ? -r * 2 : cli_finish(&err, sandbox_resume(name, &err));
}
