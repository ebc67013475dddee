/* What starting and talking to a confined worker takes on the caller's
 * side, for the VMM worker (vmmworker.h) and the share worker
 * (shareworker.h) alike: the gantry binary executed afresh in a hidden
 * role, in the namespaces confine_fork makes, with an empty environment
 * but for the names given, fds 0 and 1 /dev/null, 2 our stderr and 3 its
 * channel (a SOCK_SEQPACKET socket, one JSON message each way, with
 * descriptors); everything else it is given comes in its configuration
 * message. */
#ifndef GANTRY_SANDBOX_WORKER_H
#define GANTRY_SANDBOX_WORKER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/unixsock.h"
#include "confine/confine.h"

#define WORKER_CHAN    3
#define WORKER_MSG_MAX 65536

/* What a worker is given, in the order its configuration lists it. */
struct worker_handover {
	int fds[UNIX_FDS_MAX];
	bool ours[UNIX_FDS_MAX]; /* opened here for it: closed once sent */
	size_t n;
};

void worker_give(struct worker_handover *h, int fd, bool ours);
void worker_handover_close(struct worker_handover *h);

/* Fork and exec `gantry ROLE --isolation MODE --ns .. --userns-errno ..`
 * (what names it in messages); its pid and our end of the channel. */
int worker_spawn(const char *role, const char *what, enum confine_mode mode,
		 unsigned long extra_ns, const char *const *env, pid_t *pid, int *chan,
		 gantry_error_t *err);
/* Reap it within a few seconds, SIGKILL if it lingers; *pid then -1. */
void worker_reap(pid_t *pid, int *status);
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
/* The worker's side: answer (returned) carries req's id. */
json_t *worker_answer_to(const json_t *req, json_t *answer);
/* A line from the worker (key's, else dflt), fit for our messages. */
char *worker_line(json_t *j, const char *key, const char *dflt);
/* Its first message within ms: {"op":"ready"} (its "isolation" report
 * into *isolation), or why not: its error, silence, its exit (reaped). */
int worker_wait_ready(pid_t *pid, int chan, int ms, const char *what, json_t **isolation,
		      gantry_error_t *err);

#endif
