/* libFuzzer target for the egress policy's decoder (net/policy.c): the
 * document a user (or a script handed a hostile one) gives
 * `gantry net-policy set`.
 *
 * Input: the policy document's bytes.
 * Checked: a document that decodes writes a canonical form that decodes
 * again to the same canonical form, and to a policy equal field by field;
 * a few fixed destinations are judged without crashing, and to the same
 * verdict by both; a refused document leaves no policy and one error line.
 * Seeds: tests/fuzz/corpus/net_policy (tests/fuzz/mkcorpus.py). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "net/policy.h"

#define IP(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (d))

static const struct {
	uint32_t ip;
	enum net_proto proto;
	uint16_t port;
} dsts[] = {
	{ IP(203, 0, 113, 10), NET_PROTO_TCP, 443 },
	{ IP(203, 0, 113, 11), NET_PROTO_UDP, 53 },
	{ IP(10, 0, 0, 1), NET_PROTO_TCP, 80 },
	{ IP(1, 1, 1, 1), NET_PROTO_ICMP, 0 },
	{ IP(198, 51, 100, 66), NET_PROTO_TCP, 1 },
	{ IP(255, 255, 255, 255), NET_PROTO_UDP, 65535 },
};

static char *canonical(const struct policy *p)
{
	json_t *j = policy_to_json(p);
	char *s = json_dumps(j, JSON_COMPACT);

	json_decref(j);
	check(s != NULL);
	return s;
}

static void judge_all(const struct policy *p, const struct policy *q, const struct learned *l)
{
	struct policy_wall w = { .host = { IP(198, 51, 100, 66) }, .nr_host = 1 };
	char buf[300];

	for (size_t i = 0; i < sizeof(dsts) / sizeof(dsts[0]); i++) {
		struct policy_verdict a =
			policy_judge(p, &w, l, dsts[i].ip, dsts[i].proto, dsts[i].port, 1000);
		struct policy_verdict b =
			policy_judge(q, &w, l, dsts[i].ip, dsts[i].proto, dsts[i].port, 1000);

		check(a.allow == b.allow && a.why == b.why && a.rule == b.rule);
		check((a.why == POLICY_WHY_RULE) == (a.rule >= 0));
		check(a.rule < (int)p->nr_rules);
		policy_verdict_str(&a, l, dsts[i].ip, 1000, buf, sizeof(buf));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct policy *p = (struct policy *)1, *q = NULL;
	struct learned *l;
	gantry_error_t err = NULL;
	char *a, *b;

	if (policy_parse((const char *)data, size, "fuzz", &p, &err) < 0) {
		check(p == NULL);
		check(strchr(gantry_error_str(err), '\n') == NULL);
		gantry_error_free(&err);
		return 0;
	}
	a = canonical(p);
	check(policy_parse(a, strlen(a), "canonical", &q, &err) == 0);
	b = canonical(q);
	check(strcmp(a, b) == 0);
	check(p->nr_rules == q->nr_rules && p->default_allow == q->default_allow &&
	      p->allow_local == q->allow_local && p->nr_allow == q->nr_allow &&
	      p->nr_resolve == q->nr_resolve);
	check(p->nr_rules == 0 || memcmp(p->rules, q->rules, p->nr_rules * sizeof(*p->rules)) == 0);

	l = learned_new();
	for (size_t i = 0; i < p->nr_allow; i++) {
		check(policy_dns_name(p, p->allow_domains[i][0] == '*'
						 ? p->allow_domains[i] + 2
						 : p->allow_domains[i]) == POLICY_DNS_LEARN);
		learned_add(l, dsts[i % 6].ip, p->allow_domains[i], (uint32_t)i, 0);
	}
	judge_all(p, q, l);
	learned_retain(l, p, 0);
	json_decref(learned_json(l, 0));
	learned_free(l);

	free(a);
	free(b);
	policy_free(q);
	policy_free(p);
	return 0;
}
