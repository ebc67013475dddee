/* libFuzzer target for the MCP gateway's guest side: the newline-delimited
 * frame reader (mcp/frame.h), fed the input in chunks whose sizes the
 * input's first bytes choose, and each whole line through the gateway's
 * JSON-RPC handling with no remote but the fs server (mcp_gateway_handle,
 * and a session's fs calls and the guest's fs answers, as
 * mcp_session_step sends them). A line never holds a newline or NUL,
 * never passes MCP_FRAME_MAX, every answer is a JSON-RPC 2.0 object with a
 * result or an error, and an fs request to the guest is one marked line. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/frame.h"
#include "mcp/gateway.h"
#include "proto/agent.h"

#include "check.h"

static void answer_ok(json_t *a)
{
	if (a == NULL)
		return;
	check(json_is_object(a));
	check(strcmp(json_string_value(json_object_get(a, "jsonrpc")), "2.0") == 0);
	check((json_object_get(a, "result") != NULL) != (json_object_get(a, "error") != NULL));
	json_decref(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct mcp_gateway g;
	static int ready;
	struct fuzz_in f = { data, size };
	struct mcp_reader rd;
	struct mcp_session s;
	size_t chunk = 1 + fuzz_take8(&f) % 64;

	if (!ready) {
		mcp_gateway_init(&g);
		check(mcp_gateway_fs(&g, "/srv", NULL, NULL) == 0);
		ready = 1;
	}
	mcp_reader_init(&rd);
	mcp_session_init(&s, -1);
	while (f.left) {
		size_t room, n;
		char *space = mcp_reader_space(&rd, &room), *line;
		const char *why;
		size_t len;
		int r;

		n = chunk < f.left ? chunk : f.left;
		n = n < room ? n : room;
		memcpy(space, f.in, n);
		mcp_reader_wrote(&rd, n);
		f.in += n;
		f.left -= n;
		while ((r = mcp_reader_next(&rd, &line, &len, &why)) == 1) {
			json_t *msg;

			check(len > 0 && len <= MCP_FRAME_MAX);
			check(memchr(line, '\n', len) == NULL && memchr(line, '\0', len) == NULL);
			check(line[len] == '\0');
			if (line[0] == PROTO_MCP_FS_MARK) {
				answer_ok(mcp_fs_answer(&s, line, len));
				continue;
			}
			msg = json_loadb(line, len, 0, NULL);
			if (msg && json_object_get(msg, "id") &&
			    strcmp(json_string_value(json_object_get(msg, "method")) ?: "",
				   "tools/call") == 0 &&
			    strncmp(json_string_value(json_object_get(json_object_get(msg, "params"),
								      "name")) ?: "",
				    "fs__", 4) == 0) {
				char *req = NULL;

				answer_ok(mcp_fs_request(&s, json_object_get(msg, "id"),
							 json_object_get(msg, "params"), &req));
				if (req) {
					check(req[0] == PROTO_MCP_FS_MARK);
					check(strchr(req, '\n') == req + strlen(req) - 1);
					free(req);
				}
			} else if (msg) {
				answer_ok(mcp_gateway_handle(&g, msg));
			}
			json_decref(msg);
		}
		if (r < 0 || n == 0)
			break;
	}
	mcp_reader_free(&rd);
	mcp_session_end(&s);
	return 0;
}
