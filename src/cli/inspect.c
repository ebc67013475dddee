/* `gantry inspect NAME [--json]`: one sandbox's configuration, state, image,
 * resources and paths. */
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

static void inspect_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry inspect NAME [--json]\n\n"
		"Show the sandbox NAME: its state (and why it crashed), its image, resources,\n"
		"the image's process settings, and the files that make it up.\n\nFlags:\n");
	flags_usage(out, flags);
}

/* The image's config and the user's paths may hold anything: shown safe. */
static char *shown_text(const char *s)
{
	return text_sanitized(s, strlen(s), 0);
}

static void print_strv(const char *label, json_t *a)
{
	size_t i;
	json_t *v;

	printf("%-14s", label);
	if (json_array_size(a) == 0)
		printf("-");
	json_array_foreach(a, i, v)
	{
		cleanup_free char *text = shown_text(json_string_value(v) ? json_string_value(v) : "");

		printf("%s%s", i ? " " : "", text);
	}
	printf("\n");
}

static void print_field(const char *label, json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	char *text;

	if (json_is_string(v)) {
		cleanup_free char *shown = shown_text(json_string_value(v));

		printf("%-14s%s\n", label, shown);
		return;
	}
	if (v == NULL || json_is_null(v)) {
		printf("%-14s-\n", label);
		return;
	}
	text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
	printf("%-14s%s\n", label, text ? text : "?");
	free(text);
}

/* The mode, and per role of isolation.json what does not hold. */
static void print_isolation(json_t *o)
{
	json_t *iso = json_object_get(o, "isolation"), *v;
	const char *role;

	print_field("Isolation:", o, "process_isolation");
	json_object_foreach(json_object_get(iso, "roles"), role, v)
	{
		json_t *deg = json_object_get(v, "degraded");

		if (json_is_string(json_object_get(v, "state"))) {
			cleanup_free char *state =
				shown_text(json_string_value(json_object_get(v, "state")));

			printf("  %-12s%s\n", role, state);
		}
		else if (json_array_size(deg) == 0)
			printf("  %-12sconfined, every property enforced\n", role);
		else
			print_strv(role, deg);
	}
}

static void inspect_text(json_t *o)
{
	json_t *cfg = json_object_get(o, "config"), *paths = json_object_get(o, "paths");
	static const char *const rows[][2] = {
		{ "Name:", "name" },	       { "State:", "state" },
		{ "Reason:", "reason" },       { "PID:", "pid" },
		{ "Created:", "created" },     { "Image:", "image" },
		{ "Digest:", "image_digest" }, { "CPUs:", "cpus" },
		{ "Memory MiB:", "mem_mib" },  { "Writable:", "writable" },
		{ "Disk MiB:", "disk_mib" },   { "Network:", "net" },
	};
	const char *key;
	json_t *v;

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
		print_field(rows[i][0], o, rows[i][1]);
	print_strv("Ports:", json_object_get(o, "ports"));
	if (json_is_true(json_object_get(o, "net"))) {
		json_t *p = json_object_get(o, "net_policy");

		if (json_is_object(p))
			printf("%-14sdefault %s, %zu rules, %zu+%zu domains (gantry net-policy show)\n",
			       "Net policy:", json_string_value(json_object_get(p, "default")),
			       json_array_size(json_object_get(p, "rules")),
			       json_array_size(json_object_get(p, "allowDomains")),
			       json_array_size(json_object_get(p, "resolveDomains")));
		else
			printf("%-14sthe default (allow, local networks walled off)\n", "Net policy:");
		print_field("Local net:", o, "allow_local_net");
		if (json_is_string(json_object_get(o, "proxy"))) {
			print_field("Proxy:", o, "proxy");
			print_field("Proxy only:", o, "proxy_enforce");
		}
	}
	if (json_is_true(json_object_get(o, "oauth_custody")))
		printf("%-14sserved (gantry-guest oauth login|token PROVIDER)\n", "OAuth custody:");
	print_isolation(o);
	if (json_is_object(cfg)) {
		print_strv("Entrypoint:", json_object_get(cfg, "entrypoint"));
		print_strv("Cmd:", json_object_get(cfg, "cmd"));
		print_strv("Env:", json_object_get(cfg, "env"));
		print_field("User:", cfg, "user");
		print_field("WorkingDir:", cfg, "working_dir");
	}
	printf("Paths:\n");
	json_object_foreach(paths, key, v)
	{
		cleanup_free char *path = shown_text(json_is_string(v) ? json_string_value(v) : "-");

		printf("  %-12s%s\n", key, path);
	}
}

int cmd_inspect(int argc, char **argv)
{
	cleanup_free char *dir = NULL;
	gantry_error_t err = NULL;
	struct sandbox sb = { 0 };
	bool as_json = false, help = false, dashdash;
	const char *name = NULL;
	json_t *o;
	int rest, r;
	const struct flag flags[] = {
		{ "json", FLAG_BOOL, &as_json, NULL, NULL, "print JSON", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	/* NAME first, flags after it (flags before it work too). */
	if (argc > 0 && argv[0][0] != '-') {
		name = argv[0];
		argc--;
		argv++;
	}
	r = flags_parse_cmd("inspect", flags, argc, argv, &rest, &dashdash, inspect_usage);
	if (r <= 0)
		return -r;
	if (name == NULL && rest < argc)
		name = argv[rest++];
	if (name == NULL || rest < argc) {
		log_error("inspect: %s (see gantry inspect -help)",
			  name ? "unexpected arguments after NAME" : "NAME is required");
		return 2;
	}
	if (sandbox_inspect(name, &sb, &dir, &err) < 0)
		return cli_fail(&err, CLI_EXIT_FAILED);
	o = sandbox_to_json(&sb, dir);
	if (as_json) {
		cli_print_json(o);
	} else {
		inspect_text(o);
	}
	json_decref(o);
	sandbox_free(&sb);
	return 0;
}
