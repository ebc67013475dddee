/* The egress worker's own look-ups of the hosts it connects to: one A
 * query over UDP to the nameservers the network worker's DNS proxy asks
 * (net/dns.h: dns_upstreams), each tried in turn, from a fresh socket
 * with a random ID and port, its answer checked as the proxy checks
 * every answer (dns_answer_learn). Never blocking: the worker polls the
 * socket with its connections. */
#ifndef GANTRY_EGRESS_RESOLVE_H
#define GANTRY_EGRESS_RESOLVE_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "net/dns.h"

#define LOOKUP_ADDRS_MAX 8
#define LOOKUP_TRY_MS	 2000 /* for each nameserver */
#define LOOKUP_KEEP_S	 60   /* an answer is used again for its TTL, at most this */

struct lookup {
	int fd; /* -1: none in flight */
	struct dns_question q;
	const struct sockaddr_in *up;
	size_t nr_up, at;
	uint64_t deadline;		/* CLOCK_MONOTONIC ms of this try */
	uint32_t ips[LOOKUP_ADDRS_MAX]; /* host order */
	size_t nr_ips;
	uint32_t ttl; /* seconds: the least of the answer's */
};

/* Ask for host's A records (up: the nameservers, kept by the caller). */
int lookup_start(struct lookup *l, const char *host, const struct sockaddr_in *up, size_t nr_up,
		 gantry_error_t *err);
/* After its fd was readable, or its deadline passed: 1 with the
 * addresses (at least one), 0 not yet, -1 with why. */
int lookup_step(struct lookup *l, uint64_t now, gantry_error_t *err);
void lookup_end(struct lookup *l);

#endif
