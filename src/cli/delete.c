/* `gantry delete NAME...`: stop each if running, then remove its state. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "sandbox/lifecycle.h"

int cmd_delete(int argc, char **argv)
{
	int r = flags_names("delete",
			    "Delete sandboxes, stopping each first if it runs: its state and the\n"
			    "writable layer Gantry made for it. A -rwlayer file you gave is kept,\n"
			    "and so are cached images.",
			    argc, argv);

	return r <= 0 ? -r * 2 : cli_each_name(argc, argv, sandbox_delete);
}
