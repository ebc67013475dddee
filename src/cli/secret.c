/* `gantry secret set|rm|ls`: a sandbox's secrets, changed live on a
 * running one. Flags and printing only; the work is src/sandbox/secrets.c. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/log.h"
#include "common/text.h"
#include "common/util.h"
#include "sandbox/lifecycle.h"

static void secret_usage(FILE *out, const struct flag *flags)
{
	fprintf(out, "Usage: gantry secret set NAME SPEC\n"
		     "       gantry secret rm NAME SECRET\n"
		     "       gantry secret ls NAME [--json]\n\n"
		     "Give the sandbox NAME a secret, take one away, or list them (names and\n"
		     "sources, never values). SPEC is as for -secret: SECRET (its value from this\n"
		     "environment, now), SECRET=@/PATH or SECRET='!COMMAND ARG...' (read by the\n"
		     "sandbox when used), with ,ttl=DUR; SECRET@HOST[,HOST...] keeps it out of\n"
		     "the environment, for git on those hosts only; with ,inject (or\n"
		     ",header=NAME, ,format=TEXT) the environment holds a placeholder that\n"
		     "Gantry replaces with the value in HTTPS requests to those hosts, and the\n"
		     "value never enters the guest. On a running sandbox the\n"
		     "change is live: the sessions that start from then on see it; one already\n"
		     "running keeps the environment it started with. It is kept for the\n"
		     "sandbox's next boot either way (a secret from the environment is taken\n"
		     "again from the resume's).\n"
		     "See docs/secrets.md.\n\nFlags:\n");
	flags_usage(out, flags);
}

static int secret_change(bool set, int argc, char **argv)
{
	const char *cmd = set ? "secret set" : "secret rm";
	gantry_error_t err = NULL;
	bool help = false;
	char *pos[2];
	int npos, r;
	const struct flag flags[] = {
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	r = flags_parse_mixed(cmd, flags, argc, argv, pos, 2, &npos, secret_usage);
	if (r <= 0)
		return -r;
	if (npos != 2) {
		log_error("%s: want NAME and %s (see gantry secret -help)", cmd,
			  set ? "SPEC" : "SECRET");
		return 2;
	}
	r = set ? sandbox_secret_set(pos[0], pos[1], cli_getenv, &err)
		: sandbox_secret_rm(pos[0], pos[1], &err);
	if (r < 0) {
		gantry_error_sanitize(&err, 0);
		return cli_fail(&err, CLI_EXIT_FAILED);
	}
	return 0;
}

static void secret_table(json_t *o)
{
	json_t *v;
	size_t i;

	printf("%-24s %-8s %-8s %-24s %s\n", "SECRET", "SOURCE", "TTL", "HOSTS", "FROM");
	json_array_foreach(json_object_get(o, "secrets"), i, v)
	{
		cleanup_free char *from = NULL, *hosts = NULL;
		json_t *x;
		char ttl[32] = "-";
		size_t k;

		if (json_object_get(v, "ttlMs"))
			snprintf(ttl, sizeof(ttl), "%llds",
				 (long long)json_integer_value(json_object_get(v, "ttlMs")) / 1000);
		if (json_object_get(v, "path")) {
			from = xstrdup(cli_json_str(v, "path", ""));
		} else {
			json_array_foreach(json_object_get(v, "command"), k, x)
			{
				char *was = from;

				xasprintf(&from, "%s%s%s", was ? was : "", was ? " " : "",
					  json_string_value(x));
				free(was);
			}
		}
		json_array_foreach(json_object_get(v, "hosts"), k, x)
		{
			char *was = hosts;

			xasprintf(&hosts, "%s%s%s", was ? was : "", was ? "," : "",
				  json_string_value(x));
			free(was);
		}
		if (hosts && json_is_true(json_object_get(v, "inject"))) {
			char *was = hosts;

			xasprintf(&hosts, "%s (inject)", was);
			free(was);
		}
		if (from)
			text_sanitize(from, 0);
		printf("%-24s %-8s %-8s %-24s %s\n", cli_json_str(v, "name", "?"),
		       cli_json_str(v, "source", "?"), ttl, hosts ? hosts : "-", from ? from : "-");
	}
}

static int secret_ls(int argc, char **argv)
{
	return cli_show("secret ls", "secret", argc, argv, secret_usage, sandbox_secrets_list,
			secret_table);
}

int cmd_secret(int argc, char **argv)
{
	static const struct flag all[] = {
		{ "json", FLAG_BOOL, NULL, NULL, NULL, "ls: print JSON", 0 },
		{ 0 },
	};

	if (flags_help_only(argc, argv)) {
		secret_usage(stdout, all);
		return 0;
	}
	if (argc > 0 && strcmp(argv[0], "set") == 0)
		return secret_change(true, argc - 1, argv + 1);
	if (argc > 0 && (strcmp(argv[0], "rm") == 0 || strcmp(argv[0], "remove") == 0))
		return secret_change(false, argc - 1, argv + 1);
	if (argc > 0 && strcmp(argv[0], "ls") == 0)
		return secret_ls(argc - 1, argv + 1);
	log_error("secret: want set, rm or ls (see gantry secret -help)");
	return 2;
}
