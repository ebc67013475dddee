/* `gantry version [--json]`. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/log.h"
#include "proto/agent.h"

static void version_usage(FILE *out, const struct flag *flags)
{
	fprintf(out, "Usage: gantry version [--json]\n\nPrint Gantry's version and the version of "
		     "the host/guest protocol it speaks.\n\nFlags:\n");
	flags_usage(out, flags);
}

int cmd_version(int argc, char **argv)
{
	bool as_json = false, help = false, dashdash;
	int rest, r;
	const struct flag flags[] = {
		{ "json", FLAG_BOOL, &as_json, NULL, NULL, "print JSON", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	r = flags_parse_cmd("version", flags, argc, argv, &rest, &dashdash, version_usage);
	if (r <= 0)
		return -r;
	if (rest < argc) {
		log_error("version: unexpected argument `%s`", argv[rest]);
		return 2;
	}
	if (as_json) {
		json_t *o = json_pack("{s:s,s:i}", "version", GANTRY_VERSION, "protocol",
				      PROTO_VERSION);
		char *text = json_dumps(o, JSON_COMPACT);

		printf("%s\n", text ? text : "{}");
		free(text);
		json_decref(o);
	} else {
		printf("gantry %s (protocol %d)\n", GANTRY_VERSION, PROTO_VERSION);
	}
	return 0;
}
