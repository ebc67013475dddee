/* The gateway's built-in fs server (see gateway.h): its two tools, the
 * request line that sends a call to the guest, and the answer that comes
 * back turned into the call's result. The work itself is the guest's
 * (gantry-init's fs server, shut in its root as its user); what comes
 * back is the guest's too, and only ever goes back to the guest. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/util.h"
#include "mcp/gateway.h"
#include "proto/agent.h"
#include "proto/base64.h"

#define FS_PATH_MAX 4095

int mcp_gateway_fs(struct mcp_gateway *g, const char *root, const char *user,
		   gantry_error_t *err)
{
	unsigned long uid = 65534, gid = 65534;
	char *end;

	root = root ? root : "/";
	if (root[0] != '/' || strlen(root) > FS_PATH_MAX || strstr(root, "/../") ||
	    (strlen(root) >= 3 && strcmp(root + strlen(root) - 3, "/..") == 0))
		return gantry_error_opt(err, "mcp_fs_root",
					": an absolute path in the sandbox without `..`");
	if (user && strcmp(user, "nobody") != 0) {
		errno = 0;
		uid = strtoul(user, &end, 10);
		if (errno || end == user || (*end && *end != ':') || uid > 0xfffffffeUL)
			return gantry_error_opt(err, "mcp_fs_user", ": nobody, UID or UID:GID");
		gid = uid;
		if (*end == ':') {
			const char *g0 = end + 1;

			gid = strtoul(g0, &end, 10);
			if (errno || end == g0 || *end || gid > 0xfffffffeUL)
				return gantry_error_opt(err, "mcp_fs_user",
							": nobody, UID or UID:GID");
		}
	}
	if (uid == 0 || gid == 0)
		return gantry_error_opt(err, "mcp_fs_user",
					": not root, nor root's group: the fs server runs as "
					"a user of its own");
	free(g->fs_root);
	g->fs_root = xstrdup(root);
	g->fs_uid = (uint32_t)uid;
	g->fs_gid = (uint32_t)gid;
	g->fs = true;
	return 0;
}

void mcp_fs_tools(json_t *tools)
{
	static const struct {
		const char *name, *what;
	} t[] = {
		{ MCP_FS_ID "__read_file",
		  "Read a text file of the sandbox (at most 512 KiB). Bytes that are not UTF-8 "
		  "come back as U+FFFD." },
		{ MCP_FS_ID "__list_directory",
		  "List a directory of the sandbox: one line per entry, [DIR], [FILE], [LINK] or "
		  "[OTHER] and its name, by name." },
	};

	for (size_t i = 0; i < ARRAY_SIZE(t); i++)
		json_array_append_new(
			tools, json_pack("{s:s,s:s,s:{s:s,s:{s:{s:s,s:s}},s:[s]}}", "name", t[i].name,
					 "description", t[i].what, "inputSchema", "type", "object",
					 "properties", "path", "type", "string", "description",
					 "an absolute path, or one from the fs root",
					 "required", "path"));
}

static json_t *tool_result(json_t *id, const char *text, size_t len, bool error)
{
	size_t n;
	char *clean = text_utf8_replaced(text, len, &n);
	json_t *r = json_pack("{s:s,s:O,s:{s:[{s:s,s:s%}],s:b}}", "jsonrpc", "2.0", "id", id,
			      "result", "content", "type", "text", "text", clean, n, "isError",
			      error);

	free(clean);
	return r;
}

static json_t *call_error(json_t *id, const char *msg)
{
	return tool_result(id, msg, strlen(msg), true);
}

json_t *mcp_fs_request(struct mcp_session *s, json_t *id, json_t *params, char **line)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	json_t *args = json_object_get(params, "arguments");
	const char *path = json_string_value(json_object_get(args, "path"));
	const char *op = NULL;
	size_t plen, slot;
	char *full, *enc;

	*line = NULL;
	if (name && strcmp(name, MCP_FS_ID "__read_file") == 0)
		op = "read";
	else if (name && strcmp(name, MCP_FS_ID "__list_directory") == 0)
		op = "list";
	if (op == NULL)
		return call_error(id, "no such fs tool (fs__read_file, fs__list_directory)");
	if (path == NULL || (plen = json_string_length(json_object_get(args, "path"))) == 0 ||
	    plen > FS_PATH_MAX || strlen(path) != plen)
		return call_error(id, "`path`: a path of 1 to 4095 bytes, no NUL");
	for (slot = 0; slot < MCP_FS_PENDING && s->fs_pending[slot].id; slot++)
		;
	if (slot == MCP_FS_PENDING)
		return call_error(id, "too many fs calls under way in this session");
	xasprintf(&full, "%s%s", path[0] == '/' ? "" : "/", path);
	if (strlen(full) > FS_PATH_MAX) {
		free(full);
		return call_error(id, "`path`: a path of 1 to 4095 bytes, no NUL");
	}
	enc = xmalloc(b64_encoded_len(strlen(full), B64_URL) + 1);
	b64_encode(full, strlen(full), enc, B64_URL);
	s->fs_pending[slot] = (struct mcp_fs_pending){ .seq = ++s->fs_seq,
						       .id = json_incref(id),
						       .path = full };
	xasprintf(line, "%c%llu %s %s\n", PROTO_MCP_FS_MARK, (unsigned long long)s->fs_seq, op,
		  enc);
	free(enc);
	return NULL;
}

json_t *mcp_fs_answer(struct mcp_session *s, const char *line, size_t len)
{
	unsigned long long seq;
	struct mcp_fs_pending *p = NULL;
	json_t *reply;
	int at = 0;

	if (len < 2 || line[0] != PROTO_MCP_FS_MARK ||
	    sscanf(line + 1, "%llu %n", &seq, &at) != 1 || at == 0)
		return NULL;
	for (size_t i = 0; i < MCP_FS_PENDING; i++)
		if (s->fs_pending[i].id && s->fs_pending[i].seq == seq)
			p = &s->fs_pending[i];
	if (p == NULL)
		return NULL; /* nothing asked: dropped */
	line += 1 + at;
	len -= 1 + (size_t)at;
	if (len >= 3 && strncmp(line, "ok ", 3) == 0) {
		char *data = xmalloc(len);
		long n = b64_decode(line + 3, len - 3, data, len, B64_URL);

		reply = n < 0 ? call_error(p->id, "the fs server's answer does not decode") :
				tool_result(p->id, data, (size_t)n, false);
		free(data);
	} else if (len > 4 && strncmp(line, "err ", 4) == 0) {
		cleanup_free char *why = text_sanitized(line + 4, len - 4, 200);
		cleanup_free char *msg = NULL;
		cleanup_free char *shown = text_sanitized(p->path, strlen(p->path), 256);

		xasprintf(&msg, "%s: %s", shown, why);
		reply = call_error(p->id, msg);
	} else {
		reply = call_error(p->id, "the fs server's answer is not one");
	}
	mcp_fs_forget(p);
	return reply;
}

void mcp_fs_forget(struct mcp_fs_pending *p)
{
	json_decref(p->id);
	free(p->path);
	*p = (struct mcp_fs_pending){ 0 };
}
