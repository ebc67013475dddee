/* `gantry ls [--json]`: the sandboxes, as a table or as JSON. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/text.h"
#include "common/util.h"
#include "common/log.h"
#include "sandbox/lifecycle.h"
#include "secret/spec.h"

static void ls_usage(FILE *out, const struct flag *flags)
{
	fprintf(out, "Usage: gantry ls [--json]\n\n"
		     "List sandboxes: NAME, STATE (running, stopped, crashed, broken), the\n"
		     "supervisor's PID, SECRETS (names only), IMAGE, CPUS and MEM (MiB). A\n"
		     "crashed or broken sandbox's reason follows the table. A one-shot gantry\n"
		     "exec is listed while it runs (running, its PID the gantry exec's;\n"
		     "\"oneshot\": true in JSON).\n"
		     "With --json, an array of objects (see docs/sandboxes.md).\n\nFlags:\n");
	flags_usage(out, flags);
}

static void ls_json(const struct sandbox *v, size_t n)
{
	json_t *a = json_array();
	char *text;

	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, sandbox_to_json(&v[i], NULL));
	text = json_dumps(a, JSON_INDENT(2) | JSON_ENSURE_ASCII);
	json_decref(a);
	printf("%s\n", text ? text : "[]");
	free(text);
}

/* Its secrets' names, joined by commas; "-" when it has none. */
static char *secret_names(const struct sandbox *sb)
{
	char *out = xstrdup(sb->nr_secrets ? "" : "-");

	for (size_t i = 0; i < sb->nr_secrets; i++) {
		char *was = out;

		xasprintf(&out, "%s%s%.*s", was, i ? "," : "",
			  (int)secret_spec_name_len(sb->secrets[i]), sb->secrets[i]);
		free(was);
	}
	return out;
}

static void ls_table(const struct sandbox *v, size_t n)
{
	printf("%-24s %-8s %-8s %-16s %-32s %-4s %s\n", "NAME", "STATE", "PID", "SECRETS", "IMAGE",
	       "CPUS", "MEM");
	for (size_t i = 0; i < n; i++) {
		const char *img = v[i].image ? v[i].image : "-";
		cleanup_free char *image = text_sanitized(img, strlen(img), 0);
		cleanup_free char *secrets = secret_names(&v[i]);
		char pid[24] = "-";

		if (v[i].pid > 0)
			snprintf(pid, sizeof(pid), "%ld", v[i].pid);
		printf("%-24s %-8s %-8s %-16s %-32s %-4llu %llu\n", v[i].name,
		       sandbox_shown_state(&v[i]), pid, secrets, image,
		       (unsigned long long)v[i].cpus, (unsigned long long)v[i].mem_mib);
	}
	for (size_t i = 0; i < n; i++) {
		if ((v[i].state == SANDBOX_CRASHED || v[i].state == SANDBOX_BROKEN) && v[i].reason) {
			cleanup_free char *reason =
				text_sanitized(v[i].reason, strlen(v[i].reason), 0);

			printf("%s: %s: %s%s\n", v[i].name, sandbox_state_name(v[i].state), reason,
			       v[i].state == SANDBOX_BROKEN ? " (gantry delete --force removes it)"
							    : "");
		}
	}
}

int cmd_ls(int argc, char **argv)
{
	gantry_error_t err = NULL;
	struct sandbox *v;
	bool as_json = false, help = false, dashdash;
	size_t n;
	int rest, r;
	const struct flag flags[] = {
		{ "json", FLAG_BOOL, &as_json, NULL, NULL, "print JSON", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	r = flags_parse_cmd("ls", flags, argc, argv, &rest, &dashdash, ls_usage);
	if (r <= 0)
		return -r;
	if (rest < argc) {
		log_error("ls: unexpected argument `%s` (see gantry ls -help)", argv[rest]);
		return 2;
	}
	if (sandbox_list(&v, &n, &err) < 0)
		return cli_fail(&err, CLI_EXIT_FAILED);
	if (as_json)
		ls_json(v, n);
	else
		ls_table(v, n);
	sandbox_list_free(v, n);
	return 0;
}
