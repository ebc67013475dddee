/* `gantry stop NAME`: the guest syncs and powers off; its files stay. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "sandbox/lifecycle.h"

int cmd_stop(int argc, char **argv)
{
	gantry_error_t err = NULL;
	const char *name;
	int r = flags_one_name(
		"stop",
		"Stop a running sandbox: its guest syncs and powers off, its processes\n"
		"end. Its configuration and writable layer stay for gantry resume.",
		argc, argv, &name);

	return r <= 0 ? -r * 2 : cli_finish(&err, sandbox_stop(name, &err));
}
