/* Inside the agent library only: struct agent, the link to one guest (or to
 * one sandbox supervisor) that link.c opens and session.c runs a session
 * over, and the control connection's outbound queue.
 *
 * The control connection is non-blocking. A frame the host sends is encoded
 * into a queue and as much of it as the socket takes goes at once; the rest
 * waits for POLLOUT, flushed by whoever polls the link (agent_run's relay,
 * agent_shutdown). A send from another thread (agent_signal) that leaves
 * bytes waiting wakes the relay through a pipe so that it polls for POLLOUT.
 * Past AGENT_SEND_QUEUE_MAX bytes waiting, or AGENT_SEND_STALL_MS with
 * bytes waiting and none taken, the link is cut for good: every later send
 * and wait fails saying the peer stopped reading. */
#ifndef GANTRY_AGENT_LINK_H
#define GANTRY_AGENT_LINK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/session.h"
#include "common/error.h"
#include "common/outq.h"
#include "proto/agent.h"

#define AGENT_PASSED 8 /* stdio streams handed over but not yet claimed */

struct agent {
	char *ctl_path, *stdio_path; /* what errors name */
	bool unix_paths;	     /* sockets to remove at the end */
	bool doors;		     /* the listeners are doors (common/door.h) */
	int ctl_listen, stdio_listen;
	int control;
	const char *peer; /* "the guest" or "the sandbox": who errors blame */
	struct proto_decoder *dec;
	int cancel[2];
	int cancel_ext; /* the caller's (agent_watch_cancel), or -1 */
	int wake[2]; /* bytes were queued from another thread: poll for POLLOUT */
	uint32_t next_id;
	_Atomic uint32_t running;  /* the session agent_run serves, or 0 */
	pthread_mutex_t send_lock; /* out, cut and control: agent_signal may come from any thread */
	struct outq out; /* control bytes the peer has not taken yet */
	bool cut; /* for good: cut_why says why */
	char cut_why[160];
	char *kernel;
	/* Attached to a sandbox supervisor: streams arrive on the control
	 * connection as passed fds, in the order of their STREAM frames. */
	bool remote;
	int passed[AGENT_PASSED];
	size_t npassed;
};

/* Deadlines in now_ms() time; UINT64_MAX is never. */
uint64_t link_deadline(int timeout_ms);
int link_left_ms(uint64_t deadline);
/* The next dial waiting on listen, one of a's listeners (non-blocking,
 * close-on-exec), or -1 with errno. */
int link_accept(const struct agent *a, int listen);
bool link_cancelled(struct agent *a);

/* Queue one frame for the peer and send what the socket takes now. An
 * EXEC's id becomes a->running as it is queued. */
int link_send(struct agent *a, const struct proto_msg *m, gantry_error_t *err);
/* Send what waits: 1 when nothing is left, 0 when some still waits, -1
 * when the peer is gone or the link was cut (its queue is then dropped). */
int link_flush(struct agent *a, gantry_error_t *err);
bool link_pending(struct agent *a);
/* Cut the link if its bytes have waited with no progress for too long:
 * 0, or -1 once cut. */
int link_check(struct agent *a, gantry_error_t *err);
/* Milliseconds until link_check would cut (-1: nothing waits). */
int link_timeout_ms(struct agent *a);
/* Empty the wake pipe. */
void link_woken(struct agent *a);
/* Read what the control connection has into a->dec, keeping the fds a
 * supervisor passes along: >0 bytes, 0 EOF, -1 errno (EAGAIN: nothing). */
ssize_t link_fill(struct agent *a);
void link_close(struct agent *a);

#endif
