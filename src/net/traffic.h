/* Per-destination traffic counters for `gantry net traffic`: bytes and
 * packets each way, first and last seen, and the latest verdict, for at
 * most TRAFFIC_MAX destinations keyed by (address, protocol, port); when
 * the table is full the destination seen least recently makes room (and
 * is counted as evicted). Connections from the host to a published port
 * are counted apart, as inbound to the guest's port (one entry per peer
 * address and published port, however many connections), so that they
 * never crowd out the guest's own destinations. Drops are also counted per reason, whether or
 * not the frame had a destination to file it under. */
#ifndef GANTRY_NET_TRAFFIC_H
#define GANTRY_NET_TRAFFIC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "net/dns.h"
#include "net/filter.h"

#define TRAFFIC_MAX	  256
#define TRAFFIC_NAMES_MAX 128 /* DNS names, the least recently asked make room */
#define TRAFFIC_WHY_MAX	  96

struct traffic;

struct traffic *traffic_new(void);
void traffic_free(struct traffic *t);

/* A guest frame as the frame check (and the policy) judged it: counted
 * as sent to its destination when it has one (v->inbound: to its peer,
 * under the guest's port), and under its reason when dropped. now:
 * wall-clock seconds. */
void traffic_guest(struct traffic *t, const struct filter_verdict *v, time_t now);
/* The egress policy's reason (policy_verdict_str) for its latest verdict
 * on a destination. */
void traffic_policy(struct traffic *t, uint32_t addr, enum net_proto proto, uint16_t port,
		    const char *why, time_t now);
/* A DNS question the guest asked, and what became of it: "refused",
 * "resolved", "learned" or "local". */
void traffic_dns(struct traffic *t, const char *name, uint16_t qtype, const char *verdict,
		 time_t now);
/* A drop with no frame check verdict behind it (NET_DROP_GUEST_QUEUE). */
void traffic_drop(struct traffic *t, enum net_drop reason);
/* A frame to the guest from addr (proto, port): its bytes received. */
void traffic_rx(struct traffic *t, uint32_t addr, enum net_proto proto, uint16_t port, size_t bytes,
		time_t now);
/* A frame to the guest, parsed for its source (inbound: on a connection
 * to a published port, filed under the guest's port). */
void traffic_rx_frame(struct traffic *t, const uint8_t *frame, size_t len, bool inbound,
		      time_t now);

/* The snapshot: {"destinations":[...], "dns":[...], "drops":{...},
 * "evicted":N}, most recently seen first. */
json_t *traffic_json(const struct traffic *t);
size_t traffic_count(const struct traffic *t);
uint64_t traffic_evicted(const struct traffic *t);
uint64_t traffic_drops(const struct traffic *t, enum net_drop reason);

#endif
