/* The egress policy (net/policy.c): every decoding error is one line that
 * names its JSON path; the canonical document reads back to the same
 * policy; the judge's order (rule, wall, learned for TCP and UDP only,
 * default); domain matching and the DNS answer for a name; the learned
 * table's expiry, eviction and retain; the proxy rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/util.h"
#include "net/policy.h"

#define IP(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (d))

static struct policy *parse_ok(const char *doc)
{
	struct policy *p = NULL;
	gantry_error_t err = NULL;

	if (policy_parse(doc, strlen(doc), "policy", &p, &err) < 0)
		fail_msg("%s: %s", doc, gantry_error_str(err));
	assert_non_null(p);
	return p;
}

static void parse_fails(const char *doc, const char *want)
{
	struct policy *p = (struct policy *)1;
	gantry_error_t err = NULL;

	assert_int_equal(policy_parse(doc, strlen(doc), "policy", &p, &err), -1);
	assert_null(p);
	assert_non_null(err);
	if (strncmp(gantry_error_str(err), want, strlen(want)) != 0)
		fail_msg("%s: got `%s`, want `%s...`", doc, gantry_error_str(err), want);
	assert_null(strchr(gantry_error_str(err), '\n'));
	gantry_error_free(&err);
}

static void test_errors(void **state)
{
	static const struct {
		const char *doc, *want;
	} cases[] = {
		{ "[]", "a policy must be a JSON object" },
		{ "{", "policy: invalid JSON" },
		{ "{\"default\":\"deny\",\"default\":\"allow\"}", "policy: invalid JSON" },
		{ "{\"defualt\":\"deny\"}", "defualt: unknown key" },
		{ "{\"default\":\"Deny\"}", "default: must be \"allow\" or \"deny\"" },
		{ "{\"default\":null}", "default: must be \"allow\" or \"deny\"" },
		{ "{\"default\":1}", "default: must be \"allow\" or \"deny\"" },
		{ "{\"allowLocal\":\"yes\"}", "allowLocal: must be true or false" },
		{ "{\"rules\":{}}", "rules: must be an array" },
		{ "{\"rules\":[{},3]}", "rules[1]: must be an object" },
		{ "{\"rules\":[{\"acton\":\"deny\"}]}", "rules[0].acton: unknown key" },
		{ "{\"rules\":[{},{},{\"action\":\"drop\"}]}", "rules[2].action: must be" },
		{ "{\"rules\":[{\"proto\":\"sctp\"}]}", "rules[0].proto: must be" },
		{ "{\"rules\":[{\"cidr\":8}]}", "rules[0].cidr: must be a string" },
		{ "{\"rules\":[{},{},{\"cidr\":\"10.0.0.1/8\"}]}",
		  "rules[2].cidr: `10.0.0.1/8` has host bits set (10.0.0.0/8?)" },
		{ "{\"rules\":[{\"cidr\":\"10.0.0.0/33\"}]}",
		  "rules[0].cidr: `10.0.0.0/33` is not" },
		{ "{\"rules\":[{\"cidr\":\"10.0.0.0/08\"}]}",
		  "rules[0].cidr: `10.0.0.0/08` is not" },
		{ "{\"rules\":[{\"cidr\":\"10.0.0.0/\"}]}", "rules[0].cidr: `10.0.0.0/` is not" },
		{ "{\"rules\":[{\"cidr\":\"010.0.0.0/8\"}]}",
		  "rules[0].cidr: `010.0.0.0/8` is not" },
		{ "{\"rules\":[{\"cidr\":\"10.1\"}]}", "rules[0].cidr: `10.1` is not" },
		{ "{\"rules\":[{\"cidr\":\"0x0a.0.0.0\"}]}", "rules[0].cidr: `0x0a.0.0.0` is not" },
		{ "{\"rules\":[{\"cidr\":\"256.0.0.0\"}]}", "rules[0].cidr: `256.0.0.0` is not" },
		{ "{\"rules\":[{\"cidr\":\"1.2.3.4 \"}]}", "rules[0].cidr: `1.2.3.4 ` is not" },
		{ "{\"rules\":[{\"cidr\":\"1.2.3.4.5\"}]}", "rules[0].cidr: `1.2.3.4.5` is not" },
		{ "{\"rules\":[{\"cidr\":\"\"}]}", "rules[0].cidr: `` is not" },
		{ "{\"rules\":[{\"ports\":443}]}", "rules[0].ports: must be a string" },
		{ "{\"rules\":[{\"ports\":\"\"}]}", "rules[0].ports: `` is not a port list" },
		{ "{\"rules\":[{\"ports\":\"0\"}]}", "rules[0].ports: `0` is not a port list" },
		{ "{\"rules\":[{\"ports\":\"65536\"}]}", "rules[0].ports: `65536` is not" },
		{ "{\"rules\":[{\"ports\":\"53, 443\"}]}", "rules[0].ports: `53, 443` is not" },
		{ "{\"rules\":[{\"ports\":\"53,,443\"}]}", "rules[0].ports: `53,,443` is not" },
		{ "{\"rules\":[{\"ports\":\"53,\"}]}", "rules[0].ports: `53,` is not" },
		{ "{\"rules\":[{\"ports\":\"1-\"}]}", "rules[0].ports: `1-` is not" },
		{ "{\"rules\":[{\"ports\":\"1-2-3\"}]}", "rules[0].ports: `1-2-3` is not" },
		{ "{\"rules\":[{\"ports\":\"080\"}]}", "rules[0].ports: `080` is not" },
		{ "{\"rules\":[{\"ports\":\"90-80\"}]}", "rules[0].ports: `90-80`: range 90-80 is "
							 "backwards" },
		{ "{\"rules\":[{\"ports\":\"1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,"
		  "21,22,23,24,25,26,27,28,29,30,31,32,33\"}]}",
		  "rules[0].ports: more than 32 port ranges" },
		{ "{\"rules\":[{\"ports\":\"7\",\"proto\":\"icmp\"}]}",
		  "rules[0].ports: ICMP has no" },
		{ "{\"rules\":[{\"proto\":\"icmp\",\"ports\":\"7\"}]}",
		  "rules[0].ports: ICMP has no" },
		{ "{\"rules\":[{\"cidr\":\"1.2.3.4\\u0000\"}]}", "policy: invalid JSON" },
		{ "{\"allowDomains\":\"a.com\"}", "allowDomains: must be an array" },
		{ "{\"allowDomains\":[\"a.com\",1]}", "allowDomains[1]: must be a string" },
		{ "{\"allowDomains\":[\"*\"]}", "allowDomains[0]: `*` names no domain" },
		{ "{\"allowDomains\":[\"*.\"]}", "allowDomains[0]: `*.` names no domain" },
		{ "{\"allowDomains\":[\"\"]}", "allowDomains[0]: `` names no domain" },
		{ "{\"allowDomains\":[\".\"]}", "allowDomains[0]: `.` names no domain" },
		{ "{\"allowDomains\":[\"a.*.com\"]}", "allowDomains[0]: `a.*.com`: `*` only" },
		{ "{\"allowDomains\":[\"*a.com\"]}", "allowDomains[0]: `*a.com`: `*` only" },
		{ "{\"allowDomains\":[\"*.*.com\"]}", "allowDomains[0]: `*.*.com`: `*` only" },
		{ "{\"resolveDomains\":[\"a..com\"]}",
		  "resolveDomains[0]: `a..com` is not a domain" },
		{ "{\"resolveDomains\":[\".a.com\"]}", "resolveDomains[0]: `.a.com` is not" },
		{ "{\"resolveDomains\":[\"a.com..\"]}", "resolveDomains[0]: `a.com..` is not" },
		{ "{\"resolveDomains\":[\"a b.com\"]}", "resolveDomains[0]: `a b.com` is not" },
		{ "{\"resolveDomains\":[\"a\\n.com\"]}", "resolveDomains[0]: `a?.com` is not" },
	};
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		parse_fails(cases[i].doc, cases[i].want);
}

static void test_error_limits(void **state)
{
	char *doc, *label;
	size_t off;
	(void)state;

	/* A label of 64 and a name of 254. */
	label = xmalloc(64 + 1);
	memset(label, 'a', 64);
	label[64] = '\0';
	xasprintf(&doc, "{\"allowDomains\":[\"ok.com\",\"%s.com\"]}", label);
	parse_fails(doc, "allowDomains[1]: `aaaa");
	free(doc);
	label[63] = '\0';
	xasprintf(&doc, "{\"allowDomains\":[\"%s.%s.%s.%s\"]}", label, label, label, label);
	parse_fails(doc, "allowDomains[0]: `aaaa"); /* 4 * 63 + 3 = 255 */
	free(doc);
	xasprintf(&doc, "{\"allowDomains\":[\"*.%s.%s.%s.%.61s\"]}", label, label, label, label);
	policy_free(parse_ok(doc)); /* 253 below the `*.` */
	free(doc);
	free(label);

	/* One rule and one name over the limits. */
	doc = xmalloc(16 * (POLICY_RULES_MAX + 2));
	off = (size_t)sprintf(doc, "{\"rules\":[{}");
	for (int i = 0; i < POLICY_RULES_MAX; i++)
		off += (size_t)sprintf(doc + off, ",{}");
	strcpy(doc + off, "]}");
	parse_fails(doc, "rules: more than 1024 rules");
	off = (size_t)sprintf(doc, "{\"resolveDomains\":[\"a\"");
	for (int i = 0; i < POLICY_DOMAINS_MAX; i++)
		off += (size_t)sprintf(doc + off, ",\"a\"");
	strcpy(doc + off, "]}");
	parse_fails(doc, "resolveDomains: more than 1024 names");
	free(doc);

	/* Over the size limit before any parsing; at it, read. */
	doc = xmalloc(POLICY_FILE_MAX + 1);
	memset(doc, ' ', POLICY_FILE_MAX + 1);
	doc[0] = '{';
	doc[POLICY_FILE_MAX] = '}';
	{
		struct policy *p = (struct policy *)1;
		gantry_error_t err = NULL;

		assert_int_equal(policy_parse(doc, POLICY_FILE_MAX + 1, "p.json", &p, &err), -1);
		assert_null(p);
		assert_string_equal(gantry_error_str(err), "p.json: larger than 1048576 bytes");
		gantry_error_free(&err);
		assert_int_equal(policy_parse(doc + 1, POLICY_FILE_MAX, "p.json", &p, &err), -1);
		gantry_error_free(&err);
		doc[1] = '{';
		assert_int_equal(policy_parse(doc + 1, POLICY_FILE_MAX, "p.json", &p, &err), 0);
		policy_free(p);
	}
	free(doc);
}

/* A NUL in a string of a json_t built by hand (jansson's loader refuses
 * \u0000 before we see it). */
static void test_error_nul(void **state)
{
	json_t *j = json_pack("{s:[s#]}", "allowDomains", "a.com\0b", (size_t)7);
	struct policy *p = (struct policy *)1;
	gantry_error_t err = NULL;
	(void)state;

	assert_int_equal(policy_from_json(j, &p, &err), -1);
	assert_null(p);
	assert_string_equal(gantry_error_str(err), "allowDomains[0]: holds a NUL byte");
	gantry_error_free(&err);
	json_decref(j);
}

static char *canonical(const struct policy *p)
{
	json_t *j = policy_to_json(p);
	char *s = json_dumps(j, JSON_COMPACT);

	json_decref(j);
	return s;
}

static void test_canonical(void **state)
{
	struct policy *p, *q, *d;
	char *a, *b;
	json_t *j;
	gantry_error_t err = NULL;
	(void)state;

	p = parse_ok(
		"{\"allowDomains\":[\"API.Example.com.\",\"*.Packages.example.com\"],"
		"\"rules\":[{\"action\":\"deny\",\"cidr\":\"203.0.113.10\"},"
		"{\"cidr\":\"203.0.113.0/24\",\"proto\":\"tcp\",\"ports\":\"443,8000-9000,80-80\"},"
		"{\"cidr\":\"0.0.0.0/0\",\"proto\":\"icmp\"},{}],"
		"\"default\":\"deny\",\"resolveDomains\":[\"x.org\"],\"allowLocal\":true}");
	a = canonical(p);
	assert_string_equal(a,
			    "{\"default\":\"deny\",\"allowLocal\":true,\"rules\":["
			    "{\"action\":\"deny\",\"cidr\":\"203.0.113.10/32\",\"proto\":\"any\"},"
			    "{\"action\":\"allow\",\"cidr\":\"203.0.113.0/24\",\"proto\":\"tcp\","
			    "\"ports\":\"443,8000-9000,80\"},"
			    "{\"action\":\"allow\",\"cidr\":\"0.0.0.0/0\",\"proto\":\"icmp\"},"
			    "{\"action\":\"allow\",\"proto\":\"any\"}],"
			    "\"allowDomains\":[\"api.example.com\",\"*.packages.example.com\"],"
			    "\"resolveDomains\":[\"x.org\"]}");
	assert_false(p->rules[2].any_addr);
	assert_true(p->rules[3].any_addr);

	j = policy_to_json(p);
	assert_int_equal(policy_from_json(j, &q, &err), 0);
	json_decref(j);
	b = canonical(q);
	assert_string_equal(a, b);
	assert_int_equal(q->nr_rules, 4);
	assert_memory_equal(q->rules, p->rules, 4 * sizeof(*p->rules));
	free(b);

	d = policy_dup(p);
	b = canonical(d);
	assert_string_equal(a, b);
	free(b);
	free(a);
	policy_free(d);
	policy_free(q);
	policy_free(p);

	p = policy_default(false);
	a = canonical(p);
	assert_string_equal(a, "{\"default\":\"allow\",\"allowLocal\":false,\"rules\":[],"
			       "\"allowDomains\":[],\"resolveDomains\":[]}");
	d = policy_dup(p);
	policy_free(p);
	p = parse_ok("{}");
	b = canonical(p);
	assert_string_equal(a, b);
	free(a);
	free(b);
	policy_free(p);
	assert_true(d->default_allow);
	policy_free(d);
	p = policy_default(true);
	assert_true(p->allow_local);
	policy_free(p);
	policy_free(NULL);
}

static struct policy_verdict judge(const struct policy *p, const struct learned *l, uint32_t ip,
				   enum net_proto proto, uint16_t port)
{
	static const struct policy_wall w = { .host = { IP(198, 51, 100, 7) }, .nr_host = 1 };

	return policy_judge(p, &w, l, ip, proto, port, 1000);
}

#define assert_verdict(v, a, w, r)                                                                 \
	do {                                                                                       \
		struct policy_verdict v_ = (v);                                                    \
		assert_int_equal(v_.allow, (a));                                                   \
		assert_int_equal(v_.why, (w));                                                     \
		assert_int_equal(v_.rule, (r));                                                    \
	} while (0)

static void test_judge(void **state)
{
	struct policy *p =
		parse_ok("{\"default\":\"deny\",\"rules\":["
			 "{\"action\":\"deny\",\"cidr\":\"203.0.113.11/32\"},"
			 "{\"cidr\":\"203.0.113.0/24\",\"proto\":\"tcp\",\"ports\":\"443\"},"
			 "{\"cidr\":\"10.1.0.0/16\",\"proto\":\"udp\",\"ports\":\"53,5000-5010\"},"
			 "{\"cidr\":\"100.64.0.0/16\",\"ports\":\"22\"},"
			 "{\"action\":\"deny\",\"cidr\":\"198.18.0.0/15\",\"proto\":\"icmp\"}]}");
	struct learned *l = learned_new();
	char buf[128];
	(void)state;

	learned_add(l, IP(198, 51, 100, 20), "api.example.com", 300, 0);
	learned_add(l, IP(10, 99, 0, 10), "rebind.example.com", 300, 0);

	/* Rules in order, before the wall. */
	assert_verdict(judge(p, l, IP(203, 0, 113, 11), NET_PROTO_TCP, 443), false, POLICY_WHY_RULE,
		       0);
	assert_verdict(judge(p, l, IP(203, 0, 113, 10), NET_PROTO_TCP, 443), true, POLICY_WHY_RULE,
		       1);
	assert_verdict(judge(p, l, IP(10, 1, 2, 3), NET_PROTO_UDP, 5005), true, POLICY_WHY_RULE, 2);
	assert_verdict(judge(p, l, IP(10, 1, 2, 3), NET_PROTO_UDP, 5011), false, POLICY_WHY_WALL,
		       -1);
	assert_verdict(judge(p, l, IP(10, 1, 2, 3), NET_PROTO_TCP, 53), false, POLICY_WHY_WALL, -1);
	/* A rule with ports matches TCP and UDP of proto any, never ICMP. */
	assert_verdict(judge(p, l, IP(100, 64, 9, 9), NET_PROTO_UDP, 22), true, POLICY_WHY_RULE, 3);
	assert_verdict(judge(p, l, IP(100, 64, 9, 9), NET_PROTO_ICMP, 0), false, POLICY_WHY_WALL,
		       -1);
	assert_verdict(judge(p, l, IP(198, 19, 1, 1), NET_PROTO_ICMP, 0), false, POLICY_WHY_RULE,
		       4);
	/* Off the rules' ports: default deny. */
	assert_verdict(judge(p, l, IP(203, 0, 113, 10), NET_PROTO_TCP, 80), false,
		       POLICY_WHY_DEFAULT, -1);
	/* The wall: fixed ranges and host addresses, before learned ones. */
	assert_verdict(judge(p, l, IP(10, 99, 0, 10), NET_PROTO_TCP, 443), false, POLICY_WHY_WALL,
		       -1);
	assert_verdict(judge(p, l, IP(198, 51, 100, 7), NET_PROTO_TCP, 1), false, POLICY_WHY_WALL,
		       -1);
	assert_verdict(judge(p, l, IP(172, 31, 0, 5), NET_PROTO_TCP, 1), false, POLICY_WHY_WALL,
		       -1);
	assert_verdict(judge(p, l, IP(172, 32, 0, 5), NET_PROTO_TCP, 1), false, POLICY_WHY_DEFAULT,
		       -1);
	/* Learned: TCP and UDP only. */
	assert_verdict(judge(p, l, IP(198, 51, 100, 20), NET_PROTO_TCP, 8443), true,
		       POLICY_WHY_LEARNED, -1);
	assert_verdict(judge(p, l, IP(198, 51, 100, 20), NET_PROTO_UDP, 443), true,
		       POLICY_WHY_LEARNED, -1);
	assert_verdict(judge(p, l, IP(198, 51, 100, 20), NET_PROTO_ICMP, 0), false,
		       POLICY_WHY_DEFAULT, -1);
	assert_verdict(policy_judge(p, NULL, NULL, IP(198, 51, 100, 20), NET_PROTO_TCP, 1, 1000),
		       false, POLICY_WHY_DEFAULT, -1);
	/* Expired: the default again. */
	assert_verdict(policy_judge(p, NULL, l, IP(198, 51, 100, 20), NET_PROTO_TCP, 1, 300000),
		       false, POLICY_WHY_DEFAULT, -1);

	/* The verdict in words. */
	struct policy_verdict v = judge(p, l, IP(203, 0, 113, 11), NET_PROTO_TCP, 443);
	policy_verdict_str(&v, l, IP(203, 0, 113, 11), 1000, buf, sizeof(buf));
	assert_string_equal(buf, "rule 0 (deny)");
	v = judge(p, l, IP(10, 99, 0, 10), NET_PROTO_TCP, 443);
	policy_verdict_str(&v, l, IP(10, 99, 0, 10), 1000, buf, sizeof(buf));
	assert_string_equal(buf, "local network");
	v = judge(p, l, IP(198, 51, 100, 20), NET_PROTO_TCP, 443);
	policy_verdict_str(&v, l, IP(198, 51, 100, 20), 1000, buf, sizeof(buf));
	assert_string_equal(buf, "learned (api.example.com)");
	v = judge(p, l, IP(1, 1, 1, 1), NET_PROTO_TCP, 443);
	policy_verdict_str(&v, l, IP(1, 1, 1, 1), 1000, buf, sizeof(buf));
	assert_string_equal(buf, "default deny");

	/* allowLocal lets the learned private address through. */
	p->allow_local = true;
	assert_verdict(judge(p, l, IP(10, 99, 0, 10), NET_PROTO_TCP, 443), true, POLICY_WHY_LEARNED,
		       -1);
	assert_verdict(judge(p, l, IP(10, 1, 2, 3), NET_PROTO_TCP, 1), false, POLICY_WHY_DEFAULT,
		       -1);
	policy_free(p);

	p = policy_default(false);
	assert_verdict(judge(p, NULL, IP(1, 2, 3, 4), NET_PROTO_ICMP, 0), true, POLICY_WHY_DEFAULT,
		       -1);
	assert_verdict(judge(p, NULL, IP(127, 0, 0, 1), NET_PROTO_TCP, 80), false, POLICY_WHY_WALL,
		       -1);
	assert_verdict(judge(p, NULL, IP(0, 1, 2, 3), NET_PROTO_UDP, 80), false, POLICY_WHY_WALL,
		       -1);
	assert_verdict(judge(p, NULL, IP(255, 255, 255, 255), NET_PROTO_UDP, 80), false,
		       POLICY_WHY_WALL, -1);
	assert_verdict(judge(p, NULL, IP(224, 0, 0, 1), NET_PROTO_UDP, 80), false, POLICY_WHY_WALL,
		       -1);
	assert_verdict(judge(p, NULL, IP(169, 254, 169, 254), NET_PROTO_TCP, 80), false,
		       POLICY_WHY_WALL, -1);
	assert_verdict(judge(p, NULL, IP(100, 127, 0, 1), NET_PROTO_TCP, 80), false,
		       POLICY_WHY_WALL, -1);
	assert_verdict(judge(p, NULL, IP(100, 128, 0, 1), NET_PROTO_TCP, 80), true,
		       POLICY_WHY_DEFAULT, -1);
	assert_verdict(judge(p, NULL, IP(192, 168, 127, 254), NET_PROTO_TCP, 80), false,
		       POLICY_WHY_WALL, -1);
	policy_free(p);
	learned_free(l);
}

/* An allow rule without a cidr is for addresses past the wall: "allow
 * tcp 443" reaches the world's 443, not the host's loopback (.254),
 * metadata or the host's own addresses; a cidr naming them opens them, a
 * deny rule denies there too, and allowLocal takes the wall down. */
static void test_rule_without_cidr_keeps_the_wall(void **state)
{
	struct policy *p =
		parse_ok("{\"default\":\"deny\",\"rules\":["
			 "{\"action\":\"deny\",\"proto\":\"tcp\",\"ports\":\"25\"},"
			 "{\"proto\":\"tcp\",\"ports\":\"80,443\"},"
			 "{\"cidr\":\"192.168.127.254/32\",\"proto\":\"tcp\",\"ports\":\"443\"}]}");
	(void)state;

	assert_verdict(judge(p, NULL, IP(203, 0, 113, 10), NET_PROTO_TCP, 443), true,
		       POLICY_WHY_RULE, 1);
	assert_verdict(judge(p, NULL, IP(169, 254, 169, 254), NET_PROTO_TCP, 80), false,
		       POLICY_WHY_WALL, -1);
	assert_verdict(judge(p, NULL, IP(198, 51, 100, 7), NET_PROTO_TCP, 443), false,
		       POLICY_WHY_WALL, -1);
	assert_verdict(judge(p, NULL, IP(192, 168, 127, 254), NET_PROTO_TCP, 80), false,
		       POLICY_WHY_WALL, -1);
	assert_verdict(judge(p, NULL, IP(192, 168, 127, 254), NET_PROTO_TCP, 443), true,
		       POLICY_WHY_RULE, 2);
	assert_verdict(judge(p, NULL, IP(10, 0, 0, 1), NET_PROTO_TCP, 25), false, POLICY_WHY_RULE,
		       0);
	policy_free(p);
	p = parse_ok("{\"default\":\"deny\",\"allowLocal\":true,\"rules\":["
		     "{\"proto\":\"tcp\",\"ports\":\"80\"}]}");
	assert_verdict(judge(p, NULL, IP(169, 254, 169, 254), NET_PROTO_TCP, 80), true,
		       POLICY_WHY_RULE, 0);
	policy_free(p);
}

static void test_wall_host(void **state)
{
	struct policy_wall w = { .nr_host = 0 };
	(void)state;

	policy_wall_host_addrs(&w);
	assert_true(w.nr_host <= POLICY_WALL_HOST);
	for (size_t i = 0; i < w.nr_host; i++) {
		assert_true(policy_wall_hit(&w, w.host[i]));
		for (size_t k = 0; k < i; k++)
			assert_int_not_equal(w.host[i], w.host[k]);
	}
}

static void test_enforce_proxy(void **state)
{
	struct policy *p = parse_ok("{\"default\":\"allow\",\"rules\":[{\"action\":\"deny\","
				    "\"cidr\":\"198.51.100.0/24\"}]}");
	uint32_t ips[] = { IP(192, 168, 127, 254), IP(203, 0, 113, 5) };
	char *s;
	(void)state;

	policy_add_proxy(p, ips, 2, 3128, true);
	s = canonical(p);
	assert_string_equal(s,
			    "{\"default\":\"allow\",\"allowLocal\":false,\"rules\":["
			    "{\"action\":\"allow\",\"cidr\":\"192.168.127.254/"
			    "32\",\"proto\":\"tcp\",\"ports\":\"3128\"},"
			    "{\"action\":\"allow\",\"cidr\":\"203.0.113.5/"
			    "32\",\"proto\":\"tcp\",\"ports\":\"3128\"},"
			    "{\"action\":\"deny\",\"proto\":\"tcp\",\"ports\":\"80,443\"},"
			    "{\"action\":\"deny\",\"proto\":\"udp\",\"ports\":\"443\"},"
			    "{\"action\":\"deny\",\"cidr\":\"198.51.100.0/24\",\"proto\":\"any\"}],"
			    "\"allowDomains\":[],\"resolveDomains\":[]}");
	free(s);
	assert_verdict(judge(p, NULL, IP(192, 168, 127, 254), NET_PROTO_TCP, 3128), true,
		       POLICY_WHY_RULE, 0);
	assert_verdict(judge(p, NULL, IP(192, 168, 127, 254), NET_PROTO_TCP, 3129), false,
		       POLICY_WHY_WALL, -1);
	assert_verdict(judge(p, NULL, IP(1, 1, 1, 1), NET_PROTO_TCP, 443), false, POLICY_WHY_RULE,
		       2);
	assert_verdict(judge(p, NULL, IP(1, 1, 1, 1), NET_PROTO_UDP, 443), false, POLICY_WHY_RULE,
		       3);
	assert_verdict(judge(p, NULL, IP(1, 1, 1, 1), NET_PROTO_UDP, 80), true, POLICY_WHY_DEFAULT,
		       -1);
	policy_free(p);
}

static void test_domains(void **state)
{
	struct policy *p;
	(void)state;

	assert_true(policy_domain_match("example.com", "example.com"));
	assert_false(policy_domain_match("example.com", "www.example.com"));
	assert_false(policy_domain_match("example.com", "example.co"));
	assert_true(policy_domain_match("*.example.com", "example.com"));
	assert_true(policy_domain_match("*.example.com", "a.b.example.com"));
	assert_false(policy_domain_match("*.example.com", "badexample.com"));
	assert_false(policy_domain_match("*.example.com", "example.com.evil"));
	assert_false(policy_domain_match("*.example.com", "xample.com"));
	assert_true(policy_domain_match("Example.COM", "example.com"));

	p = parse_ok("{\"default\":\"deny\",\"allowDomains\":[\"Api.Example.com.\",\"*.pkg.test\"],"
		     "\"resolveDomains\":[\"ntp.test\",\"api.example.com\"]}");
	assert_string_equal(p->allow_domains[0], "api.example.com");
	assert_int_equal(policy_dns_name(p, "api.example.com"), POLICY_DNS_LEARN);
	assert_int_equal(policy_dns_name(p, "a.pkg.test"), POLICY_DNS_LEARN);
	assert_int_equal(policy_dns_name(p, "pkg.test"), POLICY_DNS_LEARN);
	assert_int_equal(policy_dns_name(p, "ntp.test"), POLICY_DNS_RESOLVE);
	assert_int_equal(policy_dns_name(p, "x.ntp.test"), POLICY_DNS_REFUSE);
	assert_int_equal(policy_dns_name(p, "evil.test"), POLICY_DNS_REFUSE);
	p->default_allow = true; /* allowDomains still decide */
	assert_int_equal(policy_dns_name(p, "evil.test"), POLICY_DNS_REFUSE);
	policy_free(p);

	p = parse_ok("{\"resolveDomains\":[\"ntp.test\"]}");
	assert_int_equal(policy_dns_name(p, "anything.test"), POLICY_DNS_RESOLVE);
	policy_free(p);
	p = parse_ok("{\"default\":\"deny\"}");
	assert_int_equal(policy_dns_name(p, "anything.test"), POLICY_DNS_REFUSE);
	policy_free(p);
	p = parse_ok("{\"allowDomains\":[\"_srv.a-b.test\",\"*.x9.test\"]}");
	policy_free(p);
}

static void test_learned(void **state)
{
	struct learned *l = learned_new();
	struct policy *p;
	json_t *j;
	char *s, name[32];
	(void)state;

	/* TTLs: capped at 300 s, 0 counts as 60 s. */
	learned_add(l, IP(1, 0, 0, 1), "a.test", 100000, 0);
	learned_add(l, IP(1, 0, 0, 2), "b.test", 0, 0);
	learned_add(l, IP(1, 0, 0, 3), "c.test", 5, 0);
	assert_int_equal(learned_count(l), 3);
	assert_true(learned_has(l, IP(1, 0, 0, 1), 299999));
	assert_false(learned_has(l, IP(1, 0, 0, 1), 300000));
	assert_true(learned_has(l, IP(1, 0, 0, 2), 59999));
	assert_false(learned_has(l, IP(1, 0, 0, 2), 60000));
	assert_false(learned_has(l, IP(1, 0, 0, 3), 5000));
	assert_false(learned_has(l, IP(1, 0, 0, 4), 0));
	assert_null(learned_name(l, IP(1, 0, 0, 3), 5000));

	/* Names per address, each with its own expiry. */
	learned_add(l, IP(1, 0, 0, 3), "d.test", 60, 0);
	assert_string_equal(learned_name(l, IP(1, 0, 0, 3), 0), "c.test");
	assert_string_equal(learned_name(l, IP(1, 0, 0, 3), 5000), "d.test");
	learned_add(l, IP(1, 0, 0, 3), "c.test", 100, 0); /* refreshed */
	assert_string_equal(learned_name(l, IP(1, 0, 0, 3), 70000), "c.test");

	j = learned_json(l, 1000);
	s = json_dumps(j, JSON_COMPACT);
	assert_string_equal(s,
			    "[{\"addr\":\"1.0.0.1\",\"names\":[\"a.test\"],\"expires_in_s\":299},"
			    "{\"addr\":\"1.0.0.2\",\"names\":[\"b.test\"],\"expires_in_s\":59},"
			    "{\"addr\":\"1.0.0.3\",\"names\":[\"c.test\",\"d.test\"],"
			    "\"expires_in_s\":99}]");
	free(s);
	json_decref(j);

	/* A full name list: the soonest-expiring name makes room. */
	for (int i = 0; i < POLICY_LEARNED_NAMES; i++) {
		snprintf(name, sizeof(name), "n%d.test", i);
		learned_add(l, IP(2, 0, 0, 1), name, (uint32_t)(100 + (i == 3 ? -50 : i)), 0);
	}
	learned_add(l, IP(2, 0, 0, 1), "new.test", 10, 0);
	j = learned_json(l, 0);
	s = json_dumps(json_array_get(j, 3), JSON_COMPACT);
	assert_string_equal(s,
			    "{\"addr\":\"2.0.0.1\",\"names\":[\"n0.test\",\"n1.test\",\"n2.test\","
			    "\"new.test\",\"n4.test\",\"n5.test\",\"n6.test\",\"n7.test\"],"
			    "\"expires_in_s\":107}");
	free(s);
	json_decref(j);

	/* Retain: names the new policy lets learn, unexpired. */
	p = parse_ok("{\"allowDomains\":[\"*.test\"],\"resolveDomains\":[\"b.test\"]}");
	learned_retain(l, p, 0);
	assert_int_equal(learned_count(l), 4);
	policy_free(p);
	p = parse_ok("{\"allowDomains\":[\"c.test\",\"n1.test\"],\"resolveDomains\":[\"a.test\"]}");
	learned_retain(l, p, 1000);
	assert_int_equal(learned_count(l), 2);
	assert_false(learned_has(l, IP(1, 0, 0, 1), 1000));
	assert_false(learned_has(l, IP(1, 0, 0, 2), 1000));
	assert_string_equal(learned_name(l, IP(1, 0, 0, 3), 1000), "c.test");
	assert_string_equal(learned_name(l, IP(2, 0, 0, 1), 1000), "n1.test");
	learned_retain(l, p, 200000); /* both expired */
	assert_int_equal(learned_count(l), 0);
	policy_free(p);
	learned_free(l);
}

/* A full table: the address whose latest expiry is soonest goes, and
 * every other one stays findable through the index's deletions. */
static void test_learned_evict(void **state)
{
	struct learned *l = learned_new();
	struct policy *p;
	(void)state;

	for (uint32_t i = 0; i < POLICY_LEARNED_MAX; i++)
		learned_add(l, IP(9, 0, 0, 0) + i * 4096, "x.test", 100 + (i % 150), 0);
	learned_add(l, IP(9, 0, 0, 0) + 7 * 4096, "y.test", 300, 0); /* its latest is 300 now */
	assert_int_equal(learned_count(l), POLICY_LEARNED_MAX);
	learned_add(l, IP(8, 8, 8, 8), "z.test", 300, 0);
	assert_int_equal(learned_count(l), POLICY_LEARNED_MAX);
	assert_true(learned_has(l, IP(8, 8, 8, 8), 0));
	assert_false(learned_has(l, IP(9, 0, 0, 0), 0)); /* i 0: the first of the soonest */
	assert_true(learned_has(l, IP(9, 0, 0, 0) + 150 * 4096, 0));
	learned_add(l, IP(8, 8, 4, 4), "z.test", 300, 0);
	assert_false(learned_has(l, IP(9, 0, 0, 0) + 150 * 4096, 0));
	for (uint32_t i = 1; i < POLICY_LEARNED_MAX; i++)
		if (i != 150)
			assert_true(learned_has(l, IP(9, 0, 0, 0) + i * 4096, 0));

	/* Drop every other address, then all are still where they should be. */
	p = parse_ok("{\"allowDomains\":[\"y.test\",\"z.test\"]}");
	learned_retain(l, p, 0);
	assert_int_equal(learned_count(l), 3);
	assert_true(learned_has(l, IP(9, 0, 0, 0) + 7 * 4096, 0));
	assert_true(learned_has(l, IP(8, 8, 8, 8), 0));
	assert_true(learned_has(l, IP(8, 8, 4, 4), 0));
	assert_false(learned_has(l, IP(9, 0, 0, 0) + 8 * 4096, 0));
	policy_free(p);
	learned_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errors),	      cmocka_unit_test(test_error_limits),
		cmocka_unit_test(test_error_nul),     cmocka_unit_test(test_canonical),
		cmocka_unit_test(test_judge),	      cmocka_unit_test(test_wall_host),
		cmocka_unit_test(test_rule_without_cidr_keeps_the_wall),
		cmocka_unit_test(test_enforce_proxy), cmocka_unit_test(test_domains),
		cmocka_unit_test(test_learned),	      cmocka_unit_test(test_learned_evict),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
