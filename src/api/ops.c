/* The manager API's operations: each lifecycle call is one, with an id a
 * client can look up, replayed by its Idempotency-Key, announced to the
 * /v1/events readers when it begins and ends; and the slots that bound
 * how many lifecycle calls and execs run at once. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "api/api_priv.h"
#include "common/text.h"
#include "common/util.h"

uint64_t api_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

char *api_time(uint64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	char buf[40];
	struct tm tm;
	size_t n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", gmtime_r(&t, &tm));

	snprintf(buf + n, sizeof(buf) - n, ".%03dZ", (int)(ms % 1000));
	return xstrdup(buf);
}

static char *now_rfc3339(void)
{
	return api_time(api_wall_ms());
}

void api_cond_init(pthread_cond_t *c)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
}

void api_cond_wait_ms(pthread_cond_t *c, pthread_mutex_t *m, unsigned ms)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L)
		t.tv_sec++, t.tv_nsec -= 1000000000L;
	pthread_cond_timedwait(c, m, &t);
}

void api_ops_init(struct api_server *s)
{
	pthread_mutex_init(&s->lock, NULL);
	api_cond_init(&s->wake);
}

static void op_clear(struct api_op *op)
{
	free(op->sandbox);
	free(op->error);
	free(op->created);
	free(op->updated);
	*op = (struct api_op){ 0 };
}

static void sub_clear(struct api_sub *sub)
{
	for (size_t i = 0; i < sub->len; i++)
		free(sub->frames[(sub->head + i) % API_SUBSCRIBER_QUEUE]);
	*sub = (struct api_sub){ 0 };
}

void api_ops_destroy(struct api_server *s)
{
	for (size_t i = 0; i < API_OPERATIONS_MAX; i++)
		op_clear(&s->ops[i]);
	for (size_t i = 0; i < API_SUBSCRIBERS_MAX; i++)
		sub_clear(&s->subs[i]);
	pthread_cond_destroy(&s->wake);
	pthread_mutex_destroy(&s->lock);
}

static const char *state_name(enum api_op_state st)
{
	return st == API_OP_RUNNING ? "running" : st == API_OP_SUCCEEDED ? "succeeded" : "failed";
}

json_t *api_op_json(const struct api_op *op)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:o,s:s,s:s}", "id", op->id, "kind", op->kind, "sandbox",
			 op->sandbox, "state", state_name(op->state), "error",
			 op->error ? json_string(op->error) : json_null(), "createdAt", op->created,
			 "updatedAt", op->updated);
}

/* ---- events ---- */

/* Queue op's news for every reader; one whose queue is full is dropped
 * (its stream ends) rather than hold the rest. Under s->lock. */
static void publish(struct api_server *s, const struct api_op *op)
{
	cleanup_free char *time = now_rfc3339(), *data = NULL;
	uint64_t id = ++s->event_id;
	json_t *j = json_pack("{s:I,s:s,s:s,s:s,s:s,s:s}", "id", (json_int_t)id, "type",
			      "operation", "operationId", op->id, "sandbox", op->sandbox, "state",
			      state_name(op->state), "time", time);

	data = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	for (size_t i = 0; i < API_SUBSCRIBERS_MAX; i++) {
		struct api_sub *sub = &s->subs[i];
		char *frame;

		if (!sub->used || sub->dropped)
			continue;
		if (sub->len == API_SUBSCRIBER_QUEUE) {
			sub->dropped = true;
			continue;
		}
		xasprintf(&frame, "id: %llu\nevent: operation\ndata: %s\n\n",
			  (unsigned long long)id, data);
		sub->frames[(sub->head + sub->len++) % API_SUBSCRIBER_QUEUE] = frame;
	}
	pthread_cond_broadcast(&s->wake);
}

static size_t sub_read(struct api_stream *st, char *buf, size_t cap);
static void sub_done(struct api_stream *st);

void api_events(struct api_server *s, int conn_fd, struct api_reply *r)
{
	struct api_sub *sub = NULL;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < API_SUBSCRIBERS_MAX && sub == NULL; i++)
		if (!s->subs[i].used)
			sub = &s->subs[i];
	if (sub) {
		*sub = (struct api_sub){ .stream = { sub_read, sub_done },
					 .s = s,
					 .conn_fd = conn_fd,
					 .used = true,
					 .len = 1 };
		sub->frames[0] = xstrdup(": connected\n\n");
	}
	pthread_mutex_unlock(&s->lock);
	if (sub == NULL)
		return api_reply_error(r, 503, "%d event readers already: try again later",
				       API_SUBSCRIBERS_MAX);
	r->status = 200;
	r->type = "text/event-stream";
	r->stream = &sub->stream;
}

static void sub_done(struct api_stream *st)
{
	struct api_sub *sub = (struct api_sub *)st;
	struct api_server *s = sub->s;

	pthread_mutex_lock(&s->lock);
	sub_clear(sub);
	pthread_mutex_unlock(&s->lock);
}

bool api_client_gone(int fd)
{
	struct pollfd p = { fd, POLLRDHUP, 0 };

	return fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static size_t sub_read(struct api_stream *st, char *buf, size_t cap)
{
	struct api_sub *sub = (struct api_sub *)st;
	struct api_server *s = sub->s;
	static const char keepalive[] = ": keepalive\n\n";
	uint64_t until = now_ms() + s->keepalive_ms, now;
	size_t n = 0;

	pthread_mutex_lock(&s->lock);
	/* In steps of a second at most, so that a client gone is seen soon
	 * and its place given back. */
	while (sub->len == 0 && !s->stopping && !sub->dropped && (now = now_ms()) < until) {
		api_cond_wait_ms(&s->wake, &s->lock, (unsigned)MIN(until - now, 1000u));
		if (sub->len == 0 && api_client_gone(sub->conn_fd))
			sub->dropped = true;
	}
	if (s->stopping || sub->dropped) {
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	if (sub->len == 0 && cap >= sizeof(keepalive) - 1) {
		memcpy(buf, keepalive, sizeof(keepalive) - 1);
		n = sizeof(keepalive) - 1;
	}
	/* Whole frames while they fit; the head frame cut where it must. */
	while (sub->len && n < cap) {
		char **head = &sub->frames[sub->head];
		size_t left = strlen(*head + sub->off), take = MIN(left, cap - n);

		memcpy(buf + n, *head + sub->off, take);
		n += take;
		sub->off += take;
		if (take < left)
			break;
		free(*head);
		*head = NULL;
		sub->off = 0;
		sub->head = (sub->head + 1) % API_SUBSCRIBER_QUEUE;
		sub->len--;
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* ---- operations ---- */

static struct api_op *op_find(struct api_server *s, const char *id)
{
	for (size_t i = 0; i < API_OPERATIONS_MAX; i++)
		if (s->ops[i].used && strcmp(s->ops[i].id, id) == 0)
			return &s->ops[i];
	return NULL;
}

static struct api_op *op_by_key(struct api_server *s, const char *key)
{
	for (size_t i = 0; i < API_OPERATIONS_MAX; i++)
		if (s->ops[i].used && s->ops[i].key[0] && strcmp(s->ops[i].key, key) == 0)
			return &s->ops[i];
	return NULL;
}

/* A free entry, or the oldest finished one forgotten; NULL when all are
 * running (as many as API_OPERATIONS_MAX cannot be: the slots bound them). */
static struct api_op *op_slot(struct api_server *s)
{
	struct api_op *old = NULL;

	for (size_t i = 0; i < API_OPERATIONS_MAX; i++) {
		struct api_op *op = &s->ops[i];

		if (!op->used)
			return op;
		if (op->state != API_OP_RUNNING && (old == NULL || op->seq < old->seq))
			old = op;
	}
	if (old)
		op_clear(old);
	return old;
}

static void fingerprint(const struct api_request *req, char out[DIGEST_STR_MAX])
{
	struct sha256 h;

	sha256_init(&h);
	sha256_update(&h, req->method, strlen(req->method) + 1);
	sha256_update(&h, req->path, strlen(req->path) + 1);
	sha256_update(&h, req->body ? req->body : "", req->len);
	if (sha256_final(&h, out, NULL) < 0)
		snprintf(out, DIGEST_STR_MAX, "-"); /* no libcrypto: keys match on themselves */
	sha256_release(&h);
}

static void op_reply(const struct api_op *op, unsigned ok_status, struct api_reply *r)
{
	if (op->state == API_OP_FAILED) {
		api_reply_error(r, op->status, "%s", op->error ? op->error : "failed");
		json_object_set_new(r->json, "operationId", json_string(op->id));
		return;
	}
	api_reply_json(r, op->state == API_OP_RUNNING ? 202 : ok_status, api_op_json(op));
}

/* The answer to a key already seen, under s->lock: true with r filled. */
static bool replay(struct api_server *s, const char *key, const char *fp, struct api_reply *r)
{
	struct api_op *op = op_by_key(s, key);

	if (op == NULL)
		return false;
	if (strcmp(op->fingerprint, fp) != 0)
		api_reply_error(r, 409, "Idempotency-Key `%s` was used for another request", key);
	else
		op_reply(op, 200, r);
	return true;
}

bool api_op_replayed(struct api_server *s, const struct api_request *req, struct api_reply *r)
{
	char fp[DIGEST_STR_MAX];
	bool done;

	if (req->key == NULL)
		return false;
	fingerprint(req, fp);
	pthread_mutex_lock(&s->lock);
	done = replay(s, req->key, fp, r);
	pthread_mutex_unlock(&s->lock);
	return done;
}

bool api_op_begin(struct api_server *s, const struct api_request *req, const char *kind,
		  const char *sandbox, char id[33], struct api_reply *r)
{
	char fp[DIGEST_STR_MAX] = "";
	unsigned char raw[16];
	struct api_op *op;

	if (req->key)
		fingerprint(req, fp);
	pthread_mutex_lock(&s->lock);
	if (req->key && replay(s, req->key, fp, r)) {
		pthread_mutex_unlock(&s->lock);
		return false;
	}
	if (s->lifecycle >= API_LIFECYCLE_MAX || (op = op_slot(s)) == NULL) {
		pthread_mutex_unlock(&s->lock);
		api_reply_error(r, 503, "%d lifecycle calls under way already: try again later",
				API_LIFECYCLE_MAX);
		return false;
	}
	s->lifecycle++;
	if (getrandom(raw, sizeof(raw), 0) != sizeof(raw))
		abort();
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(op->id + 2 * i, 3, "%02x", raw[i]);
	op->used = true;
	op->kind = kind;
	op->sandbox = xstrdup(sandbox);
	op->state = API_OP_RUNNING;
	op->created = now_rfc3339();
	op->updated = xstrdup(op->created);
	snprintf(op->key, sizeof(op->key), "%s", req->key ? req->key : "");
	memcpy(op->fingerprint, fp, sizeof(fp));
	op->seq = ++s->op_seq;
	memcpy(id, op->id, sizeof(op->id));
	publish(s, op);
	pthread_mutex_unlock(&s->lock);
	return true;
}

void api_op_end(struct api_server *s, const char *id, gantry_error_t *err, unsigned ok_status,
		struct api_reply *r)
{
	unsigned status = err ? api_error_status(*err, 409) : ok_status;
	struct api_op *op;

	pthread_mutex_lock(&s->lock);
	s->lifecycle--;
	op = op_find(s, id);
	/* A create's missing file (an image, a share, a policy) is its input's
	 * fault; 404 is for the sandbox a route names. */
	if (status == 404 && strcmp(op->kind, "create") == 0)
		status = 400;
	free(op->updated);
	op->updated = now_rfc3339();
	op->state = err ? API_OP_FAILED : API_OP_SUCCEEDED;
	if (err) {
		op->error = text_sanitize_utf8(
			xstrdup(status == 404 ? (*err)->msg : gantry_error_str(*err)));
		op->status = status; /* a replay answers as this did */
	}
	publish(s, op);
	op_reply(op, ok_status, r);
	pthread_mutex_unlock(&s->lock);
}

void api_op_get(struct api_server *s, const char *id, struct api_reply *r)
{
	struct api_op *op;

	pthread_mutex_lock(&s->lock);
	op = op_find(s, id);
	if (op)
		api_reply_json(r, 200, api_op_json(op));
	else
		api_reply_error(r, 404, "no operation `%.40s`", id);
	pthread_mutex_unlock(&s->lock);
}

bool api_exec_slot(struct api_server *s, bool take, struct api_reply *r)
{
	bool ok = true;

	pthread_mutex_lock(&s->lock);
	if (!take)
		s->execs--;
	else if (s->execs >= API_EXECS_MAX)
		ok = false;
	else
		s->execs++;
	pthread_mutex_unlock(&s->lock);
	if (!ok)
		api_reply_error(r, 503, "%d execs under way already: try again later",
				API_EXECS_MAX);
	return ok;
}
