/* The DNS proxy, first part: the strict query check, the local zone,
 * FORMERR and REFUSED answers, and DNS over TCP on the proxy's Unix socket.
 * The proxy and the upstream on 127.0.0.1 it forwards to are in dns_rig.h;
 * forwarding, the upstreams and the limits are in test_dns_upstream.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "net/dns.h"
#include "net/dns_wire.h"
#include "net/net.h"
#include "dns_rig.h"

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

/* ---- what the proxy answers itself ---------------------------------------- */

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
		cmocka_unit_test(test_tcp),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
