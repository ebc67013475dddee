/* The DNS proxy, second part: forwarding through an upstream on 127.0.0.1
 * (a real UDP socket this test answers). The next upstream when one is
 * silent or refuses, answers under another ID or for another question,
 * the learning hook along a CNAME chain, an answer too big for UDP,
 * timeouts and the rate limit on a skewed clock, and the upstreams that
 * resolv.conf and NET_DNS_ENV name. The rig is dns_rig.h; the query check,
 * the local zone, FORMERR and REFUSED, and DNS over TCP are in test_dns.c. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/settings.h"
#include "common/util.h"
#include "net/dns.h"
#include "net/dns_wire.h"
#include "net/net.h"
#include "dns_rig.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forward),
		cmocka_unit_test(test_next_upstream),
		cmocka_unit_test(test_forward_spoofs_ignored),
		cmocka_unit_test(test_learned_cname_chain),
		cmocka_unit_test(test_forward_truncated),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_resolv_conf),
		cmocka_unit_test(test_env_upstream),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
