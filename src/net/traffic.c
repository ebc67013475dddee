/* Per-destination traffic counters (see traffic.h): a fixed table of
 * TRAFFIC_MAX entries, found through a small chained hash; eviction, rare,
 * scans for the least recently seen. */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "net/frame.h"
#include "net/net.h"
#include "net/traffic.h"

#define BUCKETS 512 /* a power of two, twice the entries */
#define NIL	0xffff

struct entry {
	uint32_t addr;
	uint16_t port;
	uint8_t proto;
	uint8_t reason; /* latest verdict: NET_DROP_NONE is allowed */
	bool inbound;	/* port is the guest's, on connections from the host */
	uint16_t next;	/* hash chain */
	uint64_t tx_bytes, rx_bytes, tx_packets, rx_packets;
	time_t first_seen, last_seen;
	uint64_t tick; /* recency, for eviction */
	char why[TRAFFIC_WHY_MAX]; /* the policy's reason for its latest verdict */
};

struct name_entry {
	char name[DNS_NAME_MAX + 1];
	uint16_t qtype;
	char verdict[12];
	uint64_t count;
	time_t last_seen;
	uint64_t tick;
};

struct traffic {
	struct entry e[TRAFFIC_MAX];
	uint16_t bucket[BUCKETS];
	size_t n;
	uint64_t tick, evicted;
	uint64_t drops[NET_DROP_COUNT];
	/* Every frame each way, whatever its destination or fate. */
	uint64_t tx_bytes, rx_bytes, tx_packets, rx_packets;
	struct name_entry names[TRAFFIC_NAMES_MAX];
	size_t nr_names;
};

struct traffic *traffic_new(void)
{
	struct traffic *t = xzalloc(sizeof(*t));

	memset(t->bucket, 0xff, sizeof(t->bucket));
	return t;
}

void traffic_free(struct traffic *t)
{
	free(t);
}

static unsigned hash(uint32_t addr, uint8_t proto, uint16_t port, bool inbound)
{
	uint32_t h = addr * 0x9e3779b1u ^
		     ((uint32_t)inbound << 24 | (uint32_t)port << 8 | proto) * 0x85ebca6bu;

	return (h ^ h >> 15) & (BUCKETS - 1);
}

static void unlink_entry(struct traffic *t, uint16_t i)
{
	struct entry *e = &t->e[i];
	uint16_t *p = &t->bucket[hash(e->addr, e->proto, e->port, e->inbound)];

	while (*p != i)
		p = &t->e[*p].next;
	*p = e->next;
}

/* The slot the least recently seen destination holds, emptied. */
static uint16_t evict(struct traffic *t)
{
	uint16_t lru = 0;

	for (uint16_t i = 1; i < TRAFFIC_MAX; i++)
		if (t->e[i].tick < t->e[lru].tick)
			lru = i;
	unlink_entry(t, lru);
	t->evicted++;
	return lru;
}

static struct entry *lookup(struct traffic *t, uint32_t addr, enum net_proto proto, uint16_t port,
			    bool inbound, time_t now)
{
	unsigned h = hash(addr, (uint8_t)proto, port, inbound);
	uint16_t i;
	struct entry *e;

	for (i = t->bucket[h]; i != NIL; i = t->e[i].next) {
		e = &t->e[i];
		if (e->addr == addr && e->proto == proto && e->port == port &&
		    e->inbound == inbound)
			goto found;
	}
	i = t->n < TRAFFIC_MAX ? (uint16_t)t->n++ : evict(t);
	e = &t->e[i];
	*e = (struct entry){ .addr = addr,
			     .port = port,
			     .proto = (uint8_t)proto,
			     .inbound = inbound,
			     .next = t->bucket[h],
			     .first_seen = now };
	t->bucket[h] = i;
found:
	e->last_seen = now;
	e->tick = ++t->tick;
	return e;
}

void traffic_guest(struct traffic *t, const struct filter_verdict *v, time_t now)
{
	struct entry *e;

	t->tx_bytes += v->len;
	t->tx_packets++;
	if (v->reason != NET_DROP_NONE)
		traffic_drop(t, v->reason);
	if (!v->has_dst)
		return;
	e = lookup(t, v->dst, v->proto, v->inbound ? v->sport : v->port, v->inbound, now);
	e->reason = (uint8_t)v->reason;
	e->tx_bytes += v->len;
	e->tx_packets++;
}

void traffic_policy(struct traffic *t, uint32_t addr, enum net_proto proto, uint16_t port,
		    const char *why, time_t now)
{
	struct entry *e = lookup(t, addr, proto, port, false, now);

	snprintf(e->why, sizeof(e->why), "%s", why ? why : "");
}

void traffic_dns(struct traffic *t, const char *name, uint16_t qtype, const char *verdict,
		 time_t now)
{
	struct name_entry *e = NULL;
	size_t i;

	for (i = 0; i < t->nr_names && !e; i++)
		if (t->names[i].qtype == qtype && strcmp(t->names[i].name, name) == 0)
			e = &t->names[i];
	if (e == NULL && t->nr_names < TRAFFIC_NAMES_MAX) {
		e = &t->names[t->nr_names++];
	} else if (e == NULL) {
		e = &t->names[0];
		for (i = 1; i < TRAFFIC_NAMES_MAX; i++)
			if (t->names[i].tick < e->tick)
				e = &t->names[i];
	}
	if (e->qtype != qtype || strcmp(e->name, name) != 0) {
		memset(e, 0, sizeof(*e));
		snprintf(e->name, sizeof(e->name), "%s", name);
		e->qtype = qtype;
	}
	snprintf(e->verdict, sizeof(e->verdict), "%s", verdict);
	e->count++;
	e->last_seen = now;
	e->tick = ++t->tick;
}

void traffic_drop(struct traffic *t, enum net_drop reason)
{
	if ((unsigned)reason < NET_DROP_COUNT)
		t->drops[reason]++;
}

static void rx(struct traffic *t, uint32_t addr, enum net_proto proto, uint16_t port, bool inbound,
	       size_t bytes, time_t now)
{
	struct entry *e = lookup(t, addr, proto, port, inbound, now);

	e->rx_bytes += bytes;
	e->rx_packets++;
}

void traffic_rx(struct traffic *t, uint32_t addr, enum net_proto proto, uint16_t port, size_t bytes,
		time_t now)
{
	struct entry *e = lookup(t, addr, proto, port, false, now);

	e->rx_bytes += bytes;
	e->rx_packets++;
}

void traffic_rx_frame(struct traffic *t, const uint8_t *frame, size_t len, bool inbound, time_t now)
{
	const uint8_t *ip = frame + FRAME_IP;
	enum net_proto proto = NET_PROTO_OTHER;
	uint16_t port = 0;
	size_t ihl;

	t->rx_bytes += len;
	t->rx_packets++;
	if (len < NET_ETH_HLEN)
		return;
	if (frame_get16(frame + 12) == ETH_TYPE_ARP) {
		if (len >= NET_ETH_HLEN + ARP_BODY_LEN)
			traffic_rx(t, frame_get32(frame + NET_ETH_HLEN + 14), NET_PROTO_ARP, 0, len,
				   now);
		return;
	}
	if (frame_get16(frame + 12) != ETH_TYPE_IPV4 || len < FRAME_L4)
		return;
	ihl = (size_t)(ip[0] & 0xf) * 4;
	if (ip[9] == IPPROTO_NUM_ICMP) {
		proto = NET_PROTO_ICMP;
	} else if (ip[9] == IPPROTO_NUM_TCP || ip[9] == IPPROTO_NUM_UDP) {
		proto = ip[9] == IPPROTO_NUM_TCP ? NET_PROTO_TCP : NET_PROTO_UDP;
		if (ihl >= IPV4_HLEN && len >= FRAME_IP + ihl + (inbound ? 4 : 2))
			port = frame_get16(ip + ihl + (inbound ? 2 : 0));
	}
	rx(t, frame_get32(ip + 12), proto, port, inbound && port, len, now);
}

static json_t *time_json(time_t t)
{
	char buf[32];
	struct tm tm;

	if (gmtime_r(&t, &tm) == NULL || strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		return json_null();
	return json_string(buf);
}

static json_t *entry_json(const struct entry *e)
{
	struct in_addr a = { .s_addr = htonl(e->addr) };
	char ip[INET_ADDRSTRLEN];

	json_t *o;

	inet_ntop(AF_INET, &a, ip, sizeof(ip));
	o = json_pack("{s:s, s:s, s:i, s:s, s:s, s:I, s:I, s:I, s:I, s:o, s:o}", "addr", ip,
		      "proto", net_proto_name(e->proto), "port", (int)e->port, "verdict",
		      e->reason == NET_DROP_NONE ? "allowed" : "dropped", "reason",
		      net_drop_name(e->reason), "tx_bytes", (json_int_t)e->tx_bytes, "rx_bytes",
		      (json_int_t)e->rx_bytes, "tx_packets", (json_int_t)e->tx_packets,
		      "rx_packets", (json_int_t)e->rx_packets, "first_seen",
		      time_json(e->first_seen), "last_seen", time_json(e->last_seen));
	/* The guest's port, on connections the host opened to it. */
	if (e->inbound)
		json_object_set_new(o, "inbound", json_true());
	return o;
}

static int names_by_recency(const void *a, const void *b)
{
	const struct name_entry *x = *(const struct name_entry *const *)a,
				*y = *(const struct name_entry *const *)b;

	return x->tick < y->tick ? 1 : x->tick > y->tick ? -1 : 0;
}

static json_t *names_json(const struct traffic *t)
{
	const struct name_entry *order[TRAFFIC_NAMES_MAX];
	json_t *a = json_array();

	for (size_t i = 0; i < t->nr_names; i++)
		order[i] = &t->names[i];
	qsort(order, t->nr_names, sizeof(order[0]), names_by_recency);
	for (size_t i = 0; i < t->nr_names; i++)
		json_array_append_new(a, json_pack("{s:s, s:i, s:s, s:I, s:o}", "name",
						   order[i]->name, "qtype", (int)order[i]->qtype,
						   "verdict", order[i]->verdict, "count",
						   (json_int_t)order[i]->count, "last_seen",
						   time_json(order[i]->last_seen)));
	return a;
}

static int by_recency(const void *a, const void *b)
{
	const struct entry *x = *(const struct entry *const *)a,
			   *y = *(const struct entry *const *)b;

	return x->tick < y->tick ? 1 : x->tick > y->tick ? -1 : 0;
}

json_t *traffic_json(const struct traffic *t)
{
	const struct entry *order[TRAFFIC_MAX];
	json_t *dests = json_array(), *drops = json_object();

	for (size_t i = 0; i < t->n; i++)
		order[i] = &t->e[i];
	qsort(order, t->n, sizeof(order[0]), by_recency);
	for (size_t i = 0; i < t->n; i++) {
		json_t *e = entry_json(order[i]);

		if (order[i]->why[0])
			json_object_set_new(e, "policy", json_string(order[i]->why));
		json_array_append_new(dests, e);
	}
	for (int r = NET_DROP_NONE + 1; r < NET_DROP_COUNT; r++)
		if (t->drops[r])
			json_object_set_new(drops, net_drop_name(r),
					    json_integer((json_int_t)t->drops[r]));
	return json_pack("{s:o, s:o, s:o, s:I, s:{s:I, s:I, s:I, s:I}}", "destinations", dests,
			 "dns", names_json(t), "drops", drops, "evicted", (json_int_t)t->evicted,
			 "totals", "tx_bytes", (json_int_t)t->tx_bytes, "rx_bytes",
			 (json_int_t)t->rx_bytes, "tx_packets", (json_int_t)t->tx_packets,
			 "rx_packets", (json_int_t)t->rx_packets);
}

size_t traffic_count(const struct traffic *t)
{
	return t->n;
}

uint64_t traffic_evicted(const struct traffic *t)
{
	return t->evicted;
}

uint64_t traffic_drops(const struct traffic *t, enum net_drop reason)
{
	return (unsigned)reason < NET_DROP_COUNT ? t->drops[reason] : 0;
}
