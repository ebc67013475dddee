/* The network worker's flow table: the TCP connections and UDP exchanges
 * the egress policy admitted (or that a published port opened from the
 * host), so each is judged once, at its first frame, and again only when
 * the policy changes. Bounded: at most FLOW_MAX of each protocol. With
 * the table full, a new TCP connection takes the place of the oldest one
 * still half open (the guest's SYN answered, and never acknowledged: what
 * a SYN flood leaves), as a kernel's SYN queue does; with none such it
 * finds no room until an old one ends or idles out. A new
 * UDP exchange takes the place of the one idle longest.
 *
 * A flow the policy no longer allows is cut: its entry stays a while as a
 * tombstone so that whatever either side still sends on it is dropped
 * (and the guest's segments answered with a RST). */
#ifndef GANTRY_NET_FLOW_H
#define GANTRY_NET_FLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/filter.h"
#include "net/policy.h"

#define FLOW_MAX	 4096 /* of each protocol */
/* An idle TCP connection's flow: as long as Linux's conntrack keeps one
 * established (5 days), past any keepalive; once it is gone the guest's
 * next segment on it is answered with a RST. */
#define FLOW_TCP_IDLE_MS (5 * 24 * 3600 * 1000ull)
#define FLOW_UDP_IDLE_MS (60 * 1000ull)
#define FLOW_CLOSED_MS	 (30 * 1000ull) /* a TCP flow after FIN both ways or a RST */
#define FLOW_CUT_MS	 (10 * 1000ull) /* a cut flow's tombstone */
#define FLOW_HELLO_MAX	 16384		/* of one flow's first bytes, held to read its hello */
#define FLOW_HELLO_BYTES (4u << 20)	/* of all flows' */
#define FLOW_SYN_RATE	 1000		/* new TCP connections a second, */
#define FLOW_SYN_BURST	 1000		/* in bursts of this many */

struct flow_key {
	uint32_t remote;     /* the far end's address, host order */
	uint16_t rport;	     /* its port */
	uint16_t gport;	     /* the guest's port */
	enum net_proto proto; /* TCP or UDP */
};

enum flow_fin { FLOW_FIN_GUEST = 1, FLOW_FIN_REMOTE = 2 };

enum flow_tls {
	FLOW_TLS_NONE, /* nothing to check */
	FLOW_TLS_WAIT, /* its first bytes are read until they say */
	FLOW_TLS_DONE, /* its name checked (or not TLS): passes */
};

struct flow {
	struct flow_key key;
	bool used;
	bool inbound; /* opened from the host through a published port: not judged */
	bool cut;
	bool closed; /* RST seen, or FIN both ways */
	uint8_t fins;
	bool guest_syn; /* the guest sent its SYN (or its SYN-ACK) on this connection */
	bool guest_ack; /* and a segment with ACK since: the connection is not half open */
	bool guest_small; /* its last segment with data was short (ackhold.h) */
	uint16_t guest_mss; /* the MSS the guest's SYN (or SYN-ACK) offered; 0: none */
	struct policy_verdict verdict;
	uint64_t generation; /* of the policy that judged it */
	/* TCP: the sequence number after the last segment each side sent. */
	uint32_t guest_next, remote_next;
	bool guest_seq, remote_seq; /* whether the field above was seen */
	/* TCP: what libslirp's side said: its initial sequence number, and
	 * the acknowledgment and window of its latest segment with ACK (what
	 * it has taken of the guest's stream, and how much more it would). */
	uint32_t remote_iss, remote_ack;
	uint16_t remote_wnd;
	bool remote_syn, remote_acked;
	uint64_t born_ms, last_ms, until_ms; /* until_ms: a closed or cut flow's end */
	uint64_t tx_bytes, rx_bytes;
	/* TCP to an address the policy admits only as learned from DNS: the
	 * guest's ClientHello is read for its server name (worker_tls.c). */
	uint8_t tls;	/* enum flow_tls */
	uint8_t *hello; /* the stream's first bytes so far */
	uint32_t hello_len;
	uint32_t hello_seq; /* the sequence number of its first byte */
	/* Hash chain and free list (flow.c). */
	struct flow *next;
};

struct flows;

bool flow_key_eq(const struct flow_key *a, const struct flow_key *b);

struct flows *flows_new(void);
void flows_free(struct flows *t);

struct flow *flow_find(struct flows *t, const struct flow_key *k);
/* A new entry for k (not there yet), or NULL when the table is full. */
struct flow *flow_add(struct flows *t, const struct flow_key *k, uint64_t now_ms);
void flow_remove(struct flows *t, struct flow *f);
/* With the TCP table full: the connection that ended first (kept for its
 * stragglers, not cut), else the half-open one the guest opened longest
 * ago (its SYN answered, nothing acknowledged since), to end; NULL when
 * there is room or no such flow. */
struct flow *flow_tcp_victim(struct flows *t);
/* Drop idle, closed and cut entries whose time is up. */
void flows_expire(struct flows *t, uint64_t now_ms);
size_t flows_count(const struct flows *t, enum net_proto proto);
/* Each entry in turn; fn may cut it but not remove it. */
void flows_each(struct flows *t, void (*fn)(void *opaque, struct flow *f), void *opaque);

/* Hold n more of f's first bytes; false past FLOW_HELLO_MAX for f or
 * FLOW_HELLO_BYTES for all. */
bool flow_hello_append(struct flows *t, struct flow *f, const uint8_t *p, size_t n);
/* Let go of f's first bytes. */
void flow_hello_drop(struct flows *t, struct flow *f);

/* The SYN rate limit: whether one more new TCP connection may open now. */
bool flows_syn_take(struct flows *t, uint64_t now_ms);

/* A TCP segment seen (flags, seq and the segment's length in sequence
 * space, SYN and FIN counted) from the guest or to it. true when it is a
 * SYN the guest already sent on this connection: a retransmission of its
 * SYN or SYN-ACK (or a forgery), which libslirp must not take options
 * from (frame_tcp_forget_mss). A SYN on a closed flow starts it anew. */
bool flow_tcp_seen(struct flow *f, bool from_guest, uint8_t flags, uint32_t seq, uint32_t seqlen,
		   uint64_t now_ms);

#endif
