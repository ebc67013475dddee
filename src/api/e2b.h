/* The E2B API on the manager API's server: the control plane the E2B SDK
 * calls through E2B_API_URL (sandboxes made from a template, listed,
 * timed out, killed: e2b.c) and the data plane of its in-sandbox daemon
 * through E2B_SANDBOX_URL (Connect RPCs for processes and the file
 * system, and /files: envd.c, envd_fs.c), the sandbox named by the
 * E2b-Sandbox-Id header. Both are served on the TCP listener, whose
 * token is the SDK's E2B_API_KEY (and the envd access token a create
 * answers). docs/api.md, "Existing E2B agents". */
#ifndef GANTRY_API_E2B_H
#define GANTRY_API_E2B_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/api_priv.h"

#define E2B_BOXES_MAX 64
#define E2B_PROCS_MAX 64 /* at once, running whether or not a stream follows */
#define E2B_STREAMS_MAX                                                                            \
	64			  /* Start and Connect streams: with the rest, under            \
				     API_CONNECTIONS_MAX (server.c) */
#define E2B_TIMEOUT_DEFAULT 300	  /* s, as E2B's */
#define E2B_TIMEOUT_MAX	    86400 /* s */
#define E2B_FORK_MAX	    100	  /* sandboxes one fork makes */
#define E2B_FILE_MAX	    (64u << 20)
#define E2B_ENVD_VERSION    "0.5.7"
#define E2B_KEEPALIVE_MS    30000
#define E2B_BODY_MAX	    (E2B_FILE_MAX + (1u << 20)) /* a /files upload, multipart */

/* A sandbox made through the E2B API: what E2B keeps of it that Gantry
 * does not. */
struct e2b_box {
	bool used;
	char id[65]; /* the sandbox's name */
	char *template;
	json_t *metadata;
	char *started;	 /* RFC 3339 */
	uint64_t end_ms; /* when its timeout ends it (CLOCK_REALTIME, ms) */
	bool paused;	 /* saved by a pause: no timeout, connect resumes it */
	int cpus, mem_mib;
};

/* A process started through envd's Start, while it runs and until the
 * streams following it have said how it ended. */
struct e2b_proc;

struct api_e2b {
	pthread_mutex_t lock;
	struct e2b_box boxes[E2B_BOXES_MAX];
	struct e2b_proc *procs[E2B_PROCS_MAX];
	pthread_cond_t gone; /* a process left procs (CLOCK_MONOTONIC) */
	unsigned streams;    /* following processes, or watching */
	uint32_t next_pid;
	pthread_t reaper;
	bool reaper_started;
};

/* A lifecycle call of kind on name as an operation of the manager API
 * (its slot, its events); 0 or -1 with err. */
int e2b_operation(struct api_server *s, const char *kind, const char *name, json_t *body,
		  gantry_error_t *err);

/* Undo what the server itself made and cannot keep (kind "delete": a
 * sandbox its table has no room for; "snapshot-remove": a fork's
 * snapshot). No client's call: it takes no lifecycle slot, which a busy
 * server would refuse, leaving the sandbox or snapshot behind. A failure
 * is logged. */
void e2b_undo(struct api_server *s, const char *kind, const char *name);
/* Whether the table of E2B sandboxes is full now. */
bool e2b_boxes_full(struct api_server *s);

/* A sandbox made (id) kept as E2B's, its timeout secs from now: the
 * create's answer (Sandbox with its envd token), or NULL when there is no
 * room (the sandbox is deleted then). */
json_t *e2b_box_add(struct api_server *s, const char *id, const char *template,
		    json_t *metadata, json_int_t secs);
/* A new name: prefix, a dash and 12 random hex digits (a sandbox's
 * e2b-, a snapshot's snap- or fork-). */
void e2b_random_id(const char *prefix, char id[65]);
/* The E2B sandbox id, under e->lock; NULL: none. */
struct e2b_box *e2b_box_find(struct api_e2b *e, const char *id);

/* e2b_snap.c: snapshots. The backend's call for an operation of kind
 * "snapshot" (of sandbox name, as body's "snapshot"), "create-from" (name
 * from body's "snapshot") or "snapshot-remove" (name the snapshot's). */
int e2b_snapshot_op(struct api_server *s, const char *kind, const char *name, json_t *body,
		    gantry_error_t *err);
/* Whether name is a snapshot's (a template that makes a clone of it). */
bool e2b_snapshot_known(struct api_server *s, const char *name);
/* POST /sandboxes/ID/snapshots. */
void e2b_snapshot_create(struct api_server *s, const struct api_request *req, const char *id,
			 struct api_reply *r);
/* POST /sandboxes/ID/fork: a live snapshot and count sandboxes made
 * from it, each answered on its own ({sandbox} or {error}). */
void e2b_fork(struct api_server *s, const struct api_request *req, const char *id,
	      struct api_reply *r);
/* GET /snapshots and DELETE /templates/SNAP. */
bool e2b_snapshot_route(struct api_server *s, const struct api_request *req, struct api_reply *r);

void e2b_init(struct api_server *s);
/* Ends the reaper and waits for it. */
void e2b_stop(struct api_server *s);

/* Whether req is an E2B route (then r is its answer). */
bool e2b_route(struct api_server *s, const struct api_request *req, struct api_reply *r);
/* The body limit of a request to path (a /files upload is larger). */
size_t e2b_body_max(const char *method, const char *path);

/* E2B's error body: {"code": status, "message": ...}. */
void e2b_error(struct api_reply *r, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The sandbox req's E2b-Sandbox-Id names, running and made through the
 * E2B API; NULL (r filled: a Connect error when rpc) else. */
const char *e2b_box_of(struct api_server *s, const struct api_request *req, bool rpc,
		       struct api_reply *r);

/* envd.c: /process.Process/... */
void envd_process(struct api_server *s, const struct api_request *req, const char *box,
		  const char *method, struct api_reply *r);
void envd_init(struct api_e2b *e);
/* Waits for the processes, which the server's cancel ends. */
void envd_procs_free(struct api_server *s);
/* envd_fs.c: /files and /filesystem.Filesystem/... */
void envd_files(struct api_server *s, const struct api_request *req, const char *box,
		struct api_reply *r);
void envd_filesystem(struct api_server *s, const struct api_request *req, const char *box,
		     const char *method, struct api_reply *r);
/* envd_watch.c: /filesystem.Filesystem/WatchDir. */
void envd_watch(struct api_server *s, const struct api_request *req, const char *box,
		struct api_reply *r);
/* The Connect status and code of the file helper's exit status
 * (proto/files.h). */
void envd_helper_status(int status, unsigned *http, const char **code);
/* A Connect envelope of j (consumed): flags, then the JSON's length
 * (4 bytes, big-endian) and bytes; malloc()ed, its length in *len. */
char *envd_frame(uint8_t flags, json_t *j, size_t *len);
/* The message of a Connect request: a streaming one's single envelope,
 * or a unary one's JSON. NULL with r filled. */
json_t *envd_message(const struct api_request *req, bool stream, struct api_reply *r);
/* A streaming call that cannot start: a stream of the end-of-stream
 * trailer alone, its error in it. */
void envd_stream_error(struct api_reply *r, const char *code, const char *msg);
/* A Connect error answer: status and {"code": code, "message": ...}. */
void envd_error(struct api_reply *r, unsigned status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* A command in box, to its end (api/job.h): stdout and stderr (each up
 * to max bytes, more makes it fail with EFBIG), stdin from in; one of the
 * exec slots, killed past ENVD_RUN_MS (ETIMEDOUT) or when conn_fd (the
 * client) hangs up (ECANCELED). 0 with ran->status its exit status, or -1
 * (err). */
#define ENVD_RUN_MS (10 * 60 * 1000)
struct envd_ran {
	char *out, *err;
	size_t out_len, err_len;
	int status;
};
int envd_run(struct api_server *s, const char *box, char *const *argv, const void *in,
	     size_t in_len, size_t max, int conn_fd, struct envd_ran *ran, gantry_error_t *err);
void envd_ran_free(struct envd_ran *ran);

#endif
