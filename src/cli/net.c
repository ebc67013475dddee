/* `gantry net traffic NAME [--json]`: a sandbox's per-destination traffic
 * counters, as its network worker last counted them. Everything in the
 * snapshot came from the guest's traffic or the worker: shown sanitised. */
#include <inttypes.h>
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

#define NET_CELL_MAX 40 /* a table cell from the file, at most */

static void net_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry net traffic NAME [--json]\n\n"
		"Show the sandbox NAME's network traffic by destination: address, protocol\n"
		"and port, allowed or dropped (and why), bytes and packets each way (TX: from\n"
		"the guest), when last seen, the egress policy's reason for a refusal, the\n"
		"DNS names the guest asked and whether the policy let them through, and drops\n"
		"by reason. Connections the host opened to a published port are one line per\n"
		"peer and guest port, REASON inbound. A running sandbox's counters are fresh;\n"
		"a stopped one's are those it stopped with.\n\nFlags:\n");
	flags_usage(out, flags);
}

/* A string field, sanitised; "-" when absent. */
static char *cell(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));

	if (v == NULL || *v == '\0')
		return xstrdup("-");
	return text_sanitized(v, strlen(v), NET_CELL_MAX);
}

static uint64_t count(json_t *o, const char *key)
{
	json_int_t v = json_integer_value(json_object_get(o, key));

	return v > 0 ? (uint64_t)v : 0;
}

static void traffic_table(json_t *t)
{
	json_t *v, *drops = json_object_get(t, "drops");
	const char *key;
	size_t i;

	printf("%-16s %-5s %-5s %-7s %-14s %12s %12s %9s %s\n", "ADDR", "PROTO", "PORT", "VERDICT",
	       "REASON", "TX", "RX", "PACKETS", "LAST-SEEN");
	json_array_foreach(json_object_get(t, "destinations"), i, v)
	{
		cleanup_free char *addr = cell(v, "addr"), *proto = cell(v, "proto");
		cleanup_free char *verdict = cell(v, "verdict"), *reason = cell(v, "reason");
		cleanup_free char *why = json_object_get(v, "policy") ? cell(v, "policy") : NULL;
		cleanup_free char *seen = cell(v, "last_seen");
		char port[8] = "-";

		if (json_is_integer(json_object_get(v, "port")) && count(v, "port"))
			snprintf(port, sizeof(port), "%u", (unsigned)(count(v, "port") & 0xffff));
		/* To the guest's port, from the host: not one of its destinations. */
		if (json_is_true(json_object_get(v, "inbound")) && reason[0] == '\0') {
			free(reason);
			reason = xstrdup("inbound");
		}
		printf("%-16s %-5s %-5s %-7s %-14s %12" PRIu64 " %12" PRIu64 " %9" PRIu64 " %s%s%s\n",
		       addr, proto, port, verdict, reason, count(v, "tx_bytes"),
		       count(v, "rx_bytes"), count(v, "tx_packets") + count(v, "rx_packets"), seen,
		       why ? "  policy: " : "", why ? why : "");
	}
	if (json_array_size(json_object_get(t, "dns"))) {
		printf("\nDNS names asked:\n  %-40s %-5s %-9s %7s %s\n", "NAME", "TYPE", "VERDICT",
		       "COUNT", "LAST-SEEN");
		json_array_foreach(json_object_get(t, "dns"), i, v)
		{
			cleanup_free char *name = cell(v, "name"), *verdict = cell(v, "verdict");
			cleanup_free char *seen = cell(v, "last_seen");

			printf("  %-40s %-5" PRIu64 " %-9s %7" PRIu64 " %s\n", name, count(v, "qtype"),
			       verdict, count(v, "count"), seen);
		}
	}
	if (json_object_size(drops)) {
		printf("\nDropped frames by reason:\n");
		json_object_foreach(drops, key, v)
		{
			cleanup_free char *why = text_sanitized(key, strlen(key), NET_CELL_MAX);

			printf("  %-24s %" PRIu64 "\n", why,
			       json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0);
		}
	}
	if (count(t, "evicted"))
		printf("\n%" PRIu64 " older destinations were evicted from the table\n",
		       count(t, "evicted"));
}

static int net_traffic(int argc, char **argv)
{
	return cli_show("net traffic", "net", argc, argv, net_usage, sandbox_net_traffic, traffic_table);
}

int cmd_net(int argc, char **argv)
{
	static const struct flag all[] = {
		{ "json", FLAG_BOOL, NULL, NULL, NULL, "print JSON", 0 },
		{ 0 },
	};

	if (flags_help_only(argc, argv)) {
		net_usage(stdout, all);
		return 0;
	}
	if (argc > 0 && strcmp(argv[0], "traffic") == 0)
		return net_traffic(argc - 1, argv + 1);
	log_error("net: want traffic (see gantry net -help)");
	return 2;
}
