/* The egress worker's insides, shared by its two files: worker.c (its
 * start, the channel, the bindings and the loop) and conn.c (each
 * connection, from the guest's hello to the relay). Nothing else includes
 * this; egress.h is the worker's face. */
#ifndef GANTRY_EGRESS_WORKER_PRIV_H
#define GANTRY_EGRESS_WORKER_PRIV_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egress/egress.h"
#include "egress/http.h"
#include "egress/resolve.h"
#include "egress/tls.h"
#include "net/dns.h"
#include "net/policy.h"
#include "secret/store.h"

#define IO_CHUNK    (16 * 1024)
#define UP_HIGH	     (256 * 1024) /* rewritten bytes waiting for the host: rewrite no more */
#define UP_COMPACT   (64 * 1024)  /* sent bytes dropped from the front past this and half of up */
#define RELAY_BUDGET (256 * 1024) /* bytes one connection moves before the others' turn */
#define REFUSAL_MS   5000	  /* for the guest to take an answer from Gantry */
#define EVENTS_SEEN 8		 /* what one connection reported, not reported again */

/* One injected secret, as the owner last gave it. */
struct binding {
	char name[SECRET_NAME_MAX + 1];
	char **hosts;
	char *header, *format;
	char placeholder[SECRET_PLACEHOLDER_LEN + 1];
	const uint8_t *value; /* in the worker's value block; NULL: withheld */
	size_t len;
};

enum cstate { C_HELLO, C_LOOKUP, C_CONNECT, C_UPSHAKE, C_RELAY, C_REFUSE };

struct conn {
	bool used;
	enum cstate st;
	int gfd, ufd;
	struct egress_conn *g, *u;
	char host[DNS_NAME_MAX + 1];
	struct lookup lk;
	uint32_t ips[LOOKUP_ADDRS_MAX];
	size_t nr_ips, ip_at;
	uint64_t deadline, active;
	struct egress_http *http;
	struct egress_buf up; /* to the host: rewritten, may hold values (wiped) */
	size_t up_off;
	/* The guest's, read and not yet rewritten: held while up is full. */
	uint8_t in[IO_CHUNK];
	size_t in_len, in_off;
	uint8_t down[IO_CHUNK]; /* to the guest, as the host sent it */
	size_t down_len, down_off;
	char *refusal; /* REFUSE: the answer the guest gets before the end */
	size_t refusal_len, refusal_off;
	short gwant, uwant;
	bool g_rd, u_rd; /* a read may find something: poll said so, or none was tried */
	bool g_eof, u_eof, u_closed;
	bool u_closing; /* its close_notify waits for room */
	bool busy;	/* its budget ran out with more to move */
	struct {
		int kind;
		char name[SECRET_NAME_MAX + 1];
	} seen[EVENTS_SEEN];
	size_t nr_seen;
};

struct egress {
	int chan, conn_fd, sig_fd;
	struct egress_tls *tls;
	struct sockaddr_in up[DNS_MAX_UPSTREAM];
	size_t nr_up;
	bool allow_local;
	struct policy_wall wall;
	struct binding *b;
	size_t nr_b;
	uint8_t *values; /* the arena block the values are in */
	size_t values_size;
	char **allowed; /* bound hosts the policy lets through now */
	/* The hosts' addresses as last looked up, until their TTL (at most
	 * LOOKUP_KEEP_S) has passed. */
	struct {
		char host[DNS_NAME_MAX + 1];
		uint32_t ips[LOOKUP_ADDRS_MAX];
		size_t nr_ips;
		uint64_t until;
	} known[EGRESS_HOSTS_MAX];
	struct conn conns[EGRESS_CONNS_MAX];
	size_t nr_conns;
	uint64_t events_lost;
	bool done;
};

/* worker.c: an event for the owner's audit (dropped, and counted, when
 * the channel is full); whether hosts (NULL-terminated) has host. */
void egress_event(struct egress *e, const char *kind, const char *decision, const char *secret,
		  const char *host, const char *reason);
bool egress_has_host(char *const *hosts, const char *host);

/* conn.c: a connection the network worker handed over (on e->conn_fd);
 * one step of c after poll (grev, urev: its two sides' revents) or its
 * deadline, -1 when it is over; its end. */
void conn_take(struct egress *e);
int conn_step(struct egress *e, struct conn *c, uint64_t now, short grev, short urev);
void conn_end(struct egress *e, struct conn *c);

#endif
