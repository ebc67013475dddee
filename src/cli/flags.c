/* Go-style flag parsing (see flags.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/flags.h"
#include "common/log.h"
#include "common/util.h"
#include "sandbox/lifecycle.h"

static const struct flag *flag_find(const struct flag *flags, const char *name, size_t len)
{
	for (const struct flag *f = flags; f->name; f++) {
		if (strlen(f->name) == len && strncmp(f->name, name, len) == 0)
			return f;
	}
	return NULL;
}

static int flag_set(const char *cmd, const struct flag *f, const char *value, gantry_error_t *err)
{
	uint64_t n;

	switch (f->kind) {
	case FLAG_BOOL:
		if (value == NULL || strcmp(value, "true") == 0 || strcmp(value, "1") == 0)
			*(bool *)f->target = true;
		else if (strcmp(value, "false") == 0 || strcmp(value, "0") == 0)
			*(bool *)f->target = false;
		else
			return gantry_error(err, 0, "%s: -%s=%s: want true or false", cmd, f->name,
					    value);
		return 0;
	case FLAG_STRING:
		*(const char **)f->target = value;
		return 0;
	case FLAG_UINT:
		switch (parse_u64(value, f->max ? f->max : UINT64_MAX, &n)) {
		case -1:
			return gantry_error(err, 0, "%s: -%s %s: not a whole number", cmd, f->name,
					    value);
		case -2:
			return gantry_error(err, 0, "%s: -%s %s: too large (at most %" PRIu64 ")",
					    cmd, f->name, value, f->max ? f->max : UINT64_MAX);
		}
		*(uint64_t *)f->target = n;
		return 0;
	case FLAG_FUNC:
		if (f->fn(f->target, value, err) < 0)
			return gantry_error_prefix(err, "%s: -%s", cmd, f->name);
		return 0;
	}
	return -1;
}

int flags_parse(const char *cmd, const struct flag *flags, int argc, char **argv, int *rest,
		bool *dashdash, gantry_error_t *err)
{
	int i;

	*dashdash = false;
	for (i = 0; i < argc; i++) {
		const char *a = argv[i], *name, *eq;
		const struct flag *f;

		if (strcmp(a, "--") == 0) {
			*dashdash = true;
			i++;
			break;
		}
		if (a[0] != '-' || a[1] == '\0')
			break;
		name = a + 1 + (a[1] == '-');
		eq = strchr(name, '=');
		f = flag_find(flags, name, eq ? (size_t)(eq - name) : strlen(name));
		/* -h: the help, where a command has it and no -h of its own. */
		if (f == NULL && strcmp(name, "h") == 0)
			f = flag_find(flags, "help", 4);
		if (f == NULL)
			return gantry_error(err, 0, "%s: unknown flag `%s` (see gantry %s -help)",
					    cmd, a, cmd);
		if (eq)
			eq++;
		else if (f->kind != FLAG_BOOL) {
			if (i + 1 >= argc)
				return gantry_error(err, 0, "%s: -%s needs a value", cmd, f->name);
			eq = argv[++i];
		}
		if (flag_set(cmd, f, eq, err) < 0)
			return -1;
	}
	*rest = i;
	return 0;
}

void flags_usage(FILE *out, const struct flag *flags)
{
	for (const struct flag *f = flags; f->name; f++) {
		char left[48];

		snprintf(left, sizeof(left), "-%s%s%s", f->name, f->arg ? " " : "",
			 f->arg ? f->arg : "");
		fprintf(out, "  %-22s %s\n", left, f->help);
	}
}

int flags_parse_cmd(const char *cmd, const struct flag *flags, int argc, char **argv, int *rest,
		    bool *dashdash, void (*usage)(FILE *out, const struct flag *flags))
{
	gantry_error_t err = NULL;

	if (flags_parse(cmd, flags, argc, argv, rest, dashdash, &err) < 0) {
		gantry_error_print(&err);
		return -2;
	}
	for (const struct flag *f = flags; f->name; f++) {
		if (f->kind == FLAG_BOOL && strcmp(f->name, "help") == 0 && *(bool *)f->target) {
			usage(stdout, flags);
			return 0;
		}
	}
	return 1;
}

int flags_parse_mixed(const char *cmd, const struct flag *flags, int argc, char **argv, char **pos,
		      int max, int *npos, void (*usage)(FILE *out, const struct flag *flags))
{
	bool dashdash = false;
	int i = 0;

	*npos = 0;
	while (i < argc) {
		int rest, r;

		if (!dashdash) {
			r = flags_parse_cmd(cmd, flags, argc - i, argv + i, &rest, &dashdash,
					    usage);
			if (r <= 0)
				return r;
			i += rest;
			if (i >= argc)
				break;
		}
		if (*npos == max) {
			log_error("%s: unexpected argument `%s` (see gantry %s -help)", cmd,
				  argv[i], cmd);
			return -2;
		}
		pos[(*npos)++] = argv[i++];
	}
	return 1;
}

bool flags_help_only(int argc, char **argv)
{
	return argc == 1 && (strcmp(argv[0], "-help") == 0 || strcmp(argv[0], "--help") == 0 ||
			     strcmp(argv[0], "-h") == 0);
}

int flags_names(const char *cmd, const char *what, int argc, char **argv)
{
	if (flags_help_only(argc, argv)) {
		printf("Usage: gantry %s NAME...\n\n%s\n", cmd, what);
		return 0;
	}
	for (int i = 0; i < argc; i++) {
		if (argv[i][0] == '-') {
			log_error("%s: unknown flag `%s` (see gantry %s -help)", cmd, argv[i], cmd);
			return -1;
		}
	}
	if (argc == 0) {
		log_error("%s: want one NAME or more (see gantry %s -help)", cmd, cmd);
		return -1;
	}
	return argc;
}

int cli_each_name(int argc, char **argv, int (*fn)(const char *name, gantry_error_t *err))
{
	int status = 0;

	for (int i = 0; i < argc; i++) {
		gantry_error_t err = NULL;
		int r = fn(argv[i], &err);

		if (r < 0) {
			status = cli_fail(&err, 1);
			if (status == CLI_EXIT_CANCELLED)
				break;
		}
	}
	return status;
}

int cli_fail(gantry_error_t *err, int failed)
{
	bool cancelled = *err && (*err)->status == ECANCELED, usage = gantry_error_is_usage(*err);

	gantry_error_print(err);
	return cancelled ? CLI_EXIT_CANCELLED : usage ? CLI_EXIT_USAGE : failed;
}

int cli_finish(gantry_error_t *err, int r)
{
	return r < 0 ? cli_fail(err, 1) : 0;
}

const char *cli_getenv(const char *name)
{
	return getenv(name);
}

const char *cli_json_str(json_t *o, const char *key, const char *none)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v ? v : none;
}

void cli_print_json(json_t *v)
{
	char *text = json_dumps(v, JSON_INDENT(2) | JSON_ENSURE_ASCII);

	printf("%s\n", text ? text : "{}");
	free(text);
}

int cli_show(const char *cmd, const char *what, int argc, char **argv,
	     void (*usage)(FILE *out, const struct flag *flags),
	     int (*get)(const char *name, json_t **out, gantry_error_t *err),
	     void (*table)(json_t *o))
{
	gantry_error_t err = NULL;
	bool as_json = false, help = false;
	char *pos[1];
	json_t *o;
	int npos, r;
	const struct flag flags[] = {
		{ "json", FLAG_BOOL, &as_json, NULL, NULL, "print JSON", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	r = flags_parse_mixed(cmd, flags, argc, argv, pos, 1, &npos, usage);
	if (r <= 0)
		return -r;
	if (npos != 1) {
		log_error("%s: NAME is required (see gantry %s -help)", cmd, what);
		return 2;
	}
	if (get(pos[0], &o, &err) < 0) {
		gantry_error_sanitize(&err, 0);
		return cli_fail(&err, CLI_EXIT_FAILED);
	}
	if (as_json)
		cli_print_json(o);
	else
		table(o);
	json_decref(o);
	return 0;
}

bool cli_image_like(const char *s)
{
	return !sandbox_name_valid(s) && s[0] != '-' && strpbrk(s, ":/@") != NULL;
}
