/* The E2B control plane (e2b.h): sandboxes made from a template (`base`,
 * the built-in image; any other names an image), their metadata, their
 * timeout (a reaper deletes a sandbox whose time is up, as E2B's end),
 * listed, described, killed; and the routing of the E2B paths. A create
 * and a kill are operations of the manager API, seen in /v1/events. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "api/e2b.h"
#include "common/log.h"
#include "common/text.h"
#include "common/util.h"

void e2b_error(struct api_reply *r, unsigned status, const char *fmt, ...)
{
	cleanup_free char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	msg = api_vmessage(fmt, ap);
	va_end(ap);
	api_reply_json(r, status, json_pack("{s:i,s:s}", "code", (int)status, "message", msg));
}

static void no_content(struct api_reply *r)
{
	api_reply_json(r, 204, NULL);
	r->bytes = "";
	r->len = 0;
}

struct e2b_box *e2b_box_find(struct api_e2b *e, const char *id)
{
	for (size_t i = 0; i < E2B_BOXES_MAX; i++)
		if (e->boxes[i].used && strcmp(e->boxes[i].id, id) == 0)
			return &e->boxes[i];
	return NULL;
}

static void box_clear(struct e2b_box *b)
{
	free(b->template);
	free(b->started);
	json_decref(b->metadata);
	*b = (struct e2b_box){ 0 };
}

int e2b_operation(struct api_server *s, const char *kind, const char *name, json_t *body,
		     gantry_error_t *err)
{
	const struct api_request req = { .method = "POST", .path = "/e2b" };
	struct api_reply r = { 0 };
	char id[33];
	int ret;

	if (!api_op_begin(s, &req, kind, name, id, &r)) {
		ret = gantry_error(err, EBUSY, "%s",
				   json_string_value(json_object_get(r.json, "error")));
		json_decref(r.json);
		return ret;
	}
	if (strcmp(kind, "create") == 0)
		ret = s->b->create(body, &s->cancel, err);
	else if (strcmp(kind, "pause") == 0)
		ret = s->b->pause ? s->b->pause(name, err) : gantry_error(err, ENOSYS, "no pause here");
	else if (strcmp(kind, "resume") == 0)
		ret = s->b->start(name, &s->cancel, err);
	else if (strcmp(kind, "snapshot") == 0 || strcmp(kind, "create-from") == 0 ||
		 strcmp(kind, "snapshot-remove") == 0)
		ret = e2b_snapshot_op(s, kind, name, body, err);
	else
		ret = s->b->remove(name, err);
	if (ret < 0 && *err == NULL)
		gantry_error(err, 0, "%s failed", kind);
	api_op_end(s, id, ret < 0 ? err : NULL, 200, &r);
	json_decref(r.json);
	return ret;
}

void e2b_undo(struct api_server *s, const char *kind, const char *name)
{
	gantry_error_t err = NULL;
	int r = strcmp(kind, "delete") == 0 ? s->b->remove(name, &err) :
					      e2b_snapshot_op(s, kind, name, NULL, &err);

	if (r < 0) {
		log_warn("E2B: %s `%s` left behind: %s", strcmp(kind, "delete") == 0 ?
			 "sandbox" : "snapshot", name, gantry_error_str(err));
		gantry_error_free(&err);
	}
}

bool e2b_boxes_full(struct api_server *s)
{
	struct api_e2b *e = s->e2b;
	bool full = true;

	pthread_mutex_lock(&e->lock);
	for (size_t i = 0; i < E2B_BOXES_MAX && full; i++)
		full = e->boxes[i].used;
	pthread_mutex_unlock(&e->lock);
	return full;
}

/* Delete the E2B sandbox id; it leaves the table once it is gone (or
 * was already: deleted with the CLI), and stays there when the delete
 * failed, for another try. */
static int end_box(struct api_server *s, const char *id, gantry_error_t *err)
{
	struct e2b_box *b;
	int ret = e2b_operation(s, "delete", id, NULL, err);

	if (ret < 0 && (*err)->status == ENOENT) {
		gantry_error_free(err);
		ret = 0;
	}
	if (ret == 0) {
		pthread_mutex_lock(&s->e2b->lock);
		if ((b = e2b_box_find(s->e2b, id)) != NULL)
			box_clear(b);
		pthread_mutex_unlock(&s->e2b->lock);
	}
	return ret;
}

/* The reaper: a sandbox whose timeout is up is deleted. */
static void *reaper(void *arg)
{
	struct api_server *s = arg;
	struct api_e2b *e = s->e2b;
	struct e2b_box *b;

	while (!cancel_fired(&s->cancel)) {
		char id[65] = "";
		uint64_t now = api_wall_ms();

		pthread_mutex_lock(&e->lock);
		for (size_t i = 0; i < E2B_BOXES_MAX && !id[0]; i++)
			if (e->boxes[i].used && !e->boxes[i].paused && e->boxes[i].end_ms <= now)
				snprintf(id, sizeof(id), "%s", e->boxes[i].id);
		pthread_mutex_unlock(&e->lock);
		if (id[0]) {
			gantry_error_t err = NULL;
			int ret = end_box(s, id, &err);

			if (ret < 0) {
				log_info("e2b: sandbox %s, past its timeout: %s (again in 5 s)", id,
					 gantry_error_str(err));
				pthread_mutex_lock(&e->lock);
				if ((b = e2b_box_find(e, id)) != NULL)
					b->end_ms = now + 5000;
				pthread_mutex_unlock(&e->lock);
			}
			gantry_error_free(&err);
			continue;
		}
		usleep(250000);
	}
	return NULL;
}

void e2b_init(struct api_server *s)
{
	s->e2b = xzalloc(sizeof(*s->e2b));
	pthread_mutex_init(&s->e2b->lock, NULL);
	s->e2b->next_pid = 1000;
	envd_init(s->e2b);
	s->e2b->reaper_started = pthread_create(&s->e2b->reaper, NULL, reaper, s) == 0;
}

void e2b_stop(struct api_server *s)
{
	struct api_e2b *e = s->e2b;

	if (e == NULL)
		return;
	if (e->reaper_started)
		pthread_join(e->reaper, NULL);
	envd_procs_free(s);
	for (size_t i = 0; i < E2B_BOXES_MAX; i++)
		box_clear(&e->boxes[i]);
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->gone);
	free(e);
	s->e2b = NULL;
}

/* ---- the control plane ---- */

/* What create and connect answer (the SDK's Sandbox). Under e->lock. */
static json_t *box_json(const struct e2b_box *b, const char *token, bool detail)
{
	cleanup_free char *end = api_time(b->end_ms);
	json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:n,s:s}", "sandboxID", b->id, "templateID",
			      b->template, "clientID", "gantry", "envdVersion", E2B_ENVD_VERSION,
			      "domain", "alias", b->template);

	if (token)
		json_object_set_new(j, "envdAccessToken", json_string(token));
	if (detail) {
		json_object_set_new(j, "startedAt", json_string(b->started));
		json_object_set_new(j, "endAt", json_string(end));
		json_object_set_new(j, "cpuCount", json_integer(b->cpus));
		json_object_set_new(j, "memoryMB", json_integer(b->mem_mib));
		json_object_set_new(j, "diskSizeMB", json_integer(0));
		json_object_set_new(j, "metadata", json_incref(b->metadata));
		json_object_set_new(j, "state", json_string(b->paused ? "paused" : "running"));
	}
	return j;
}

/* A string map of the request (metadata, envVars): NULL when it is not
 * an object of strings (r gets the 400). */
static bool string_map(json_t *v, const char *what, struct api_reply *r)
{
	const char *k;
	json_t *x;

	if (v == NULL)
		return true;
	if (!json_is_object(v) || json_object_size(v) > 256)
		return e2b_error(r, 400, "%s: want an object of at most 256 strings", what), false;
	json_object_foreach(v, k, x) if (!json_is_string(x)) return e2b_error(
		r, 400, "%s.%.64s: want a string", what, k),
		false;
	return true;
}

json_t *e2b_box_add(struct api_server *s, const char *id, const char *template,
		    json_t *metadata, json_int_t secs)
{
	struct api_e2b *e = s->e2b;
	gantry_error_t err = NULL;
	struct e2b_box *b = NULL;
	int cpus = 1, mem = 512;
	json_t *sb, *j = NULL;

	if (s->b->get(id, &sb, &err) == 0) {
		cpus = (int)json_integer_value(json_object_get(sb, "cpus"));
		mem = (int)json_integer_value(json_object_get(sb, "memoryMiB"));
		json_decref(sb);
	}
	gantry_error_free(&err);
	pthread_mutex_lock(&e->lock);
	for (size_t i = 0; i < E2B_BOXES_MAX && b == NULL; i++)
		if (!e->boxes[i].used)
			b = &e->boxes[i];
	if (b) {
		*b = (struct e2b_box){ .used = true, .cpus = cpus, .mem_mib = mem };
		snprintf(b->id, sizeof(b->id), "%s", id);
		b->template = xstrdup(template);
		b->metadata = metadata ? json_deep_copy(metadata) : json_object();
		b->started = api_time(api_wall_ms());
		b->end_ms = api_wall_ms() + (uint64_t)secs * 1000;
		j = box_json(b, s->token, false);
	}
	pthread_mutex_unlock(&e->lock);
	/* No room to keep it: it must not outlive this answer. */
	if (b == NULL)
		e2b_undo(s, "delete", id);
	return j;
}

void e2b_random_id(const char *prefix, char id[65])
{
	unsigned char raw[6];

	if (getrandom(raw, sizeof(raw), 0) != sizeof(raw))
		abort();
	snprintf(id, 65, "%s-%02x%02x%02x%02x%02x%02x", prefix, raw[0], raw[1], raw[2], raw[3],
		 raw[4], raw[5]);
}

static void create(struct api_server *s, const struct api_request *req, struct api_reply *r)
{
	json_t *body = api_body_object(req->body, req->len, r), *env, *metadata, *timeout, *sb;
	const char *template, *k;
	gantry_error_t err = NULL;
	json_t *creq, *v;
	char id[65];
	json_int_t secs = E2B_TIMEOUT_DEFAULT;
	bool from;

	if (body == NULL)
		return e2b_error(r, 400, "%s",
				 json_string_value(json_object_get(r->json, "error")));
	template = json_string_value(json_object_get(body, "templateID"));
	env = json_object_get(body, "envVars");
	metadata = json_object_get(body, "metadata");
	timeout = json_object_get(body, "timeout");
	if (template == NULL)
		template = "base";
	if (timeout && (!json_is_integer(timeout) || json_integer_value(timeout) < 1 ||
			json_integer_value(timeout) > E2B_TIMEOUT_MAX)) {
		json_decref(body);
		return e2b_error(r, 400, "timeout: want 1 to %d seconds", E2B_TIMEOUT_MAX);
	}
	if (timeout)
		secs = json_integer_value(timeout);
	if (!string_map(env, "envVars", r) || !string_map(metadata, "metadata", r)) {
		json_decref(body);
		return;
	}
	e2b_random_id("e2b", id);
	creq = json_pack("{s:s}", "name", id);
	/* A snapshot's name (Sandbox.create(snapshotId)): a clone of it. */
	from = e2b_snapshot_known(s, template);
	if (from && env) {
		e2b_error(r, 400, "envVars: a sandbox from snapshot %.64s has the snapshot's "
				  "environment", template);
		goto out;
	}
	if (from)
		json_object_set_new(creq, "snapshot", json_string(template));
	/* `base`, the SDK's default, is the built-in image. */
	else if (strcmp(template, "base") != 0)
		json_object_set_new(creq, "image", json_string(template));
	if (env) {
		json_t *a = json_array();

		json_object_foreach(env, k, v)
		{
			cleanup_free char *kv = NULL;

			xasprintf(&kv, "%s=%s", k, json_string_value(v));
			json_array_append_new(a, json_string(kv));
		}
		json_object_set_new(creq, "env", a);
	}
	/* No VM booted for a table with no room (one that fills meanwhile
	 * has the new sandbox deleted: e2b_box_add). */
	if (e2b_boxes_full(s)) {
		e2b_error(r, 503, "%d E2B sandboxes already", E2B_BOXES_MAX);
		goto out;
	}
	if (e2b_operation(s, from ? "create-from" : "create", id, creq, &err) < 0) {
		unsigned status = err->status == EBUSY ? 503 : api_error_status(err, 500);

		e2b_error(r, status == 404 ? 400 : status, "%s", gantry_error_str(err));
		goto out;
	}
	if ((sb = e2b_box_add(s, id, template, metadata, secs)) != NULL)
		api_reply_json(r, 201, sb);
	else
		e2b_error(r, 503, "%d E2B sandboxes already", E2B_BOXES_MAX);
out:
	gantry_error_free(&err);
	json_decref(creq);
	json_decref(body);
}

static void get(struct api_server *s, const char *id, struct api_reply *r)
{
	struct e2b_box *b;

	pthread_mutex_lock(&s->e2b->lock);
	b = e2b_box_find(s->e2b, id);
	if (b)
		api_reply_json(r, 200, box_json(b, NULL, true));
	pthread_mutex_unlock(&s->e2b->lock);
	if (b == NULL)
		e2b_error(r, 404, "sandbox %.64s not found", id);
}

/* %XX decoded in place ('+' is a space, as a form has it). */
static void pct_decode(char *s)
{
	char *w = s;

	for (; *s; s++) {
		unsigned v;

		if (*s == '%' && s[1] && s[2] && sscanf(s + 1, "%2x", &v) == 1 && v) {
			*w++ = (char)v;
			s += 2;
		} else {
			*w++ = *s == '+' ? ' ' : *s;
		}
	}
	*w = '\0';
}

/* Whether b's metadata holds every pair of q (the SDK's `metadata`
 * query: `k=v&k2=v2`, each side encoded once more). */
static bool metadata_match(const struct e2b_box *b, const char *q)
{
	cleanup_free char *copy = xstrdup(q);
	char *save = NULL;

	for (char *pair = strtok_r(copy, "&", &save); pair; pair = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(pair, '=');
		const char *have;

		if (eq == NULL)
			return false;
		*eq = '\0';
		pct_decode(pair);
		pct_decode(eq + 1);
		have = json_string_value(json_object_get(b->metadata, pair));
		if (have == NULL || strcmp(have, eq + 1) != 0)
			return false;
	}
	return true;
}

static void list(struct api_server *s, const struct api_request *req, struct api_reply *r)
{
	const char *state = req->lookup(req, true, "state");
	const char *metadata = req->lookup(req, true, "metadata");
	const char *template = req->lookup(req, true, "template");
	json_t *a = json_array();

	pthread_mutex_lock(&s->e2b->lock);
	for (size_t i = 0; i < E2B_BOXES_MAX; i++) {
		const struct e2b_box *b = &s->e2b->boxes[i];

		if (b->used && (state == NULL || strstr(state, b->paused ? "paused" : "running")) &&
		    (template == NULL || strcmp(template, b->template) == 0) &&
		    (metadata == NULL || metadata_match(b, metadata)))
			json_array_append_new(a, box_json(b, NULL, true));
	}
	pthread_mutex_unlock(&s->e2b->lock);
	api_reply_json(r, 200, a);
}

static void kill_box(struct api_server *s, const char *id, struct api_reply *r)
{
	gantry_error_t err = NULL;
	bool known;

	pthread_mutex_lock(&s->e2b->lock);
	known = e2b_box_find(s->e2b, id) != NULL;
	pthread_mutex_unlock(&s->e2b->lock);
	if (!known)
		return e2b_error(r, 404, "sandbox %.64s not found", id);
	if (end_box(s, id, &err) < 0)
		e2b_error(r, err->status == EBUSY ? 503 : 500, "%s", gantry_error_str(err));
	else
		no_content(r);
	gantry_error_free(&err);
}

/* pause: the sandbox saved and stopped (`gantry stop -snapshot`); 409
 * when it is paused already, as E2B answers. */
static void pause_box(struct api_server *s, const char *id, struct api_reply *r)
{
	gantry_error_t err = NULL;
	struct e2b_box *b;
	bool known, paused = false;

	pthread_mutex_lock(&s->e2b->lock);
	b = e2b_box_find(s->e2b, id);
	known = b != NULL;
	if (b)
		paused = b->paused;
	pthread_mutex_unlock(&s->e2b->lock);
	if (!known)
		return e2b_error(r, 404, "sandbox %.64s not found", id);
	if (paused)
		return e2b_error(r, 409, "sandbox %.64s is paused already", id);
	/* Refused (a process under way): not 409, which the SDK reads as
	 * "paused already". */
	if (e2b_operation(s, "pause", id, NULL, &err) < 0) {
		e2b_error(r, err->status == EBUSY ? 503 : 400, "%s", gantry_error_str(err));
		gantry_error_free(&err);
		return;
	}
	pthread_mutex_lock(&s->e2b->lock);
	if ((b = e2b_box_find(s->e2b, id)) != NULL)
		b->paused = true;
	pthread_mutex_unlock(&s->e2b->lock);
	no_content(r);
}

/* connect (and resume) of a paused sandbox: restored from its save, its
 * timeout from now. 0, or -1 with r's error. */
static int resume_box(struct api_server *s, const char *id, struct api_reply *r)
{
	gantry_error_t err = NULL;
	struct e2b_box *b;
	bool paused;

	pthread_mutex_lock(&s->e2b->lock);
	b = e2b_box_find(s->e2b, id);
	paused = b && b->paused;
	pthread_mutex_unlock(&s->e2b->lock);
	if (!paused)
		return 0;
	if (e2b_operation(s, "resume", id, NULL, &err) < 0) {
		e2b_error(r, err->status == EBUSY ? 503 : 500, "%s", gantry_error_str(err));
		gantry_error_free(&err);
		return -1;
	}
	pthread_mutex_lock(&s->e2b->lock);
	if ((b = e2b_box_find(s->e2b, id)) != NULL) {
		b->paused = false;
		b->end_ms = api_wall_ms() + E2B_TIMEOUT_DEFAULT * 1000ull;
	}
	pthread_mutex_unlock(&s->e2b->lock);
	return 1;
}

/* setTimeout (204) and connect (the create's answer): the sandbox's time
 * from now. */
static void timeout(struct api_server *s, const struct api_request *req, const char *id,
		    bool connect, struct api_reply *r)
{
	json_t *body = api_body_object(req->body, req->len, r), *t;
	struct e2b_box *b;
	int resumed = 0;

	if (body == NULL)
		return e2b_error(r, 400, "%s",
				 json_string_value(json_object_get(r->json, "error")));
	t = json_object_get(body, "timeout");
	if ((t || !connect) && (!json_is_integer(t) || json_integer_value(t) < 0 ||
				json_integer_value(t) > E2B_TIMEOUT_MAX)) {
		json_decref(body);
		return e2b_error(r, 400, "timeout: want 0 to %d seconds", E2B_TIMEOUT_MAX);
	}
	if (connect && (resumed = resume_box(s, id, r)) < 0) {
		json_decref(body);
		return;
	}
	pthread_mutex_lock(&s->e2b->lock);
	b = e2b_box_find(s->e2b, id);
	/* setTimeout sets it; connect only lengthens it, as E2B's does for a
	 * running sandbox. */
	if (b && t && !connect)
		b->end_ms = api_wall_ms() + (uint64_t)json_integer_value(t) * 1000;
	else if (b && t)
		b->end_ms = MAX(b->end_ms, api_wall_ms() + (uint64_t)json_integer_value(t) * 1000);
	if (b && connect)
		api_reply_json(r, resumed ? 201 : 200, box_json(b, s->token, false));
	else if (b)
		no_content(r);
	pthread_mutex_unlock(&s->e2b->lock);
	if (b == NULL)
		e2b_error(r, 404, "sandbox %.64s not found", id);
	json_decref(body);
}

const char *e2b_box_of(struct api_server *s, const struct api_request *req, bool rpc,
		       struct api_reply *r)
{
	const char *id = req->lookup(req, false, "E2b-Sandbox-Id");
	bool known;

	if (id == NULL) {
		if (rpc)
			envd_error(r, 400, "invalid_argument", "no E2b-Sandbox-Id header");
		else
			e2b_error(r, 400, "no E2b-Sandbox-Id header");
		return NULL;
	}
	pthread_mutex_lock(&s->e2b->lock);
	known = e2b_box_find(s->e2b, id) != NULL;
	pthread_mutex_unlock(&s->e2b->lock);
	if (known)
		return id;
	if (rpc)
		envd_error(r, 502, "unavailable", "sandbox %.64s is not running", id);
	else
		e2b_error(r, 502, "sandbox %.64s is not running", id);
	return NULL;
}

size_t e2b_body_max(const char *method, const char *path)
{
	return strcmp(method, "POST") == 0 && strcmp(path, "/files") == 0 ? E2B_BODY_MAX
									  : API_BODY_MAX;
}

/* path after prefix, up to the next slash: the id, into id. */
static const char *id_of(const char *path, const char *prefix, char id[65])
{
	size_t n = strlen(prefix), k;

	if (strncmp(path, prefix, n) != 0)
		return NULL;
	k = strcspn(path + n, "/");
	if (k == 0 || k > 64)
		return NULL;
	memcpy(id, path + n, k);
	id[k] = '\0';
	return path + n + k;
}

bool e2b_route(struct api_server *s, const struct api_request *req, struct api_reply *r)
{
	const char *p = req->path, *m = req->method, *rest;
	bool get_m = strcmp(m, "GET") == 0, post = strcmp(m, "POST") == 0;
	const char *box;
	char id[65];

	if (strcmp(p, "/health") == 0) {
		no_content(r);
		return true;
	}
	if (strncmp(p, "/process.Process/", 17) == 0 ||
	    strncmp(p, "/filesystem.Filesystem/", 23) == 0) {
		if (!post) {
			envd_error(r, 405, "unimplemented", "POST only");
			r->allow = "POST";
			return true;
		}
		if ((box = e2b_box_of(s, req, true, r)) == NULL)
			return true;
		if (p[1] == 'p')
			envd_process(s, req, box, p + 17, r);
		else
			envd_filesystem(s, req, box, p + 23, r);
		return true;
	}
	if (strcmp(p, "/files") == 0) {
		if ((box = e2b_box_of(s, req, false, r)) != NULL)
			envd_files(s, req, box, r);
		return true;
	}
	if (strcmp(p, "/snapshots") == 0 || strncmp(p, "/templates/", 11) == 0)
		return e2b_snapshot_route(s, req, r);
	if (strcmp(p, "/sandboxes") == 0 || strcmp(p, "/v2/sandboxes") == 0) {
		if (post)
			create(s, req, r);
		else if (get_m)
			list(s, req, r);
		else {
			e2b_error(r, 405, "%s takes GET and POST", p);
			r->allow = "GET, POST";
		}
		return true;
	}
	rest = id_of(p, "/v2/sandboxes/", id);
	if (rest == NULL)
		rest = id_of(p, "/sandboxes/", id);
	if (rest == NULL)
		return strncmp(p, "/sandboxes/", 11) == 0 || strncmp(p, "/v2/sandboxes/", 14) == 0
			       ? (e2b_error(r, 404, "no such path"), true)
			       : false;
	if (*rest == '\0' && get_m)
		get(s, id, r);
	else if (*rest == '\0' && strcmp(m, "DELETE") == 0)
		kill_box(s, id, r);
	else if (strcmp(rest, "/timeout") == 0 && post)
		timeout(s, req, id, false, r);
	else if ((strcmp(rest, "/connect") == 0 || strcmp(rest, "/resume") == 0) && post)
		timeout(s, req, id, true, r);
	else if (strcmp(rest, "/pause") == 0 && post)
		pause_box(s, id, r);
	else if (strcmp(rest, "/snapshots") == 0 && post)
		e2b_snapshot_create(s, req, id, r);
	else if (strcmp(rest, "/fork") == 0 && post)
		e2b_fork(s, req, id, r);
	else
		e2b_error(r, 404, "no such path");
	return true;
}
