/* The /v1 routes: a table of paths and methods, strict bodies (a field
 * the contract does not name is refused, by name), and the lifecycle
 * calls as operations (ops.c). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

#include "api/api_priv.h"
#include "api/e2b.h"
#include "api/fields.h"
#include "common/text.h"
#include "common/util.h"
#include "sandbox/lifecycle.h"

void api_reply_json(struct api_reply *r, unsigned status, json_t *j)
{
	json_decref(r->json);
	r->status = status;
	r->json = j;
}

char *api_vmessage(const char *fmt, va_list ap)
{
	char *msg;

	if (vasprintf(&msg, fmt, ap) < 0)
		abort();
	return text_sanitize_utf8(msg);
}

void api_reply_error(struct api_reply *r, unsigned status, const char *fmt, ...)
{
	cleanup_free char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	msg = api_vmessage(fmt, ap);
	va_end(ap);
	api_reply_json(r, status, json_pack("{s:s}", "error", msg));
}

unsigned api_error_status(gantry_error_t err, unsigned other)
{
	if (err && err->status == ENOENT)
		return 404;
	return gantry_error_is_usage(err) ? 400 : other;
}

void api_reply_failure(struct api_reply *r, gantry_error_t err, unsigned other)
{
	unsigned status = api_error_status(err, other);

	api_reply_error(r, status, "%s",
			status == 404 && err->msg ? err->msg : gantry_error_str(err));
}

json_t *api_body_object(const char *body, size_t len, struct api_reply *r)
{
	json_error_t e;
	json_t *j;

	if (body == NULL || len == 0)
		return json_object();
	j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &e);
	if (j == NULL) {
		api_reply_error(r, 400, "the body is not JSON: %s (at byte %d)", e.text,
				e.position);
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		api_reply_error(r, 400, "the body must be a JSON object");
		return NULL;
	}
	return j;
}

static const struct api_field create_fields[] = {
	API_REQUIRED("name", API_STRING),
	API_FIELD("image", API_STRING),
	API_RANGE("cpus", 1, 251),
	API_RANGE("memoryMiB", 1, 1 << 30),
	API_RANGE("diskSizeMiB", 1, 1 << 30),
	API_FIELD("writable", API_BOOL),
	API_FIELD("rwlayer", API_STRING),
	API_FIELD("net", API_BOOL),
	API_FIELD("publish", API_STRINGS),
	API_FIELD("shares", API_STRINGS),
	API_FIELD("networkPolicy", API_STRING),
	API_FIELD("allowLocalNetwork", API_BOOL),
	API_FIELD("proxy", API_STRING),
	API_FIELD("noProxy", API_STRING),
	API_FIELD("proxyEnforce", API_BOOL),
	API_FIELD("processIsolation", API_STRING),
	API_FIELD("env", API_STRINGS),
	API_FIELD("workdir", API_STRING),
	API_FIELD("user", API_STRING),
	API_FIELD("entrypoint", API_STRING),
	API_FIELD("secretNames", API_STRINGS),
	API_FIELDS_END,
};

/* How a lifecycle call went: its operation's answer. */
static void lifecycle(struct api_server *s, const struct api_request *req, const char *kind,
		      const char *name, json_t *body, unsigned ok_status, struct api_reply *r)
{
	gantry_error_t err = NULL;
	char id[33];
	int ret = -1;

	if (!api_op_begin(s, req, kind, name, id, r))
		return;
	if (strcmp(kind, "create") == 0)
		ret = s->b->create(body, &s->cancel, &err);
	else if (strcmp(kind, "start") == 0)
		ret = s->b->start(name, &s->cancel, &err);
	else if (strcmp(kind, "stop") == 0)
		ret = s->b->stop(name, &err);
	else
		ret = s->b->remove(name, &err);
	if (ret < 0 && err == NULL)
		gantry_error(&err, 0, "%s failed", kind);
	api_op_end(s, id, ret < 0 ? &err : NULL, ok_status, r);
	gantry_error_free(&err);
}

/* A sandbox the route names: its name checked, and it must exist. */
static bool known(struct api_server *s, const char *name, struct api_reply *r)
{
	gantry_error_t err = NULL;
	json_t *sb = NULL;

	/* A name no sandbox can have names none. */
	if (!sandbox_name_valid(name)) {
		api_reply_error(r, 404, "no sandbox `%.64s`", name);
		return false;
	}
	if (s->b->get(name, &sb, &err) < 0) {
		api_reply_failure(r, err, 500);
		gantry_error_free(&err);
		return false;
	}
	json_decref(sb);
	return true;
}

static void create(struct api_server *s, const struct api_request *req, struct api_reply *r)
{
	json_t *body = api_body_object(req->body, req->len, r);
	const char *name, *iso;

	if (body == NULL)
		return;
	if (api_fields_check(body, create_fields, r)) {
		name = json_string_value(json_object_get(body, "name"));
		iso = json_string_value(json_object_get(body, "processIsolation"));
		if (iso && strcmp(iso, "auto") != 0 && strcmp(iso, "required") != 0 &&
		    strcmp(iso, "off") != 0)
			api_reply_error(r, 400,
					"field `processIsolation` must be auto, required or off");
		else if (!sandbox_name_valid(name))
			api_reply_error(r, 400,
					"name `%.64s` is not a sandbox name: 1 to 64 of "
					"A-Z a-z 0-9 . _ - (not . or .., not starting with -)",
					name);
		else
			lifecycle(s, req, "create", name, body, 201, r);
	}
	json_decref(body);
}

static void get(struct api_server *s, const char *name, struct api_reply *r)
{
	gantry_error_t err = NULL;
	json_t *sb = NULL;

	if (!sandbox_name_valid(name))
		return api_reply_error(r, 404, "no sandbox `%.64s`", name);
	if (s->b->get(name, &sb, &err) < 0) {
		api_reply_failure(r, err, 500);
		gantry_error_free(&err);
		return;
	}
	api_reply_json(r, 200, sb);
}

static void list(struct api_server *s, struct api_reply *r)
{
	gantry_error_t err = NULL;
	json_t *v = NULL;

	if (s->b->list(&v, &err) < 0) {
		api_reply_failure(r, err, 500);
		gantry_error_free(&err);
		return;
	}
	api_reply_json(r, 200, json_pack("{s:o}", "sandboxes", v));
}

/* What ends a process list early: its client gone, the server's end,
 * its deadline; the call's done fd ends the watch. */
struct watchdog {
	struct api_server *s;
	int conn_fd, done;
	struct gantry_cancel cancel;
	bool timed_out;
};

static void *watchdog(void *arg)
{
	struct watchdog *w = arg;
	uint64_t until = now_ms() + API_PROCESSES_MS;

	for (uint64_t now = now_ms(); now < until; now = now_ms()) {
		struct pollfd p[3] = { { w->done, POLLIN, 0 },
				       { cancel_fd(&w->s->cancel), POLLIN, 0 },
				       { w->conn_fd, POLLRDHUP, 0 } };

		if (poll(p, 3, (int)MIN(until - now, 1000u)) < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			return NULL;
		if (p[1].revents || (p[2].revents & (POLLRDHUP | POLLHUP | POLLERR)))
			break;
	}
	w->timed_out = now_ms() >= until;
	cancel_fire(&w->cancel);
	return NULL;
}

/* A running sandbox's processes: a session in it, so one of the exec
 * slots while it runs, ended by the watchdog above. */
static void processes(struct api_server *s, const char *name, int conn_fd, struct api_reply *r)
{
	struct watchdog w = { .s = s, .conn_fd = conn_fd, .done = -1, .cancel = { .fd = -1 } };
	gantry_error_t err = NULL;
	json_t *v = NULL;
	pthread_t t;

	if (!api_exec_slot(s, true, r))
		return;
	if ((w.done = eventfd(0, EFD_CLOEXEC)) < 0 || cancel_init(&w.cancel, NULL) < 0 ||
	    pthread_create(&t, NULL, watchdog, &w) != 0) {
		api_reply_error(r, 500, "processes: cannot watch the call");
		goto out;
	}
	if (s->b->processes(name, &w.cancel, &v, &err) < 0) {
		if (w.timed_out)
			api_reply_error(r, 504, "the sandbox gave no process list in %d s",
					API_PROCESSES_MS / 1000);
		else
			api_reply_failure(r, err, cancel_fired(&s->cancel) ? 503 : 409);
		gantry_error_free(&err);
	} else {
		api_reply_json(r, 200, v);
	}
	(void)!eventfd_write(w.done, 1);
	pthread_join(t, NULL);
out:
	cancel_destroy(&w.cancel);
	close_fd(&w.done);
	api_exec_slot(s, false, NULL);
}

/* start and stop take no body: nothing, or {}. */
static bool no_body(const struct api_request *req, struct api_reply *r)
{
	json_t *body = api_body_object(req->body, req->len, r);
	bool ok = body && json_object_size(body) == 0;

	if (body && !ok)
		api_reply_error(r, 400, "this call takes no body");
	json_decref(body);
	return ok;
}

enum route_id {
	R_HEALTH,
	R_OPENAPI,
	R_SANDBOXES,
	R_SANDBOX,
	R_START,
	R_STOP,
	R_EXEC,
	R_PROCESSES,
	R_OPERATION,
	R_EVENTS,
};

struct route {
	enum route_id id;
	const char *prefix; /* the path, or before its one variable part */
	const char *suffix; /* after the variable part; NULL: no variable part */
	const char *allow;  /* its methods */
};

static const struct route routes[] = {
	{ R_HEALTH, "/v1/health", NULL, "GET" },
	{ R_OPENAPI, "/v1/openapi.yaml", NULL, "GET" },
	{ R_SANDBOXES, "/v1/sandboxes", NULL, "GET, POST" },
	{ R_START, "/v1/sandboxes/", "/start", "POST" },
	{ R_STOP, "/v1/sandboxes/", "/stop", "POST" },
	{ R_EXEC, "/v1/sandboxes/", "/exec", "POST" },
	{ R_PROCESSES, "/v1/sandboxes/", "/processes", "GET" },
	{ R_SANDBOX, "/v1/sandboxes/", "", "GET, DELETE" },
	{ R_OPERATION, "/v1/operations/", "", "GET" },
	{ R_EVENTS, "/v1/events", NULL, "GET" },
};

/* Whether path is r's; *var (malloc()ed) gets its variable part. */
static bool match(const struct route *rt, const char *path, char **var)
{
	size_t n = strlen(rt->prefix), len = strlen(path), sl;
	const char *mid;

	if (strncmp(path, rt->prefix, n) != 0)
		return false;
	if (rt->suffix == NULL)
		return path[n] == '\0';
	sl = strlen(rt->suffix);
	if (len < n + sl + 1 || strcmp(path + len - sl, rt->suffix) != 0)
		return false;
	mid = path + n;
	if (memchr(mid, '/', len - n - sl))
		return false;
	*var = xstrndup(mid, len - n - sl);
	return true;
}

static bool allowed(const struct route *rt, const char *method)
{
	size_t n = strlen(method);

	for (const char *p = rt->allow; (p = strstr(p, method)) != NULL; p += n)
		if ((p == rt->allow || p[-1] == ' ') && (p[n] == '\0' || p[n] == ','))
			return true;
	return false;
}

void api_route(struct api_server *s, const struct api_request *req, struct api_reply *r)
{
	const struct route *rt = NULL;
	cleanup_free char *var = NULL;
	const char *req_key = req->key;
	bool post, lifecycle_call;

	if (strncmp(req->path, "/v1/", 4) != 0 && s->e2b && e2b_route(s, req, r))
		return;
	for (size_t i = 0; i < ARRAY_SIZE(routes) && rt == NULL; i++)
		if (match(&routes[i], req->path, &var))
			rt = &routes[i];
	if (rt == NULL)
		return api_reply_error(r, 404, "no such path: %.200s", req->path);
	if (!allowed(rt, req->method)) {
		api_reply_error(r, 405, "%s takes %s", rt->prefix, rt->allow);
		r->allow = rt->allow;
		return;
	}
	post = strcmp(req->method, "POST") == 0;
	/* A key counts on the lifecycle calls alone; elsewhere it is not read. */
	lifecycle_call = (post || strcmp(req->method, "DELETE") == 0) && rt->id != R_EXEC;
	if (!lifecycle_call)
		req_key = NULL;
	if (req_key &&
	    (strlen(req_key) == 0 || strlen(req_key) > API_KEY_MAX ||
	     strspn(req_key, "!\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ"
			     "[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~") != strlen(req_key)))
		return api_reply_error(
			r, 400, "Idempotency-Key: 1 to %d printable ASCII characters", API_KEY_MAX);
	if (req_key && api_op_replayed(s, req, r))
		return;
	switch (rt->id) {
	case R_HEALTH:
		api_reply_json(r, 200, json_pack("{s:b,s:s}", "ok", 1, "version", GANTRY_VERSION));
		break;
	case R_OPENAPI:
		r->status = 200;
		r->bytes = api_openapi_yaml;
		r->len = api_openapi_yaml_len;
		r->type = "application/yaml";
		break;
	case R_SANDBOXES:
		if (post)
			create(s, req, r);
		else
			list(s, r);
		break;
	case R_SANDBOX:
		if (!post && strcmp(req->method, "GET") == 0)
			get(s, var, r);
		else if (known(s, var, r))
			lifecycle(s, req, "delete", var, NULL, 200, r);
		break;
	case R_START:
	case R_STOP:
		if (known(s, var, r) && no_body(req, r))
			lifecycle(s, req, rt->id == R_START ? "start" : "stop", var, NULL, 200, r);
		break;
	case R_EXEC:
		if (known(s, var, r))
			api_exec(s, var, req->body, req->len, req->conn_fd, r);
		break;
	case R_PROCESSES:
		if (known(s, var, r))
			processes(s, var, req->conn_fd, r);
		break;
	case R_OPERATION:
		api_op_get(s, var, r);
		break;
	case R_EVENTS:
		api_events(s, req->conn_fd, r);
		break;
	}
}
