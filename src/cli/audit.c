/* `gantry audit NAME`: a sandbox's security events (docs/audit.md). The
 * work is src/sandbox/secrets.c. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/text.h"
#include "common/util.h"
#include "sandbox/lifecycle.h"

static void audit_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry audit NAME [--json]\n\n"
		"The sandbox's last 256 security events, oldest first: secrets set, removed,\n"
		"delivered to a session or withheld, egress policy changes, isolation that does\n"
		"not hold, workers that ended, refused control-socket peers. Names only, never\n"
		"a value. A stopped sandbox shows the events it had (see docs/audit.md).\n\n"
		"Flags:\n");
	flags_usage(out, flags);
}

static void audit_table(json_t *o)
{
	json_t *v;
	size_t i;

	printf("%-20s %-12s %-10s %-20s %s\n", "TIME", "KIND", "DECISION", "SECRET/HOST", "REASON");
	json_array_foreach(json_object_get(o, "events"), i, v)
	{
		cleanup_free char *what = NULL, *reason = NULL;
		json_int_t count = json_integer_value(json_object_get(v, "count"));
		const char *secret = cli_json_str(v, "secret", NULL),
			   *host = cli_json_str(v, "host", NULL);

		xasprintf(&what, "%s%s%s", secret ? secret : "", secret && host ? "@" : "",
			  host ? host : "");
		reason = xstrdup(cli_json_str(v, "reason", ""));
		if (count > 1) {
			char *was = reason;

			xasprintf(&reason, "%s (x%lld)", was, (long long)count);
			free(was);
		}
		text_sanitize(what, 0);
		text_sanitize(reason, 0);
		printf("%-20s %-12s %-10s %-20s %s\n", cli_json_str(v, "time", "?"),
		       cli_json_str(v, "kind", "?"), cli_json_str(v, "decision", "?"),
		       what[0] ? what : "-", reason);
	}
}

int cmd_audit(int argc, char **argv)
{
	return cli_show("audit", "audit", argc, argv, audit_usage, sandbox_audit, audit_table);
}
