/* `gantry mcp tools [-json] NAME`: the tools the MCP gateway of the
 * running one-shot NAME (gantry wrap or exec with -mcp-remote) shows its
 * guest, asked of the gateway itself as the guest's proxy asks it. */
#include <errno.h>
#include <limits.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/log.h"
#include "common/text.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "mcp/frame.h"
#include "mcp/gateway.h"
#include "mcp/remote.h"
#include "sandbox/lifecycle.h"

#define MCP_CLI_WAIT_MS ((MCP_REMOTE_TIMEOUT_S + 10) * 1000)

static void mcp_usage(FILE *out, const struct flag *flags)
{
	fprintf(out, "Usage: gantry mcp tools [-json] NAME\n\n"
		     "The tools the MCP gateway of the running sandbox NAME (gantry wrap or\n"
		     "gantry exec with -mcp-remote, named with -name or as gantry ls shows it)\n"
		     "shows its guest: each remote's allowed tools as SERVER__TOOL, with their\n"
		     "descriptions (-json: the tools/list result as the guest gets it).\n"
		     "Exit status: 0; 1 when NAME has no gateway or it did not answer; 2 bad\n"
		     "usage.\n\nFlags:\n");
	flags_usage(out, flags);
}

static int dial(const char *name, gantry_error_t *err)
{
	cleanup_free char *dir = NULL;
	char path[PATH_MAX];
	int fd;

	if (!sandbox_name_valid(name))
		return sandbox_name_check(name, err);
	if (sandbox_dir(name, &dir, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/%s", dir, MCP_HOST_SOCK);
	fd = unix_connect(path, 0);
	if (fd < 0) {
		int e = errno;

		if (e == ENAMETOOLONG)
			return gantry_error(err, e, "`%s`: its run directory's path is too long",
					    name);
		if (e == ENOENT || e == ECONNREFUSED)
			return gantry_error(err, 0, "`%s` runs no MCP gateway (gantry wrap or exec "
						    "with -mcp-remote)",
					    name);
		return gantry_error(err, 0, "`%s`'s MCP gateway: %s", name, strerror(e));
	}
	return fd;
}

static int send_line(int fd, json_t *msg)
{
	cleanup_free char *text = json_dumps(msg, JSON_COMPACT);
	size_t len = text ? strlen(text) : 0;
	int r = text && write_full(fd, text, len) == 0 && write_full(fd, "\n", 1) == 0 ? 0 : -1;

	json_decref(msg);
	return r;
}

/* The answer with id, skipping anything else, within the wait. */
static json_t *answer(int fd, struct mcp_reader *rd, json_int_t id, gantry_error_t *err)
{
	uint64_t deadline = now_ms() + MCP_CLI_WAIT_MS;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		const char *why;
		size_t room, len;
		char *line, *space;
		ssize_t n;
		int r;

		while ((r = mcp_reader_next(rd, &line, &len, &why)) == 1) {
			json_t *m = json_loadb(line, len, 0, NULL);

			if (m && json_integer_value(json_object_get(m, "id")) == id)
				return m;
			json_decref(m);
		}
		if (r < 0)
			return gantry_error(err, EPROTO, "the gateway: %s", why), NULL;
		if (now_ms() >= deadline || poll(&p, 1, (int)(deadline - now_ms())) <= 0)
			return gantry_error(err, ETIMEDOUT, "the gateway did not answer"), NULL;
		space = mcp_reader_space(rd, &room);
		n = read(fd, space, room);
		if (n <= 0)
			return gantry_error(err, EPIPE, "the gateway hung up"), NULL;
		mcp_reader_wrote(rd, (size_t)n);
	}
}

static int tools(const char *name, bool as_json, gantry_error_t *err)
{
	struct mcp_reader rd;
	json_t *reply = NULL, *list, *t;
	size_t i;
	int fd = dial(name, err), r = -1;

	if (fd < 0)
		return -1;
	mcp_reader_init(&rd);
	if (send_line(fd, json_pack("{s:s,s:i,s:s,s:{s:s,s:{},s:{s:s,s:s}}}", "jsonrpc", "2.0",
				    "id", 1, "method", "initialize", "params", "protocolVersion",
				    MCP_PROTOCOL_VERSION, "capabilities", "clientInfo", "name",
				    "gantry-mcp-tools", "version", GANTRY_VERSION)) < 0 ||
	    (reply = answer(fd, &rd, 1, err)) == NULL)
		goto out;
	json_decref(reply);
	if (send_line(fd, json_pack("{s:s,s:s}", "jsonrpc", "2.0", "method",
				    "notifications/initialized")) < 0 ||
	    send_line(fd, json_pack("{s:s,s:i,s:s}", "jsonrpc", "2.0", "id", 2, "method",
				    "tools/list")) < 0 ||
	    (reply = answer(fd, &rd, 2, err)) == NULL)
		goto out;
	list = json_object_get(json_object_get(reply, "result"), "tools");
	if (!json_is_array(list)) {
		gantry_error(err, EPROTO, "the gateway's tools/list had no tools");
		goto out;
	}
	if (as_json) {
		cleanup_free char *text = json_dumps(json_object_get(reply, "result"), JSON_INDENT(2));

		printf("%s\n", text ? text : "{}");
	} else {
		json_array_foreach(list, i, t) {
			const char *tn = json_string_value(json_object_get(t, "name"));
			const char *td = json_string_value(json_object_get(t, "description"));
			cleanup_free char *tool = text_sanitized(tn ? tn : "?", strlen(tn ? tn : "?"), 96);
			cleanup_free char *desc = text_sanitized(td ? td : "", strlen(td ? td : ""), 160);

			printf("%s\t%s\n", tool, desc);
		}
	}
	r = 0;
out:
	json_decref(reply);
	mcp_reader_free(&rd);
	close(fd);
	return r;
}

int cmd_mcp(int argc, char **argv)
{
	gantry_error_t err = NULL;
	bool help = false, as_json = false, dashdash;
	int rest, r;
	const struct flag flags[] = {
		{ "json", FLAG_BOOL, &as_json, NULL, NULL, "the tools/list result as JSON", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	if (argc >= 1 && strcmp(argv[0], "tools") == 0) {
		argc--;
		argv++;
	} else if (!flags_help_only(argc, argv)) {
		log_error("mcp: expected `gantry mcp tools NAME`");
		return 2;
	}
	r = flags_parse_cmd("mcp", flags, argc, argv, &rest, &dashdash, mcp_usage);
	if (r <= 0)
		return r < 0 ? -r : r;
	if (rest + 1 != argc) {
		log_error("mcp tools: one sandbox NAME");
		return 2;
	}
	if (tools(argv[rest], as_json, &err) < 0) {
		gantry_error_prefix(&err, "mcp tools");
		gantry_error_print(&err);
		return 1;
	}
	return 0;
}
