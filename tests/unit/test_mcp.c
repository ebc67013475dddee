/* The MCP gateway's pure parts: -mcp-remote specs (mcp/spec.h), the tool
 * filter and its globs, the addresses the gateway refuses to dial, the
 * guest's frame reader (mcp/frame.h), redaction, and the gateway's own
 * JSON-RPC answers (initialize, ping, unknown methods, bad messages). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/util.h"
#include "mcp/frame.h"
#include "mcp/gateway.h"
#include "mcp/remote.h"
#include "mcp/spec.h"

static void test_spec_good(void **state)
{
	struct mcp_remote_spec r;
	gantry_error_t err = NULL;

	(void)state;
	assert_int_equal(mcp_remote_spec_parse("name=gh,url=https://api.example.com/mcp,"
					       "auth=bearer:GH_TOKEN,allow=*,deny=delete_*,"
					       "redact=GH_TOKEN",
					       &r, &err),
			 0);
	assert_string_equal(r.id, "gh");
	assert_int_equal(r.auth, MCP_AUTH_BEARER);
	assert_string_equal(r.auth_secret, "GH_TOKEN");
	assert_false(r.loopback);
	assert_true(mcp_tool_allowed(&r, "list_repos"));
	assert_false(mcp_tool_allowed(&r, "delete_repo"));
	assert_false(mcp_tool_allowed(&r, "auth_status"));
	assert_false(mcp_tool_allowed(&r, "revoke_Token"));
	mcp_remote_spec_free(&r);
	assert_int_equal(mcp_remote_spec_parse("name=l.1,url=http://127.0.0.1:9/m,"
					       "auth=header:X-Api-Key:K",
					       &r, &err),
			 0);
	assert_true(r.loopback);
	assert_string_equal(r.header, "X-Api-Key");
	assert_false(mcp_tool_allowed(&r, "anything")); /* no allow: no tools */
	mcp_remote_spec_free(&r);
	assert_int_equal(mcp_remote_spec_parse("name=c,url=https://c.example/,auth=custody:codex",
					       &r, &err),
			 0);
	assert_int_equal(r.auth, MCP_AUTH_CUSTODY);
	assert_string_equal(r.custody, "codex");
	assert_null(r.auth_secret);
	mcp_remote_spec_free(&r);
	assert_int_equal(mcp_remote_spec_parse("url=http://[::1]:9/,name=v6", &r, &err), 0);
	assert_true(r.loopback);
	mcp_remote_spec_free(&r);
}

static void test_spec_bad(void **state)
{
	static const char *const bad[] = {
		"url=https://a.example/",			/* no name */
		"name=a",					/* no url */
		"name=fs,url=https://a.example/",		/* the built-in's */
		"name=a__b,url=https://a.example/",		/* the separator */
		"name=gh_,url=https://a.example/",		/* gh___x is gh, _x */
		"name=-a,url=https://a.example/",		/* first character */
		"name=a,url=http://a.example/",			/* http off loopback */
		"name=a,url=ftp://a.example/",			/* scheme */
		"name=a,url=https://u:p@a.example/",		/* userinfo */
		"name=a,url=https://169.254.169.254/",		/* metadata */
		"name=a,url=https://10.0.0.1/",			/* private */
		"name=a,url=https://100.64.0.1/",		/* CGNAT */
		"name=a,url=https://[fd00::1]/",		/* unique local */
		"name=a,url=https://[::ffff:192.168.1.1]/",	/* mapped private */
		"name=a,url=https://localhost/",		/* a name for loopback */
		"name=a,url=https://a.example/,auth=bearer:",	/* no variable */
		"name=a,url=https://a.example/,auth=basic:X",	/* kind */
		"name=a,url=https://a.example/,auth=header:Host:X", /* framing header */
		"name=a,url=https://a.example/,auth=custody:",	/* no provider */
		"name=a,url=https://a.example/,auth=custody:a/b", /* not a name */
		"name=a,url=https://a.example/,what=1",		/* key */
		"name=a,url=https://a.example/,allow=",		/* empty glob */
		"name=a,name=b,url=https://a.example/",		/* twice */
		"name=a,url=https://a.example/ x",		/* space */
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct mcp_remote_spec r;
		gantry_error_t err = NULL;

		if (mcp_remote_spec_parse(bad[i], &r, &err) == 0)
			fail_msg("accepted: %s", bad[i]);
		assert_non_null(err);
		assert_null(strchr(gantry_error_str(err), '\n'));
		gantry_error_free(&err);
	}
}

static void test_glob(void **state)
{
	(void)state;
	assert_true(mcp_glob("*", ""));
	assert_true(mcp_glob("read_*", "read_file"));
	assert_false(mcp_glob("read_*", "xread_file"));
	assert_true(mcp_glob("*_file", "read_file"));
	assert_true(mcp_glob("r?ad*e", "read_file"));
	assert_true(mcp_glob("a*b*c", "aXXbYYc"));
	assert_false(mcp_glob("a*b*c", "aXXbYY"));
}

static bool refused4(const char *a, bool lo)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };

	inet_pton(AF_INET, a, &sa.sin_addr);
	return mcp_addr_refused((struct sockaddr *)&sa, lo);
}

static bool refused6(const char *a, bool lo)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6 };

	inet_pton(AF_INET6, a, &sa.sin6_addr);
	return mcp_addr_refused((struct sockaddr *)&sa, lo);
}

static void test_addresses(void **state)
{
	(void)state;
	assert_false(refused4("93.184.216.34", false));
	assert_false(refused4("203.0.113.9", false));
	assert_true(refused4("127.0.0.1", false));
	assert_false(refused4("127.0.0.1", true));
	assert_true(refused4("10.1.2.3", true));
	assert_true(refused4("172.16.0.1", false));
	assert_true(refused4("172.31.255.255", false));
	assert_false(refused4("172.32.0.1", false));
	assert_true(refused4("192.168.0.1", false));
	assert_true(refused4("169.254.169.254", false));
	assert_true(refused4("100.64.0.1", false));
	assert_true(refused4("0.0.0.0", false));
	assert_true(refused4("224.0.0.1", false));
	assert_true(refused6("::1", false));
	assert_false(refused6("::1", true));
	assert_true(refused6("fe80::1", false));
	assert_true(refused6("fd12::1", false));
	assert_true(refused6("::ffff:10.0.0.1", false));
	assert_true(refused6("::", false));
	assert_false(refused6("2001:db8::1", false));
}

static void feed(struct mcp_reader *rd, const char *s, size_t n)
{
	size_t room;
	char *space = mcp_reader_space(rd, &room);

	assert_true(n <= room);
	memcpy(space, s, n);
	mcp_reader_wrote(rd, n);
}

static void test_reader(void **state)
{
	struct mcp_reader rd;
	const char *why;
	char *line;
	size_t len;

	(void)state;
	mcp_reader_init(&rd);
	feed(&rd, "{\"a\":1}\n\n{\"b\"", 13);
	assert_int_equal(mcp_reader_next(&rd, &line, &len, &why), 1);
	assert_string_equal(line, "{\"a\":1}");
	assert_int_equal(mcp_reader_next(&rd, &line, &len, &why), 0);
	feed(&rd, ":2}\r\n", 5);
	assert_int_equal(mcp_reader_next(&rd, &line, &len, &why), 1);
	assert_string_equal(line, "{\"b\":2}");
	assert_int_equal(mcp_reader_next(&rd, &line, &len, &why), 0);
	feed(&rd, "x\0y\n", 4);
	assert_int_equal(mcp_reader_next(&rd, &line, &len, &why), -1);
	mcp_reader_free(&rd);

	/* A line of 1 MiB without its newline: broken, not waited for. */
	mcp_reader_init(&rd);
	for (size_t left = MCP_FRAME_MAX; left;) {
		size_t room;
		char *space = mcp_reader_space(&rd, &room);
		size_t n = MIN(room, left);

		memset(space, 'a', n);
		mcp_reader_wrote(&rd, n);
		left -= n;
	}
	assert_int_equal(mcp_reader_next(&rd, &line, &len, &why), -1);
	mcp_reader_free(&rd);
}

static void test_redact(void **state)
{
	struct mcp_remote r = { 0 };
	char *out;

	(void)state;
	r.redact[r.nr_redact++] = xstrdup("s3cr\"et-value");
	r.redact[r.nr_redact++] = xstrdup("abc"); /* too short to redact */
	out = mcp_redact(&r, "{\"t\":\"got s3cr\\\"et-value twice: s3cr\\\"et-value abc\"} s3cr\"et-value");
	assert_string_equal(out, "{\"t\":\"got [redacted] twice: [redacted] abc\"} [redacted]");
	free(out);
	/* A secret found in "[redacted]" itself ends. */
	r.redact[r.nr_redact++] = xstrdup("acted");
	out = mcp_redact(&r, "acted");
	assert_string_equal(out, "[redacted]");
	free(out);
	for (size_t i = 0; i < r.nr_redact; i++)
		free(r.redact[i]);
}

/* Custody's refreshed token: the next request's credential; the one it
 * replaced stays redacted, the one before that does not. */
static void test_auth_renew(void **state)
{
	struct mcp_remote r;
	char *out;

	(void)state;
	setenv("GANTRY_TEST_MCP_TOKEN", "token-one", 1);
	assert_int_equal(mcp_remote_open(&r, "name=r,url=https://mcp.example/,"
					     "auth=bearer:GANTRY_TEST_MCP_TOKEN",
					 true, NULL),
			 0);
	mcp_remote_auth_renew(&r, "token-one"); /* the same: nothing changes */
	assert_int_equal(r.nr_redact, 1);
	mcp_remote_auth_renew(&r, "token-two");
	assert_string_equal(r.auth, "token-two");
	out = mcp_redact(&r, "token-one token-two");
	assert_string_equal(out, "[redacted] [redacted]");
	free(out);
	mcp_remote_auth_renew(&r, "token-three");
	assert_string_equal(r.auth, "token-three");
	assert_int_equal(r.nr_redact, 2);
	out = mcp_redact(&r, "token-one token-two token-three");
	assert_string_equal(out, "token-one [redacted] [redacted]");
	free(out);
	mcp_remote_close(&r);
}

static json_t *handle(struct mcp_gateway *g, const char *text)
{
	json_t *m = json_loads(text, 0, NULL), *a;

	assert_non_null(m);
	a = mcp_gateway_handle(g, m);
	json_decref(m);
	return a;
}

static void test_gateway_answers(void **state)
{
	struct mcp_gateway g;
	json_t *a;

	(void)state;
	mcp_gateway_init(&g);
	a = handle(&g, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
		       "\"params\":{\"protocolVersion\":\"2025-03-26\"}}");
	assert_string_equal(json_string_value(json_object_get(json_object_get(a, "result"),
								"protocolVersion")),
			    "2025-03-26");
	json_decref(a);
	a = handle(&g, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}");
	assert_non_null(json_object_get(a, "result"));
	json_decref(a);
	assert_null(handle(&g, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));
	a = handle(&g, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/list\"}");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(a, "error"), "code")),
			 -32601);
	json_decref(a);
	a = handle(&g, "{\"jsonrpc\":\"1.0\",\"id\":3,\"method\":\"ping\"}");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(a, "error"), "code")),
			 -32600);
	json_decref(a);
	a = handle(&g, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\"}");
	assert_int_equal(json_array_size(json_object_get(json_object_get(a, "result"), "tools")), 0);
	json_decref(a);
	a = handle(&g, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\","
		       "\"params\":{\"name\":\"nobody__x\"}}");
	assert_non_null(json_object_get(a, "error"));
	json_decref(a);
	mcp_gateway_free(&g);
}

static json_t *call(const char *name, const char *path)
{
	return json_pack("{s:s,s:{s:s}}", "name", name, "arguments", "path", path);
}

static const char *result_text(json_t *reply, bool *error)
{
	json_t *r = json_object_get(reply, "result");

	*error = json_is_true(json_object_get(r, "isError"));
	return json_string_value(json_object_get(json_array_get(json_object_get(r, "content"), 0),
						 "text"));
}

static json_t *fs_answer(struct mcp_session *s, const char *line)
{
	return mcp_fs_answer(s, line, strlen(line));
}

static void test_fs(void **state)
{
	struct mcp_gateway g;
	struct mcp_session s;
	gantry_error_t err = NULL;
	json_t *id = json_integer(7), *params, *reply, *list;
	char *line = NULL;
	bool error;

	(void)state;
	mcp_gateway_init(&g);
	/* The user: nobody by default; UID, UID:GID; never root. */
	assert_int_equal(mcp_gateway_fs(&g, NULL, NULL, &err), 0);
	assert_string_equal(g.fs_root, "/");
	assert_int_equal(g.fs_uid, 65534);
	assert_int_equal(mcp_gateway_fs(&g, "/srv/x", "1000:50", &err), 0);
	assert_int_equal(g.fs_uid, 1000);
	assert_int_equal(g.fs_gid, 50);
	assert_int_equal(mcp_gateway_fs(&g, "/srv", "0", &err), -1);
	gantry_error_free(&err);
	assert_int_equal(mcp_gateway_fs(&g, "/srv", "1000:0", &err), -1);
	gantry_error_free(&err);
	assert_int_equal(mcp_gateway_fs(&g, "/srv", "bob", &err), -1);
	gantry_error_free(&err);
	assert_int_equal(mcp_gateway_fs(&g, "srv", NULL, &err), -1);
	gantry_error_free(&err);
	assert_int_equal(mcp_gateway_fs(&g, "/srv/../etc", NULL, &err), -1);
	gantry_error_free(&err);
	/* Its tools, listed first. */
	params = json_pack("{s:s,s:i,s:s}", "jsonrpc", "2.0", "id", 1, "method", "tools/list");
	reply = mcp_gateway_handle(&g, params);
	json_decref(params);
	list = json_object_get(json_object_get(reply, "result"), "tools");
	assert_int_equal(json_array_size(list), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "name")),
			    "fs__read_file");
	json_decref(reply);

	mcp_session_init(&s, -1);
	/* A call: the request line, the path made absolute, then the answer. */
	params = call("fs__read_file", "d/a.txt");
	assert_null(mcp_fs_request(&s, id, params, &line));
	assert_string_equal(line, "\x1e" "1 read L2QvYS50eHQ\n");
	free(line);
	json_decref(params);
	assert_null(fs_answer(&s, "\x1e" "2 ok aGk")); /* asked for nothing */
	reply = fs_answer(&s, "\x1e" "1 ok aGVsbG8K");
	assert_non_null(reply);
	assert_int_equal(json_integer_value(json_object_get(reply, "id")), 7);
	assert_string_equal(result_text(reply, &error), "hello\n");
	assert_false(error);
	json_decref(reply);
	assert_null(fs_answer(&s, "\x1e" "1 ok aGk")); /* answered once only */
	/* An empty file. */
	params = call("fs__read_file", "/empty");
	assert_null(mcp_fs_request(&s, id, params, &line));
	free(line);
	json_decref(params);
	reply = fs_answer(&s, "\x1e" "2 ok ");
	assert_string_equal(result_text(reply, &error), "");
	assert_false(error);
	json_decref(reply);
	/* An error, its text made safe and the path named. */
	params = call("fs__list_directory", "/x\x1b");
	assert_null(mcp_fs_request(&s, id, params, &line));
	free(line);
	json_decref(params);
	reply = fs_answer(&s, "\x1e" "3 err No such \x1b[2Jfile");
	assert_string_equal(result_text(reply, &error), "/x?: No such ?[2Jfile");
	assert_true(error);
	json_decref(reply);
	/* Bad calls are answered at once. */
	params = call("fs__write_file", "/x");
	reply = mcp_fs_request(&s, id, params, &line);
	assert_null(line);
	result_text(reply, &error);
	assert_true(error);
	json_decref(reply);
	json_decref(params);
	params = json_pack("{s:s,s:{}}", "name", "fs__read_file", "arguments");
	reply = mcp_fs_request(&s, id, params, &line);
	assert_null(line);
	json_decref(reply);
	json_decref(params);
	/* At most MCP_FS_PENDING under way. */
	params = call("fs__read_file", "/x");
	for (int i = 0; i < MCP_FS_PENDING; i++) {
		assert_null(mcp_fs_request(&s, id, params, &line));
		free(line);
	}
	reply = mcp_fs_request(&s, id, params, &line);
	assert_null(line);
	assert_non_null(strstr(result_text(reply, &error), "too many"));
	json_decref(reply);
	json_decref(params);
	mcp_session_end(&s);
	json_decref(id);
	mcp_gateway_free(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spec_good), cmocka_unit_test(test_spec_bad),
		cmocka_unit_test(test_glob),	  cmocka_unit_test(test_addresses),
		cmocka_unit_test(test_reader),	  cmocka_unit_test(test_redact),
		cmocka_unit_test(test_auth_renew),
		cmocka_unit_test(test_gateway_answers), cmocka_unit_test(test_fs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
