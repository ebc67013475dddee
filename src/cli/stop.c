/* `gantry stop NAME...`: each guest syncs and powers off; its files stay. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "sandbox/lifecycle.h"

int cmd_stop(int argc, char **argv)
{
	int r = flags_names("stop",
			    "Stop running sandboxes: each guest syncs and powers off, its processes\n"
			    "end. Their configuration and writable layers stay for gantry resume.\n"
			    "A sandbox that is not running is left as it is.",
			    argc, argv);

	return r <= 0 ? -r * 2 : cli_each_name(argc, argv, sandbox_stop);
}
