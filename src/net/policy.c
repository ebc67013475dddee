/* The egress policy (net/policy.h): its strict decoder and canonical
 * encoder, the per-frame judge, the local wall and the DNS proxy's name
 * checks. The learned-address table is net/learned.c. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/json.h"
#include "common/util.h"
#include "net/policy.h"

#define DOMAIN_MAX   253
#define LABEL_MAX    63
#define PATH_MAX_LEN 64 /* "resolveDomains[1023]", "rules[1023].action" */

/* ---- decoding ---------------------------------------------------------- */

/* A string value without NUL bytes, or an error naming path. */
static int get_string(json_t *v, const char *path, const char **out, gantry_error_t *err)
{
	if (!json_is_string(v))
		return gantry_error(err, 0, "%s: must be a string", path);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return gantry_error(err, 0, "%s: holds a NUL byte", path);
	*out = json_string_value(v);
	return 0;
}

static int get_bool(json_t *v, const char *path, bool *out, gantry_error_t *err)
{
	if (!json_is_boolean(v))
		return gantry_error(err, 0, "%s: must be true or false", path);
	*out = json_is_true(v);
	return 0;
}

static int get_action(json_t *v, const char *path, bool *allow, gantry_error_t *err)
{
	const char *s;

	if (json_is_string(v)) {
		s = json_string_value(v);
		if (strlen(s) == json_string_length(v) && strcmp(s, "allow") == 0) {
			*allow = true;
			return 0;
		}
		if (strlen(s) == json_string_length(v) && strcmp(s, "deny") == 0) {
			*allow = false;
			return 0;
		}
	}
	return gantry_error(err, 0, "%s: must be \"allow\" or \"deny\"", path);
}

static const char *const proto_names[] = {
	[POLICY_ANY] = "any",
	[POLICY_TCP] = "tcp",
	[POLICY_UDP] = "udp",
	[POLICY_ICMP] = "icmp",
};

static int get_proto(json_t *v, const char *path, enum policy_proto *out, gantry_error_t *err)
{
	if (json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v)) {
		for (size_t i = 0; i < ARRAY_SIZE(proto_names); i++) {
			if (strcmp(json_string_value(v), proto_names[i]) == 0) {
				*out = (enum policy_proto)i;
				return 0;
			}
		}
	}
	return gantry_error(err, 0, "%s: must be \"any\", \"tcp\", \"udp\" or \"icmp\"", path);
}

/* Decimal digits only, no leading zero (so "08" and "+8" are refused), at
 * most max. Returns the bytes used, 0 when there is no number there. */
static size_t strict_uint(const char *s, unsigned long max, unsigned long *out)
{
	unsigned long v = 0;
	size_t n = 0;

	while (s[n] >= '0' && s[n] <= '9') {
		if (n > 0 && v == 0)
			return 0; /* leading zero */
		v = v * 10 + (unsigned long)(s[n] - '0');
		if (v > max)
			return 0;
		n++;
	}
	*out = v;
	return n;
}

static uint32_t prefix_mask(unsigned prefix)
{
	return prefix == 0 ? 0 : ~(uint32_t)0 << (32 - prefix);
}

static void ip_str(uint32_t ip, char buf[INET_ADDRSTRLEN])
{
	snprintf(buf, INET_ADDRSTRLEN, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 0xff, (ip >> 8) & 0xff,
		 ip & 0xff);
}

/* "A.B.C.D" or "A.B.C.D/N" exactly: inet_aton would take "10.1", hex and
 * octal, none of which a reader of the file would expect. */
static int parse_cidr(const char *s, const char *path, struct policy_rule *r, gantry_error_t *err)
{
	unsigned long v, prefix = 32;
	uint32_t ip = 0;
	const char *p = s;
	char net[INET_ADDRSTRLEN];
	size_t n;

	for (int i = 0; i < 4; i++) {
		if (i > 0 && *p++ != '.')
			goto bad;
		n = strict_uint(p, 255, &v);
		if (n == 0)
			goto bad;
		ip = ip << 8 | (uint32_t)v;
		p += n;
	}
	if (*p == '/') {
		p++;
		n = strict_uint(p, 32, &prefix);
		if (n == 0)
			goto bad;
		p += n;
	}
	if (*p != '\0')
		goto bad;
	if (ip & ~prefix_mask((unsigned)prefix)) {
		ip_str(ip & prefix_mask((unsigned)prefix), net);
		return gantry_error(err, 0, "%s: `%.64s` has host bits set (%s/%lu?)", path, s, net,
				    prefix);
	}
	r->net = ip;
	r->prefix = (uint8_t)prefix;
	r->any_addr = false;
	return 0;
bad:
	return gantry_error(err, 0, "%s: `%.64s` is not A.B.C.D or A.B.C.D/N (N 0 to 32)", path, s);
}

/* "443", "53,443", "8000-9000,9443": no spaces, no empty items. */
static int parse_ports(const char *s, const char *path, struct policy_rule *r, gantry_error_t *err)
{
	const char *p = s;
	unsigned long lo, hi;
	size_t n;

	r->nr_ports = 0;
	for (;;) {
		n = strict_uint(p, 65535, &lo);
		if (n == 0 || lo == 0)
			goto bad;
		p += n;
		hi = lo;
		if (*p == '-') {
			p++;
			n = strict_uint(p, 65535, &hi);
			if (n == 0)
				goto bad;
			p += n;
			if (hi < lo)
				return gantry_error(err, 0,
						    "%s: `%.64s`: range %lu-%lu is backwards", path,
						    s, lo, hi);
		}
		if (r->nr_ports == POLICY_PORTS_MAX)
			return gantry_error(err, 0, "%s: more than %d port ranges", path,
					    POLICY_PORTS_MAX);
		r->ports[r->nr_ports].lo = (uint16_t)lo;
		r->ports[r->nr_ports].hi = (uint16_t)hi;
		r->nr_ports++;
		if (*p == '\0')
			return 0;
		if (*p++ != ',')
			goto bad;
	}
bad:
	return gantry_error(
		err, 0, "%s: `%.64s` is not a port list (N or N-M, 1 to 65535, comma separated)",
		path, s);
}

static int parse_rule(json_t *j, size_t idx, struct policy_rule *r, gantry_error_t *err)
{
	char path[PATH_MAX_LEN];
	const char *key, *s;
	json_t *v;
	bool have_ports = false;

	memset(r, 0, sizeof(*r));
	r->allow = true;
	r->any_addr = true;
	r->proto = POLICY_ANY;
	if (!json_is_object(j))
		return gantry_error(err, 0, "rules[%zu]: must be an object", idx);
	json_object_foreach(j, key, v)
	{
		snprintf(path, sizeof(path), "rules[%zu].%s", idx, key);
		if (strcmp(key, "action") == 0) {
			if (get_action(v, path, &r->allow, err) < 0)
				return -1;
		} else if (strcmp(key, "cidr") == 0) {
			if (get_string(v, path, &s, err) < 0 || parse_cidr(s, path, r, err) < 0)
				return -1;
		} else if (strcmp(key, "proto") == 0) {
			if (get_proto(v, path, &r->proto, err) < 0)
				return -1;
		} else if (strcmp(key, "ports") == 0) {
			if (get_string(v, path, &s, err) < 0 || parse_ports(s, path, r, err) < 0)
				return -1;
			have_ports = true;
		} else {
			return gantry_error(err, 0, "rules[%zu].%.64s: unknown key", idx, key);
		}
	}
	if (have_ports && r->proto == POLICY_ICMP)
		return gantry_error(err, 0,
				    "rules[%zu].ports: ICMP has no ports (drop \"ports\" "
				    "or use proto tcp or udp)",
				    idx);
	return 0;
}

static bool label_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Lowercase s, strip one trailing dot and check it is a name, or "*." and
 * one. */
static int parse_domain(const char *s, const char *path, char **out, gantry_error_t *err)
{
	cleanup_free char *d = xstrdup(s);
	size_t len = strlen(d), label = 0;
	char *body = d;

	for (size_t i = 0; i < len; i++)
		if (d[i] >= 'A' && d[i] <= 'Z')
			d[i] = (char)(d[i] - 'A' + 'a');
	if (len > 0 && d[len - 1] == '.')
		d[--len] = '\0';
	if (strcmp(d, "*") == 0 || strcmp(d, "*.") == 0 || len == 0)
		return gantry_error(err, 0,
				    "%s: `%.64s` names no domain (to allow every name, "
				    "use \"default\": \"allow\" without allowDomains)",
				    path, s);
	if (strncmp(d, "*.", 2) == 0)
		body = d + 2;
	if (strchr(body, '*'))
		return gantry_error(err, 0, "%s: `%.64s`: `*` only as a leading `*.`", path, s);
	if (strlen(body) > DOMAIN_MAX)
		return gantry_error(err, 0, "%s: `%.64s...` is longer than %d bytes", path, s,
				    DOMAIN_MAX);
	for (const char *c = body;; c++) {
		if (*c == '.' || *c == '\0') {
			if (label == 0 || label > LABEL_MAX)
				goto bad;
			if (*c == '\0')
				break;
			label = 0;
			continue;
		}
		if (!label_char(*c))
			goto bad;
		label++;
	}
	*out = steal_pointer(&d);
	return 0;
bad:
	return gantry_error(err, 0,
			    "%s: `%.64s` is not a domain name (labels of 1 to 63 letters, digits, "
			    "`-` or `_`)",
			    path, s);
}

static int parse_domains(json_t *v, const char *key, char ***out, size_t *nr, gantry_error_t *err)
{
	char path[PATH_MAX_LEN];
	const char *s;
	size_t n;

	if (!json_is_array(v))
		return gantry_error(err, 0, "%s: must be an array of names", key);
	n = json_array_size(v);
	if (n > POLICY_DOMAINS_MAX)
		return gantry_error(err, 0, "%s: more than %d names", key, POLICY_DOMAINS_MAX);
	*out = xzalloc((n + 1) * sizeof(char *));
	for (*nr = 0; *nr < n; (*nr)++) {
		snprintf(path, sizeof(path), "%s[%zu]", key, *nr);
		if (get_string(json_array_get(v, *nr), path, &s, err) < 0 ||
		    parse_domain(s, path, &(*out)[*nr], err) < 0)
			return -1;
	}
	return 0;
}

static int parse_rules(json_t *v, struct policy *p, gantry_error_t *err)
{
	size_t n;

	if (!json_is_array(v))
		return gantry_error(err, 0, "rules: must be an array of objects");
	n = json_array_size(v);
	if (n > POLICY_RULES_MAX)
		return gantry_error(err, 0, "rules: more than %d rules", POLICY_RULES_MAX);
	p->rules = xzalloc((n ? n : 1) * sizeof(*p->rules));
	for (p->nr_rules = 0; p->nr_rules < n; p->nr_rules++)
		if (parse_rule(json_array_get(v, p->nr_rules), p->nr_rules, &p->rules[p->nr_rules],
			       err) < 0)
			return -1;
	return 0;
}

static int parse_top(json_t *j, struct policy *p, gantry_error_t *err)
{
	const char *key;
	json_t *v;

	if (!json_is_object(j))
		return gantry_error(err, 0, "a policy must be a JSON object");
	json_object_foreach(j, key, v)
	{
		if (strcmp(key, "default") == 0) {
			if (get_action(v, "default", &p->default_allow, err) < 0)
				return -1;
		} else if (strcmp(key, "allowLocal") == 0) {
			if (get_bool(v, "allowLocal", &p->allow_local, err) < 0)
				return -1;
		} else if (strcmp(key, "rules") == 0) {
			if (parse_rules(v, p, err) < 0)
				return -1;
		} else if (strcmp(key, "allowDomains") == 0) {
			if (parse_domains(v, key, &p->allow_domains, &p->nr_allow, err) < 0)
				return -1;
		} else if (strcmp(key, "resolveDomains") == 0) {
			if (parse_domains(v, key, &p->resolve_domains, &p->nr_resolve, err) < 0)
				return -1;
		} else {
			return gantry_error(err, 0, "%.64s: unknown key", key);
		}
	}
	return 0;
}

int policy_from_json(json_t *j, struct policy **out, gantry_error_t *err)
{
	struct policy *p = policy_default(false);

	*out = NULL;
	if (parse_top(j, p, err) < 0) {
		policy_free(p);
		return gantry_error_sanitize(err, 0); /* keys and values are quoted */
	}
	*out = p;
	return 0;
}

int policy_parse(const char *buf, size_t len, const char *what, struct policy **out,
		 gantry_error_t *err)
{
	json_t *j;
	int ret;

	*out = NULL;
	if (len > POLICY_FILE_MAX)
		return gantry_error(err, 0, "%s: larger than %d bytes", what, POLICY_FILE_MAX);
	j = jsonh_load(buf, len, what, err);
	if (j == NULL)
		return -1;
	ret = policy_from_json(j, out, err);
	json_decref(j);
	return ret;
}

/* ---- the policy as a value --------------------------------------------- */

struct policy *policy_default(bool allow_local)
{
	struct policy *p = xzalloc(sizeof(*p));

	p->default_allow = true;
	p->allow_local = allow_local;
	return p;
}

static void ports_str(const struct policy_rule *r, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < r->nr_ports && off < len; i++) {
		const struct policy_ports *pr = &r->ports[i];

		if (pr->lo == pr->hi)
			off += (size_t)snprintf(buf + off, len - off, "%s%u", i ? "," : "", pr->lo);
		else
			off += (size_t)snprintf(buf + off, len - off, "%s%u-%u", i ? "," : "",
						pr->lo, pr->hi);
	}
}

static json_t *rule_json(const struct policy_rule *r)
{
	char buf[POLICY_PORTS_MAX * 12 + 1], ip[INET_ADDRSTRLEN];
	json_t *j = json_object();

	json_object_set_new(j, "action", json_string(r->allow ? "allow" : "deny"));
	if (!r->any_addr) {
		ip_str(r->net, ip);
		snprintf(buf, sizeof(buf), "%s/%u", ip, r->prefix);
		json_object_set_new(j, "cidr", json_string(buf));
	}
	json_object_set_new(j, "proto", json_string(proto_names[r->proto]));
	if (r->nr_ports > 0) {
		ports_str(r, buf, sizeof(buf));
		json_object_set_new(j, "ports", json_string(buf));
	}
	return j;
}

json_t *policy_to_json(const struct policy *p)
{
	json_t *j = json_object(), *rules = json_array();

	json_object_set_new(j, "default", json_string(p->default_allow ? "allow" : "deny"));
	json_object_set_new(j, "allowLocal", json_boolean(p->allow_local));
	for (size_t i = 0; i < p->nr_rules; i++)
		json_array_append_new(rules, rule_json(&p->rules[i]));
	json_object_set_new(j, "rules", rules);
	json_object_set_new(j, "allowDomains", jsonh_from_strv(p->allow_domains, p->nr_allow));
	json_object_set_new(j, "resolveDomains",
			    jsonh_from_strv(p->resolve_domains, p->nr_resolve));
	return j;
}

struct policy *policy_dup(const struct policy *p)
{
	struct policy *d = xzalloc(sizeof(*d));

	*d = *p;
	d->rules = xmalloc((p->nr_rules ? p->nr_rules : 1) * sizeof(*p->rules));
	if (p->nr_rules)
		memcpy(d->rules, p->rules, p->nr_rules * sizeof(*p->rules));
	d->allow_domains = p->allow_domains ? strv_dup(p->allow_domains, p->nr_allow) : NULL;
	d->resolve_domains =
		p->resolve_domains ? strv_dup(p->resolve_domains, p->nr_resolve) : NULL;
	return d;
}

void policy_free(struct policy *p)
{
	if (p == NULL)
		return;
	free(p->rules);
	strv_free(p->allow_domains);
	strv_free(p->resolve_domains);
	free(p);
}

/* A rule for one port (or two) at any address. */
static struct policy_rule port_rule(bool allow, enum policy_proto proto, uint16_t port)
{
	struct policy_rule r = { .allow = allow, .any_addr = true, .proto = proto, .nr_ports = 1 };

	r.ports[0].lo = r.ports[0].hi = port;
	return r;
}

void policy_add_proxy(struct policy *p, const uint32_t *ips, size_t nr_ips, uint16_t port,
		      bool enforce)
{
	size_t n = nr_ips + (enforce ? 2 : 0), i;
	struct policy_rule *rules = xmalloc((n + p->nr_rules) * sizeof(*rules));

	for (i = 0; i < nr_ips; i++) {
		rules[i] = port_rule(true, POLICY_TCP, port);
		rules[i].any_addr = false;
		rules[i].net = ips[i];
		rules[i].prefix = 32;
	}
	/* Plain HTTP, HTTPS and QUIC anywhere else go through the proxy or nowhere. */
	if (enforce) {
		rules[i] = port_rule(false, POLICY_TCP, 80);
		rules[i].nr_ports = 2;
		rules[i].ports[1].lo = rules[i].ports[1].hi = 443;
		rules[i + 1] = port_rule(false, POLICY_UDP, 443);
	}
	if (p->nr_rules)
		memcpy(rules + n, p->rules, p->nr_rules * sizeof(*rules));
	free(p->rules);
	p->rules = rules;
	p->nr_rules += n;
}

/* ---- the wall ---------------------------------------------------------- */

static const struct {
	uint32_t net;
	uint8_t prefix;
} wall_fixed[] = {
	{ 0x0a000000, 8 },  /* 10/8 */
	{ 0xac100000, 12 }, /* 172.16/12 */
	{ 0xc0a80000, 16 }, /* 192.168/16 */
	{ 0xa9fe0000, 16 }, /* 169.254/16: link-local, cloud metadata */
	{ 0x7f000000, 8 },  /* 127/8 */
	{ 0x64400000, 10 }, /* 100.64/10: carrier-grade NAT */
	{ 0xe0000000, 4 },  /* 224/4: multicast */
	{ 0xf0000000, 4 },  /* 240/4: reserved, broadcast */
	{ 0x00000000, 8 },  /* 0/8 */
};

void policy_wall_host_addrs(struct policy_wall *w)
{
	struct ifaddrs *ifa, *i;
	struct policy_wall fresh = { .nr_host = 0 };

	/* Keep the addresses we had when the host will not tell us now. */
	if (getifaddrs(&ifa) < 0)
		return;
	for (i = ifa; i != NULL && fresh.nr_host < POLICY_WALL_HOST; i = i->ifa_next) {
		uint32_t ip;
		bool seen = false;

		if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET)
			continue;
		ip = ntohl(((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr.s_addr);
		for (size_t k = 0; k < fresh.nr_host; k++)
			seen |= fresh.host[k] == ip;
		if (!seen)
			fresh.host[fresh.nr_host++] = ip;
	}
	freeifaddrs(ifa);
	*w = fresh;
}

bool policy_wall_hit(const struct policy_wall *w, uint32_t ip)
{
	for (size_t i = 0; i < ARRAY_SIZE(wall_fixed); i++)
		if ((ip & prefix_mask(wall_fixed[i].prefix)) == wall_fixed[i].net)
			return true;
	for (size_t i = 0; w != NULL && i < w->nr_host; i++)
		if (w->host[i] == ip)
			return true;
	return false;
}

/* ---- judging ----------------------------------------------------------- */

static bool rule_match(const struct policy_rule *r, uint32_t dst, enum net_proto proto,
		       uint16_t port)
{
	bool ported = proto == NET_PROTO_TCP || proto == NET_PROTO_UDP;

	switch (r->proto) {
	case POLICY_ANY:
		if (!ported && proto != NET_PROTO_ICMP)
			return false;
		break;
	case POLICY_TCP:
		if (proto != NET_PROTO_TCP)
			return false;
		break;
	case POLICY_UDP:
		if (proto != NET_PROTO_UDP)
			return false;
		break;
	case POLICY_ICMP:
		if (proto != NET_PROTO_ICMP)
			return false;
		break;
	}
	if (!r->any_addr && ((dst ^ r->net) & prefix_mask(r->prefix)) != 0)
		return false;
	if (r->nr_ports == 0)
		return true;
	if (!ported)
		return false; /* "ports" asks for a port ICMP does not have */
	for (size_t i = 0; i < r->nr_ports; i++)
		if (port >= r->ports[i].lo && port <= r->ports[i].hi)
			return true;
	return false;
}

struct policy_verdict policy_judge(const struct policy *p, const struct policy_wall *w,
				   const struct learned *l, uint32_t dst, enum net_proto proto,
				   uint16_t port, uint64_t now_ms)
{
	bool walled = !p->allow_local && policy_wall_hit(w, dst);

	for (size_t i = 0; i < p->nr_rules; i++) {
		const struct policy_rule *r = &p->rules[i];

		if (!rule_match(r, dst, proto, port))
			continue;
		/* An allow rule without a cidr is for any address past the
		 * wall: only one that names local addresses opens it ("allow
		 * tcp 443" must not reach the host's loopback or metadata). */
		if (r->allow && r->any_addr && walled)
			continue;
		return (struct policy_verdict){ r->allow, POLICY_WHY_RULE, (int)i };
	}
	/* The wall before learned addresses: a DNS answer naming a private
	 * address (rebinding) does not open the local network. */
	if (walled)
		return (struct policy_verdict){ false, POLICY_WHY_WALL, -1 };
	if ((proto == NET_PROTO_TCP || proto == NET_PROTO_UDP) && l != NULL &&
	    learned_has(l, dst, now_ms))
		return (struct policy_verdict){ true, POLICY_WHY_LEARNED, -1 };
	return (struct policy_verdict){ p->default_allow, POLICY_WHY_DEFAULT, -1 };
}

void policy_verdict_str(const struct policy_verdict *v, const struct learned *l, uint32_t ip,
			uint64_t now_ms, char *buf, size_t len)
{
	const char *name;

	switch (v->why) {
	case POLICY_WHY_RULE:
		snprintf(buf, len, "rule %d (%s)", v->rule, v->allow ? "allow" : "deny");
		break;
	case POLICY_WHY_WALL:
		snprintf(buf, len, "local network");
		break;
	case POLICY_WHY_LEARNED:
		name = l ? learned_name(l, ip, now_ms) : NULL;
		if (name)
			snprintf(buf, len, "learned (%s)", name);
		else
			snprintf(buf, len, "learned");
		break;
	case POLICY_WHY_DEFAULT:
	default:
		snprintf(buf, len, "default %s", v->allow ? "allow" : "deny");
		break;
	}
}

/* ---- DNS names --------------------------------------------------------- */

bool policy_domain_match(const char *pattern, const char *name)
{
	size_t ls, ln;

	if (strncmp(pattern, "*.", 2) != 0)
		return strcasecmp(pattern, name) == 0;
	pattern += 2;
	ls = strlen(pattern);
	ln = strlen(name);
	if (ln == ls)
		return strcasecmp(pattern, name) == 0;
	return ln > ls && name[ln - ls - 1] == '.' && strcasecmp(name + ln - ls, pattern) == 0;
}

static bool domains_match(char *const *list, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (policy_domain_match(list[i], name))
			return true;
	return false;
}

enum policy_dns policy_dns_name(const struct policy *p, const char *name)
{
	if (domains_match(p->allow_domains, p->nr_allow, name))
		return POLICY_DNS_LEARN;
	if (domains_match(p->resolve_domains, p->nr_resolve, name))
		return POLICY_DNS_RESOLVE;
	if (p->default_allow && p->nr_allow == 0)
		return POLICY_DNS_RESOLVE;
	return POLICY_DNS_REFUSE;
}
