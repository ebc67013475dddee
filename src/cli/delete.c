/* `gantry delete NAME...`: stop each if running, then remove its state. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/log.h"
#include "sandbox/lifecycle.h"

static bool force;

static int delete_one(const char *name, gantry_error_t *err)
{
	return sandbox_delete(name, force, err);
}

static void delete_usage(FILE *out, const struct flag *flags)
{
	fprintf(out, "Usage: gantry delete [--force] NAME...\n\n"
		     "Delete sandboxes, stopping each first if it runs: its state and the\n"
		     "writable layer Gantry made for it. A -rwlayer file you gave is kept,\n"
		     "and so are cached images. --force also removes a sandbox whose\n"
		     "sandbox.json does not read (`broken` in gantry ls).\n\nFlags:\n");
	flags_usage(out, flags);
}

int cmd_delete(int argc, char **argv)
{
	bool help = false, dashdash;
	int rest, r;
	const struct flag flags[] = {
		{ "force", FLAG_BOOL, &force, NULL, NULL, "remove a broken sandbox too", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	r = flags_parse_cmd("delete", flags, argc, argv, &rest, &dashdash, delete_usage);
	if (r <= 0)
		return -r;
	if (rest >= argc) {
		log_error("delete: want one NAME or more (see gantry delete -help)");
		return 2;
	}
	return cli_each_name(argc - rest, argv + rest, delete_one);
}
