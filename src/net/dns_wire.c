/* DNS messages as the proxy reads them (dns.h): the strict check of a guest
 * query, and the check and CNAME-chain walk of an upstream answer, whose
 * names may be compressed. Every offset is bounded by the message length
 * before it is read; compression pointers only go backwards, so a name
 * always ends. */
#include <arpa/inet.h>
#include <stdbool.h>
#include <string.h>

#include "common/util.h"
#include "net/dns.h"
#include "net/dns_wire.h"

#define JUMPS_MAX   32	/* compression pointers followed for one name */
#define CHAIN_MAX   8	/* names in a CNAME chain, the question's included */
#define RECORDS_MAX 256 /* answer records checked and walked; the rest only relayed */

uint16_t dns_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

void dns_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static bool label_char(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_';
}

static char lower(uint8_t c)
{
	return (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
}

/* Append one label to out (holding *n bytes of text), with its dot. */
static int add_label(char *out, size_t *n, const uint8_t *l, size_t len, bool *odd)
{
	size_t need = len + (*n ? 1 : 0);

	if (*n + need > DNS_NAME_MAX)
		return -1;
	if (*n)
		out[(*n)++] = '.';
	for (size_t i = 0; i < len; i++) {
		if (!label_char(l[i]))
			*odd = true;
		out[(*n)++] = lower(l[i]);
	}
	out[*n] = '\0';
	return 0;
}

/* The name at *off, lowercased into out (compressed only when jumps may
 * be followed); *off moves past it where it sits. 1: well-formed but with
 * bytes no query name may carry (such a name never matches one), 0: a
 * name, -1: malformed. */
static int read_name_at(const uint8_t *msg, size_t len, size_t *off, char *out, bool jumps_ok)
{
	size_t n = 0, at = *off, end = 0;
	unsigned jumps = 0;
	bool odd = false;

	out[0] = '\0';
	for (;;) {
		uint8_t l;

		if (at >= len)
			return -1;
		l = msg[at];
		if ((l & 0xc0) == 0xc0) {
			size_t to;

			if (!jumps_ok || len - at < 2 || ++jumps > JUMPS_MAX)
				return -1;
			to = dns_get16(msg + at) & 0x3fff;
			if (to >= at) /* only backwards: no loops */
				return -1;
			if (!end)
				end = at + 2;
			at = to;
			continue;
		}
		if (l > 63)
			return -1;
		at++;
		if (l == 0)
			break;
		if (len - at < l || add_label(out, &n, msg + at, l, &odd) < 0)
			return -1;
		at += l;
	}
	*off = end ? end : at;
	return odd ? 1 : 0;
}

static int read_name(const uint8_t *msg, size_t len, size_t *off, char *out)
{
	return read_name_at(msg, len, off, out, true);
}

/* The uncompressed name at off, as a query must carry it. */
static int query_name(const uint8_t *msg, size_t len, size_t *off, char *out)
{
	return read_name_at(msg, len, off, out, false) == 0 ? 0 : -1;
}

int dns_query_parse(const uint8_t *msg, size_t len, struct dns_question *q)
{
	size_t off = DNS_HDR_LEN;
	uint16_t flags;

	memset(q, 0, sizeof(*q));
	if (len < DNS_HDR_LEN)
		return DNS_RCODE_FORMERR;
	q->id = dns_get16(msg);
	flags = dns_get16(msg + 2);
	if ((flags & DNS_FLAG_QR) || DNS_OPCODE(flags) != 0)
		return DNS_RCODE_FORMERR;
	if (dns_get16(msg + 4) != 1 || dns_get16(msg + 6) != 0 || dns_get16(msg + 8) != 0 ||
	    dns_get16(msg + 10) > 1)
		return DNS_RCODE_FORMERR;
	if (query_name(msg, len, &off, q->name) < 0 || len - off < 4)
		return DNS_RCODE_FORMERR;
	q->qtype = dns_get16(msg + off);
	q->qclass = dns_get16(msg + off + 2);
	off += 4;
	if (q->qclass != DNS_CLASS_IN)
		return DNS_RCODE_FORMERR;
	q->end = off;
	if (dns_get16(msg + 10) == 1) {
		/* OPT: the root name, type 41, class, TTL, then its data. */
		if (len - off < 11 || msg[off] != 0 || dns_get16(msg + off + 1) != DNS_TYPE_OPT)
			return DNS_RCODE_FORMERR;
		off += 11;
		if (len - off < dns_get16(msg + off - 2))
			return DNS_RCODE_FORMERR;
		off += dns_get16(msg + off - 2);
	}
	return off == len ? 0 : DNS_RCODE_FORMERR;
}

struct rr {
	char owner[DNS_NAME_MAX + 1];
	bool owner_odd;
	uint16_t type, class;
	uint32_t ttl;
	size_t rdata, rdlen;
};

/* One resource record at *off. */
static int read_rr(const uint8_t *msg, size_t len, size_t *off, struct rr *r)
{
	int k = read_name(msg, len, off, r->owner);

	if (k < 0 || len - *off < 10)
		return -1;
	r->owner_odd = k > 0;
	r->type = dns_get16(msg + *off);
	r->class = dns_get16(msg + *off + 2);
	r->ttl = (uint32_t)dns_get16(msg + *off + 4) << 16 | dns_get16(msg + *off + 6);
	r->rdlen = dns_get16(msg + *off + 8);
	*off += 10;
	if (len - *off < r->rdlen)
		return -1;
	r->rdata = *off;
	*off += r->rdlen;
	return 0;
}

/* The index of name in the chain, or -1. */
static int chain_index(char chain[][DNS_NAME_MAX + 1], size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(chain[i], name) == 0)
			return (int)i;
	return -1;
}

/* A CNAME record's target, when it continues the chain. */
static bool chain_step(const uint8_t *msg, const struct rr *r, char *target)
{
	size_t at = r->rdata;

	if (r->type != DNS_TYPE_CNAME || r->class != DNS_CLASS_IN || r->owner_odd)
		return false;
	/* The target's own bytes stay inside the record's data. */
	if (read_name(msg, r->rdata + r->rdlen, &at, target) != 0)
		return false;
	return at == r->rdata + r->rdlen;
}

/* RFC 2181 8: a TTL with the top bit set means zero. */
static uint32_t rr_ttl(const struct rr *r)
{
	return r->ttl & 0x80000000u ? 0 : r->ttl;
}

/* The question's name and the CNAME targets reached from it, in up to
 * CHAIN_MAX - 1 steps, whatever order the records come in; ttl[i] is the
 * least TTL of the CNAMEs that lead to chain[i]. */
static size_t walk_chain(const uint8_t *msg, size_t len, size_t start, unsigned count,
			 const char *qname, char chain[][DNS_NAME_MAX + 1], uint32_t *ttl)
{
	char target[DNS_NAME_MAX + 1];
	size_t n = 1;
	bool grew = true;
	struct rr r;
	int at;

	strcpy(chain[0], qname);
	ttl[0] = UINT32_MAX;
	while (grew && n < CHAIN_MAX) {
		size_t off = start;

		grew = false;
		for (unsigned i = 0; i < count && n < CHAIN_MAX; i++) {
			if (read_rr(msg, len, &off, &r) < 0)
				return n; /* checked before: cannot happen */
			if (r.owner_odd || (at = chain_index(chain, n, r.owner)) < 0 ||
			    !chain_step(msg, &r, target) || chain_index(chain, n, target) >= 0)
				continue;
			ttl[n] = MIN(ttl[at], rr_ttl(&r));
			strcpy(chain[n++], target);
			grew = true;
		}
	}
	return n;
}

int dns_answer_learn(const uint8_t *msg, size_t len, const struct dns_question *q,
		     const struct dns_hooks *hooks)
{
	char name[DNS_NAME_MAX + 1], chain[CHAIN_MAX][DNS_NAME_MAX + 1];
	uint32_t ttl[CHAIN_MAX];
	size_t off = DNS_HDR_LEN, start, n;
	unsigned count;
	struct rr r;
	int at;

	if (len < DNS_HDR_LEN || !(dns_get16(msg + 2) & DNS_FLAG_QR) ||
	    DNS_OPCODE(dns_get16(msg + 2)) != 0 || dns_get16(msg + 4) != 1)
		return -1;
	if (read_name(msg, len, &off, name) != 0 || strcmp(name, q->name) != 0 || len - off < 4)
		return -1;
	if (dns_get16(msg + off) != q->qtype || dns_get16(msg + off + 2) != q->qclass)
		return -1;
	off += 4;
	start = off;
	count = MIN(dns_get16(msg + 6), RECORDS_MAX);
	for (unsigned i = 0; i < count; i++)
		if (read_rr(msg, len, &off, &r) < 0)
			return -1;
	if (!hooks || !hooks->learned)
		return (int)start;

	n = walk_chain(msg, len, start, count, q->name, chain, ttl);
	off = start;
	for (unsigned i = 0; i < count; i++) {
		struct in_addr ip;

		read_rr(msg, len, &off, &r);
		if (r.type != DNS_TYPE_A || r.class != DNS_CLASS_IN || r.rdlen != 4 ||
		    r.owner_odd || (at = chain_index(chain, n, r.owner)) < 0)
			continue;
		memcpy(&ip, msg + r.rdata, 4);
		hooks->learned(hooks->opaque, q, r.owner, ip, MIN(rr_ttl(&r), ttl[at]));
	}
	return (int)start;
}

void dns_answer_cap_ttl(uint8_t *msg, size_t len, size_t qend, uint32_t cap)
{
	unsigned count = MIN((unsigned)dns_get16(msg + 6) + dns_get16(msg + 8) + dns_get16(msg + 10),
			     RECORDS_MAX);
	size_t off = qend;
	struct rr r;

	for (unsigned i = 0; i < count; i++) {
		size_t ttl_at;

		if (read_rr(msg, len, &off, &r) < 0)
			return;
		if (r.type == DNS_TYPE_OPT || rr_ttl(&r) <= cap)
			continue;
		ttl_at = r.rdata - 6;
		dns_put16(msg + ttl_at, (uint16_t)(cap >> 16));
		dns_put16(msg + ttl_at + 2, (uint16_t)cap);
	}
}
