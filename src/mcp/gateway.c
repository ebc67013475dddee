/* The MCP gateway (see gateway.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/door.h"
#include "common/log.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "mcp/frame.h"
#include "mcp/gateway.h"
#include "net/net.h"
#include "proto/agent.h"
#include "egress/egress.h"
#include "worker/worker.h"

#define TOOL_SEP    "__"
#define LIST_PAGES  8 /* of a remote's tools/list */
#define RPC_INVALID -32600
#define RPC_NOMETHOD -32601
#define RPC_PARAMS  -32602
#define RPC_INTERNAL -32603

static const char *const versions[] = { "2025-06-18", "2025-03-26", "2024-11-05" };

static json_t *rpc_error(json_t *id, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static json_t *rpc_error(json_t *id, int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
			 "error", "code", code, "message", msg);
}

static json_t *rpc_result(json_t *id, json_t *result)
{
	return json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

/* A remote's JSON, its secrets redacted, as a new value. */
static json_t *redacted(struct mcp_remote *r, json_t *v)
{
	cleanup_free char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	cleanup_free char *clean = text ? mcp_redact(r, text) : NULL;

	return clean ? json_loads(clean, JSON_DECODE_ANY, NULL) : json_null();
}

static json_t *initialize(json_t *id, json_t *params)
{
	const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
	const char *v = versions[0];

	for (size_t i = 0; asked && i < ARRAY_SIZE(versions); i++)
		if (strcmp(asked, versions[i]) == 0)
			v = versions[i];
	return rpc_result(id, json_pack("{s:s,s:{s:{s:b}},s:{s:s,s:s},s:s}", "protocolVersion", v,
					"capabilities", "tools", "listChanged", false,
					"serverInfo", "name", "gantry", "version", GANTRY_VERSION,
					"instructions",
					"Tools of the remote MCP servers this sandbox may use, "
					"and of its fs server, named SERVER__TOOL."));
}

/* One remote's tools the guest may see, renamed, into out. */
static void list_remote(struct mcp_remote *r, json_t *out)
{
	json_t *cursor = NULL;

	for (int page = 0; page < LIST_PAGES; page++) {
		json_t *params = json_object(), *result = NULL, *error = NULL, *tools, *t;
		gantry_error_t err = NULL;
		size_t i;

		if (cursor)
			json_object_set_new(params, "cursor", cursor);
		cursor = NULL;
		if (mcp_remote_call(r, "tools/list", params, &result, &error, &err) < 0 || error) {
			log_warn("mcp: %s: tools/list: %s", r->spec.id,
				 err ? gantry_error_str(err) : "refused");
			gantry_error_free(&err);
			json_decref(params);
			json_decref(error);
			return;
		}
		json_decref(params);
		tools = json_object_get(result, "tools");
		json_array_foreach(tools, i, t) {
			const char *name = json_string_value(json_object_get(t, "name"));
			json_t *copy;
			char *full;

			if (name == NULL || !mcp_tool_allowed(&r->spec, name))
				continue;
			copy = redacted(r, t);
			name = json_string_value(json_object_get(copy, "name"));
			if (name == NULL) {
				json_decref(copy);
				continue;
			}
			xasprintf(&full, "%s" TOOL_SEP "%s", r->spec.id, name);
			json_object_set_new(copy, "name", json_string(full));
			free(full);
			json_array_append_new(out, copy);
		}
		if (json_is_string(json_object_get(result, "nextCursor")))
			cursor = json_incref(json_object_get(result, "nextCursor"));
		json_decref(result);
		if (cursor == NULL)
			return;
	}
	json_decref(cursor);
}

static json_t *tools_list(struct mcp_gateway *g, json_t *id)
{
	json_t *tools = json_array();

	if (g->fs)
		mcp_fs_tools(tools);
	for (size_t i = 0; i < g->n; i++)
		list_remote(&g->remotes[i], tools);
	return rpc_result(id, json_pack("{s:o}", "tools", tools));
}

static json_t *tools_call(struct mcp_gateway *g, json_t *id, json_t *params)
{
	const char *full = json_string_value(json_object_get(params, "name"));
	const char *sep = full ? strstr(full, TOOL_SEP) : NULL;
	struct mcp_remote *r = NULL;
	json_t *fwd, *result = NULL, *error = NULL, *answer;
	gantry_error_t err = NULL;

	if (sep == NULL)
		return rpc_error(id, RPC_PARAMS, "unknown tool: tools are SERVER__TOOL");
	if (g->fs && strncmp(full, MCP_FS_ID TOOL_SEP, sizeof(MCP_FS_ID TOOL_SEP) - 1) == 0)
		return rpc_error(id, RPC_INTERNAL, "the fs server answers in a session only");
	for (size_t i = 0; i < g->n; i++)
		if (strlen(g->remotes[i].spec.id) == (size_t)(sep - full) &&
		    strncmp(g->remotes[i].spec.id, full, (size_t)(sep - full)) == 0)
			r = &g->remotes[i];
	if (r == NULL)
		return rpc_error(id, RPC_PARAMS, "unknown tool: no server %.*s",
				 (int)MIN((size_t)(sep - full), (size_t)64), full);
	if (!mcp_tool_allowed(&r->spec, sep + 2))
		return rpc_error(id, RPC_PARAMS, "tool %.*s is not allowed in this sandbox",
				 (int)MIN(strlen(full), (size_t)128), full);
	fwd = json_deep_copy(params);
	json_object_set_new(fwd, "name", json_string(sep + 2));
	if (mcp_remote_call(r, "tools/call", fwd, &result, &error, &err) < 0) {
		cleanup_free char *why = mcp_redact(r, gantry_error_str(err));

		json_decref(fwd);
		gantry_error_free(&err);
		return rpc_error(id, RPC_INTERNAL, "%s", why);
	}
	json_decref(fwd);
	if (error) {
		answer = json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "error",
				   redacted(r, error));
		json_decref(error);
		return answer;
	}
	answer = rpc_result(id, redacted(r, result));
	json_decref(result);
	return answer;
}

json_t *mcp_gateway_handle(struct mcp_gateway *g, json_t *msg)
{
	json_t *id = json_object_get(msg, "id");
	const char *method = json_string_value(json_object_get(msg, "method"));
	json_t *params = json_object_get(msg, "params");

	if (!json_is_object(msg) ||
	    !json_is_string(json_object_get(msg, "jsonrpc")) ||
	    strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0") != 0)
		return rpc_error(NULL, RPC_INVALID, "not a JSON-RPC 2.0 message");
	if (id && !json_is_integer(id) && !json_is_string(id))
		return rpc_error(NULL, RPC_INVALID, "an id is a number or a string");
	if (method == NULL)
		return NULL; /* a response to nothing we asked: dropped */
	if (id == NULL)
		return NULL; /* a notification */
	if (params && !json_is_object(params))
		return rpc_error(id, RPC_PARAMS, "params is an object");
	if (strcmp(method, "initialize") == 0)
		return initialize(id, params);
	if (strcmp(method, "ping") == 0)
		return rpc_result(id, json_object());
	if (strcmp(method, "tools/list") == 0)
		return tools_list(g, id);
	if (strcmp(method, "tools/call") == 0)
		return tools_call(g, id, params);
	return rpc_error(id, RPC_NOMETHOD, "method not found: %.64s", method);
}

/* ---- the guest's sessions ---------------------------------------------------------------- */

/* Write all of buf, waiting for room (never longer than the idle bound). */
static bool send_all(struct mcp_gateway *g, int fd, const char *buf, size_t len)
{
	while (len) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLOUT },
				       { .fd = acceptor_stop_fd(&g->acc), .events = POLLIN } };
		ssize_t n;

		if (poll(p, 2, MCP_IDLE_S * 1000) <= 0 || p[1].revents)
			return false;
		n = send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			return false;
		buf += n;
		len -= (size_t)n;
	}
	return true;
}

static bool answer(struct mcp_gateway *g, int fd, json_t *msg)
{
	char *text = json_dumps(msg, JSON_COMPACT);
	bool ok = text && send_all(g, fd, text, strlen(text)) && send_all(g, fd, "\n", 1);

	free(text);
	return ok;
}

void mcp_session_init(struct mcp_session *s, int fd)
{
	*s = (struct mcp_session){ .fd = fd };
	mcp_reader_init(&s->rd);
}

/* A tools/call of an fs tool: sent on to the guest's fs server. */
static bool is_fs_call(const struct mcp_gateway *g, json_t *msg)
{
	const char *method = json_string_value(json_object_get(msg, "method"));
	const char *name = json_string_value(
		json_object_get(json_object_get(msg, "params"), "name"));

	return g->fs && method && strcmp(method, "tools/call") == 0 && name &&
	       json_object_get(msg, "id") &&
	       strncmp(name, MCP_FS_ID TOOL_SEP, sizeof(MCP_FS_ID TOOL_SEP) - 1) == 0;
}

void mcp_session_end(struct mcp_session *s)
{
	for (size_t i = 0; i < MCP_FS_PENDING; i++)
		mcp_fs_forget(&s->fs_pending[i]);
	mcp_reader_free(&s->rd);
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

bool mcp_session_step(struct mcp_gateway *g, struct mcp_session *s)
{
	const char *why;
	size_t room, len;
	char *space, *line;
	ssize_t n;
	int r;

	space = mcp_reader_space(&s->rd, &room);
	n = recv(s->fd, space, room, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n <= 0)
		return false;
	mcp_reader_wrote(&s->rd, (size_t)n);
	while ((r = mcp_reader_next(&s->rd, &line, &len, &why)) == 1) {
		json_error_t jerr;
		json_t *msg = NULL, *reply;
		char *request = NULL;

		if (line[0] == PROTO_MCP_FS_MARK) {
			reply = g->fs ? mcp_fs_answer(s, line, len) : NULL;
		} else if ((msg = json_loadb(line, len, 0, &jerr)) == NULL) {
			reply = rpc_error(NULL, -32700, "parse error: %s", jerr.text);
		} else if (is_fs_call(g, msg)) {
			reply = mcp_fs_request(s, json_object_get(msg, "id"),
					       json_object_get(msg, "params"), &request);
		} else {
			reply = mcp_gateway_handle(g, msg);
		}
		json_decref(msg);
		if (request) {
			bool sent = send_all(g, s->fd, request, strlen(request));

			free(request);
			if (!sent)
				return false;
		}
		if (reply && !answer(g, s->fd, reply)) {
			json_decref(reply);
			return false;
		}
		json_decref(reply);
	}
	if (r < 0)
		log_info("mcp: a guest session ended: %s", why);
	return r >= 0;
}

/* A session on a thread of this process (isolation off), as long as the
 * guest keeps it and speaks within MCP_IDLE_S. */
static void session_conn(void *opaque, int fd)
{
	struct mcp_gateway *g = opaque;
	struct mcp_session s;

	mcp_session_init(&s, fd);
	for (;;) {
		struct pollfd p[2] = { { .fd = s.fd, .events = POLLIN },
				       { .fd = acceptor_stop_fd(&g->acc), .events = POLLIN } };

		if (poll(p, 2, MCP_IDLE_S * 1000) <= 0 || p[1].revents || !mcp_session_step(g, &s))
			break;
	}
	mcp_session_end(&s);
}

void mcp_gateway_init(struct mcp_gateway *g)
{
	memset(g, 0, sizeof(*g));
	g->acc = ACCEPTOR_NONE;
	g->host = ACCEPTOR_NONE;
	g->chan = -1;
	g->pid = -1;
	g->keeper_stop = -1;
}

int mcp_gateway_add(struct mcp_gateway *g, const char *spec, gantry_error_t *err)
{
	struct mcp_remote_spec sp;

	if (g->n == MCP_REMOTES_MAX)
		return gantry_error_opt(err, "mcp_remotes", ": more than %d", MCP_REMOTES_MAX);
	if (mcp_remote_spec_parse(spec, &sp, err) < 0)
		return -1;
	for (size_t k = 0; k < g->n; k++)
		if (strcmp(sp.id, g->remotes[k].spec.id) == 0) {
			gantry_error_opt(err, "mcp_remotes", ": name=%s given twice", sp.id);
			mcp_remote_spec_free(&sp);
			return -1;
		}
	mcp_remote_spec_free(&sp);
	if (mcp_remote_open(&g->remotes[g->n], spec, true, err) < 0) {
		mcp_remote_close(&g->remotes[g->n]);
		return -1;
	}
	g->specs[g->n++] = xstrdup(spec);
	return 0;
}

/* The confined gateway: spawned with the listener and the trust store,
 * then given the secrets, which this process then forgets. */
static int spawn_worker(struct mcp_gateway *g, int listen, enum confine_mode mode, int log_fd,
			gantry_error_t *err)
{
	static const char *const env[] = { "GANTRY_LOG", CONFINE_SECCOMP_ENV, NET_DNS_ENV, NULL };
	cleanup_free const char **args = xzalloc((7 + 2 * g->n) * sizeof(*args));
	char listen_arg[16], trust_arg[16];
	cleanup_close int trust = -1;
	json_t *remotes = json_array(), *isolation = NULL;
	int fds[2], n = 0;

	snprintf(listen_arg, sizeof(listen_arg), "%d", WORKER_FIRST_FD);
	snprintf(trust_arg, sizeof(trust_arg), "%d", WORKER_FIRST_FD + 1);
	args[n++] = "--listen-fd";
	args[n++] = listen_arg;
	args[n++] = "--trust-fd";
	args[n++] = trust_arg;
	for (size_t i = 0; i < g->n; i++) {
		args[n++] = "--remote";
		args[n++] = g->specs[i];
	}
	if (g->fs)
		args[n++] = "--fs";
	if ((trust = egress_trust_open(err)) < 0) {
		json_decref(remotes);
		return gantry_error_prefix(err, "the MCP gateway");
	}
	fds[0] = listen;
	fds[1] = trust;
	if (worker_spawn(&(struct worker_spawn){ .role = MCP_WORKER_ROLE,
						 .what = "MCP gateway",
						 .mode = mode,
						 .extra_ns = CONFINE_ROOT_UNPRIVILEGED,
						 .env = env,
						 .args = args,
						 .log_fd = log_fd,
						 .fds = fds,
						 .nr_fds = 2 },
			 &g->pid, &g->chan, err) < 0 ||
	    worker_wait_ready(&g->pid, g->chan, MCP_WORKER_READY_MS, "MCP gateway", &isolation,
			      err) < 0) {
		json_decref(remotes);
		return gantry_error_prefix(err, "the MCP gateway");
	}
	json_decref(isolation);
	for (size_t i = 0; i < g->n; i++)
		json_array_append_new(remotes, mcp_remote_secrets_json(&g->remotes[i]));
	if (worker_send_json(g->chan, json_pack("{s:s,s:o}", "op", "secrets", "remotes", remotes),
			     NULL, 0) < 0)
		return gantry_error_errno(err, "the MCP gateway: its secrets");
	/* Held there now, not here. */
	for (size_t i = 0; i < g->n; i++) {
		char *spec = g->specs[i];

		mcp_remote_close(&g->remotes[i]);
		mcp_remote_open(&g->remotes[i], spec, false, NULL);
	}
	return 0;
}

/* A host client: joined to a dial of the gateway, which it then serves as
 * it serves the guest's proxy. */
static void host_conn(void *opaque, int fd)
{
	struct mcp_gateway *g = opaque;
	int gw = doors_dial(g->doors, PROTO_MCP_PORT);

	if (gw >= 0) {
		acceptor_join(&g->host, fd, gw);
		close(gw);
	}
	close(fd);
}

int mcp_gateway_open(struct mcp_gateway *g, struct doors *doors, const char *dir,
		     enum confine_mode mode, int log_fd, gantry_error_t *err)
{
	cleanup_free char *path = NULL;
	cleanup_close int in = -1;

	if (g->n == 0 && !g->fs)
		return 0;
	g->doors = doors;
	xasprintf(&path, "%s/%s", dir, MCP_HOST_SOCK);
	if (acceptor_adopt(&g->host, unix_listen(path, 4, err), MCP_HOST_CONNS, host_conn, g,
			   err) < 0)
		return gantry_error_prefix(err, "the MCP gateway");
	if (mode == CONFINE_OFF)
		return acceptor_door(&g->acc, doors, PROTO_MCP_PORT, MCP_SESSIONS_MAX, session_conn,
				     g, err) < 0 ?
			       gantry_error_prefix(err, "the MCP gateway") :
			       0;
	/* The door's end is the confined gateway's alone. */
	in = doors_open(doors, PROTO_MCP_PORT, err);
	if (in < 0)
		return gantry_error_prefix(err, "the MCP gateway");
	return spawn_worker(g, in, mode, log_fd, err);
}

int mcp_gateway_run(struct mcp_gateway *g, gantry_error_t *err)
{
	return acceptor_run(&g->host, "the MCP gateway", err) < 0 ||
			       acceptor_run(&g->acc, "the MCP gateway", err) < 0 ||
			       mcp_custody_keep(g, err) < 0 ?
		       -1 :
		       0;
}

void mcp_gateway_stop(struct mcp_gateway *g)
{
	/* No renewal is sent once the channel is closed. */
	mcp_custody_stop(g);
	acceptor_stop(&g->host);
	acceptor_stop(&g->acc);
	close_fd(&g->chan); /* the confined gateway's end of the run */
	if (g->pid > 0) {
		int status;

		worker_stop(&g->pid, &status);
	}
}

void mcp_gateway_free(struct mcp_gateway *g)
{
	mcp_gateway_stop(g);
	for (size_t i = 0; i < g->n; i++) {
		mcp_remote_close(&g->remotes[i]);
		free(g->specs[i]);
	}
	g->n = 0;
	free(g->fs_root);
	g->fs_root = NULL;
	g->fs = false;
}
