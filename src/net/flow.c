/* The flow table (see flow.h): two fixed pools of FLOW_MAX entries, one
 * per protocol, chained into one hash of four times that many buckets.
 * A pool is handed out front to back before its free list is used, so a
 * worker whose guest opens few flows never touches most of its pages. */
#include <string.h>

#include "common/util.h"
#include "net/flow.h"
#include "net/frame.h"

#define FLOW_BUCKETS (4 * FLOW_MAX) /* a power of two */

struct pool {
	struct flow e[FLOW_MAX];
	struct flow *free; /* entries given back */
	size_t fresh;	   /* e[fresh..] never handed out */
	size_t used;
};

struct flows {
	struct flow *bucket[FLOW_BUCKETS];
	struct pool tcp, udp;
	uint32_t syn_tokens;
	uint64_t syn_refill_ms;
	bool syn_started;
	size_t hello_bytes; /* the flows' first bytes held, together */
};

static struct pool *pool_of(struct flows *t, enum net_proto p)
{
	return p == NET_PROTO_TCP ? &t->tcp : &t->udp;
}

struct flows *flows_new(void)
{
	return xzalloc(sizeof(struct flows));
}

static struct flow *pool_take(struct pool *pl)
{
	struct flow *f = pl->free;

	if (f)
		pl->free = f->next;
	else if (pl->fresh < FLOW_MAX)
		f = &pl->e[pl->fresh++];
	return f;
}

void flows_free(struct flows *t)
{
	for (size_t i = 0; i < t->tcp.fresh; i++)
		free(t->tcp.e[i].hello);
	free(t);
}

static size_t hash(const struct flow_key *k)
{
	uint64_t h = (uint64_t)k->remote * 0x9e3779b97f4a7c15ull;

	h ^= ((uint64_t)k->rport << 32 | (uint64_t)k->gport << 16 | (uint64_t)k->proto) *
	     0xc2b2ae3d27d4eb4full;
	return (size_t)(h >> 40) & (FLOW_BUCKETS - 1);
}

bool flow_key_eq(const struct flow_key *a, const struct flow_key *b)
{
	return a->remote == b->remote && a->rport == b->rport && a->gport == b->gport &&
	       a->proto == b->proto;
}

struct flow *flow_find(struct flows *t, const struct flow_key *k)
{
	for (struct flow *f = t->bucket[hash(k)]; f; f = f->next)
		if (flow_key_eq(&f->key, k))
			return f;
	return NULL;
}

bool flow_hello_append(struct flows *t, struct flow *f, const uint8_t *p, size_t n)
{
	if (n > FLOW_HELLO_MAX - f->hello_len || n > FLOW_HELLO_BYTES - t->hello_bytes)
		return false;
	f->hello = xrealloc(f->hello, f->hello_len + n);
	memcpy(f->hello + f->hello_len, p, n);
	f->hello_len += (uint32_t)n;
	t->hello_bytes += n;
	return true;
}

void flow_hello_drop(struct flows *t, struct flow *f)
{
	t->hello_bytes -= f->hello_len;
	free(f->hello);
	f->hello = NULL;
	f->hello_len = 0;
}

void flow_remove(struct flows *t, struct flow *f)
{
	struct flow **p = &t->bucket[hash(&f->key)];
	struct pool *pl = pool_of(t, f->key.proto);

	while (*p && *p != f)
		p = &(*p)->next;
	if (*p == NULL)
		return;
	*p = f->next;
	flow_hello_drop(t, f);
	memset(f, 0, sizeof(*f));
	f->next = pl->free;
	pl->free = f;
	pl->used--;
}

/* The UDP entry idle longest that no cut holds, to make room. */
static struct flow *udp_victim(struct flows *t)
{
	struct flow *best = NULL;

	for (size_t i = 0; i < t->udp.fresh; i++) {
		struct flow *f = &t->udp.e[i];

		if (f->used && !f->cut &&
		    (best == NULL || f->last_ms < best->last_ms))
			best = f;
	}
	return best;
}

/* Half open: the guest's SYN answered (libslirp answers once its host
 * connection is up, and only then does a RST from the guest close that
 * socket) and nothing acknowledged since. */
static bool half_open(const struct flow *f)
{
	return f->used && !f->inbound && !f->cut && !f->closed && f->guest_syn && !f->guest_ack &&
	       f->remote_seq;
}

struct flow *flow_tcp_victim(struct flows *t)
{
	struct flow *best = NULL, *closed = NULL;

	if (t->tcp.used < FLOW_MAX)
		return NULL;
	for (size_t i = 0; i < t->tcp.fresh; i++) {
		struct flow *f = &t->tcp.e[i];

		/* A connection that ended, kept only for its stragglers (a cut
		 * one's tombstone stays). */
		if (f->used && f->closed && !f->cut &&
		    (closed == NULL || f->until_ms < closed->until_ms))
			closed = f;
		if (half_open(f) && (best == NULL || f->born_ms < best->born_ms))
			best = f;
	}
	return closed ? closed : best;
}

struct flow *flow_add(struct flows *t, const struct flow_key *k, uint64_t now_ms)
{
	struct pool *pl = pool_of(t, k->proto);
	struct flow *f, **b;

	if (pl->used == FLOW_MAX)
		flows_expire(t, now_ms);
	if (pl->used == FLOW_MAX && k->proto == NET_PROTO_UDP && (f = udp_victim(t)))
		flow_remove(t, f);
	f = pool_take(pl);
	if (f == NULL)
		return NULL;
	pl->used++;
	memset(f, 0, sizeof(*f));
	f->used = true;
	f->key = *k;
	f->born_ms = f->last_ms = now_ms;
	f->verdict.rule = -1;
	b = &t->bucket[hash(k)];
	f->next = *b;
	*b = f;
	return f;
}

static bool expired(const struct flow *f, uint64_t now_ms)
{
	if (f->cut || f->closed)
		return now_ms >= f->until_ms;
	return now_ms > f->last_ms && now_ms - f->last_ms >=
	       (f->key.proto == NET_PROTO_TCP ? FLOW_TCP_IDLE_MS : FLOW_UDP_IDLE_MS);
}

static void expire_pool(struct flows *t, struct pool *pl, uint64_t now_ms)
{
	for (size_t i = 0; i < pl->fresh; i++)
		if (pl->e[i].used && expired(&pl->e[i], now_ms))
			flow_remove(t, &pl->e[i]);
}

void flows_expire(struct flows *t, uint64_t now_ms)
{
	expire_pool(t, &t->tcp, now_ms);
	expire_pool(t, &t->udp, now_ms);
}

size_t flows_count(const struct flows *t, enum net_proto proto)
{
	return proto == NET_PROTO_TCP ? t->tcp.used : t->udp.used;
}

void flows_each(struct flows *t, void (*fn)(void *opaque, struct flow *f), void *opaque)
{
	for (size_t b = 0; b < FLOW_BUCKETS; b++)
		for (struct flow *f = t->bucket[b]; f; f = f->next)
			fn(opaque, f);
}

bool flows_syn_take(struct flows *t, uint64_t now_ms)
{
	uint64_t n;

	if (!t->syn_started) {
		t->syn_started = true;
		t->syn_tokens = FLOW_SYN_BURST;
		t->syn_refill_ms = now_ms;
	}
	if (now_ms > t->syn_refill_ms) {
		n = (now_ms - t->syn_refill_ms) * FLOW_SYN_RATE / 1000;
		if (n) {
			t->syn_tokens = (uint32_t)MIN((uint64_t)FLOW_SYN_BURST, t->syn_tokens + n);
			t->syn_refill_ms += n * 1000 / FLOW_SYN_RATE;
		}
	}
	if (t->syn_tokens == 0)
		return false;
	t->syn_tokens--;
	return true;
}

bool flow_tcp_seen(struct flow *f, bool from_guest, uint8_t flags, uint32_t seq, uint32_t seqlen,
		   uint64_t now_ms)
{
	uint32_t end = seq + seqlen;
	bool again = false;

	f->last_ms = now_ms;
	if (f->closed && !f->cut && (flags & (TCP_SYN | TCP_ACK)) == TCP_SYN) {
		/* The same ports once more: a new connection. */
		f->closed = false;
		f->fins = 0;
		f->guest_seq = f->remote_seq = f->guest_syn = f->guest_ack = false;
		f->remote_syn = f->remote_acked = false;
		f->born_ms = now_ms;
		f->until_ms = 0;
	}
	if (from_guest && (flags & TCP_SYN)) {
		again = f->guest_syn;
		f->guest_syn = true;
	}
	/* A SYN-ACK the guest sends answers a published port's SYN: its flow is
	 * inbound, never half open in the sense above. */
	if (from_guest && (flags & (TCP_SYN | TCP_ACK)) == TCP_ACK)
		f->guest_ack = true;
	if (from_guest) {
		if (!f->guest_seq || (int32_t)(end - f->guest_next) > 0)
			f->guest_next = end;
		f->guest_seq = true;
	} else {
		if (!f->remote_seq || (int32_t)(end - f->remote_next) > 0)
			f->remote_next = end;
		f->remote_seq = true;
	}
	if (flags & TCP_FIN)
		f->fins |= from_guest ? FLOW_FIN_GUEST : FLOW_FIN_REMOTE;
	if (!f->closed && ((flags & TCP_RST) || f->fins == (FLOW_FIN_GUEST | FLOW_FIN_REMOTE))) {
		f->closed = true;
		if (!f->cut)
			f->until_ms = now_ms + FLOW_CLOSED_MS;
	}
	return again;
}
