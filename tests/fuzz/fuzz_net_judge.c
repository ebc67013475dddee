/* libFuzzer target for the egress policy's judge (net/policy.c), against
 * a reference model written here as plainly as the header states the
 * order: the first matching rule, else the local wall unless allowLocal,
 * else a learned address for TCP or UDP, else the default.
 *
 * Input, bytes (multi-byte fields big-endian):
 *   flags: bit 0 default allow, bit 1 allowLocal, bits 2-3 learned count,
 *          bit 4 one host address on the wall
 *   rule count (mod JUDGE_RULES + 1), then per rule:
 *     flags (bit 0 allow, bit 1 any address, bits 2-3 proto, bits 4-5
 *     port ranges, 0 to 2), net (4), prefix (mod 33), two ranges (2 + 2 each)
 *   per learned address: ip (4), ttl in seconds (2)
 *   the host address (4), when flagged
 *   the clock at judging, in 100 ms after the learning (2)
 *   then destinations to the end: ip (4), proto (mod 3), port (2).
 * Seeds: tests/fuzz/corpus/net_judge (tests/fuzz/mkcorpus.py). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "net/policy.h"

#define JUDGE_RULES   8
#define JUDGE_LEARNED 3
#define LEARN_AT_MS   1000000

struct input {
	const uint8_t *p;
	size_t left;
};

static uint32_t take(struct input *in, size_t n)
{
	uint32_t v = 0;

	for (size_t i = 0; i < n; i++) {
		v <<= 8;
		if (in->left > 0) {
			v |= *in->p++;
			in->left--;
		}
	}
	return v;
}

/* The wall as the header lists it, first octets and prefix lengths. */
static const struct {
	uint8_t a, b;
	unsigned prefix;
} model_wall[] = {
	{ 10, 0, 8 },	 { 172, 16, 12 }, { 192, 168, 16 }, { 169, 254, 16 }, { 127, 0, 8 },
	{ 100, 64, 10 }, { 224, 0, 4 },	  { 240, 0, 4 },    { 0, 0, 8 },
};

/* Same network when the top prefix bits agree, shifting instead of masks. */
static bool model_in(uint32_t ip, uint32_t net, unsigned prefix)
{
	if (prefix == 0)
		return true;
	return (ip >> (32 - prefix)) == (net >> (32 - prefix));
}

static bool model_wall_hit(uint32_t ip, const uint32_t *host, size_t nr_host)
{
	for (size_t i = 0; i < sizeof(model_wall) / sizeof(model_wall[0]); i++) {
		uint32_t net = (uint32_t)model_wall[i].a << 24 | (uint32_t)model_wall[i].b << 16;

		if (model_in(ip, net, model_wall[i].prefix))
			return true;
	}
	for (size_t i = 0; i < nr_host; i++)
		if (host[i] == ip)
			return true;
	return false;
}

static bool model_rule(const struct policy_rule *r, uint32_t ip, enum net_proto proto,
		       uint16_t port)
{
	bool port_ok = false;

	if (r->proto == POLICY_TCP && proto != NET_PROTO_TCP)
		return false;
	if (r->proto == POLICY_UDP && proto != NET_PROTO_UDP)
		return false;
	if (r->proto == POLICY_ICMP && proto != NET_PROTO_ICMP)
		return false;
	if (!r->any_addr && !model_in(ip, r->net, r->prefix))
		return false;
	if (r->nr_ports == 0)
		return true;
	if (proto == NET_PROTO_ICMP)
		return false;
	for (size_t i = 0; i < r->nr_ports; i++)
		if (r->ports[i].lo <= port && port <= r->ports[i].hi)
			port_ok = true;
	return port_ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	struct policy_rule rules[JUDGE_RULES];
	struct policy p = { .rules = rules };
	struct policy_wall w = { .nr_host = 0 };
	uint32_t learned_ip[JUDGE_LEARNED];
	uint64_t learned_exp[JUDGE_LEARNED], now;
	size_t nr_learned;
	struct learned *l;
	uint32_t flags = take(&in, 1);
	char name[16];

	p.default_allow = flags & 1;
	p.allow_local = flags & 2;
	nr_learned = (flags >> 2) & 3;
	if (nr_learned > JUDGE_LEARNED)
		nr_learned = JUDGE_LEARNED;
	p.nr_rules = take(&in, 1) % (JUDGE_RULES + 1);
	for (size_t i = 0; i < p.nr_rules; i++) {
		struct policy_rule *r = &rules[i];
		uint32_t rf = take(&in, 1);

		memset(r, 0, sizeof(*r));
		r->allow = rf & 1;
		r->any_addr = rf & 2;
		r->proto = (enum policy_proto)((rf >> 2) & 3);
		r->nr_ports = ((rf >> 4) & 3) % 3;
		r->net = take(&in, 4);
		r->prefix = (uint8_t)(take(&in, 1) % 33);
		if (r->any_addr)
			r->net = r->prefix = 0;
		else if (r->prefix < 32) /* the decoder's invariant: no host bits */
			r->net = r->prefix ? r->net >> (32 - r->prefix) << (32 - r->prefix) : 0;
		for (size_t k = 0; k < 2; k++) {
			uint16_t lo = (uint16_t)take(&in, 2), hi = (uint16_t)take(&in, 2);

			lo = lo ? lo : 1;
			hi = hi ? hi : 1;
			r->ports[k].lo = lo < hi ? lo : hi;
			r->ports[k].hi = lo < hi ? hi : lo;
		}
	}

	l = learned_new();
	for (size_t i = 0; i < nr_learned; i++) {
		uint32_t ttl;

		learned_ip[i] = take(&in, 4);
		ttl = take(&in, 2);
		snprintf(name, sizeof(name), "n%zu.test", i);
		learned_add(l, learned_ip[i], name, ttl, LEARN_AT_MS);
		ttl = ttl == 0 ? 60 : ttl > 300 ? 300 : ttl;
		learned_exp[i] = LEARN_AT_MS + (uint64_t)ttl * 1000;
	}
	if (flags & 16)
		w.host[w.nr_host++] = take(&in, 4);
	now = LEARN_AT_MS + (uint64_t)take(&in, 2) * 100;

	while (in.left > 0) {
		uint32_t ip = take(&in, 4);
		enum net_proto proto = (enum net_proto)(take(&in, 1) % 3);
		uint16_t port = (uint16_t)take(&in, 2);
		struct policy_verdict v = policy_judge(&p, &w, l, ip, proto, port, now);
		bool allow = p.default_allow, learned = false, walled;
		enum policy_why why = POLICY_WHY_DEFAULT;
		int rule = -1;

		for (size_t i = 0; i < nr_learned; i++)
			if (learned_ip[i] == ip && learned_exp[i] > now)
				learned = true;
		walled = !p.allow_local && model_wall_hit(ip, w.host, w.nr_host);
		/* The first match wins (last written); an allow rule without
		 * a cidr matches only past the wall. */
		for (size_t i = p.nr_rules; i-- > 0;)
			if (model_rule(&rules[i], ip, proto, port) &&
			    !(rules[i].allow && rules[i].any_addr && walled))
				rule = (int)i;
		if (rule >= 0) {
			allow = rules[rule].allow;
			why = POLICY_WHY_RULE;
		} else if (walled) {
			allow = false;
			why = POLICY_WHY_WALL;
		} else if (proto != NET_PROTO_ICMP && learned) {
			allow = true;
			why = POLICY_WHY_LEARNED;
		}
		check(v.allow == allow);
		check(v.why == why);
		check(v.rule == rule);
		check(learned_has(l, ip, now) == learned);
	}
	learned_free(l);
	return 0;
}
