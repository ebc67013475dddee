/* The supervisor's state, shared by its files: supervisor.c (start-up, the
 * poll loop, the guest's control connection, the end), sessions.c (ctl.sock
 * clients and the guest's stdio dials), netrelay.c (the network worker's
 * control socket and the ctl.sock ops relayed to it). Nothing here blocks: every socket
 * is non-blocking, what a peer does not take at once waits in a bounded
 * outbound queue, and a peer that stops reading or says nothing in time is
 * cut off. */
#ifndef GANTRY_SUPERVISOR_SUPERVISOR_PRIV_H
#define GANTRY_SUPERVISOR_SUPERVISOR_PRIV_H

#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "common/door.h"
#include "common/outq.h"
#include "oauth/custody.h"
#include "oauth/service.h"
#include "sandbox/network.h"
#include "proto/agent.h"
#include "sandbox/machine.h"
#include "sandbox/state.h"
#include "secret/broker.h"
#include "secret/store.h"
#include "share/spec.h"
#include "snapshot/files.h"

#define SUP_MAX_CLIENTS	    256
#define SUP_MAX_STREAMS	    64		  /* guest stdio dials waiting for their STREAM frame */
#define SUP_STREAM_READ_MS  5000	  /* for that frame */
#define SUP_REQUEST_MS	    10000	  /* for a ctl client's request line */
#define SUP_SAVE_MS	    120000	  /* the VM's RAM written out, and synced */
#define SUP_FREEZE_MS	    10000	  /* the vCPUs parked or let go */
#define SUP_CLIENT_QUEUE    (256 * 1024)  /* owed to one client */
#define SUP_GUEST_QUEUE	    (1024 * 1024) /* owed to the guest's control connection */
#define SUP_GUEST_OWN	    (64 * 1024)	  /* beyond it, for our own SIGHUPs and SHUTDOWN */
#define SUP_GUEST_HIGH	    (64 * 1024)	  /* above it, sessions' frames wait in their sockets */
#define SUP_GUEST_STALL_MS  5000	  /* the guest took nothing with bytes waiting: cut */
#define SUP_CLIENT_STALL_MS OUTQ_STALL_MS
#define SUP_LOG_EVERY_MS    10000 /* what a guest can repeat is logged this often at most */
#define SUP_NET_MS	    5000  /* for the network worker's answer to a request */
#define SUP_NET_QUEUE	    32	  /* requests waiting for the worker's one outstanding */
#define SUP_TRAFFIC_MS	    2000  /* a traffic snapshot this often */
#define SUP_NET_REAP_MS	    2000  /* a worker that hung up and lives on: killed */

struct client {
	int fd;
	bool session;	  /* past an "exec" request: agent frames now */
	bool secrets;	  /* the session's process has secrets of its own */
	bool stop_waiter; /* answer once the VM has ended */
	char *line;	  /* the request line so far */
	size_t len;
	struct proto_decoder *dec;
	uint32_t client_id, guest_id;
	bool streamed;	   /* its stdio stream went to it */
	bool backlog;	   /* whole frames wait in dec for the guest's queue to drain */
	bool done;	   /* EXIT or ERROR went to it */
	uint64_t deadline; /* its request line is due by then; 0: none due */
	bool waiting;	   /* its request waits: for the network worker, or a share change */
	char *value;	   /* a secret.set's value coming in, in the secret arena */
	size_t value_len, value_got;
	char *value_spec;
	size_t discard; /* a refused secret.set's value still to come, read and zeroed */
	struct outq q;
};

enum net_op {
	NET_OP_NONE,
	NET_OP_PUBLISH,
	NET_OP_UNPUBLISH,
	NET_OP_TRAFFIC,
	NET_OP_POLICY,
	NET_OP_POLICY_SHOW
};

/* A request for the network worker. */
struct net_req {
	enum net_op op;
	struct client *c; /* who waits for the answer; NULL: the supervisor's own, or gone */
	char spec[PORT_SPEC_MAX];
	bool ephemeral;
	json_t *policy; /* NET_OP_POLICY's (owned; NULL: the default) */
	bool allow_local;
	uint64_t deadline;
	/* A publish's host socket, bound here (the worker holds no identity
	 * to bind a port below 1024 with), owned until sent. */
	bool has_fd;
	int fd;
};

/* The network worker, as the loop sees it: one request outstanding at a
 * time (its answers come in order), the others waiting behind it. */
struct sup_net {
	int ctl;	     /* its control socket (the machine's); -1: none, or gone */
	struct net_req sent; /* op NONE: nothing outstanding */
	struct net_req queue[SUP_NET_QUEUE];
	size_t queued;
	char **live; /* the ports forwarded now, canonical */
	size_t nr_live;
	bool ephemeral[PORTS_MAX];
	uint64_t next_traffic;
	bool reap; /* it hung up: to be reaped, and the link's end logged */
	uint64_t reap_deadline;
	char *msg; /* NET_CTL_MSG_MAX + 1 bytes for one answer */
};

#define SUP_SHARE_OPS	   8	 /* share changes under way at once */
#define SUP_SHARE_POLL_MS  100	 /* how often a remove looks at open files */
#define SUP_SHARE_GUEST_MS 20000 /* for the guest's DONE */

enum share_stage {
	SHARE_FREE,
	SHARE_DRAIN, /* a remove waits for the guest's open files to close */
	SHARE_GUEST, /* waits for the guest's DONE */
};

/* One `share add` or `share rm` under way. */
struct share_op {
	enum share_stage stage;
	struct client *c; /* who waits for the answer; NULL: gone */
	bool add, ephemeral;
	char tag[SHARE_TAG_MAX + 1];
	char *spec;	   /* add: the share, canonical */
	char *path;	   /* rm: the container path it leaves */
	bool exported;	   /* rm: its export is still the server's */
	uint32_t last_id;  /* the guest request whose DONE ends it */
	uint64_t deadline; /* SHARE_GUEST: for that DONE */
	uint32_t error;	   /* that DONE's errno */
	char *why;	   /* and message */
};

/* The shares as the guest has them now, and the changes under way. */
struct sup_shares {
	char **live; /* canonical, mounted in the container now */
	size_t nr_live;
	struct share_op ops[SUP_SHARE_OPS];
	uint32_t next_id;
};

/* A guest stdio dial, until its STREAM frame says whose it is. */
struct stream_wait {
	int fd; /* -1: a free slot */
	uint8_t frame[PROTO_HDR_SIZE + 4];
	size_t got;
	uint64_t deadline;
};

#define SUP_SECRETS_WAIT_MS 10000 /* for the caller to hand its secrets over */
#define SUP_AUDIT_EVENTS    256
#define SUP_BROKER_CONNS    8
#define SUP_BROKER_IN	    BROKER_REQUEST_MAX
#define SUP_BROKER_MS	    BROKER_WAIT_MS

/* A credential helper's connection to the broker (broker.c). */
struct broker_conn {
	int fd; /* -1: closed (the slot is free unless resolving) */
	char in[SUP_BROKER_IN + 1];
	size_t got;
	uint64_t deadline;
	struct broker_out out; /* the answer; text NULL: still reading */
	size_t out_sent;
	/* The value is looked up on a thread of its own (a file read, a
	 * command run), which sets resolved and wakes the loop. */
	bool resolving;
	atomic_bool resolved;
	pthread_t thread;
	struct secret_store *store;
	int wake;
	struct broker_req req;
	struct secret_value v;
	int r;
	char why[256];
};

struct sup_broker {
	int listen;
	int wake; /* an eventfd the lookups' threads write when done */
	struct broker_conn c[SUP_BROKER_CONNS];
};

/* One security event (audit.c): names, never values. */
struct audit_event {
	uint64_t seq; /* the order of events across both rings */
	time_t time;
	char kind[24];
	char decision[16];
	char secret[256]; /* a name, or names joined by commas */
	char host[256];
	char reason[200];
	uint32_t count; /* repeated back to back this often */
};

struct audit_ring {
	struct audit_event ev[SUP_AUDIT_EVENTS];
	size_t head, n;
};

/* What the guest can cause (credential requests, TLS refusals) has a ring
 * of its own: however much of it there is, it cannot push out the rest. */
struct sup_audit {
	struct audit_ring host, guest;
	uint64_t seq;
	bool dirty; /* audit.json is behind */
	uint64_t saved_at;
};

struct sup {
	const char *name;
	char *dir;
	struct sandbox sb;
	int ready_fd;
	struct machine m;
	struct doors doors; /* the host ports its guest dials (common/door.h) */
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
	/* `stop -snapshot`: the save's new files in SANDBOX_PAUSE, handed to
	 * the VMM; pausing once a save-and-stop was asked; restored when this
	 * boot went on from the last save instead. */
	struct snap_save pause;
	bool pausing, restored;
	bool frozen; /* its vCPUs parked (ctl "freeze"); SANDBOX_FROZEN says so */
	struct sup_net net;
	struct sup_shares shares;
	struct secret_store secrets; /* its processes' (secret/store.h) */
	uint64_t egress_next;	     /* when the egress worker's values are read again */
	struct sup_audit audit;
	struct sup_broker broker;
	/* OAuth custody (sb.oauth_custody): served on threads of its own */
	struct oauth_custody custody;
	struct oauth_service custody_svc;
};

/* supervisor.c */
/* A supervisor with nothing open yet (sockets -1), for name. */
void sup_init(struct sup *s, const char *name);
/* One round of the loop: wait for what is ready, up to the next deadline
 * and at most max_ms (-1: no limit), and serve it. Does not return once
 * the VM has ended (the supervisor exits). */
void sup_serve_once(struct sup *s, int max_ms);
/* Queue m for the guest; false when it could not be (the guest is gone,
 * more is owed to it than SUP_GUEST_QUEUE, or m is larger than a frame:
 * EMSGSIZE). own: a frame of the
 * supervisor's (SIGHUP for a client gone, SHUTDOWN), which has room past
 * that. */
bool sup_send_guest(struct sup *s, const struct proto_msg *m, bool own);
void sup_begin_stop(struct sup *s, const char *why);
/* Why the sandbox cannot be saved now, or NULL: `stop -snapshot`, or
 * live (a snapshot it runs on from, its exec sessions with it); one that
 * holds secrets only with_secrets. */
const char *sup_pause_refused(struct sup *s, bool live, bool with_secrets);
/* Stop the VM with a save (VMM_STOP_SAVE) instead of asking the guest
 * to power off; the end (supervisor.c's finish) puts the save in place. */
void sup_begin_pause(struct sup *s);
/* More than SUP_GUEST_HIGH waits for the guest: sessions' frames wait too. */
bool sup_guest_busy(const struct sup *s);

/* snapshot.c */
/* ctl "snapshot" {"dir":D}: the running VM saved live into the empty
 * directory D (state, memory, origin) with a copy of its writable layer
 * as it was, the VM paused meanwhile; answered once it runs on. */
void ctl_snapshot(struct sup *s, struct client *c, json_t *j, size_t end);
/* ctl "freeze" {"frozen":B}: the VM's vCPUs parked (a pause without a
 * save) or let go, answered once that holds. */
void ctl_freeze(struct sup *s, struct client *c, json_t *j, size_t end);
/* A stop or a save of a paused VM: its vCPUs run first, to end it. */
void sup_thaw_for_end(struct sup *s);

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
/* The answer j (taken) to c's waiting request; c may take its next. */
void client_reply_json(struct sup *s, struct client *c, json_t *j);
/* The same, {"ok":true} or (error) {"ok":false,"error":error}; c NULL: nobody. */
void client_answer(struct sup *s, struct client *c, const char *error);
/* The guest agent is gone: every session still waiting gets ERROR. */
void clients_guest_gone(struct sup *s, const char *why);
/* Deadlines and stalls: clients and stream dials past theirs are dropped;
 * *wake gets the next one. */
void clients_expire(struct sup *s, uint64_t now, uint64_t *wake);
void streams_accept(struct sup *s);
void stream_event(struct sup *s, struct stream_wait *w);
/* c's request line (end bytes and its newline) is answered: what was
 * sent behind it waits its turn. */
void client_line_done(struct client *c, size_t end);
/* The ctl requests of the network (ctl.h): ports answered here, the
 * others once the network worker has. */
void ctl_ports(struct sup *s, struct client *c, json_t *req, size_t end);
void ctl_traffic(struct sup *s, struct client *c, json_t *req, size_t end);
void ctl_netpolicy_get(struct sup *s, struct client *c, json_t *req, size_t end);
void ctl_netpolicy_set(struct sup *s, struct client *c, json_t *req, size_t end);
void ctl_publish(struct sup *s, struct client *c, json_t *req, size_t end);
void ctl_unpublish(struct sup *s, struct client *c, json_t *req, size_t end);

/* audit.c */
/* Record an event: kind and decision from audit.c's list (docs/audit.md),
 * the secret's name and the host where it has them, and why (printf). */
void sup_audit(struct sup *s, const char *kind, const char *decision, const char *secret,
	       const char *host, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The same, for an event the guest caused (its own ring). */
void sup_audit_guest(struct sup *s, const char *kind, const char *decision, const char *secret,
		     const char *host, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The events of both rings, oldest first. */
json_t *sup_audit_json(const struct sup *s);
/* audit.json as the ring is now (when it changed). */
void sup_audit_save(struct sup *s);
/* Save what changed once a second; *wake gets when. */
void sup_audit_tick(struct sup *s, uint64_t now, uint64_t *wake);

/* egress.c: the egress worker (none: each does nothing) is given the
 * injected secrets now, and the bound hosts the policy lets through now;
 * whether its hosts cover sp's (else err says so); its channel (-1:
 * none), and what came on it. */
void sup_egress_bindings(struct sup *s);
void sup_egress_allowed(struct sup *s);
bool sup_egress_covers(struct sup *s, const struct secret_spec *sp, gantry_error_t *err);
int sup_egress_fd(const struct sup *s);
void sup_egress_event(struct sup *s);
/* Every SUP_EGRESS_REFRESH_MS the injected secrets are resolved again
 * (each source by its own ttl) and given to the worker; *wake gets when. */
#define SUP_EGRESS_REFRESH_MS 30000
void sup_egress_tick(struct sup *s, uint64_t now, uint64_t *wake);

/* broker.c */
/* Open PROTO_BROKER_PORT's door (a failure is logged: bound secrets are
 * then withheld, as the helper finds no broker). */
void sup_broker_init(struct sup *s);
void sup_broker_accept(struct sup *s);
/* Its wake eventfd is readable: the lookups that are done are answered. */
void sup_broker_woken(struct sup *s);
/* The connections to poll into fds (SUP_BROKER_CONNS at most), owner[i]
 * each one's; those past their deadline closed; *wake gets the next. */
size_t sup_broker_fds(struct sup *s, struct pollfd *fds, struct broker_conn **owner, uint64_t now,
		      uint64_t *wake);
void sup_broker_event(struct sup *s, struct broker_conn *b, int fd, short revents);

/* secretlive.c */
/* secret.set, secret.rm and audit.tail: answered at once, or once a
 * secret.set's value (what follows its line) has come. */
void ctl_secret_set(struct sup *s, struct client *c, json_t *req, size_t end);
void ctl_secret_rm(struct sup *s, struct client *c, json_t *req, size_t end);
void ctl_audit_tail(struct sup *s, struct client *c, json_t *req, size_t end);
/* More of a secret.set's value is readable on c. */
void client_secret_value(struct sup *s, struct client *c);
/* More of a refused secret.set's value is readable on c: read, zeroed. */
void client_secret_discard(struct sup *s, struct client *c);
/* A value c was sending, zeroed and freed. */
void client_secret_free(struct client *c);

/* sharelive.c */
/* The live list starts as the shares the VM booted with. */
void sup_shares_init(struct sup *s);
/* share.ls, answered at once; share.add and share.rm, once the share
 * worker and the guest have. */
void ctl_share_ls(struct sup *s, struct client *c, json_t *req, size_t end);
void ctl_share_add(struct sup *s, struct client *c, json_t *req, size_t end);
void ctl_share_rm(struct sup *s, struct client *c, json_t *req, size_t end);
/* The guest's answer to a MOUNT or UNMOUNT. */
void sup_shares_done(struct sup *s, const struct proto_msg *m);
/* Removes waiting for open files look again; *wake gets the next time. */
void sup_shares_tick(struct sup *s, uint64_t now, uint64_t *wake);
/* The share worker's channel, watched for its hang-up alone (-1: none). */
int sup_share_worker_fd(const struct sup *s);
/* The channels of the live shares' workers, for their hang-ups, into fds
 * (FS_MAX_EXPORTS at most); the one of fd hung up. */
size_t sup_live_share_fds(const struct sup *s, struct pollfd *fds);
void sup_live_share_gone(struct sup *s, int fd);
/* It hung up: it is reaped, and isolation.json and the log say so. */
void sup_share_worker_gone(struct sup *s);
/* c is going: a remove it waits for is called off, the rest carry on. */
void sup_shares_client_gone(struct sup *s, struct client *c);
/* The guest's control connection is gone: every change under way fails. */
void sup_shares_guest_gone(struct sup *s, const char *why);

/* netrelay.c */
/* The worker's control socket is ctl (-1: a sandbox without a network);
 * live: the ports it was started with. */
void sup_net_init(struct sup *s, int ctl, char *const *live, size_t n);
/* Send what is due (the next request, a traffic snapshot), expire what is
 * past its deadline, reap a worker that hung up; *wake gets the next time. */
void sup_net_tick(struct sup *s, uint64_t now, uint64_t *wake);
/* The worker's control socket is readable (or hung up). */
void sup_net_event(struct sup *s);
/* c is going: nothing is to be answered to it. */
void sup_net_client_gone(struct sup *s, struct client *c);
/* At the end: one last traffic snapshot into network-traffic.json,
 * bounded (waits at most about 2 s for the worker). */
void sup_net_final(struct sup *s);
void sup_net_free(struct sup *s);

#endif
