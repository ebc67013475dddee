/* E2B snapshots (e2b.h), as the SDK's createSnapshot, listSnapshots,
 * deleteSnapshot and Sandbox.create(snapshotId) ask for them: a running
 * E2B sandbox saved live (`gantry snapshot`), the snapshots listed,
 * removed (at DELETE /templates/SNAP, where E2B keeps them), and a
 * sandbox made from one named as its template (`gantry start -from`). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "api/e2b.h"
#include "common/util.h"

int e2b_snapshot_op(struct api_server *s, const char *kind, const char *name, json_t *body,
		    gantry_error_t *err)
{
	const char *snap = json_string_value(json_object_get(body, "snapshot"));

	if (s->b->snapshot == NULL)
		return gantry_error(err, ENOSYS, "no snapshots here");
	if (strcmp(kind, "snapshot") == 0)
		return s->b->snapshot(name, snap, err);
	if (strcmp(kind, "create-from") == 0)
		return s->b->start_from(name, snap, &s->cancel, err);
	return s->b->snapshot_remove(name, err);
}

static json_t *snapshots(struct api_server *s)
{
	gantry_error_t err = NULL;
	json_t *all = NULL;

	if (s->b->snapshots == NULL || s->b->snapshots(&all, &err) < 0) {
		gantry_error_free(&err);
		json_decref(all);
		return json_array();
	}
	return all;
}

bool e2b_snapshot_known(struct api_server *s, const char *name)
{
	json_t *all = snapshots(s), *v;
	size_t i;
	bool known = false;

	json_array_foreach(all, i, v)
	{
		const char *n = json_string_value(json_object_get(v, "name"));

		known |= n && strcmp(n, name) == 0 && !json_object_get(v, "error");
	}
	json_decref(all);
	return known;
}

void e2b_snapshot_create(struct api_server *s, const struct api_request *req, const char *id,
			 struct api_reply *r)
{
	json_t *body = api_body_object(req->body, req->len, r), *name, *op;
	gantry_error_t err = NULL;
	char snap[65];
	bool known;

	if (body == NULL)
		return e2b_error(r, 400, "%s",
				 json_string_value(json_object_get(r->json, "error")));
	name = json_object_get(body, "name");
	if (name && (!json_is_string(name) || strlen(json_string_value(name)) >= sizeof(snap))) {
		json_decref(body);
		return e2b_error(r, 400, "name: want a snapshot name");
	}
	pthread_mutex_lock(&s->e2b->lock);
	known = e2b_box_find(s->e2b, id) != NULL;
	pthread_mutex_unlock(&s->e2b->lock);
	if (!known) {
		json_decref(body);
		return e2b_error(r, 404, "sandbox %.64s not found", id);
	}
	if (name) {
		snprintf(snap, sizeof(snap), "%s", json_string_value(name));
	} else {
		e2b_random_id("snap", snap);
	}
	json_decref(body);
	op = json_pack("{s:s}", "snapshot", snap);
	if (e2b_operation(s, "snapshot", id, op, &err) < 0)
		e2b_error(r, err->status == EBUSY ? 503 : 400, "%s", gantry_error_str(err));
	else
		api_reply_json(r, 201, json_pack("{s:s,s:[s]}", "snapshotID", snap, "names", snap));
	json_decref(op);
	gantry_error_free(&err);
}

/* The source's template and metadata (copies), or false: no such box. */
static bool box_copy(struct api_server *s, const char *id, char **template, json_t **metadata)
{
	const struct e2b_box *b;

	pthread_mutex_lock(&s->e2b->lock);
	b = e2b_box_find(s->e2b, id);
	if (b) {
		*template = xstrdup(b->template);
		*metadata = json_deep_copy(b->metadata);
	}
	pthread_mutex_unlock(&s->e2b->lock);
	return b != NULL;
}

/* Clones a fork makes at once: half the lifecycle calls the server runs
 * together, the rest left to other clients. */
#define FORK_AT_ONCE (API_LIFECYCLE_MAX / 2)

/* The clones of one fork, made by up to FORK_AT_ONCE threads that each
 * take the next one not yet begun. */
struct fork_run {
	struct api_server *s;
	const char *snap;
	pthread_mutex_t lock;
	json_int_t n, next;
	struct fork_clone {
		char id[65];
		int rc;
		gantry_error_t err;
	} *clones;
};

static void *fork_clones(void *arg)
{
	struct fork_run *f = arg;

	for (;;) {
		struct fork_clone *c;
		json_t *op;

		pthread_mutex_lock(&f->lock);
		c = f->next < f->n ? &f->clones[f->next++] : NULL;
		pthread_mutex_unlock(&f->lock);
		if (c == NULL)
			return NULL;
		/* Its own body: jansson's reference counts are not atomic. */
		op = json_pack("{s:s}", "snapshot", f->snap);
		c->rc = e2b_operation(f->s, "create-from", c->id, op, &c->err);
		json_decref(op);
	}
}

/* Every clone made, FORK_AT_ONCE at a time, or as many as the server
 * has lifecycle calls free now (each clone is one, and one refused for
 * want of a slot would fail), at least one: this thread makes the rest. */
static void fork_make(struct fork_run *f)
{
	pthread_t t[FORK_AT_ONCE];
	size_t started = 0, at_once;

	pthread_mutex_lock(&f->s->lock);
	at_once = f->s->lifecycle < API_LIFECYCLE_MAX ? API_LIFECYCLE_MAX - f->s->lifecycle : 0;
	pthread_mutex_unlock(&f->s->lock);
	at_once = MAX(MIN(at_once, (size_t)FORK_AT_ONCE), (size_t)1);
	while (started + 1 < at_once && (json_int_t)started + 1 < f->n &&
	       pthread_create(&t[started], NULL, fork_clones, f) == 0)
		started++;
	fork_clones(f);
	for (size_t i = 0; i < started; i++)
		pthread_join(t[i], NULL);
}

void e2b_fork(struct api_server *s, const struct api_request *req, const char *id,
	      struct api_reply *r)
{
	json_t *body = api_body_object(req->body, req->len, r), *count, *timeout, *metadata = NULL;
	json_t *op = NULL, *out;
	cleanup_free char *template = NULL;
	gantry_error_t err = NULL;
	json_int_t n = 1, secs = E2B_TIMEOUT_DEFAULT;
	struct fork_run f = { .s = s, .lock = PTHREAD_MUTEX_INITIALIZER };
	char snap[65];

	if (body == NULL)
		return e2b_error(r, 400, "%s",
				 json_string_value(json_object_get(r->json, "error")));
	count = json_object_get(body, "count");
	timeout = json_object_get(body, "timeout");
	if (count && (!json_is_integer(count) || json_integer_value(count) < 1 ||
		      json_integer_value(count) > E2B_FORK_MAX)) {
		json_decref(body);
		return e2b_error(r, 400, "count: want 1 to %d", E2B_FORK_MAX);
	}
	if (timeout && (!json_is_integer(timeout) || json_integer_value(timeout) < 1 ||
			json_integer_value(timeout) > E2B_TIMEOUT_MAX)) {
		json_decref(body);
		return e2b_error(r, 400, "timeout: want 1 to %d seconds", E2B_TIMEOUT_MAX);
	}
	n = count ? json_integer_value(count) : 1;
	secs = timeout ? json_integer_value(timeout) : secs;
	json_decref(body);
	if (!box_copy(s, id, &template, &metadata))
		return e2b_error(r, 404, "sandbox %.64s not found", id);
	/* One snapshot for all of them, taken live: the source runs on. */
	e2b_random_id("fork", snap);
	op = json_pack("{s:s}", "snapshot", snap);
	if (e2b_operation(s, "snapshot", id, op, &err) < 0) {
		e2b_error(r, err->status == EBUSY ? 503 : 400, "%s", gantry_error_str(err));
		goto out;
	}
	f.snap = snap;
	f.n = n;
	f.clones = xzalloc((size_t)n * sizeof(*f.clones));
	for (json_int_t i = 0; i < n; i++)
		e2b_random_id("e2b", f.clones[i].id);
	fork_make(&f);
	out = json_array();
	for (json_int_t i = 0; i < n; i++) {
		struct fork_clone *c = &f.clones[i];
		json_t *sb = NULL;

		if (c->rc == 0 &&
		    (sb = e2b_box_add(s, c->id, template, metadata, secs)) == NULL)
			gantry_error(&c->err, EBUSY, "%d E2B sandboxes already", E2B_BOXES_MAX);
		if (sb)
			json_array_append_new(out, json_pack("{s:o}", "sandbox", sb));
		else
			json_array_append_new(
				out, json_pack("{s:{s:i,s:s}}", "error", "code",
					       c->err->status == EBUSY ? 503 : 500, "message",
					       gantry_error_str(c->err)));
		gantry_error_free(&c->err);
	}
	free(f.clones);
	api_reply_json(r, 200, out);
	/* Each clone has its own copies: the snapshot goes. */
	e2b_undo(s, "snapshot-remove", snap);
out:
	gantry_error_free(&err);
	json_decref(op);
	json_decref(metadata);
}

/* GET /snapshots[?sandboxID=ID][&name=N]: E2B's SnapshotInfo each. */
static void list(struct api_server *s, const struct api_request *req, struct api_reply *r)
{
	const char *box = req->lookup(req, true, "sandboxID");
	const char *name = req->lookup(req, true, "name");
	json_t *all = snapshots(s), *out = json_array(), *v;
	size_t i;

	json_array_foreach(all, i, v)
	{
		const char *n = json_string_value(json_object_get(v, "name"));
		const char *src = json_string_value(json_object_get(v, "source"));

		if (n == NULL || json_object_get(v, "error") ||
		    (box && (src == NULL || strcmp(box, src) != 0)) || (name && strcmp(name, n) != 0))
			continue;
		json_array_append_new(out, json_pack("{s:s,s:[s]}", "snapshotID", n, "names", n));
	}
	json_decref(all);
	api_reply_json(r, 200, out);
}

static void remove_(struct api_server *s, const char *snap, struct api_reply *r)
{
	gantry_error_t err = NULL;

	if (!e2b_snapshot_known(s, snap))
		return e2b_error(r, 404, "snapshot %.64s not found", snap);
	if (e2b_operation(s, "snapshot-remove", snap, NULL, &err) < 0) {
		e2b_error(r, err->status == ENOENT ? 404 : 500, "%s", gantry_error_str(err));
		gantry_error_free(&err);
		return;
	}
	api_reply_json(r, 204, NULL);
	r->bytes = "";
	r->len = 0;
}

bool e2b_snapshot_route(struct api_server *s, const struct api_request *req, struct api_reply *r)
{
	const char *p = req->path, *snap = p + strlen("/templates/");

	if (strcmp(p, "/snapshots") == 0) {
		if (strcmp(req->method, "GET") == 0)
			list(s, req, r);
		else {
			e2b_error(r, 405, "/snapshots takes GET");
			r->allow = "GET";
		}
		return true;
	}
	if (*snap == '\0' || strchr(snap, '/') || strlen(snap) > 64)
		e2b_error(r, 404, "no such path");
	else if (strcmp(req->method, "DELETE") != 0) {
		e2b_error(r, 405, "%s takes DELETE", p);
		r->allow = "DELETE";
	} else
		remove_(s, snap, r);
	return true;
}
