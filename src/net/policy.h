/* The egress policy: which destinations a guest may reach and which names
 * its DNS queries may carry. Decoded strictly from the reference grammar
 * (docs/network.md), compiled into rules judged per guest frame by the
 * network worker, and into the name checks its DNS proxy asks.
 *
 *   { "default": "allow"|"deny",          default allow
 *     "allowLocal": bool,                 default false: the local wall stands
 *     "rules": [ { "action": "allow"|"deny",        default allow
 *                  "cidr": "A.B.C.D/N",             omitted: any address
 *                  "proto": "any"|"tcp"|"udp"|"icmp",  default any
 *                  "ports": "443" | "53,443" | "8000-9000" } ],  omitted: any
 *     "allowDomains": ["host", "*.suffix"],   resolved, and their addresses allowed
 *     "resolveDomains": ["host"] }            resolved only
 *
 * A destination is judged: the first rule that matches it; else the local
 * wall (unless allowLocal), else an address learned from a DNS answer to
 * an allowDomains name (TCP and UDP only), else the default.
 *
 * Pure code over memory: no I/O, so it is unit tested and fuzzed as it
 * runs. The learned table is the worker's; policy_judge only asks it. */
#ifndef GANTRY_NET_POLICY_H
#define GANTRY_NET_POLICY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "net/filter.h"

#define POLICY_FILE_MAX	   (1024 * 1024) /* bytes of a policy file */
#define POLICY_DOC_MAX	   (128 * 1024)	 /* of its canonical document, compact */
#define POLICY_RULES_MAX   1024
#define POLICY_DOMAINS_MAX 1024 /* in each of the two lists */
#define POLICY_PORTS_MAX   32	/* ranges in one rule's "ports" */
#define POLICY_WALL_HOST   64	/* host interface addresses added to the wall */

/* Learned addresses: TTLs capped at POLICY_TTL_CAP seconds (a zero TTL
 * counts as POLICY_TTL_ZERO), at most POLICY_LEARNED_MAX addresses, each
 * with at most POLICY_LEARNED_NAMES names. */
#define POLICY_TTL_CAP	     300
#define POLICY_TTL_ZERO	     60
#define POLICY_LEARNED_MAX   4096
#define POLICY_LEARNED_NAMES 8

enum policy_proto { POLICY_ANY, POLICY_TCP, POLICY_UDP, POLICY_ICMP };

struct policy_ports {
	uint16_t lo, hi; /* inclusive */
};

struct policy_rule {
	bool allow;
	uint32_t net;	/* host order, net & ~mask == 0 */
	uint8_t prefix; /* 0..32; 0 with no "cidr": any address */
	bool any_addr;	/* no "cidr" given */
	enum policy_proto proto;
	size_t nr_ports; /* 0: any port (and ICMP matches) */
	struct policy_ports ports[POLICY_PORTS_MAX];
};

struct policy {
	bool default_allow;
	bool allow_local;
	struct policy_rule *rules;
	size_t nr_rules;
	char **allow_domains; /* lowercased, no trailing dot; "*.s" kept as written */
	size_t nr_allow;
	char **resolve_domains;
	size_t nr_resolve;
};

/* Decode a policy document (at most POLICY_FILE_MAX bytes). Strict: an
 * unknown or duplicate key, a value of the wrong type, a bad CIDR (host
 * bits set included), port list, protocol, action or domain name is one
 * error line naming its JSON path, e.g.
 *   "rules[2].cidr: `10.0.0.1/8` has host bits set (10.0.0.0/8?)"
 *   "defualt: unknown key"
 * what names the document in JSON syntax errors. */
int policy_parse(const char *buf, size_t len, const char *what, struct policy **out,
		 gantry_error_t *err);
int policy_from_json(json_t *j, struct policy **out, gantry_error_t *err);
/* The policy of a sandbox without a file: {"default":"allow"} and the wall. */
struct policy *policy_default(bool allow_local);
/* The canonical document: every key present, rules fully spelt out, in
 * an order policy_from_json reads back to an equal policy. */
json_t *policy_to_json(const struct policy *p);
struct policy *policy_dup(const struct policy *p);
void policy_free(struct policy *p);

/* -proxy: put in front of p's rules "allow tcp to each proxy address on
 * port"; with enforce (-proxy-enforce), then "deny tcp 80,443" and "deny
 * udp 443" too, so the web is reached only through the proxy. */
void policy_add_proxy(struct policy *p, const uint32_t *ips, size_t nr_ips, uint16_t port,
		      bool enforce);

/* The local-network wall: 10/8, 172.16/12, 192.168/16, 169.254/16, 127/8,
 * 100.64/10, 224/4, 240/4, 0/8, and the host's own interface addresses. */
struct policy_wall {
	uint32_t host[POLICY_WALL_HOST];
	size_t nr_host;
};
/* Fill w->host from getifaddrs() (IPv4 only); the fixed ranges need no
 * filling. Not pure: the worker calls it at start and on every swap. */
void policy_wall_host_addrs(struct policy_wall *w);
bool policy_wall_hit(const struct policy_wall *w, uint32_t ip);

/* Addresses learned from DNS answers: ip -> the allowDomains names it was
 * an answer for, each with its expiry. */
struct learned;
struct learned *learned_new(void);
void learned_free(struct learned *l);
/* name: the question's name (the one the policy allowed). ttl_s: as the
 * answer gave it (capped and zero-mapped here). When the table is full,
 * the address that expires soonest makes room. */
void learned_add(struct learned *l, uint32_t ip, const char *name, uint32_t ttl_s,
		 uint64_t now_ms);
bool learned_has(const struct learned *l, uint32_t ip, uint64_t now_ms);
/* Whether name (any case) is one of ip's names now. */
bool learned_has_name(const struct learned *l, uint32_t ip, const char *name, uint64_t now_ms);
/* The first unexpired name ip was learned for, or NULL. */
const char *learned_name(const struct learned *l, uint32_t ip, uint64_t now_ms);
/* After a swap: drop the names p no longer lets learn, and expired ones. */
void learned_retain(struct learned *l, const struct policy *p, uint64_t now_ms);
size_t learned_count(const struct learned *l);
/* [{"addr","names":[...],"expires_in_s"}...] for `net-policy show`. */
json_t *learned_json(const struct learned *l, uint64_t now_ms);

/* Why a destination was judged as it was. */
enum policy_why {
	POLICY_WHY_RULE,    /* rule[rule] matched: allow or deny as it says */
	POLICY_WHY_WALL,    /* the local wall: deny */
	POLICY_WHY_LEARNED, /* a learned address: allow */
	POLICY_WHY_DEFAULT, /* the default */
};

struct policy_verdict {
	bool allow;
	enum policy_why why;
	int rule; /* index of the rule for POLICY_WHY_RULE, else -1 */
};

/* "rule 3 (deny)", "local network", "learned (api.example.com)", "default deny". */
void policy_verdict_str(const struct policy_verdict *v, const struct learned *l, uint32_t ip,
			uint64_t now_ms, char *buf, size_t len);

/* Judge a destination: dst host order; proto TCP, UDP or ICMP; port the
 * TCP/UDP destination port (0 for ICMP). l may be NULL (nothing learned). */
struct policy_verdict policy_judge(const struct policy *p, const struct policy_wall *w,
				   const struct learned *l, uint32_t dst, enum net_proto proto,
				   uint16_t port, uint64_t now_ms);

/* What the DNS proxy does with a query for name (lowercased, no trailing
 * dot): REFUSE it at once, forward it (RESOLVE), or forward it and learn
 * the addresses of its answer (LEARN). A name matching allowDomains
 * learns; one matching only resolveDomains resolves; a default-allow
 * policy with no allowDomains resolves every name; anything else is
 * refused (so a default-deny policy without domain lists refuses all). */
enum policy_dns { POLICY_DNS_REFUSE, POLICY_DNS_RESOLVE, POLICY_DNS_LEARN };
enum policy_dns policy_dns_name(const struct policy *p, const char *name);
/* "example.com" matches only itself; "*.example.com" matches
 * example.com and every name below it. Both lowercased. */
bool policy_domain_match(const char *pattern, const char *name);

#endif
