/* The supervisor's state, shared by its files: supervisor.c (start-up, the
 * poll loop, the guest's control connection, the end), sessions.c (ctl.sock
 * clients and the guest's stdio dials). Nothing here blocks: every socket
 * is non-blocking, what a peer does not take at once waits in a bounded
 * outbound queue, and a peer that stops reading or says nothing in time is
 * cut off. */
#ifndef GANTRY_SANDBOX_SUPERVISOR_PRIV_H
#define GANTRY_SANDBOX_SUPERVISOR_PRIV_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/outq.h"
#include "proto/agent.h"
#include "sandbox/machine.h"
#include "sandbox/state.h"

#define SUP_MAX_CLIENTS	    256
#define SUP_MAX_STREAMS	    64		  /* guest stdio dials waiting for their STREAM frame */
#define SUP_STREAM_READ_MS  5000	  /* for that frame */
#define SUP_REQUEST_MS	    10000	  /* for a ctl client's request line */
#define SUP_CLIENT_QUEUE    (256 * 1024)  /* owed to one client */
#define SUP_GUEST_QUEUE	    (1024 * 1024) /* owed to the guest's control connection */
#define SUP_GUEST_OWN	    (64 * 1024)	  /* beyond it, for our own SIGHUPs and SHUTDOWN */
#define SUP_GUEST_HIGH	    (64 * 1024)	  /* above it, sessions' frames wait in their sockets */
#define SUP_GUEST_STALL_MS  5000	  /* the guest took nothing with bytes waiting: cut */
#define SUP_CLIENT_STALL_MS OUTQ_STALL_MS
#define SUP_LOG_EVERY_MS    10000 /* what a guest can repeat is logged this often at most */

struct client {
	int fd;
	bool session;	  /* past an "exec" request: agent frames now */
	bool stop_waiter; /* answer once the VM has ended */
	char *line;	  /* the request line so far */
	size_t len;
	struct proto_decoder *dec;
	uint32_t client_id, guest_id;
	bool streamed;	   /* its stdio stream went to it */
	bool backlog;	   /* whole frames wait in dec for the guest's queue to drain */
	bool done;	   /* EXIT or ERROR went to it */
	uint64_t deadline; /* its request line is due by then; 0: none due */
	struct outq q;
};

/* A guest stdio dial, until its STREAM frame says whose it is. */
struct stream_wait {
	int fd; /* -1: a free slot */
	uint8_t frame[PROTO_HDR_SIZE + 4];
	size_t got;
	uint64_t deadline;
};

struct sup {
	const char *name;
	char *dir;
	struct sandbox sb;
	int ready_fd;
	struct machine m;
	int control; /* the guest agent's control connection; -1 once gone */
	struct outq control_q;
	struct proto_decoder *dec;
	const char *guest_gone; /* why control is -1 */
	const char *killed;	/* why we ended the VM ourselves */
	const char *cut_why;	/* control broke: cut it after this round */
	int stdio_listen, ctl_listen, sigfd;
	struct client *clients[SUP_MAX_CLIENTS];
	struct stream_wait streams[SUP_MAX_STREAMS];
	uint32_t next_id;
	uint64_t error_logged; /* the guest's last id-less ERROR in the log */
	bool stopping;
	uint64_t stop_deadline;
};

/* supervisor.c */
/* A supervisor with nothing open yet (sockets -1), for name. */
void sup_init(struct sup *s, const char *name);
/* One round of the loop: wait for what is ready, up to the next deadline
 * and at most max_ms (-1: no limit), and serve it. Does not return once
 * the VM has ended (the supervisor exits). */
void sup_serve_once(struct sup *s, int max_ms);
/* Queue m for the guest; false when it could not be (the guest is gone, or
 * more is owed to it than SUP_GUEST_QUEUE). own: a frame of the
 * supervisor's (SIGHUP for a client gone, SHUTDOWN), which has room past
 * that. */
bool sup_send_guest(struct sup *s, const struct proto_msg *m, bool own);
void sup_begin_stop(struct sup *s, const char *why);
/* More than SUP_GUEST_HIGH waits for the guest: sessions' frames wait too. */
bool sup_guest_busy(const struct sup *s);

/* sessions.c */
/* Whether a message the guest can make us repeat may be logged now (*last:
 * when it last was). */
bool sup_log_due(uint64_t *last);
void clients_accept(struct sup *s);
void client_event(struct sup *s, struct client *c, short revents);
/* Serve frames c's decoder holds back, once the guest's queue has room. */
void client_backlog(struct sup *s, struct client *c);
/* Drop c, hanging up on its session like a terminal on its process. */
void client_hangup(struct sup *s, struct client *c);
void client_drop(struct sup *s, struct client *c);
struct client *client_by_guest_id(struct sup *s, uint32_t id);
/* Queue a frame for c; a client that cannot take it is hung up on. */
void client_send(struct sup *s, struct client *c, const struct proto_msg *m, int fd);
/* {"ok":true} or {"ok":false,"error":...} */
int client_reply(struct client *c, bool ok, const char *error);
/* The guest agent is gone: every session still waiting gets ERROR. */
void clients_guest_gone(struct sup *s, const char *why);
/* Deadlines and stalls: clients and stream dials past theirs are dropped;
 * *wake gets the next one. */
void clients_expire(struct sup *s, uint64_t now, uint64_t *wake);
void streams_accept(struct sup *s);
void stream_event(struct sup *s, struct stream_wait *w);

#endif
