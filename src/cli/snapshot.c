/* `gantry snapshot NAME [-as SNAP]`, `snapshot ls|inspect|rm` and
 * `gantry fork NAME [-n N] [-as PREFIX]` (sandbox/snapshots.h). */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/log.h"
#include "common/text.h"
#include "common/util.h"
#include "sandbox/lifecycle.h"

static void snapshot_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry snapshot NAME [-as SNAP] [-with-secrets]\n"
		"       gantry snapshot ls [--json]\n"
		"       gantry snapshot inspect SNAP\n"
		"       gantry snapshot rm SNAP...\n\n"
		"Save the running sandbox NAME as snapshot SNAP (default NAME-TIME): its\n"
		"vCPUs, devices and memory, and a copy of its writable layer. The save is\n"
		"live: NAME stands still while it is written, then runs on, its exec\n"
		"sessions and connections with it. gantry start NEW -from SNAP starts a\n"
		"sandbox from it, gantry fork NAME -n N several at once. A sandbox with\n"
		"secrets is saved only with -with-secrets (their values are in its memory;\n"
		"a clone takes those from the environment again, as a resume does); secrets\n"
		"injected at egress never enter the guest and need no flag. Removing a\n"
		"snapshot leaves the sandboxes made from it as they are\n"
		"(docs/snapshots.md).\n\nFlags:\n");
	flags_usage(out, flags);
}

/* Text the snapshot's files hold: shown safe. */
static void print_text(const char *fmt, json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));
	cleanup_free char *shown = text_sanitized(v ? v : "-", strlen(v ? v : "-"), 0);

	printf(fmt, shown);
}

static int snapshot_ls(bool as_json)
{
	gantry_error_t err = NULL;
	json_t *a = NULL, *v;
	size_t i;

	if (sandbox_snapshot_list(&a, &err) < 0) {
		json_decref(a);
		return cli_finish(&err, -1);
	}
	if (as_json) {
		char *text = json_dumps(a, JSON_INDENT(2) | JSON_ENSURE_ASCII);

		puts(text ? text : "[]");
		free(text);
		json_decref(a);
		return 0;
	}
	printf("%-24s %-24s %-22s %-4s %s\n", "SNAPSHOT", "SOURCE", "CREATED", "CPUS", "MEM");
	json_array_foreach(a, i, v) {
		print_text("%-24s ", v, "name");
		print_text("%-24s ", v, "source");
		print_text("%-22s ", v, "created");
		printf("%-4lld %lld\n", (long long)json_integer_value(json_object_get(v, "cpus")),
		       (long long)json_integer_value(json_object_get(v, "mem_mib")));
	}
	json_decref(a);
	return 0;
}

static int snapshot_inspect(const char *snap)
{
	gantry_error_t err = NULL;
	json_t *j = sandbox_snapshot_inspect(snap, &err);
	char *text;

	if (j == NULL)
		return cli_finish(&err, -1);
	text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	puts(text ? text : "{}");
	free(text);
	json_decref(j);
	return 0;
}

int cmd_snapshot(int argc, char **argv)
{
	bool help = false, as_json = false, with_secrets = false;
	const char *as = NULL;
	gantry_error_t err = NULL;
	char *made = NULL;
	int r;
	const struct flag flags[] = {
		{ "as", FLAG_STRING, &as, NULL, "SNAP", "the snapshot's name (default NAME-TIME)", 0 },
		{ "with-secrets", FLAG_BOOL, &with_secrets, NULL, NULL,
		  "save a sandbox that holds secrets too (their values go to disk with its memory)",
		  0 },
		{ "json", FLAG_BOOL, &as_json, NULL, NULL, "ls: print JSON", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	/* Flags before, between and after the words. */
	cleanup_free char **pos = xzalloc((size_t)(argc + 1) * sizeof(*pos));
	const char *word;
	int n;

	r = flags_parse_mixed("snapshot", flags, argc, argv, pos, argc, &n, snapshot_usage);
	if (r <= 0)
		return -r;
	word = n > 0 ? pos[0] : NULL;
	if (word && strcmp(word, "ls") == 0 && n == 1)
		return snapshot_ls(as_json);
	if (word && strcmp(word, "inspect") == 0 && n == 2)
		return snapshot_inspect(pos[1]);
	if (word && strcmp(word, "rm") == 0 && n >= 2)
		return cli_each_name(n - 1, pos + 1, sandbox_snapshot_remove);
	if (n != 1 || strcmp(word, "ls") == 0 || strcmp(word, "rm") == 0 ||
	    strcmp(word, "inspect") == 0) {
		log_error("snapshot: want NAME, ls, inspect SNAP or rm SNAP... (see gantry snapshot "
			  "-help)");
		return 2;
	}
	r = sandbox_snapshot_take(word, as, with_secrets, &made, &err);
	if (r == 0)
		log_info("snapshot `%s` made; `%s` runs on: gantry start NEW -from %s", made, word,
			 made);
	free(made);
	return cli_finish(&err, r);
}

static void fork_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry fork NAME [-n N] [-as PREFIX] [-with-secrets]\n\n"
		"Snapshot the running sandbox NAME as PREFIX (default NAME-fork) and start\n"
		"N clones of it at once, PREFIX-1 to PREFIX-N: each goes on from where NAME\n"
		"was, with its memory and a copy of its files, under its own name, machine\n"
		"id and random state. NAME goes on too. The snapshot stays for gantry start\n"
		"-from (docs/snapshots.md).\n\nFlags:\n");
	flags_usage(out, flags);
}

int cmd_fork(int argc, char **argv)
{
	bool help = false, with_secrets = false;
	const char *as = NULL;
	uint64_t n = 1;
	unsigned int started = 0;
	gantry_error_t err = NULL;
	int r;
	const struct flag flags[] = {
		{ "n", FLAG_UINT, &n, NULL, "N", "clones to start (default 1, at most 100)", FORK_MAX },
		{ "as", FLAG_STRING, &as, NULL, "PREFIX", "the snapshot's name and the clones' prefix",
		  0 },
		{ "with-secrets", FLAG_BOOL, &with_secrets, NULL, NULL,
		  "fork a sandbox that holds secrets too (gantry snapshot -help)", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	/* NAME, with flags before or after it. */
	char *name = NULL;
	int npos;

	r = flags_parse_mixed("fork", flags, argc, argv, &name, 1, &npos, fork_usage);
	if (r <= 0)
		return -r;
	if (npos != 1) {
		log_error("fork: want one NAME (see gantry fork -help)");
		return 2;
	}
	if (n == 0) {
		log_error("fork: -n 0: want 1 to %d clones", FORK_MAX);
		return 2;
	}
	r = sandbox_fork(name, (unsigned int)n, as, with_secrets, cli_getenv, &started, &err);
	if (r == 0)
		log_info("%u clone%s of `%s` running", started, started == 1 ? "" : "s", name);
	return cli_finish(&err, r);
}
