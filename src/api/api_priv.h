/* The manager API's insides: the server's state shared by its connection
 * threads (server.c), the operations and their events (ops.c), the routes
 * (v1.c, exec.c). */
#ifndef GANTRY_API_API_PRIV_H
#define GANTRY_API_API_PRIV_H

#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/api.h"
#include "image/digest.h"

/* A body streamed as it comes (the events, a process's output): read
 * gives up to max bytes, waiting for some; 0 ends the stream. done is
 * called once, when the answer ends or the client went away. */
struct api_stream {
	size_t (*read)(struct api_stream *st, char *buf, size_t max);
	void (*done)(struct api_stream *st);
};

enum api_op_state { API_OP_RUNNING, API_OP_SUCCEEDED, API_OP_FAILED };

/* A lifecycle call as /v1/operations/{id} shows it. */
struct api_op {
	bool used;
	char id[33];
	const char *kind; /* create, start, stop, delete */
	char *sandbox;
	enum api_op_state state;
	char *error;
	unsigned status; /* a failed one's answer: 400, 404 or 409 */
	char *created, *updated;
	char key[API_KEY_MAX + 1]; /* its Idempotency-Key, or "" */
	char fingerprint[DIGEST_STR_MAX];
	uint64_t seq; /* the order they came in */
};

/* One /v1/events reader: the frames not yet sent, in a ring. */
struct api_sub {
	struct api_stream stream; /* first: the reply's stream is this */
	struct api_server *s;
	int conn_fd; /* its client's connection, watched for a hang-up */
	bool used, dropped;
	char *frames[API_SUBSCRIBER_QUEUE];
	size_t head, len;
	size_t off; /* of the head frame, sent already */
};

struct api_server {
	const struct api_backend *b;
	pthread_mutex_t lock;
	pthread_cond_t wake; /* an event, or the end */
	struct api_op ops[API_OPERATIONS_MAX];
	uint64_t op_seq, event_id;
	unsigned lifecycle, execs; /* in flight */
	size_t bodies;		   /* request bodies' bytes held (server.c) */
	struct api_sub subs[API_SUBSCRIBERS_MAX];
	unsigned keepalive_ms;
	bool stopping;
	/* Fired when the server ends: in-flight calls end with it. */
	struct gantry_cancel cancel;
	const char *token;   /* the TCP listener's, or NULL */
	struct api_e2b *e2b; /* the E2B API's state (e2b.h), or NULL */
};

/* An answer to a request: status, a body (JSON, or bytes with a type),
 * a header or two, or a stream of events. */
struct api_reply {
	unsigned status;
	json_t *json;
	const void *bytes;
	size_t len;
	char *owned; /* bytes that are the reply's, freed once sent */
	const char *type;
	const char *allow;	   /* 405's Allow */
	struct api_stream *stream; /* a streamed body, or NULL */
};

struct api_request {
	const char *method, *path;
	const char *key; /* Idempotency-Key, or NULL */
	const char *body;
	size_t len;
	/* A header's value, or a query argument's (query true); NULL when
	 * there is none. */
	const char *(*lookup)(const struct api_request *req, bool query, const char *name);
	void *conn;
	int conn_fd; /* the client's connection, or -1 */
};

/* fmt's message, malloc()ed, what is not UTF-8 in it made '?': an error
 * may quote a client's bytes or a guest's, and JSON takes UTF-8 only. */
char *api_vmessage(const char *fmt, va_list ap);

/* Answers: {"error": one line} with a status. */
void api_reply_error(struct api_reply *r, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void api_reply_json(struct api_reply *r, unsigned status, json_t *j);

/* The status of a backend's error (api.h): 400 for the caller's input,
 * 404 for ENOENT, else other; and the reply with its message (ENOENT's
 * without strerror's words). Read before gantry_error_str, which folds
 * the errno into the message. */
unsigned api_error_status(gantry_error_t err, unsigned other);
void api_reply_failure(struct api_reply *r, gantry_error_t err, unsigned other);

/* The route of req (v1.c): fills r. */
void api_route(struct api_server *s, const struct api_request *req, struct api_reply *r);
/* POST /v1/sandboxes/{name}/exec (exec.c); conn_fd: the client's
 * connection (-1: none), whose hang-up ends the process. */
void api_exec(struct api_server *s, const char *name, const char *body, size_t len, int conn_fd,
	      struct api_reply *r);
/* The body as a JSON object (NULL body or "": {}), or an error reply. */
json_t *api_body_object(const char *body, size_t len, struct api_reply *r);

/* Now on the wall clock, in ms; and ms as RFC 3339 UTC with milliseconds
 * (malloc()ed): the times the API answers. */
uint64_t api_wall_ms(void);
char *api_time(uint64_t ms);

/* ops.c: the operations, the lifecycle's slots and the events. */
void api_ops_init(struct api_server *s);
void api_ops_destroy(struct api_server *s);
/* An operation as JSON (Operation). Under s->lock. */
json_t *api_op_json(const struct api_op *op);
/* Begin a lifecycle call of kind on sandbox for req: a new operation,
 * running (its id into id), or the answer already (a replay, a key reused
 * for another request, no slot free): then false with r filled. */
bool api_op_begin(struct api_server *s, const struct api_request *req, const char *kind,
		  const char *sandbox, char id[33], struct api_reply *r);
/* The answer to a request whose Idempotency-Key was seen already (before
 * anything else is checked: a replay of a delete finds no sandbox, and
 * answers as the delete did): true with r filled. */
bool api_op_replayed(struct api_server *s, const struct api_request *req, struct api_reply *r);
/* End it: succeeded (err NULL) or failed; r gets the answer (ok_status
 * with the operation, or 409/400/404 with the error). */
void api_op_end(struct api_server *s, const char *id, gantry_error_t *err, unsigned ok_status,
		struct api_reply *r);
/* GET /v1/operations/{id}. */
void api_op_get(struct api_server *s, const char *id, struct api_reply *r);
/* Whether a client's connection (fd, or -1: none) was hung up. */
bool api_client_gone(int fd);
/* A condition whose waits are measured on a clock that never steps, and
 * one wait on it of at most ms. */
void api_cond_init(pthread_cond_t *c);
void api_cond_wait_ms(pthread_cond_t *c, pthread_mutex_t *m, unsigned ms);
/* A slot for an exec; false (503 in r) when all are taken. */
bool api_exec_slot(struct api_server *s, bool take, struct api_reply *r);
/* /v1/events: a subscriber, as a stream for r (503 in r when there are
 * too many). Its reads give the next frames, waiting up to the keepalive
 * for one (then a keepalive comment); 0 at the server's end or once the
 * subscriber fell behind. */
void api_events(struct api_server *s, int conn_fd, struct api_reply *r);

#endif
