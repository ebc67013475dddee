/* What the DNS proxy's tests share (test_dns.c, test_dns_upstream.c):
 * queries built by hand, and a proxy with an upstream on 127.0.0.1 (a real
 * UDP socket the test answers, in the ways respond() below picks). Its
 * hooks keep what the guest got and what the proxy learned, and refuse a
 * name with "exfil" in it. pump() runs the proxy's poll loop and the
 * upstream's. Include after <cmocka.h>. */
#ifndef GANTRY_TESTS_UNIT_DNS_RIG_H
#define GANTRY_TESTS_UNIT_DNS_RIG_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util.h"
#include "net/dns.h"
#include "net/dns_wire.h"

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

#endif
