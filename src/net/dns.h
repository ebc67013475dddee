/* The DNS proxy at the gateway (192.168.127.1:53), UDP and TCP, inside the
 * network worker. libslirp's own DNS forwarder is off: every guest query
 * is parsed and checked here first, answered at once when it is malformed
 * (FORMERR), for a name of the local zone, or refused (issue: egress
 * policy); only a well-formed query for a name the hooks allow is sent
 * upstream, with a fresh random ID from a fresh random source port, and
 * its answer relayed back under the guest's ID.
 *
 *  - UDP: the worker's frame check hands each guest datagram to .1:53 to
 *    dns_proxy_udp_query(); answers come back through hooks.udp_answer,
 *    which the worker wraps into a UDP/IPv4/Ethernet frame from .1:53.
 *  - TCP: libslirp connects each guest TCP connection to .1:53 to the Unix
 *    socket tcp_path (slirp_add_unix), which the proxy listens on; each
 *    connection carries any number of 2-byte-length-framed messages, each
 *    judged and answered on its own.
 *
 * Upstreams: NET_DNS_ENV (IP:PORT) when set, else the nameservers of
 * /etc/resolv.conf (IPv4 ones, port 53). Bounds: queries up to 4096 bytes
 * over UDP, 256 in flight, 5 s then SERVFAIL, a rate limit per second. All
 * on the worker's one thread, never blocking: fds go into its poll set. */
#ifndef GANTRY_NET_DNS_H
#define GANTRY_NET_DNS_H

#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define DNS_NAME_MAX	 253
#define DNS_UDP_MAX	 4096
#define DNS_MAX_UPSTREAM 3
#define DNS_INFLIGHT_MAX 256 /* queries waiting upstream; more: SERVFAIL */
#define DNS_TCP_CONNS	 64  /* TCP connections at once; more are closed at accept */
/* libslirp's connect() to the TCP socket blocks while its backlog is
 * full, and it is this thread's to accept: the worker takes what waits
 * before each batch of guest frames (at most 64 connects), into room for
 * twice that. */
#define DNS_TCP_BACKLOG 128
/* The most fds dns_proxy_pollfds() fills: the TCP listener, its
 * connections and one socket per query in flight. */
#define DNS_POLLFDS_MAX	 (1 + DNS_TCP_CONNS + DNS_INFLIGHT_MAX)

struct dns_question {
	char name[DNS_NAME_MAX + 1]; /* lowercased, no trailing dot; "" = the root */
	uint16_t qtype, qclass;
	uint16_t id;
	size_t end; /* offset just past the question in the message */
};

struct dns_hooks {
	void *opaque;
	/* An answer for the guest: a UDP datagram from .1:53 to guest_port. */
	void (*udp_answer)(void *opaque, uint16_t guest_port, const uint8_t *msg, size_t len);
	/* Whether q may go upstream; NULL: every name may. Refused ones are
	 * answered REFUSED at once, and the upstream never sees them. */
	bool (*allow)(void *opaque, const struct dns_question *q);
	/* Whether the addresses in the answer to allowed query q are to be
	 * learned; NULL: every answer's are, when learned is set. */
	bool (*learn)(void *opaque, const struct dns_question *q);
	/* An A record in an upstream answer to query q, owned by the
	 * question's name or its CNAME chain; ttl in seconds, the least of the
	 * record's and the chain's CNAMEs' up to it. NULL: ignored. */
	void (*learned)(void *opaque, const struct dns_question *q, const char *owner,
			struct in_addr ip, uint32_t ttl);
	/* Whether allowed query q names a host whose HTTPS the egress worker
	 * takes (egress/egress.h): answered here with the gateway's address
	 * (no other record), never sent upstream. NULL: none is. */
	bool (*intercept)(void *opaque, const struct dns_question *q);
	/* Above 0: the TTLs of an answer whose addresses are learned are cut
	 * to at most this many seconds before the guest sees them, so its
	 * cache never outlives what was learned. */
	uint32_t ttl_cap;
};

struct dns_proxy;

/* upstreams: NULL to read NET_DNS_ENV or /etc/resolv.conf. tcp_path: the
 * Unix socket to listen on for TCP queries (NULL: none). */
int dns_proxy_new(struct dns_proxy **out, const struct dns_hooks *hooks,
		  const struct sockaddr_in *upstreams, size_t nr_upstreams, const char *tcp_path,
		  gantry_error_t *err);
/* Its Unix socket is not to be removed at the end (it lives in a root of
 * the worker's own, gone with it, or someone else removes it). */
void dns_proxy_keep_path(struct dns_proxy *p);
void dns_proxy_free(struct dns_proxy *p);

/* A query the guest sent over UDP from guest_port. */
void dns_proxy_udp_query(struct dns_proxy *p, uint16_t guest_port, const uint8_t *msg,
			 size_t len);

/* Take every TCP connection waiting on the listener (see DNS_TCP_BACKLOG). */
void dns_proxy_accept(struct dns_proxy *p);
/* Poll integration: the proxy's fds and events into fds[0..max) (returns
 * how many), then, after poll(), the same slice back to dispatch. */
size_t dns_proxy_pollfds(struct dns_proxy *p, struct pollfd *fds, size_t max);
void dns_proxy_dispatch(struct dns_proxy *p, const struct pollfd *fds, size_t n);
/* Milliseconds until the proxy's next deadline (-1: none), and the work due
 * by now (timeouts answered SERVFAIL). */
int dns_proxy_timeout_ms(const struct dns_proxy *p);
void dns_proxy_tick(struct dns_proxy *p);

/* Counters for the traffic report. */
struct dns_stats {
	uint64_t queries, forwarded, answered_local, formerr, refused, servfail, rate_limited;
};
void dns_proxy_stats(const struct dns_proxy *p, struct dns_stats *out);

/* The check every guest query passes, on its own for tests and fuzzing:
 * opcode QUERY, QR clear, exactly one question of class IN, an
 * uncompressed valid name (labels of [A-Za-z0-9_-], at most 63 bytes,
 * 253 in all), at most one OPT record and nothing else. 0 with q filled,
 * or the RCODE to answer with (1, FORMERR). On FORMERR q->id is the
 * query's ID when it has a 12-byte header, and q->end is 0 unless the
 * question itself was read (a FORMERR answer echoes it then). */
int dns_query_parse(const uint8_t *msg, size_t len, struct dns_question *q);

/* The check every upstream answer passes after its ID matched, on its own
 * for tests and fuzzing: QR set, one question equal to q's (name, type,
 * class), a well-formed answer section (compressed names followed safely;
 * its first 256 records checked, the rest relayed as they are).
 * Then hooks->learned (when set) is called for each A record of class IN
 * owned by q's name or its CNAME chain. Returns the offset just past the
 * question, or -1 when msg is not an answer to q (nothing learned). */
int dns_answer_learn(const uint8_t *msg, size_t len, const struct dns_question *q,
		     const struct dns_hooks *hooks);
/* Cut every TTL above cap in the records of answer msg (of which the
 * question ends at qend) to cap; OPT records keep theirs. msg was checked
 * by dns_answer_learn. */
void dns_answer_cap_ttl(uint8_t *msg, size_t len, size_t qend, uint32_t cap);

/* For tests: move the proxy's clock forward by ms (timeouts, the rate
 * limit, idle connections), so a test need not wait them out. */
void dns_proxy_clock_skew(struct dns_proxy *p, uint64_t ms);

/* The upstreams a proxy with none given asks: NET_DNS_ENV's, else
 * /etc/resolv.conf's (at most DNS_MAX_UPSTREAM into out, *n of them). */
int dns_upstreams(struct sockaddr_in *out, size_t *n, gantry_error_t *err);
/* The nameservers of a resolv.conf (IPv4, port 53), at most max. */
size_t dns_resolv_conf(const char *path, struct sockaddr_in *out, size_t max);

#endif
