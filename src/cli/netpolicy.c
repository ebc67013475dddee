/* `gantry net-policy set|default|clear|show`: a sandbox's egress policy,
 * swapped at once on a running one, saved on a stopped one. The file is
 * checked here, in full, before anything changes. Flags and printing
 * only; the work is src/sandbox/network.c. */
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

#define CELL_MAX 64

static void netpolicy_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry net-policy set [--allow-local-net] NAME FILE\n"
		"       gantry net-policy default [--allow-local-net] NAME\n"
		"       gantry net-policy clear [--allow-local-net] NAME\n"
		"       gantry net-policy show NAME [--json]\n\n"
		"Change the egress policy of the sandbox NAME: set makes FILE's policy (JSON,\n"
		"see docs/network.md) the sandbox's; default (or its other name, clear) goes\n"
		"back to the built-in one: every destination allowed but local networks and\n"
		"the host. --allow-local-net takes the local-network wall down as well.\n"
		"On a running sandbox the new policy is in force when the command returns:\n"
		"connections it denies are reset, addresses learned for names it still\n"
		"allows stay. A file with an error changes nothing. On a stopped sandbox the\n"
		"policy is saved for its next boot. show prints the policy (on a running\n"
		"sandbox, as in force, with the addresses learned from DNS).\n\nFlags:\n");
	flags_usage(out, flags);
}

static int netpolicy_change(const char *what, bool set, int argc, char **argv)
{
	cleanup_free char *cmd = NULL;
	gantry_error_t err = NULL;
	bool allow_local = false, help = false;
	json_t *policy = NULL, *out = NULL;
	char *pos[2];
	int npos, r;
	const struct flag flags[] = {
		{ "allow-local-net", FLAG_BOOL, &allow_local, NULL, NULL,
		  "let the guest reach local networks and the host", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	xasprintf(&cmd, "net-policy %s", what);
	r = flags_parse_mixed(cmd, flags, argc, argv, pos, 2, &npos, netpolicy_usage);
	if (r <= 0)
		return -r;
	if (npos != (set ? 2 : 1)) {
		log_error("%s: want NAME%s (see gantry net-policy -help)", cmd, set ? " and FILE" : "");
		return 2;
	}
	r = set && net_policy_file(pos[1], &policy, &err) < 0 ? gantry_error_as_usage(&err) : 0;
	if (r == 0)
		r = sandbox_net_policy_set(pos[0], policy, allow_local, &out, &err);
	json_decref(policy);
	if (r < 0) {
		gantry_error_sanitize(&err, 0);
		return cli_fail(&err, CLI_EXIT_FAILED);
	}
	if (json_is_true(json_object_get(out, "running")))
		printf("sandbox %s: policy in force (generation %lld); %lld connections cut\n", pos[0],
		       json_integer_value(json_object_get(out, "generation")),
		       json_integer_value(json_object_get(out, "cut")));
	else
		printf("sandbox %s: policy saved for its next boot\n", pos[0]);
	json_decref(out);
	return 0;
}

static char *cell(json_t *o, const char *key, const char *none)
{
	const char *v = json_string_value(json_object_get(o, key));

	if (v == NULL || *v == '\0')
		return xstrdup(none);
	return text_sanitized(v, strlen(v), CELL_MAX);
}

static void print_names(const char *title, json_t *a)
{
	json_t *v;
	size_t i;

	printf("%s:", title);
	if (json_array_size(a) == 0)
		printf(" none");
	json_array_foreach(a, i, v)
	{
		const char *s = json_string_value(v);
		cleanup_free char *shown = text_sanitized(s ? s : "?", strlen(s ? s : "?"), CELL_MAX);

		printf(" %s", shown);
	}
	printf("\n");
}

static void policy_table(json_t *o)
{
	json_t *p = json_object_get(o, "policy"), *v, *learned = json_object_get(o, "learned");
	size_t i;

	printf("Sandbox:  %s (%s)\n", json_string_value(json_object_get(o, "name")),
	       json_is_true(json_object_get(o, "running")) ? "running: the policy in force"
							    : "stopped: the saved policy");
	printf("Policy:   %s\n", json_is_true(json_object_get(o, "default"))
				     ? "the default"
				     : "from a file");
	printf("Default:  %s\n", json_string_value(json_object_get(p, "default")));
	printf("Local networks and the host: %s\n",
	       json_is_true(json_object_get(p, "allowLocal")) ? "allowed" : "walled off");
	printf("\n%-4s %-6s %-18s %-5s %s\n", "#", "ACTION", "CIDR", "PROTO", "PORTS");
	json_array_foreach(json_object_get(p, "rules"), i, v)
	{
		cleanup_free char *action = cell(v, "action", "allow"), *cidr = cell(v, "cidr", "any");
		cleanup_free char *proto = cell(v, "proto", "any"), *ports = cell(v, "ports", "any");

		printf("%-4zu %-6s %-18s %-5s %s\n", i, action, cidr, proto, ports);
	}
	printf("\n");
	print_names("Allowed domains", json_object_get(p, "allowDomains"));
	print_names("Resolved only", json_object_get(p, "resolveDomains"));
	if (json_is_array(learned)) {
		printf("\nLearned from DNS: %lld addresses%s\n",
		       json_integer_value(json_object_get(o, "learned_total")),
		       json_array_size(learned) <
				       (size_t)json_integer_value(json_object_get(o, "learned_total"))
			       ? " (the first shown)"
			       : "");
		json_array_foreach(learned, i, v)
		{
			cleanup_free char *addr = cell(v, "addr", "?");

			printf("  %-16s %4llds ", addr,
			       json_integer_value(json_object_get(v, "expires_in_s")));
			print_names("for", json_object_get(v, "names"));
		}
	}
}

static int netpolicy_show(int argc, char **argv)
{
	return cli_show("net-policy show", "net-policy", argc, argv, netpolicy_usage,
			sandbox_net_policy_show, policy_table);
}

int cmd_net_policy(int argc, char **argv)
{
	static const struct flag all[] = {
		{ "allow-local-net", FLAG_BOOL, NULL, NULL, NULL,
		  "set, default, clear: let the guest reach local networks and the host", 0 },
		{ "json", FLAG_BOOL, NULL, NULL, NULL, "show: print JSON", 0 },
		{ 0 },
	};

	if (flags_help_only(argc, argv)) {
		netpolicy_usage(stdout, all);
		return 0;
	}
	if (argc > 0 && strcmp(argv[0], "set") == 0)
		return netpolicy_change("set", true, argc - 1, argv + 1);
	if (argc > 0 && (strcmp(argv[0], "default") == 0 || strcmp(argv[0], "clear") == 0))
		return netpolicy_change(argv[0], false, argc - 1, argv + 1);
	if (argc > 0 && strcmp(argv[0], "show") == 0)
		return netpolicy_show(argc - 1, argv + 1);
	log_error("net-policy: want set, default, clear or show (see gantry net-policy -help)");
	return 2;
}
