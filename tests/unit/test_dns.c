/* The DNS proxy: the strict query check, the local zone, FORMERR and
 * REFUSED answers, forwarding through an upstream on 127.0.0.1 (a real
 * UDP socket this test answers), timeouts and the rate limit on a skewed
 * clock, the learning hook along a CNAME chain, and DNS over TCP on the
 * proxy's Unix socket. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/settings.h"
#include "common/util.h"
#include "net/dns.h"
#include "net/dns_wire.h"
#include "net/net.h"

#define MSG_CAP 65536

static size_t put_name(uint8_t *b, const char *name)
{
	size_t n = 0;

	while (*name) {
		const char *dot = strchr(name, '.');
		size_t l = dot ? (size_t)(dot - name) : strlen(name);

		b[n++] = (uint8_t)l;
		memcpy(b + n, name, l);
		n += l;
		name += l + (dot ? 1 : 0);
	}
	b[n++] = 0;
	return n;
}

static size_t mkquery(uint8_t *b, uint16_t id, const char *name, uint16_t type)
{
	size_t n = DNS_HDR_LEN;

	memset(b, 0, DNS_HDR_LEN);
	dns_put16(b, id);
	dns_put16(b + 2, DNS_FLAG_RD);
	dns_put16(b + 4, 1);
	n += put_name(b + n, name);
	dns_put16(b + n, type);
	dns_put16(b + n + 2, DNS_CLASS_IN);
	return n + 4;
}

/* ---- the query check ---------------------------------------------------- */

static void test_parse_good(void **state)
{
	uint8_t b[600];
	struct dns_question q;
	size_t n;

	(void)state;
	n = mkquery(b, 0x1234, "WWW.Example-1.com", DNS_TYPE_A);
	assert_int_equal(dns_query_parse(b, n, &q), 0);
	assert_string_equal(q.name, "www.example-1.com");
	assert_int_equal(q.id, 0x1234);
	assert_int_equal(q.qtype, DNS_TYPE_A);
	assert_int_equal(q.qclass, DNS_CLASS_IN);
	assert_int_equal(q.end, n);

	/* One OPT record is fine (EDNS, as every resolver sends). */
	dns_put16(b + 10, 1);
	memcpy(b + n, "\0\0\x29\x10\0\0\0\0\0\0\4\0\x0a\0\0", 15);
	assert_int_equal(dns_query_parse(b, n + 15, &q), 0);
	assert_int_equal(q.end, n);

	/* The root and an underscore label. */
	n = mkquery(b, 1, "", 2);
	assert_int_equal(dns_query_parse(b, n, &q), 0);
	assert_string_equal(q.name, "");
	n = mkquery(b, 1, "_dmarc.example.com", 16);
	assert_int_equal(dns_query_parse(b, n, &q), 0);
}

static void test_parse_bad(void **state)
{
	char label[80], name[400];
	uint8_t b[600];
	struct dns_question q;
	size_t n;

	(void)state;
	/* Two questions. */
	n = mkquery(b, 7, "a.com", 1);
	dns_put16(b + 4, 2);
	memcpy(b + n, b + DNS_HDR_LEN, n - DNS_HDR_LEN);
	assert_int_equal(dns_query_parse(b, 2 * n - DNS_HDR_LEN, &q), DNS_RCODE_FORMERR);
	assert_int_equal(q.id, 7);

	/* QR set: a response, not a query. */
	n = mkquery(b, 7, "a.com", 1);
	b[2] |= 0x80;
	assert_int_equal(dns_query_parse(b, n, &q), DNS_RCODE_FORMERR);

	/* opcode 2 (STATUS), opcode 5 (UPDATE). */
	n = mkquery(b, 7, "a.com", 1);
	b[2] = (uint8_t)(b[2] | 2 << 3);
	assert_int_equal(dns_query_parse(b, n, &q), DNS_RCODE_FORMERR);
	b[2] = (uint8_t)(5 << 3);
	assert_int_equal(dns_query_parse(b, n, &q), DNS_RCODE_FORMERR);

	/* A compression pointer in the question: "b" then a pointer to "a.com". */
	n = mkquery(b, 7, "a.com", 1);
	memcpy(b + DNS_HDR_LEN, "\1b\xc0\x0c", 4);
	dns_put16(b + 16, 1);
	dns_put16(b + 18, 1);
	assert_int_equal(dns_query_parse(b, 20, &q), DNS_RCODE_FORMERR);

	/* A 64-byte label, and 63 is the most. */
	memset(label, 'a', 64);
	label[64] = '\0';
	snprintf(name, sizeof(name), "%s.com", label);
	n = mkquery(b, 7, name, 1);
	assert_int_equal(dns_query_parse(b, n, &q), DNS_RCODE_FORMERR);
	label[63] = '\0';
	snprintf(name, sizeof(name), "%s.com", label);
	n = mkquery(b, 7, name, 1);
	assert_int_equal(dns_query_parse(b, n, &q), 0);

	/* 253 bytes of name is the most; 254 is one too many. */
	snprintf(name, sizeof(name), "%s.%s.%s.%s", label, label, label, label);
	name[253] = '\0';
	name[252] = 'x';
	n = mkquery(b, 7, name, 1);
	assert_int_equal(dns_query_parse(b, n, &q), 0);
	assert_int_equal(strlen(q.name), 253);
	snprintf(name, sizeof(name), "%s.%s.%s.%s", label, label, label, label);
	name[254] = '\0';
	name[253] = 'x';
	n = mkquery(b, 7, name, 1);
	assert_int_equal(dns_query_parse(b, n, &q), DNS_RCODE_FORMERR);

	/* Bytes no name may carry: a dot inside a label, a space, a NUL, 0xff. */
	for (int i = 0; i < 4; i++) {
		static const uint8_t bad[] = { '.', ' ', 0, 0xff };

		n = mkquery(b, 7, "abc.com", 1);
		b[DNS_HDR_LEN + 2] = bad[i];
		assert_int_equal(dns_query_parse(b, n, &q), DNS_RCODE_FORMERR);
		assert_int_equal(q.end, 0);
	}

	/* Class CH; an answer record; two OPT records; trailing junk. */
	n = mkquery(b, 7, "a.com", 1);
	b[n - 1] = 3;
	assert_int_equal(dns_query_parse(b, n, &q), DNS_RCODE_FORMERR);
	n = mkquery(b, 7, "a.com", 1);
	dns_put16(b + 6, 1);
	assert_int_equal(dns_query_parse(b, n, &q), DNS_RCODE_FORMERR);
	n = mkquery(b, 7, "a.com", 1);
	dns_put16(b + 10, 2);
	memcpy(b + n, "\0\0\x29\x10\0\0\0\0\0\0\0\0\0\x29\x10\0\0\0\0\0\0\0", 22);
	assert_int_equal(dns_query_parse(b, n + 22, &q), DNS_RCODE_FORMERR);
	n = mkquery(b, 7, "a.com", 1);
	b[n] = 0;
	assert_int_equal(dns_query_parse(b, n + 1, &q), DNS_RCODE_FORMERR);
	assert_int_equal(q.end, n); /* the question could be read */
	/* An OPT whose data runs past the end, and a record that is not OPT. */
	dns_put16(b + 10, 1);
	memcpy(b + n, "\0\0\x29\x10\0\0\0\0\0\0\5\0", 12);
	assert_int_equal(dns_query_parse(b, n + 12, &q), DNS_RCODE_FORMERR);
	memcpy(b + n, "\0\0\x01\0\1\0\0\0\0\0\0", 11);
	assert_int_equal(dns_query_parse(b, n + 11, &q), DNS_RCODE_FORMERR);

	/* Cut short anywhere. */
	n = mkquery(b, 7, "abc.example.com", 1);
	for (size_t cut = 0; cut < n; cut++)
		assert_int_equal(dns_query_parse(b, cut, &q), DNS_RCODE_FORMERR);
}

/* ---- a proxy with an upstream on 127.0.0.1 -------------------------------- */

struct fx {
	struct dns_proxy *p;
	int up; /* the upstream's socket */
	struct sockaddr_in up_addr;
	/* What the guest got over UDP. */
	unsigned answers;
	uint16_t port;
	uint8_t ans[MSG_CAP];
	size_t ans_len;
	/* What the upstream got, and how it answers: respond() below. */
	unsigned queries;
	uint8_t query[MSG_CAP];
	size_t query_len;
	struct sockaddr_in query_from;
	int mode;
	bool refuse_all;
	/* The learning hook's calls. */
	unsigned learned;
	char learned_name[8][DNS_NAME_MAX + 1];
	struct in_addr learned_ip[8];
	uint32_t learned_ttl[8];
};

enum { UP_SILENT, UP_ANSWER, UP_WRONG_ID_FIRST, UP_WRONG_QUESTION_FIRST, UP_CNAME, UP_HUGE };

static void on_answer(void *opaque, uint16_t port, const uint8_t *msg, size_t len)
{
	struct fx *f = opaque;

	assert_true(len <= DNS_UDP_MAX);
	f->answers++;
	f->port = port;
	memcpy(f->ans, msg, len);
	f->ans_len = len;
}

static bool on_allow(void *opaque, const struct dns_question *q)
{
	struct fx *f = opaque;

	return !f->refuse_all && strstr(q->name, "exfil") == NULL;
}

static void on_learned(void *opaque, const struct dns_question *q, const char *name,
		       struct in_addr ip, uint32_t ttl)
{
	struct fx *f = opaque;

	(void)q;
	if (f->learned < 8) {
		strcpy(f->learned_name[f->learned], name);
		f->learned_ip[f->learned] = ip;
		f->learned_ttl[f->learned] = ttl;
	}
	f->learned++;
}

static void fx_open(struct fx *f, bool with_upstream, const char *tcp_path)
{
	struct dns_hooks hooks = {
		.opaque = f, .udp_answer = on_answer, .allow = on_allow, .learned = on_learned
	};
	socklen_t sl = sizeof(f->up_addr);
	gantry_error_t err = NULL;

	memset(f, 0, sizeof(*f));
	f->up = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_true(f->up >= 0);
	f->up_addr = (struct sockaddr_in){ .sin_family = AF_INET,
					   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	assert_int_equal(bind(f->up, (struct sockaddr *)&f->up_addr, sizeof(f->up_addr)), 0);
	assert_int_equal(getsockname(f->up, (struct sockaddr *)&f->up_addr, &sl), 0);
	f->mode = UP_ANSWER;
	assert_int_equal(
		dns_proxy_new(&f->p, &hooks, &f->up_addr, with_upstream ? 1 : 0, tcp_path, &err),
		0);
}

static void fx_close(struct fx *f)
{
	dns_proxy_free(f->p);
	close(f->up);
}

/* An answer to query q (n bytes, its question ending at qend): flags, the
 * question, then records appended by the caller. */
static size_t answer_head(uint8_t *a, const uint8_t *q, size_t qend, uint16_t ancount)
{
	memcpy(a, q, qend);
	dns_put16(a + 2, DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA);
	dns_put16(a + 6, ancount);
	dns_put16(a + 8, 0);
	dns_put16(a + 10, 0);
	return qend;
}

/* A record: owner (wire bytes), type, TTL, data. */
static size_t put_rr(uint8_t *a, const void *owner, size_t olen, uint16_t type, uint32_t ttl,
		     const void *data, uint16_t dlen)
{
	size_t n = 0;

	memcpy(a, owner, olen);
	n += olen;
	dns_put16(a + n, type);
	dns_put16(a + n + 2, DNS_CLASS_IN);
	dns_put16(a + n + 4, (uint16_t)(ttl >> 16));
	dns_put16(a + n + 6, (uint16_t)ttl);
	dns_put16(a + n + 8, dlen);
	memcpy(a + n + 10, data, dlen);
	return n + 10 + dlen;
}

static const uint8_t ip_1234[4] = { 1, 2, 3, 4 };

/* The chain www.example.com -> a.cdn.net -> b.cdn.net, with an A record
 * for b.cdn.net, one for the question's name and one for a name outside
 * the chain; out of order, and with compression pointers. */
static size_t cname_answer(uint8_t *a, const uint8_t *q, size_t qend)
{
	uint8_t tgt[64];
	size_t n = answer_head(a, q, qend, 5), a_cdn, b_cdn;
	static const uint8_t qptr[] = { 0xc0, DNS_HDR_LEN };

	/* b.cdn.net A 1.2.3.4 comes before the CNAMEs that lead to it. */
	b_cdn = n;
	n += put_rr(a + n, "\1b\3cdn\3net", 11, DNS_TYPE_A, 300, ip_1234, 4);
	a_cdn = n;
	/* a.cdn.net CNAME b.cdn.net (pointer to "b.cdn.net" above) */
	tgt[0] = 0xc0 | (uint8_t)(b_cdn >> 8);
	tgt[1] = (uint8_t)b_cdn;
	n += put_rr(a + n, "\1a\3cdn\3net", 11, DNS_TYPE_CNAME, 60, tgt, 2);
	/* www.example.com CNAME a.cdn.net: label "a" then a pointer to "cdn.net" */
	tgt[0] = 1;
	tgt[1] = 'a';
	tgt[2] = 0xc0 | (uint8_t)((b_cdn + 2) >> 8);
	tgt[3] = (uint8_t)(b_cdn + 2);
	n += put_rr(a + n, qptr, 2, DNS_TYPE_CNAME, 60, tgt, 4);
	n += put_rr(a + n, "\5other\3net", 11, DNS_TYPE_A, 300, "\6\6\6\6", 4);
	n += put_rr(a + n, qptr, 2, DNS_TYPE_A, 0x80000001u, "\5\6\7\x08", 4);
	(void)a_cdn;
	return n;
}

static void up_send(struct fx *f, const uint8_t *a, size_t n)
{
	assert_int_equal(
		sendto(f->up, a, n, 0, (struct sockaddr *)&f->query_from, sizeof(f->query_from)),
		(ssize_t)n);
}

/* The upstream's side of one query. */
static void respond(struct fx *f)
{
	static uint8_t a[MSG_CAP];
	struct dns_question q;
	size_t n;

	assert_int_equal(dns_query_parse(f->query, f->query_len, &q), 0);
	switch (f->mode) {
	case UP_SILENT:
		return;
	case UP_WRONG_ID_FIRST:
		n = answer_head(a, f->query, q.end, 1);
		n += put_rr(a + n, "\xc0\x0c", 2, DNS_TYPE_A, 60, "\x09\x09\x09\x09", 4);
		dns_put16(a, (uint16_t)(q.id + 1));
		up_send(f, a, n);
		break;
	case UP_WRONG_QUESTION_FIRST:
		n = answer_head(a, f->query, q.end, 1);
		n += put_rr(a + n, "\xc0\x0c", 2, DNS_TYPE_A, 60, "\x09\x09\x09\x09", 4);
		a[q.end - 3] ^= 1; /* another type */
		up_send(f, a, n);
		break;
	case UP_CNAME:
		up_send(f, a, cname_answer(a, f->query, q.end));
		return;
	case UP_HUGE:
		n = answer_head(a, f->query, q.end, 600);
		for (int i = 0; i < 600; i++)
			n += put_rr(a + n, "\xc0\x0c", 2, DNS_TYPE_A, 60, ip_1234, 4);
		up_send(f, a, n);
		return;
	}
	n = answer_head(a, f->query, q.end, 1);
	n += put_rr(a + n, "\xc0\x0c", 2, DNS_TYPE_A, 60, ip_1234, 4);
	up_send(f, a, n);
}

/* Run the proxy's poll loop (and the upstream's) for up to ms, or until
 * the guest has want answers in all. */
static void pump(struct fx *f, int ms, unsigned want)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while (now_ms() < end && f->answers < want) {
		struct pollfd fds[DNS_POLLFDS_MAX + 1];
		size_t n = dns_proxy_pollfds(f->p, fds, DNS_POLLFDS_MAX);
		int t = dns_proxy_timeout_ms(f->p);

		fds[n] = (struct pollfd){ .fd = f->up, .events = POLLIN };
		assert_true(poll(fds, n + 1, t >= 0 && t < 10 ? t : 10) >= 0);
		dns_proxy_dispatch(f->p, fds, n);
		dns_proxy_tick(f->p);
		if (fds[n].revents & POLLIN) {
			socklen_t sl = sizeof(f->query_from);
			ssize_t got = recvfrom(f->up, f->query, MSG_CAP, 0,
					       (struct sockaddr *)&f->query_from, &sl);

			if (got > 0) {
				f->query_len = (size_t)got;
				f->queries++;
				respond(f);
			}
		}
	}
}

static int rcode(const struct fx *f)
{
	return f->ans[3] & 0xf;
}

static void test_local_zone(void **state)
{
	static const struct {
		const char *name;
		uint16_t type;
		int rcode;
		uint32_t addr; /* 0: no answer record */
	} cases[] = {
		{ "gateway.gantry.internal", DNS_TYPE_A, 0, NET_GATEWAY },
		{ "HOST.gantry.internal", DNS_TYPE_A, 0, NET_HOST },
		{ "host.docker.internal", DNS_TYPE_A, 0, NET_HOST },
		{ "host.containers.internal", DNS_TYPE_A, 0, NET_HOST },
		{ "gateway.docker.internal", DNS_TYPE_A, 0, NET_GATEWAY },
		{ "gateway.containers.internal", DNS_TYPE_ANY, 0, NET_GATEWAY },
		{ "host.gantry.internal", 28, 0, 0 }, /* AAAA: NOERROR, nothing */
		{ "host.gantry.internal", 16, 0, 0 },
		{ "gantry.internal", DNS_TYPE_A, 0, 0 },
		{ "nope.gantry.internal", DNS_TYPE_A, DNS_RCODE_NXDOMAIN, 0 },
		{ "a.host.gantry.internal", DNS_TYPE_A, DNS_RCODE_NXDOMAIN, 0 },
		{ "nope.docker.internal", 28, DNS_RCODE_NXDOMAIN, 0 },
	};
	uint8_t b[512];
	struct dns_stats st;
	struct fx f;

	(void)state;
	fx_open(&f, true, NULL);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		size_t n = mkquery(b, (uint16_t)(100 + i), cases[i].name, cases[i].type);
		uint32_t ip;

		dns_proxy_udp_query(f.p, 40000, b, n);
		assert_int_equal(f.answers, i + 1);
		assert_int_equal(f.port, 40000);
		assert_int_equal(dns_get16(f.ans), 100 + i);
		assert_true(f.ans[2] & 0x80);
		assert_int_equal(rcode(&f), cases[i].rcode);
		assert_int_equal(dns_get16(f.ans + 4), 1);
		/* The question comes back as it was asked. */
		assert_memory_equal(f.ans + DNS_HDR_LEN, b + DNS_HDR_LEN, n - DNS_HDR_LEN);
		assert_int_equal(dns_get16(f.ans + 6), cases[i].addr ? 1 : 0);
		if (!cases[i].addr) {
			assert_int_equal(f.ans_len, n);
			continue;
		}
		assert_int_equal(f.ans_len, n + 16);
		assert_int_equal(dns_get16(f.ans + n + 2), DNS_TYPE_A);
		memcpy(&ip, f.ans + n + 12, 4);
		assert_int_equal(ntohl(ip), cases[i].addr);
	}
	dns_proxy_stats(f.p, &st);
	assert_int_equal(st.answered_local, ARRAY_SIZE(cases));
	assert_int_equal(st.forwarded, 0);
	pump(&f, 30, 1000);
	assert_int_equal(f.queries, 0);
	fx_close(&f);
}

static void test_formerr_refused(void **state)
{
	uint8_t b[512];
	struct dns_stats st;
	struct fx f;
	size_t n;

	(void)state;
	fx_open(&f, true, NULL);
	/* Trailing junk: FORMERR with the ID and the question echoed. */
	n = mkquery(b, 0xbeef, "a.example.com", DNS_TYPE_A);
	b[n] = 0;
	dns_proxy_udp_query(f.p, 1234, b, n + 1);
	assert_int_equal(f.answers, 1);
	assert_int_equal(rcode(&f), DNS_RCODE_FORMERR);
	assert_int_equal(dns_get16(f.ans), 0xbeef);
	assert_int_equal(dns_get16(f.ans + 4), 1);
	assert_int_equal(f.ans_len, n);
	/* A bad name: a bare header. */
	b[DNS_HDR_LEN + 1] = '!';
	dns_proxy_udp_query(f.p, 1234, b, n);
	assert_int_equal(f.answers, 2);
	assert_int_equal(rcode(&f), DNS_RCODE_FORMERR);
	assert_int_equal(dns_get16(f.ans), 0xbeef);
	assert_int_equal(f.ans_len, DNS_HDR_LEN);
	assert_int_equal(dns_get16(f.ans + 4), 0);
	/* Shorter than a header: nothing to answer. */
	dns_proxy_udp_query(f.p, 1234, b, 11);
	assert_int_equal(f.answers, 2);

	/* Refused by the hook: at once, and the upstream never sees it. */
	n = mkquery(b, 0x4242, "secret.exfil.example.com", 16);
	dns_proxy_udp_query(f.p, 1235, b, n);
	assert_int_equal(f.answers, 3);
	assert_int_equal(rcode(&f), DNS_RCODE_REFUSED);
	assert_int_equal(dns_get16(f.ans), 0x4242);
	assert_int_equal(f.port, 1235);
	pump(&f, 50, 1000);
	assert_int_equal(f.queries, 0);
	dns_proxy_stats(f.p, &st);
	assert_int_equal(st.queries, 4);
	assert_int_equal(st.formerr, 3);
	assert_int_equal(st.refused, 1);
	fx_close(&f);
}

static void test_forward(void **state)
{
	uint8_t b[512];
	struct dns_stats st;
	struct fx f;
	size_t n;

	(void)state;
	fx_open(&f, true, NULL);
	n = mkquery(b, 0x1111, "www.example.com", DNS_TYPE_A);
	dns_proxy_udp_query(f.p, 5000, b, n);
	assert_int_equal(f.answers, 0);
	pump(&f, 2000, 1);
	assert_int_equal(f.queries, 1);
	/* The upstream saw the query under another ID (the rest the same)... */
	assert_int_equal(f.query_len, n);
	assert_memory_equal(f.query + 2, b + 2, n - 2);
	/* ... and the guest gets the answer under its own. */
	assert_int_equal(f.answers, 1);
	assert_int_equal(f.port, 5000);
	assert_int_equal(dns_get16(f.ans), 0x1111);
	assert_int_equal(rcode(&f), 0);
	assert_int_equal(dns_get16(f.ans + 6), 1);
	assert_memory_equal(f.ans + f.ans_len - 4, ip_1234, 4);

	/* Two queries at once go from two source ports. */
	f.mode = UP_SILENT;
	dns_proxy_udp_query(f.p, 5001, b, n);
	pump(&f, 200, 1000);
	{
		uint16_t first = f.query_from.sin_port;

		dns_proxy_udp_query(f.p, 5002, b, n);
		pump(&f, 200, 1000);
		assert_int_equal(f.queries, 3);
		assert_int_not_equal(first, f.query_from.sin_port);
	}
	/* Unanswered for 5 s: SERVFAIL, without waiting them out. */
	assert_true(dns_proxy_timeout_ms(f.p) > 4000);
	assert_true(dns_proxy_timeout_ms(f.p) <= 5000);
	dns_proxy_clock_skew(f.p, 5001);
	assert_int_equal(dns_proxy_timeout_ms(f.p), 0);
	dns_proxy_tick(f.p);
	assert_int_equal(f.answers, 3);
	assert_int_equal(rcode(&f), DNS_RCODE_SERVFAIL);
	assert_int_equal(dns_get16(f.ans), 0x1111);
	assert_int_equal(dns_get16(f.ans + 4), 1);
	assert_int_equal(dns_proxy_timeout_ms(f.p), -1);
	dns_proxy_stats(f.p, &st);
	assert_int_equal(st.forwarded, 3);
	assert_int_equal(st.servfail, 2);
	fx_close(&f);
}

static int udp_bound(struct sockaddr_in *sa)
{
	socklen_t sl = sizeof(*sa);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	*sa = (struct sockaddr_in){ .sin_family = AF_INET,
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	assert_int_equal(bind(fd, (struct sockaddr *)sa, sizeof(*sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)sa, &sl), 0);
	return fd;
}

/* The next upstream gets the query when one is silent for its share of
 * the 5 s, or refuses it (ICMP port unreachable) at once. */
static void test_next_upstream(void **state)
{
	struct dns_hooks hooks;
	gantry_error_t err = NULL;
	struct sockaddr_in ups[2];
	uint8_t b[512], got[512];
	struct fx f;
	size_t n;
	int silent;

	(void)state;
	fx_open(&f, true, NULL);
	dns_proxy_free(f.p);
	hooks = (struct dns_hooks){ .opaque = &f, .udp_answer = on_answer };
	silent = udp_bound(&ups[0]);
	ups[1] = f.up_addr;
	assert_int_equal(dns_proxy_new(&f.p, &hooks, ups, 2, NULL, &err), 0);
	n = mkquery(b, 0x6666, "www.example.com", DNS_TYPE_A);
	dns_proxy_udp_query(f.p, 5000, b, n);
	pump(&f, 50, 1);
	assert_int_equal(recv(silent, got, sizeof(got), MSG_DONTWAIT), (ssize_t)n);
	assert_int_equal(f.queries, 0);
	assert_true(dns_proxy_timeout_ms(f.p) <= 2500);
	dns_proxy_clock_skew(f.p, 2501);
	pump(&f, 2000, 1);
	assert_int_equal(f.queries, 1);
	assert_int_equal(f.answers, 1);
	assert_int_equal(dns_get16(f.ans), 0x6666);
	assert_int_equal(rcode(&f), 0);
	dns_proxy_free(f.p);

	/* Nothing listens at the first one any more. */
	close(silent);
	assert_int_equal(dns_proxy_new(&f.p, &hooks, ups, 2, NULL, &err), 0);
	dns_proxy_udp_query(f.p, 5000, b, n);
	pump(&f, 2000, 2);
	assert_int_equal(f.queries, 2);
	assert_int_equal(f.answers, 2);
	assert_int_equal(rcode(&f), 0);
	fx_close(&f);
}

/* An answer under another ID, or for another question, is not taken. */
static void test_forward_spoofs_ignored(void **state)
{
	uint8_t b[512];
	struct fx f;
	size_t n;

	(void)state;
	fx_open(&f, true, NULL);
	for (int mode = UP_WRONG_ID_FIRST; mode <= UP_WRONG_QUESTION_FIRST; mode++) {
		f.mode = mode;
		f.answers = 0;
		n = mkquery(b, 0x2222, "www.example.com", DNS_TYPE_A);
		dns_proxy_udp_query(f.p, 5000, b, n);
		pump(&f, 2000, 1);
		pump(&f, 50, 2);
		assert_int_equal(f.answers, 1);
		assert_int_equal(dns_get16(f.ans), 0x2222);
		assert_memory_equal(f.ans + f.ans_len - 4, ip_1234, 4);
	}
	/* The wrong answers taught nothing; each right one, its A record. */
	assert_int_equal(f.learned, 2);
	assert_string_equal(f.learned_name[0], "www.example.com");
	fx_close(&f);
}

static void test_learned_cname_chain(void **state)
{
	uint8_t b[512], a[1024];
	struct dns_question q;
	struct fx f;
	size_t n;

	(void)state;
	fx_open(&f, true, NULL);
	f.mode = UP_CNAME;
	n = mkquery(b, 0x3333, "WWW.example.com", DNS_TYPE_A);
	dns_proxy_udp_query(f.p, 5000, b, n);
	pump(&f, 2000, 1);
	assert_int_equal(f.answers, 1);
	assert_int_equal(dns_get16(f.ans + 6), 5);
	/* b.cdn.net by way of the chain, www.example.com itself; not other.net. */
	assert_int_equal(f.learned, 2);
	assert_string_equal(f.learned_name[0], "b.cdn.net");
	assert_memory_equal(&f.learned_ip[0], ip_1234, 4);
	assert_int_equal(f.learned_ttl[0], 60); /* the CNAMEs' that lead to it */
	assert_string_equal(f.learned_name[1], "www.example.com");
	assert_memory_equal(&f.learned_ip[1], "\5\6\7\x08", 4);
	assert_int_equal(f.learned_ttl[1], 0); /* top bit set: zero */
	fx_close(&f);

	/* The same answer checked on its own; then against another question,
	 * and cut short, it is no answer and teaches nothing. */
	{
		struct dns_hooks hooks = { .opaque = &f, .learned = on_learned };

		f.learned = 0;
		n = mkquery(b, 1, "www.example.com", DNS_TYPE_A);
		assert_int_equal(dns_query_parse(b, n, &q), 0);
		size_t an = cname_answer(a, b, n);
		assert_int_equal(dns_answer_learn(a, an, &q, &hooks), (int)n);
		assert_int_equal(f.learned, 2);
		for (size_t cut = 0; cut < an; cut++)
			assert_int_equal(dns_answer_learn(a, cut, &q, &hooks), -1);
		assert_int_equal(f.learned, 2);
		strcpy(q.name, "a.cdn.net");
		assert_int_equal(dns_answer_learn(a, an, &q, &hooks), -1);
		/* A pointer to itself, and one forward, are malformed. */
		strcpy(q.name, "www.example.com");
		a[n] = 0xc0;
		a[n + 1] = (uint8_t)n;
		assert_int_equal(dns_answer_learn(a, an, &q, &hooks), -1);
		a[n + 1] = (uint8_t)(n + 2);
		assert_int_equal(dns_answer_learn(a, an, &q, &hooks), -1);
		assert_int_equal(f.learned, 2);
	}
}

/* Past DNS_UDP_MAX an answer is cut to its question, TC set. */
static void test_forward_truncated(void **state)
{
	uint8_t b[512];
	struct fx f;
	size_t n;

	(void)state;
	fx_open(&f, true, NULL);
	f.mode = UP_HUGE;
	f.learned = 0;
	n = mkquery(b, 0x4444, "big.example.com", DNS_TYPE_A);
	dns_proxy_udp_query(f.p, 5000, b, n);
	pump(&f, 2000, 1);
	assert_int_equal(f.answers, 1);
	assert_int_equal(f.learned, 256); /* the records checked, of 600 */
	assert_int_equal(f.ans_len, n);
	assert_int_equal(dns_get16(f.ans), 0x4444);
	assert_true(dns_get16(f.ans + 2) & DNS_FLAG_TC);
	assert_int_equal(dns_get16(f.ans + 6), 0);
	fx_close(&f);
}

static void test_limits(void **state)
{
	uint8_t b[512];
	struct dns_stats st;
	struct fx f;
	size_t n;

	(void)state;
	fx_open(&f, true, NULL);
	f.mode = UP_SILENT;
	n = mkquery(b, 1, "www.example.com", DNS_TYPE_A);
	/* A burst of 200, then REFUSED. */
	for (int i = 0; i < 200; i++)
		dns_proxy_udp_query(f.p, 5000, b, n);
	assert_int_equal(f.answers, 0);
	dns_proxy_udp_query(f.p, 5000, b, n);
	assert_int_equal(f.answers, 1);
	assert_int_equal(rcode(&f), DNS_RCODE_REFUSED);
	/* 50 a second after that: two seconds on, 100 more; past 256 in
	 * flight, SERVFAIL. */
	dns_proxy_clock_skew(f.p, 2000);
	for (int i = 0; i < 56; i++)
		dns_proxy_udp_query(f.p, 5000, b, n);
	assert_int_equal(f.answers, 1);
	dns_proxy_udp_query(f.p, 5000, b, n);
	assert_int_equal(f.answers, 2);
	assert_int_equal(rcode(&f), DNS_RCODE_SERVFAIL);
	dns_proxy_stats(f.p, &st);
	assert_int_equal(st.rate_limited, 1);
	assert_int_equal(st.forwarded, 256);
	/* All of them time out. */
	dns_proxy_clock_skew(f.p, 5000);
	dns_proxy_tick(f.p);
	assert_int_equal(f.answers, 258);
	fx_close(&f);

	/* No upstream at all: SERVFAIL at once. */
	fx_open(&f, false, NULL);
	dns_proxy_udp_query(f.p, 5000, b, n);
	assert_int_equal(f.answers, 1);
	assert_int_equal(rcode(&f), DNS_RCODE_SERVFAIL);
	fx_close(&f);
}

static void test_resolv_conf(void **state)
{
	char path[] = "/tmp/gantry-test-resolv.XXXXXX";
	struct sockaddr_in sa[DNS_MAX_UPSTREAM];
	int fd = mkstemp(path);
	static const char text[] = "# comment\nsearch example.com\nnameserver 127.0.0.53\n"
				   "nameserver ::1\nnameserver   10.0.0.2 \noptions edns0\n"
				   "nameserver bogus\nnameserver 10.0.0.3\nnameserver 10.0.0.4\n";

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, sizeof(text) - 1), (ssize_t)sizeof(text) - 1);
	close(fd);
	assert_int_equal(dns_resolv_conf(path, sa, DNS_MAX_UPSTREAM), 3);
	assert_int_equal(ntohl(sa[0].sin_addr.s_addr), 0x7f000035);
	assert_int_equal(ntohs(sa[0].sin_port), 53);
	assert_int_equal(ntohl(sa[1].sin_addr.s_addr), 0x0a000002);
	assert_int_equal(ntohl(sa[2].sin_addr.s_addr), 0x0a000003);
	assert_int_equal(dns_resolv_conf(path, sa, 1), 1);
	unlink(path);
	assert_int_equal(dns_resolv_conf(path, sa, DNS_MAX_UPSTREAM), 0);
}

/* NET_DNS_ENV names the upstream when none is given. */
static void test_env_upstream(void **state)
{
	struct dns_hooks hooks = { 0 };
	gantry_error_t err = NULL;
	struct dns_proxy *p;
	uint8_t b[512];
	struct fx f;
	char env[64];
	size_t n;

	(void)state;
	fx_open(&f, true, NULL);
	dns_proxy_free(f.p);
	hooks = (struct dns_hooks){ .opaque = &f, .udp_answer = on_answer };
	snprintf(env, sizeof(env), "127.0.0.1:%u", ntohs(f.up_addr.sin_port));
	setenv(NET_DNS_ENV, env, 1);
	gantry_settings_load();
	assert_int_equal(dns_proxy_new(&f.p, &hooks, NULL, 0, NULL, &err), 0);
	n = mkquery(b, 0x5555, "www.example.com", DNS_TYPE_A);
	dns_proxy_udp_query(f.p, 5000, b, n);
	pump(&f, 2000, 1);
	assert_int_equal(f.queries, 1);
	assert_int_equal(dns_get16(f.ans), 0x5555);
	fx_close(&f);

	setenv(NET_DNS_ENV, "127.0.0.1", 1);
	gantry_settings_load();
	assert_int_equal(dns_proxy_new(&p, &hooks, NULL, 0, NULL, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), NET_DNS_ENV));
	gantry_error_free(&err);
	unsetenv(NET_DNS_ENV);
	gantry_settings_load();
}

/* ---- TCP ------------------------------------------------------------------ */

static int tcp_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	strcpy(sa.sun_path, path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		fail_msg("connect `%s`: %s", path, strerror(errno));
	return fd;
}

/* Read framed answers from fd while pumping, until want of them came. */
static size_t tcp_answers(struct fx *f, int fd, uint8_t *buf, size_t want_bytes, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	size_t have = 0;

	while (have < want_bytes && now_ms() < end) {
		ssize_t n;

		pump(f, 10, UINT32_MAX);
		n = recv(fd, buf + have, MSG_CAP - have, MSG_DONTWAIT);
		if (n > 0)
			have += (size_t)n;
		if (n == 0)
			break;
	}
	return have;
}

static bool tcp_closed(struct fx *f, int fd)
{
	uint8_t c;

	pump(f, 50, UINT32_MAX);
	return recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

static void test_tcp(void **state)
{
	char dir[] = "/tmp/gantry-test-dns.XXXXXX", path[64];
	static uint8_t out[MSG_CAP], in[MSG_CAP];
	uint16_t ids[2];
	struct stat st;
	struct fx f;
	size_t n1, n2, got, off;
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/dns.sock", dir);
	fx_open(&f, true, path);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	/* Two messages in one write: a forwarded one and a local one. */
	fd = tcp_connect(path);
	n1 = mkquery(out + 2, 0x0a0a, "www.example.com", DNS_TYPE_A);
	dns_put16(out, (uint16_t)n1);
	n2 = mkquery(out + 4 + n1, 0x0b0b, "host.gantry.internal", DNS_TYPE_A);
	dns_put16(out + 2 + n1, (uint16_t)n2);
	assert_int_equal(write(fd, out, 4 + n1 + n2), (ssize_t)(4 + n1 + n2));
	got = tcp_answers(&f, fd, in, 4 + n1 + 16 + n2 + 16, 2000);
	assert_int_equal(got, 4 + n1 + 16 + n2 + 16);
	/* In whatever order: the local one comes first here. */
	off = 0;
	for (int i = 0; i < 2; i++) {
		size_t len = dns_get16(in + off);

		ids[i] = dns_get16(in + off + 2);
		assert_int_equal(in[off + 5] & 0xf, 0);
		assert_int_equal(dns_get16(in + off + 2 + 6), 1);
		off += 2 + len;
	}
	assert_true((ids[0] == 0x0a0a && ids[1] == 0x0b0b) ||
		    (ids[0] == 0x0b0b && ids[1] == 0x0a0a));
	assert_int_equal(f.answers, 0); /* nothing over UDP */

	/* One message in three writes, judged when whole: FORMERR for junk. */
	n1 = mkquery(out + 2, 0x0c0c, "split.example.com", DNS_TYPE_A);
	out[2 + n1] = 0xff;
	n1++;
	dns_put16(out, (uint16_t)n1);
	assert_int_equal(write(fd, out, 1), 1);
	pump(&f, 20, UINT32_MAX);
	assert_int_equal(write(fd, out + 1, 7), 7);
	pump(&f, 20, UINT32_MAX);
	assert_int_equal(recv(fd, in, 1, MSG_DONTWAIT), -1);
	assert_int_equal(write(fd, out + 8, n1 + 2 - 8), (ssize_t)(n1 + 2 - 8));
	got = tcp_answers(&f, fd, in, 2 + n1 - 1, 2000);
	assert_int_equal(got, 2 + n1 - 1);
	assert_int_equal(dns_get16(in + 2), 0x0c0c);
	assert_int_equal(in[5] & 0xf, DNS_RCODE_FORMERR);

	/* A length of zero closes the connection. */
	assert_int_equal(write(fd, "\0\0", 2), 2);
	assert_true(tcp_closed(&f, fd));
	close(fd);

	/* So does quiet for 30 s. */
	fd = tcp_connect(path);
	pump(&f, 20, UINT32_MAX);
	assert_false(tcp_closed(&f, fd));
	dns_proxy_clock_skew(f.p, 30001);
	assert_true(tcp_closed(&f, fd));
	close(fd);

	/* A peer that half-closes after its query still gets the answer. */
	fd = tcp_connect(path);
	n1 = mkquery(out + 2, 0x0d0d, "www.example.com", DNS_TYPE_A);
	dns_put16(out, (uint16_t)n1);
	assert_int_equal(write(fd, out, 2 + n1), (ssize_t)(2 + n1));
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	got = tcp_answers(&f, fd, in, 2 + n1 + 16, 2000);
	assert_int_equal(got, 2 + n1 + 16);
	assert_int_equal(dns_get16(in + 2), 0x0d0d);
	assert_true(tcp_closed(&f, fd));
	close(fd);

	/* Connections past the limit are closed at once; the others live. */
	{
		int fds[DNS_TCP_CONNS + 1];

		for (int i = 0; i <= DNS_TCP_CONNS; i++) {
			fds[i] = tcp_connect(path);
			pump(&f, 1, UINT32_MAX);
		}
		assert_true(tcp_closed(&f, fds[DNS_TCP_CONNS]));
		assert_false(tcp_closed(&f, fds[0]));
		for (int i = 0; i <= DNS_TCP_CONNS; i++)
			close(fds[i]);
	}
	fx_close(&f);
	assert_int_equal(access(path, F_OK), -1);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_good),
		cmocka_unit_test(test_parse_bad),
		cmocka_unit_test(test_local_zone),
		cmocka_unit_test(test_formerr_refused),
		cmocka_unit_test(test_forward),
		cmocka_unit_test(test_next_upstream),
		cmocka_unit_test(test_forward_spoofs_ignored),
		cmocka_unit_test(test_learned_cname_chain),
		cmocka_unit_test(test_forward_truncated),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_resolv_conf),
		cmocka_unit_test(test_env_upstream),
		cmocka_unit_test(test_tcp),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
