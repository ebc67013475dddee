/* `gantry ports publish|unpublish|ls`: a sandbox's published ports, live
 * on a running one, in its sandbox.json on a stopped one. Flags and
 * printing only; the work is src/sandbox/network.c. */
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

static void ports_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry ports publish [--ephemeral] NAME SPEC\n"
		"       gantry ports unpublish [--ephemeral] NAME SPEC\n"
		"       gantry ports ls NAME [--json]\n\n"
		"Forward a host port to the sandbox NAME's guest, stop forwarding one, or list\n"
		"them. SPEC is [IP:]HOST:GUEST[/tcp|/udp] or GUEST: IP defaults to 127.0.0.1,\n"
		"a HOST of 0 (or none) picks a free port, and publish prints the spec as\n"
		"chosen. On a running sandbox the change is live and saved for its next\n"
		"boot; --ephemeral: live only, until it stops (a saved port comes back then).\n"
		"On a stopped sandbox the change is saved for its next boot.\n\nFlags:\n");
	flags_usage(out, flags);
}

static int ports_change(bool publish, int argc, char **argv)
{
	const char *cmd = publish ? "ports publish" : "ports unpublish";
	cleanup_free char *chosen = NULL;
	gantry_error_t err = NULL;
	bool ephemeral = false, help = false;
	char *pos[2];
	int npos, r;
	const struct flag flags[] = {
		{ "ephemeral", FLAG_BOOL, &ephemeral, NULL, NULL,
		  "live only: not saved, gone when the sandbox stops", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	r = flags_parse_mixed(cmd, flags, argc, argv, pos, 2, &npos, ports_usage);
	if (r <= 0)
		return -r;
	if (npos != 2) {
		log_error("%s: want NAME and SPEC (see gantry ports -help)", cmd);
		return 2;
	}
	if (publish)
		r = sandbox_publish(pos[0], pos[1], ephemeral, &chosen, &err);
	else
		r = sandbox_unpublish(pos[0], pos[1], ephemeral, &err);
	if (r < 0) {
		gantry_error_sanitize(&err, 0);
		return cli_fail(&err, CLI_EXIT_FAILED);
	}
	if (chosen)
		printf("%s\n", chosen);
	return 0;
}

static void ports_table(json_t *o)
{
	json_t *v;
	size_t i;

	printf("%-16s %-9s %-10s %-5s %s\n", "HOST-IP", "HOST-PORT", "GUEST-PORT", "PROTO",
	       "SAVED");
	json_array_foreach(json_object_get(o, "ports"), i, v)
	{
		const char *ip = json_string_value(json_object_get(v, "host_ip"));
		const char *proto = json_string_value(json_object_get(v, "proto"));

		printf("%-16s %-9lld %-10lld %-5s %s\n", ip ? ip : "?",
		       json_integer_value(json_object_get(v, "host_port")),
		       json_integer_value(json_object_get(v, "guest_port")), proto ? proto : "?",
		       json_is_true(json_object_get(v, "ephemeral")) ? "no (ephemeral)" : "yes");
	}
}

static int ports_ls(int argc, char **argv)
{
	return cli_show("ports ls", "ports", argc, argv, ports_usage, sandbox_ports_list, ports_table);
}

int cmd_ports(int argc, char **argv)
{
	static const struct flag all[] = {
		{ "ephemeral", FLAG_BOOL, NULL, NULL, NULL, "publish, unpublish: live only", 0 },
		{ "json", FLAG_BOOL, NULL, NULL, NULL, "ls: print JSON", 0 },
		{ 0 },
	};

	if (flags_help_only(argc, argv)) {
		ports_usage(stdout, all);
		return 0;
	}
	if (argc > 0 && strcmp(argv[0], "publish") == 0)
		return ports_change(true, argc - 1, argv + 1);
	if (argc > 0 && strcmp(argv[0], "unpublish") == 0)
		return ports_change(false, argc - 1, argv + 1);
	if (argc > 0 && strcmp(argv[0], "ls") == 0)
		return ports_ls(argc - 1, argv + 1);
	log_error("ports: want publish, unpublish or ls (see gantry ports -help)");
	return 2;
}
