/* `gantry resume NAME`: boot a stopped or crashed sandbox again. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/signals.h"
#include "sandbox/lifecycle.h"

int cmd_resume(int argc, char **argv)
{
	static struct gantry_cancel cancel;
	gantry_error_t err = NULL;
	const char *name;
	int r = flags_one_name("resume",
			       "Boot a stopped (or crashed) sandbox again, with the files it had.\n"
			       "Returns once gantry exec NAME can run commands in it.",
			       argc, argv, &name);

	if (r <= 0)
		return -r * 2;
	/* Ctrl-C while it boots ends the boot; the sandbox stays stopped. */
	if (cli_signals_cancel(&cancel, &err) < 0)
		return cli_finish(&err, -1);
	return cli_finish(&err, sandbox_resume(name, &cancel, &err));
}
