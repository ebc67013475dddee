/* libFuzzer target for the manager API's requests (src/api/): routing,
 * strict bodies (create's and exec's fields), Idempotency-Key replays and
 * the operations they keep, over a backend that does nothing and
 * succeeds. Input: a method byte, the path up to a newline, an optional
 * "K:" line (the key), then the body. Every answer is one the contract
 * lists, a JSON object for all but the OpenAPI file and the events, and
 * an error answer says what was wrong in one line. One server lives
 * across inputs, so replays of earlier keys and the operations' table
 * filling up are reached too. The E2B routes (api/e2b.h) are there as
 * well: one E2B sandbox is made first, the E2b-Sandbox-Id header names
 * it, the key line is also the `path` query argument, and every command
 * the backend runs prints the body back: what the guest would say to a
 * stat, a cat or a Start is the input's. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api_priv.h"
#include "api/e2b.h"
#include "common/util.h"
#include "proto/agent.h"

#include "check.h"

static const char *guest_out = "";
static size_t guest_len;
static char e2b_box[65];

static int list(json_t **out, gantry_error_t *err)
{
	(void)err;
	*out = json_array();
	return 0;
}

static int get(const char *name, json_t **out, gantry_error_t *err)
{
	/* Names starting with 'x' do not exist. */
	if (name[0] == 'x')
		return gantry_error(err, ENOENT, "no sandbox `%s`", name);
	*out = json_pack("{s:s}", "name", name);
	return 0;
}

static int create(json_t *req, const struct gantry_cancel *cancel, gantry_error_t *err)
{
	(void)cancel;
	check(json_is_string(json_object_get(req, "name")));
	if (json_object_get(req, "image"))
		return gantry_error_usage(err, "image: refused by the fuzzer's backend");
	return 0;
}

static int start(const char *name, const struct gantry_cancel *cancel, gantry_error_t *err)
{
	(void)cancel;
	return name[0] == 'f' ? gantry_error(err, 0, "start failed") : 0;
}

static int stop(const char *name, gantry_error_t *err)
{
	(void)name;
	(void)err;
	return 0;
}

static int exec(const char *name, const struct api_exec *x, int in, int out, int err_fd, int sig,
		const struct gantry_cancel *cancel, struct api_exec_result *res,
		gantry_error_t *err)
{
	(void)name;
	(void)in;
	(void)sig;
	(void)err_fd;
	(void)cancel;
	(void)err;
	check(x->argc >= 1 && x->argc <= API_ARGV_MAX && x->argv[x->argc] == NULL);
	/* The guest's say: the input's body, then some bytes not UTF-8. */
	if (write_full(out, guest_out, guest_len) < 0 || write(out, "\xff\xc3", 2) < 0)
		return gantry_error(err, 0, "write");
	/* gantry-init's helper succeeds, so its records are read. */
	res->exit_code = strcmp(x->argv[0], PROTO_HELPER_PATH) == 0 ? 0 : (int)x->argc;
	res->signal = 0;
	return 0;
}

static int processes(const char *name, const struct gantry_cancel *cancel, json_t **out,
		     gantry_error_t *err)
{
	(void)cancel;
	(void)err;
	*out = json_pack("{s:[{s:i,s:i,s:i,s:s,s:i,s:s}]}", "processes", "pid", 1, "ppid", 0, "uid",
			 0, "state", "S", "rssKiB", 4, "command", name);
	return 0;
}

static const struct api_backend backend = {
	.list = list,
	.get = get,
	.create = create,
	.start = start,
	.stop = stop,
	.remove = stop,
	.exec = exec,
	.processes = processes,
};

/* The E2B sandbox's id, a multipart type, and the key as `path`. */
static const char *lookup(const struct api_request *req, bool query, const char *name)
{
	if (!query && strcmp(name, "E2b-Sandbox-Id") == 0)
		return e2b_box;
	if (!query && strcmp(name, "Content-Type") == 0)
		return "multipart/form-data; boundary=b";
	return query && strcmp(name, "path") == 0 ? req->key : NULL;
}

static struct api_server *server(void)
{
	static struct api_server *s;

	if (s == NULL) {
		s = xzalloc(sizeof(*s));
		s->b = &backend;
		s->keepalive_ms = 1;
		api_ops_init(s);
		if (cancel_init(&s->cancel, NULL) < 0)
			abort();
		/* As gantry serve: a process gone with its pipe is no signal. */
		signal(SIGPIPE, SIG_IGN);
		e2b_init(s);
		{
			struct api_request req = { .method = "POST",
						   .path = "/v2/sandboxes",
						   .body = "{}",
						   .len = 2,
						   .lookup = lookup,
						   .conn_fd = -1 };
			struct api_reply r = { 0 };

			check(e2b_route(s, &req, &r) && r.status == 201);
			snprintf(e2b_box, sizeof(e2b_box), "%s",
				 json_string_value(json_object_get(r.json, "sandboxID")));
			json_decref(r.json);
		}
	}
	return s;
}

static bool known_status(unsigned st)
{
	static const unsigned ok[] = { 200, 201, 202, 204, 400, 404, 405, 408,
				       409, 413, 429, 500, 501, 502, 503 };

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (ok[i] == st)
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const methods[] = { "GET", "POST", "DELETE", "PUT" };
	struct api_server *s = server();
	struct api_reply r = { 0 };
	struct api_request req;
	char *buf, *path, *nl, *key = NULL, *body;
	const char *err;

	if (size < 1 || size > (1u << 16))
		return 0;
	buf = xmalloc(size);
	memcpy(buf, data + 1, size - 1);
	buf[size - 1] = '\0';
	path = buf;
	nl = memchr(buf, '\n', size - 1);
	body = nl ? nl + 1 : buf + size - 1;
	if (nl)
		*nl = '\0';
	if (nl && strncmp(body, "K:", 2) == 0 && (nl = strchr(body, '\n')) != NULL) {
		key = body + 2;
		*nl = '\0';
		body = nl + 1;
	}
	req = (struct api_request){ .method = methods[data[0] % 4],
				    .path = path,
				    .key = key,
				    .body = body,
				    .len = (size_t)(buf + size - 1 - body),
				    .lookup = lookup };
	guest_out = body;
	guest_len = req.len;
	api_route(s, &req, &r);
	check(known_status(r.status));
	if (r.stream) {
		char frame[256];

		check(r.status == 200);
		check(r.stream->read(r.stream, frame, sizeof(frame)) > 0);
		r.stream->done(r.stream);
	} else if (r.owned) {
		check(r.status == 200); /* a file's bytes: what the guest said */
		free(r.owned);
	} else if (r.bytes) {
		check((r.status == 200 && r.len == api_openapi_yaml_len) ||
		      (r.status == 204 && r.len == 0));
	} else {
		check(json_is_object(r.json) || json_is_array(r.json));
		if (r.status >= 400) {
			err = json_string_value(json_object_get(r.json, "error"));
			if (err == NULL) /* E2B's shapes */
				err = json_string_value(json_object_get(r.json, "message"));
			check(err && *err);
		}
		if (r.status == 405)
			check(r.allow != NULL);
	}
	json_decref(r.json);
	free(buf);
	return 0;
}
