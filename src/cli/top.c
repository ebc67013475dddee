/* `gantry top NAME [--json]`: the processes of a running sandbox's
 * container, as docker top shows a container's (sandbox/procs.h). */
#include <jansson.h>
#include <stdio.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/util.h"
#include "sandbox/lifecycle.h"

static void top_usage(FILE *out, const struct flag *flags)
{
	fprintf(out, "Usage: gantry top NAME [--json]\n\n"
		     "The processes of a running sandbox's container, in its PID namespace: PID,\n"
		     "parent, user id, state (R running, S sleeping, D waiting on I/O, Z zombie,\n"
		     "T stopped), resident memory and command line. gantry-init reads them in the\n"
		     "container, so the image needs no ps.\n\n"
		     "Flags:\n");
	flags_usage(out, flags);
}

static void top_table(json_t *o)
{
	json_t *v;
	size_t i;

	printf("%-8s %-8s %-8s %-5s %10s  %s\n", "PID", "PPID", "UID", "STATE", "RSS", "COMMAND");
	json_array_foreach(json_object_get(o, "processes"), i, v)
	{
		char rss[32];

		snprintf(rss, sizeof(rss), "%lldKiB",
			 (long long)json_integer_value(json_object_get(v, "rssKiB")));
		/* The command was sanitised as it was read. */
		printf("%-8lld %-8lld %-8lld %-5s %10s  %s\n",
		       (long long)json_integer_value(json_object_get(v, "pid")),
		       (long long)json_integer_value(json_object_get(v, "ppid")),
		       (long long)json_integer_value(json_object_get(v, "uid")),
		       cli_json_str(v, "state", "?"), rss, cli_json_str(v, "command", ""));
	}
}

/* Ctrl-C ends gantry, and with it the session. */
static int get(const char *name, json_t **out, gantry_error_t *err)
{
	return sandbox_processes_json(name, NULL, out, err);
}

int cmd_top(int argc, char **argv)
{
	return cli_show("top", "top", argc, argv, top_usage, get, top_table);
}
