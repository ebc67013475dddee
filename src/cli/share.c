/* `gantry share add|rm|ls`: a sandbox's host directory shares, live on a
 * running one, in its sandbox.json on a stopped one. Flags and printing
 * only; the work is src/sandbox/shares.c. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/log.h"
#include "common/text.h"
#include "common/util.h"
#include "sandbox/lifecycle.h"

static void share_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry share add [--replace] [--ephemeral] NAME SPEC\n"
		"       gantry share rm [--force] [--ephemeral] NAME TAG\n"
		"       gantry share ls NAME [--json]\n\n"
		"Share a host directory into the sandbox NAME, stop sharing one, or list them.\n"
		"SPEC is TAG=HOST_PATH[@CTR_PATH][,ro][,nogit][,uid=N,gid=N], as for -share (default\n"
		"CTR_PATH /host/TAG). On a running sandbox the change is live, in its container\n"
		"and its sessions, and saved for its next boot; --ephemeral: live only, until it\n"
		"stops (a saved share comes back then). add --replace replaces the share with\n"
		"the same tag at once. rm waits until no file of the share is open in the\n"
		"sandbox; --force removes it at once, and what was open fails from then on.\n"
		"On a stopped sandbox the change is saved for its next boot.\n\nFlags:\n");
	flags_usage(out, flags);
}

static void rm_waiting(const char *tag, long open)
{
	log_info("share `%s`: waiting for %ld open file%s in the sandbox to close (--force "
		 "removes it now)",
		 tag, open, open == 1 ? "" : "s");
}

static int share_change(bool add, int argc, char **argv)
{
	const char *cmd = add ? "share add" : "share rm";
	cleanup_free char *kept = NULL;
	gantry_error_t err = NULL;
	bool ephemeral = false, replace = false, force = false, help = false;
	char *pos[2];
	int npos, r;
	const struct flag add_flags[] = {
		{ "replace", FLAG_BOOL, &replace, NULL, NULL,
		  "replace the share with the same tag", 0 },
		{ "ephemeral", FLAG_BOOL, &ephemeral, NULL, NULL,
		  "live only: not saved, gone when the sandbox stops", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};
	const struct flag rm_flags[] = {
		{ "force", FLAG_BOOL, &force, NULL, NULL,
		  "do not wait for open files: they fail from now on", 0 },
		{ "ephemeral", FLAG_BOOL, &ephemeral, NULL, NULL,
		  "live only: still saved, back when the sandbox next boots", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	r = flags_parse_mixed(cmd, add ? add_flags : rm_flags, argc, argv, pos, 2, &npos,
			      share_usage);
	if (r <= 0)
		return -r;
	if (npos != 2) {
		log_error("%s: want NAME and %s (see gantry share -help)", cmd, add ? "SPEC" : "TAG");
		return 2;
	}
	if (add)
		r = sandbox_share_add(pos[0], pos[1], replace, ephemeral, &kept, &err);
	else
		r = sandbox_share_rm(pos[0], pos[1], force, ephemeral, rm_waiting, &err);
	if (r < 0) {
		gantry_error_sanitize(&err, 0);
		return cli_fail(&err, CLI_EXIT_FAILED);
	}
	if (kept) {
		text_sanitize(kept, 0);
		printf("%s\n", kept);
	}
	return 0;
}

static void share_table(json_t *o)
{
	json_t *v;
	size_t i;

	printf("%-16s %-4s %-9s %-6s %-24s %s\n", "TAG", "MODE", "OWNER", "STATE", "PATH", "HOST");
	json_array_foreach(json_object_get(o, "shares"), i, v)
	{
		cleanup_free char *path = xstrdup(cli_json_str(v, "path", "?")),
				  *host = xstrdup(cli_json_str(v, "host", "?"));
		char owner[32] = "-";
		const char *state;

		text_sanitize(path, 0);
		text_sanitize(host, 0);
		if (json_object_get(v, "uid"))
			snprintf(owner, sizeof(owner), "%lld:%lld",
				 json_integer_value(json_object_get(v, "uid")),
				 json_integer_value(json_object_get(v, "gid")));
		if (!json_is_true(json_object_get(v, "live")))
			state = json_is_true(json_object_get(o, "running")) ? "saved" : "-";
		else
			state = json_is_true(json_object_get(v, "saved")) ? "live" : "live*";
		printf("%-16s %-4s %-9s %-6s %-24s %s\n", cli_json_str(v, "tag", "?"),
		       json_is_true(json_object_get(v, "ro")) ? "ro" : "rw", owner, state, path,
		       host);
	}
}

static int share_ls(int argc, char **argv)
{
	return cli_show("share ls", "share", argc, argv, share_usage, sandbox_shares_list,
			share_table);
}

int cmd_share(int argc, char **argv)
{
	static const struct flag all[] = {
		{ "replace", FLAG_BOOL, NULL, NULL, NULL, "add: replace the share with the same tag",
		  0 },
		{ "force", FLAG_BOOL, NULL, NULL, NULL, "rm: do not wait for open files", 0 },
		{ "ephemeral", FLAG_BOOL, NULL, NULL, NULL, "add, rm: live only", 0 },
		{ "json", FLAG_BOOL, NULL, NULL, NULL, "ls: print JSON", 0 },
		{ 0 },
	};

	if (flags_help_only(argc, argv)) {
		share_usage(stdout, all);
		return 0;
	}
	if (argc > 0 && strcmp(argv[0], "add") == 0)
		return share_change(true, argc - 1, argv + 1);
	if (argc > 0 && (strcmp(argv[0], "rm") == 0 || strcmp(argv[0], "remove") == 0))
		return share_change(false, argc - 1, argv + 1);
	if (argc > 0 && strcmp(argv[0], "ls") == 0)
		return share_ls(argc - 1, argv + 1);
	log_error("share: want add, rm or ls (see gantry share -help)");
	return 2;
}
