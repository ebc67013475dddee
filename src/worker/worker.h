/* The one way a worker is started and spoken to, for the network, VMM and
 * share workers and every later one: the gantry binary executed afresh in
 * a hidden role (executing, not only forking, keeps the caller's threads
 * and locks out of it), in a session of its own and the namespaces
 * confine_fork makes, with an empty environment but for the names given,
 * fds 0 and 1 /dev/null, 2 its log (or our stderr), 3 its channel and 4 on
 * the descriptors it is given at birth. The channel is a SOCK_SEQPACKET
 * socket carrying one JSON object per message each way, with descriptors:
 * the worker's first message says it is ready ({"op":"ready","ok":true,
 * "isolation":REPORT}) or why not ({"op":"error","ok":false,"error":E});
 * after that, requests carry an id their answers echo (worker_request).
 * What else a worker is given comes in its arguments or a configuration
 * message. Each worker's main lives beside the subsystem it runs. */
#ifndef GANTRY_WORKER_WORKER_H
#define GANTRY_WORKER_WORKER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/unixsock.h"
#include "confine/confine.h"

#define WORKER_CHAN     3
#define WORKER_FIRST_FD 4 /* the descriptors given at birth, in order */
#define WORKER_MSG_MAX  (512 * 1024)

/* What a worker is given, in the order its configuration lists it. */
struct worker_handover {
	int fds[UNIX_FDS_MAX];
	bool ours[UNIX_FDS_MAX]; /* opened here for it: closed once sent */
	size_t n;
};

void worker_give(struct worker_handover *h, int fd, bool ours);
void worker_handover_close(struct worker_handover *h);

/* How a worker is started. */
struct worker_spawn {
	const char *role;	 /* the hidden command, argv[1] */
	const char *what;	 /* its name in messages ("network worker") */
	enum confine_mode mode;
	unsigned long extra_ns;	 /* namespaces beyond confine_fork's own */
	const char *const *env;	 /* the names of the variables it keeps; NULL: all */
	const char *const *args; /* its own arguments, after the role; NULL: none */
	int log_fd;		 /* its stderr (its log); -1: ours */
	const int *fds;		 /* given at birth as WORKER_FIRST_FD on; not closed */
	size_t nr_fds;
};

/* Fork and exec `gantry ROLE ARGS... --isolation MODE --ns .. --userns-errno
 * ..`; its pid and our end of the channel. */
int worker_spawn(const struct worker_spawn *ws, pid_t *pid, int *chan, gantry_error_t *err);
/* Reap it within a few seconds, SIGKILL if it lingers; *pid then -1. */
void worker_reap(pid_t *pid, int *status);
/* Stop it now: SIGTERM, then SIGKILL if it lives on past WORKER_STOP_MS;
 * reaped, *pid then -1. */
#define WORKER_STOP_MS 2000
void worker_stop(pid_t *pid, int *status);
/* One message within ms (-1: no limit): its JSON object, or NULL (EOF,
 * silence, a bad one; *eof says which). Descriptors that came with it
 * are closed. */
json_t *worker_recv_json(int fd, int ms, bool *eof);
/* The same keeping its descriptors (at most max_fds, in fds): a worker's
 * side reads its configuration and requests so. */
json_t *worker_recv_json_fds(int fd, int ms, int *fds, size_t max_fds, size_t *nr_fds, bool *eof);
/* One message (j taken) with fds. 0, or -1 with errno. */
int worker_send_json(int fd, json_t *j, const int *fds, size_t nr_fds);
/* A request (req taken, with fds) and its answer within ms (-1: no
 * limit), matched by an id the request carries ("id", from *next_id) and
 * the answer echoes: an answer that comes after its request gave up is
 * dropped when it arrives, never read as a later request's. The answer,
 * or NULL (*eof: the worker hung up; else silence or a send that failed). */
json_t *worker_request(int chan, uint64_t *next_id, json_t *req, const int *fds, size_t nr_fds,
		       int ms, bool *eof);
/* The same keeping the answer's descriptors (at most max_got, into got,
 * *nr_got of them): a worker asking its caller for one. Those of an
 * answer dropped are closed. */
json_t *worker_request_fds(int chan, uint64_t *next_id, json_t *req, const int *fds, size_t nr_fds,
			   int ms, int *got, size_t max_got, size_t *nr_got, bool *eof);
/* The worker's side: answer (returned) carries req's id. */
json_t *worker_answer_to(const json_t *req, json_t *answer);
/* The worker's side: its first message, ready with its isolation report
 * (error NULL), or the error that ends it. */
json_t *worker_ready_msg(const char *error, json_t *isolation);
/* A line from the worker (key's, else dflt), fit for our messages. */
char *worker_line(json_t *j, const char *key, const char *dflt);
/* Its first message within ms: ready (its "isolation" report into
 * *isolation), or why not: its error, silence, its exit (reaped). */
int worker_wait_ready(pid_t *pid, int chan, int ms, const char *what, json_t **isolation,
		      gantry_error_t *err);

#endif
