/* The network worker's insides, shared by its three files: worker.c (the
 * frames both ways and the loop), worker_ctl.c (the egress policy,
 * published ports and the control socket) and worker_main.c (set-up,
 * confinement and teardown). Nothing outside
 * src/net/worker*.c includes this; worker.h is the worker's face. */
#ifndef GANTRY_NET_WORKER_PRIV_H
#define GANTRY_NET_WORKER_PRIV_H

#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/util.h"
#include "net/ackhold.h"
#include "net/dns.h"
#include "net/filter.h"
#include "net/flow.h"
#include "net/net.h"
#include "net/policy.h"
#include "net/portspec.h"
#include "net/slirp.h"
#include "net/traffic.h"

/* Frames waiting for the guest: above OUT_HIGH libslirp stops reading host
 * sockets (resuming below OUT_LOW); above OUT_FULL guest frames wait in the
 * VMM too. What libslirp still sends then (ACKs, retransmissions) queues
 * on; only past OUT_HARD, a guest that takes nothing for long, is a frame
 * dropped, and counted. */
#define OUT_LOW		 (4 * MiB)
#define OUT_HIGH	 (8 * MiB)
#define OUT_FULL	 (16 * MiB)
#define OUT_HARD	 (64 * MiB)
#define RX_BUDGET	 64   /* guest frames per wakeup */
#define DNS_POLL_MAX	 1024 /* slots offered to the DNS proxy */
#define DNS_SYN_ROUND	 8    /* new TCP connections to .1:53 per wakeup */
#define MAX_FORWARDS	 1024
#define CTL_SEND_MS	 1000 /* an answer the supervisor does not take in this long is lost */
#define DROP_LOG_GAP_MS	 1000
#define PROXY_IPS_MAX	 16
#define FLOWS_EXPIRE_MS	 1000
#define SHOW_LEARNED_MAX 256

struct out_frame {
	struct out_frame *next;
	size_t len;
	uint8_t data[];
};

struct forward {
	struct forward *next;
	struct port_spec spec;
};

struct worker {
	int frame_fd, ctl_fd, sig_fd;
	struct nat nat;
	struct dns_proxy *dns;
	char *dns_dir, *dns_path;
	int dns_cleaner;      /* write end of the pipe the directory's cleaner waits on */
	char *dns_slirp_path; /* where libslirp dials it: dns_path, or its path in our own root */
	struct net_filter filter;
	struct traffic *traffic;
	struct forward *forwards;
	size_t nr_forwards;
	struct out_frame *out_head, *out_tail;
	size_t out_bytes;
	bool out_trim; /* the queue was deep: give its memory back once empty */
	uint8_t *rx;
	struct pollfd *fds;
	size_t nfds, cap;
	unsigned dns_syns;
	bool done;
	/* The egress policy in force, and what it keeps. */
	struct policy *policy;
	bool allow_local;
	struct policy_wall wall;
	struct learned *learned;
	struct flows *flows;
	struct ack_hold *acks;
	uint64_t generation, flows_expired_ms, dns_logged;
	uint32_t proxy_ips[PROXY_IPS_MAX];
	size_t nr_proxy_ips;
	uint16_t proxy_port;
	bool proxy_enforce;
	uint64_t write_error_logged;
	uint64_t repeated_syns; /* SYNs the guest sent again, their MSS dropped */
	uint64_t half_open_ended, half_open_logged; /* for room in a full flow table */
	uint64_t drop_logged[NET_DROP_COUNT];
	uint64_t drop_quiet[NET_DROP_COUNT];
	/* HTTPS to the hosts an injected secret is bound to: the guest's DNS
	 * answers the gateway for them, libslirp dials https_path for each
	 * connection to .1:443, and each one accepted here goes on to the
	 * egress worker over inject_fd (egress/egress.h). */
	int inject_fd, https_listen;
	char **inject_hosts;
	size_t nr_inject;
	char *https_path;
	uint64_t https_lost;
	json_t *events; /* for the supervisor's audit, taken with each traffic snapshot */
	uint64_t events_lost;
};

/* A TCP or UDP frame to or from the guest, as a flow key: its protocol,
 * the far end and both ports; and for TCP its flags, sequence number and
 * length in sequence space. */
struct seg {
	struct flow_key k;
	uint8_t flags;
	uint32_t seq, seqlen;
	uint32_t ack;	/* TCP: its acknowledgment number (valid with TCP_ACK) */
	uint16_t wnd;	/* and its window */
	uint32_t data_off, data_len; /* TCP: its payload in the frame */
};

/* worker.c: a frame to the guest, in its own buffer (f) or the caller's
 * (buf, len, f NULL); a frame as a flow key (false for anything but TCP
 * and UDP); whether guest port gport of proto is published. */
void worker_to_guest(struct worker *w, struct out_frame *f, const uint8_t *buf, size_t len);
bool worker_frame_seg(const uint8_t *frame, size_t len, bool from_guest, struct seg *s);
bool worker_published(struct worker *w, enum net_proto proto, uint16_t gport);
/* libslirp's frames for the guest (struct nat's send), and the DNS
 * proxy's answers over UDP (its udp_answer hook). */
void worker_slirp_send(void *opaque, const uint8_t *frame, size_t len);
void worker_dns_answer(void *opaque, uint16_t guest_port, const uint8_t *msg, size_t len);
/* Serve the frame fd, the control socket, the DNS proxy and libslirp until
 * a signal, the frame fd's or the control socket's end. */
void worker_loop(struct worker *w);
/* libslirp reads host sockets or waits, by how much the queue holds. */
void worker_backpressure(struct worker *w);
/* worker_tls.c: a TCP segment from the guest on flow f (its verdict
 * made) passes the TLS name check: NET_DROP_NONE, or why it may not (the
 * flow is cut then, why says so). */
enum net_drop worker_tls_check(struct worker *w, struct flow *f, const uint8_t *frame,
			       const struct seg *s, char *why, size_t why_len);
/* worker_ctl.c: end flow f for good (see there); a TCP flow's RSTs both
 * ways, its queued frames to the guest dropped; an event for the
 * supervisor's audit (kind, decision, host; at most NET_EVENTS_MAX wait). */
void worker_flow_cut(struct worker *w, struct flow *f, const char *why);
void worker_flow_reset(struct worker *w, struct flow *f);
void worker_event(struct worker *w, const char *kind, const char *decision, const char *host,
		  const char *reason);
/* Take the frames of flow k out of the guest's queue; *seq gets the
 * sequence number of the first TCP frame taken. Whether there were any. */
bool worker_out_purge(struct worker *w, const struct flow_key *k, uint32_t *seq);

/* worker_ctl.c: a new policy in force (p NULL: none), every flow judged
 * again; the flows it cut. */
unsigned worker_policy_install(struct worker *w, struct policy *p, bool allow_local);
/* The DNS proxy's hooks: whether the policy lets a question through, and
 * learns its answers. */
bool worker_dns_allow(void *opaque, const struct dns_question *q);
bool worker_dns_learn(void *opaque, const struct dns_question *q);
void worker_dns_learned(void *opaque, const struct dns_question *q, const char *owner,
			struct in_addr ip, uint32_t ttl);
/* Publish the port spec text (its canonical form in out). */
int worker_publish(struct worker *w, const char *text, int fd, struct port_spec *out,
		   gantry_error_t *err);
/* Serve what waits on the control socket. */
void worker_read_ctl(struct worker *w);
/* A connection libslirp made to .1:443, handed to the egress worker. */
void worker_https_accept(struct worker *w);
bool worker_dns_intercept(void *opaque, const struct dns_question *q);

#endif
