/* `gantry delete NAME`: stop if running, then remove its state. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "sandbox/lifecycle.h"

int cmd_delete(int argc, char **argv)
{
	gantry_error_t err = NULL;
	const char *name;
	int r = flags_one_name(
		"delete",
		"Delete a sandbox, stopping it first if it runs: its state and the\n"
		"writable layer Gantry made for it. A -rwlayer file you gave is kept,\n"
		"and so are cached images.",
		argc, argv, &name);

	return r <= 0 ? -r * 2 : cli_finish(&err, sandbox_delete(name, &err));
}
