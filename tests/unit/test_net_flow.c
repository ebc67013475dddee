/* The network worker's flow table (net/flow.h) and the workload's proxy
 * (net/proxy.h): bounds, expiry, the SYN rate, sequence tracking; the
 * proxy URLs -proxy takes and the variables they become; held ACKs
 * (net/ackhold.h): what is held, what replaces it, when it goes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/json.h"
#include "common/util.h"
#include "net/ackhold.h"
#include "net/flow.h"
#include "net/frame.h"
#include "net/net.h"
#include "net/proxy.h"
#include "net/tls_hello.h"

static struct flow_key key(enum net_proto proto, uint32_t remote, uint16_t gport)
{
	return (struct flow_key){ .remote = remote, .rport = 443, .gport = gport, .proto = proto };
}

static void test_find_add_remove(void **state)
{
	struct flows *t = flows_new();
	struct flow_key k = key(NET_PROTO_TCP, 0xcb00710a, 40000), u = k;
	struct flow *f;

	(void)state;
	u.proto = NET_PROTO_UDP;
	assert_null(flow_find(t, &k));
	f = flow_add(t, &k, 1000);
	assert_non_null(f);
	assert_ptr_equal(flow_find(t, &k), f);
	assert_null(flow_find(t, &u)); /* the protocol is part of the key */
	assert_int_equal(flows_count(t, NET_PROTO_TCP), 1);
	flow_remove(t, f);
	assert_null(flow_find(t, &k));
	assert_int_equal(flows_count(t, NET_PROTO_TCP), 0);
	flows_free(t);
}

/* TCP: a full table refuses; UDP: the flow idle longest makes room. */
static void test_full(void **state)
{
	struct flows *t = flows_new();
	struct flow_key k;
	struct flow *f;

	(void)state;
	for (uint32_t i = 0; i < FLOW_MAX; i++) {
		k = key(NET_PROTO_TCP, 0xcb007100 + (i >> 16), (uint16_t)i);
		assert_non_null(flow_add(t, &k, 1000));
		k.proto = NET_PROTO_UDP;
		assert_non_null(flow_add(t, &k, 1000 + i));
	}
	k = key(NET_PROTO_TCP, 0xc6336401, 1);
	assert_null(flow_add(t, &k, 2000));
	k.proto = NET_PROTO_UDP;
	f = flow_add(t, &k, 2000);
	assert_non_null(f);
	assert_int_equal(flows_count(t, NET_PROTO_UDP), FLOW_MAX);
	/* The oldest, gport 0, went. */
	k = key(NET_PROTO_UDP, 0xcb007100, 0);
	assert_null(flow_find(t, &k));
	k.gport = 1;
	assert_non_null(flow_find(t, &k));
	/* A closed TCP flow gives its slot back once its time is up. */
	k = key(NET_PROTO_TCP, 0xcb007100, 7);
	f = flow_find(t, &k);
	flow_tcp_seen(f, true, TCP_RST, 1, 0, 3000);
	assert_true(f->closed);
	k = key(NET_PROTO_TCP, 0xc6336401, 1);
	assert_null(flow_add(t, &k, 3000 + FLOW_CLOSED_MS - 1));
	assert_non_null(flow_add(t, &k, 3000 + FLOW_CLOSED_MS));
	flows_free(t);
}

/* A full TCP table gives up its oldest half-open connection, never one
 * the guest acknowledged or one opened from the host. */
static void test_half_open_victim(void **state)
{
	struct flows *t = flows_new();
	struct flow_key k;
	struct flow *f;

	(void)state;
	for (uint32_t i = 0; i < FLOW_MAX; i++) {
		k = key(NET_PROTO_TCP, 0xcb007100, (uint16_t)i);
		assert_null(flow_tcp_victim(t));
		f = flow_add(t, &k, 1000 + i);
		flow_tcp_seen(f, true, TCP_SYN, 1, 1, 1000 + i);
		/* Half open once answered (a SYN-ACK from the far end): before
		 * that, libslirp is still connecting and takes no RST. */
		flow_tcp_seen(f, false, TCP_SYN | TCP_ACK, 9, 1, 5000);
		if (i < 2) /* established */
			flow_tcp_seen(f, true, TCP_ACK, 2, 0, 5000);
		if (i == 2) /* opened from the host */
			f->inbound = true;
	}
	f = flow_tcp_victim(t);
	assert_non_null(f);
	assert_int_equal(f->key.gport, 3);
	flow_remove(t, f);
	assert_null(flow_tcp_victim(t)); /* room again */
	k = key(NET_PROTO_TCP, 0xc6336401, 1);
	assert_non_null(flow_add(t, &k, 9000));
	assert_int_equal(flow_tcp_victim(t)->key.gport, 4);
	k = key(NET_PROTO_TCP, 0xcb007100, 4);
	f = flow_find(t, &k);
	f->remote_seq = false;
	assert_int_equal(flow_tcp_victim(t)->key.gport, 5);
	/* A connection that ended goes first, the one that ended first of
	 * them (a host client's churn on a published port cannot hold the
	 * table with closed flows); a cut one's tombstone never. */
	k = key(NET_PROTO_TCP, 0xcb007100, 0);
	flow_tcp_seen(flow_find(t, &k), true, TCP_RST | TCP_ACK, 2, 0, 6000);
	k = key(NET_PROTO_TCP, 0xcb007100, 1);
	f = flow_find(t, &k);
	flow_tcp_seen(f, true, TCP_RST | TCP_ACK, 2, 0, 5500);
	assert_int_equal(flow_tcp_victim(t)->key.gport, 1);
	f->cut = true;
	assert_int_equal(flow_tcp_victim(t)->key.gport, 0);
	flows_free(t);
}

static void test_expiry(void **state)
{
	struct flows *t = flows_new();
	struct flow_key tk = key(NET_PROTO_TCP, 1, 1), uk = key(NET_PROTO_UDP, 1, 1);
	struct flow *f;

	(void)state;
	flow_add(t, &tk, 0 + 1);
	flow_add(t, &uk, 0 + 1);
	flows_expire(t, FLOW_UDP_IDLE_MS);
	assert_non_null(flow_find(t, &uk));
	flows_expire(t, FLOW_UDP_IDLE_MS + 1);
	assert_null(flow_find(t, &uk));
	assert_non_null(flow_find(t, &tk));
	flows_expire(t, FLOW_TCP_IDLE_MS + 1);
	assert_null(flow_find(t, &tk));
	/* A cut flow stays as a tombstone for FLOW_CUT_MS, busy or not. */
	f = flow_add(t, &tk, 5000);
	f->cut = true;
	f->until_ms = 5000 + FLOW_CUT_MS;
	flows_expire(t, 5000 + FLOW_CUT_MS - 1);
	assert_non_null(flow_find(t, &tk));
	flows_expire(t, 5000 + FLOW_CUT_MS);
	assert_null(flow_find(t, &tk));
	flows_free(t);
}

static void test_syn_rate(void **state)
{
	struct flows *t = flows_new();
	unsigned n = 0;

	(void)state;
	while (flows_syn_take(t, 100))
		n++;
	assert_int_equal(n, FLOW_SYN_BURST);
	assert_false(flows_syn_take(t, 100));
	/* 10 ms later, 10 more. */
	n = 0;
	while (flows_syn_take(t, 110))
		n++;
	assert_int_equal(n, 10);
	flows_free(t);
}

/* Each side's next sequence number only moves forward (a retransmission
 * does not move it back), across the wrap; FIN both ways closes. */
static void test_tcp_seen(void **state)
{
	struct flows *t = flows_new();
	struct flow_key k = key(NET_PROTO_TCP, 1, 1);
	struct flow *f = flow_add(t, &k, 1);

	(void)state;
	flow_tcp_seen(f, true, TCP_SYN, 0xfffffff0u, 1, 1);
	assert_int_equal(f->guest_next, 0xfffffff1u);
	flow_tcp_seen(f, true, TCP_ACK, 0xfffffff1u, 100, 2);
	assert_int_equal(f->guest_next, 0x55);
	flow_tcp_seen(f, true, TCP_ACK, 0xfffffff1u, 10, 3);
	assert_int_equal(f->guest_next, 0x55);
	flow_tcp_seen(f, false, TCP_SYN | TCP_ACK, 7, 1, 4);
	assert_int_equal(f->remote_next, 8);
	flow_tcp_seen(f, true, TCP_FIN | TCP_ACK, 0x55, 1, 5);
	assert_false(f->closed);
	flow_tcp_seen(f, false, TCP_FIN | TCP_ACK, 8, 1, 6);
	assert_true(f->closed);
	assert_int_equal(f->until_ms, 6 + FLOW_CLOSED_MS);
	flows_free(t);
}

/* The guest's SYN (or SYN-ACK) a second time on a connection is told
 * apart from its first; after FIN both ways, a SYN opens a new one. */
static void test_tcp_repeated_syn(void **state)
{
	struct flows *t = flows_new();
	struct flow_key k = key(NET_PROTO_TCP, 1, 1);
	struct flow *out = flow_add(t, &k, 1), *in;

	(void)state;
	assert_false(flow_tcp_seen(out, true, TCP_SYN, 100, 1, 1));
	assert_false(flow_tcp_seen(out, false, TCP_SYN | TCP_ACK, 7, 1, 2));
	assert_true(flow_tcp_seen(out, true, TCP_SYN, 100, 1, 3));
	assert_false(flow_tcp_seen(out, true, TCP_ACK, 101, 1000, 4));
	assert_true(flow_tcp_seen(out, true, TCP_SYN, 100, 1, 5));
	flow_tcp_seen(out, true, TCP_FIN | TCP_ACK, 1101, 1, 6);
	flow_tcp_seen(out, false, TCP_FIN | TCP_ACK, 8, 1, 7);
	assert_true(out->closed);
	/* The same ports again. */
	assert_false(flow_tcp_seen(out, true, TCP_SYN, 5000, 1, 8));
	assert_false(out->closed);
	assert_true(flow_tcp_seen(out, true, TCP_SYN, 5000, 1, 9));

	/* A published port: the host's SYN, then the guest's SYN-ACK twice. */
	k.gport = 2;
	in = flow_add(t, &k, 10);
	assert_false(flow_tcp_seen(in, false, TCP_SYN, 1, 1, 10));
	assert_false(flow_tcp_seen(in, true, TCP_SYN | TCP_ACK, 300, 1, 11));
	assert_false(flow_tcp_seen(in, false, TCP_SYN, 1, 1, 12));
	assert_true(flow_tcp_seen(in, true, TCP_SYN | TCP_ACK, 300, 1, 13));
	flows_free(t);
}

/* A frame libslirp would send the guest: IPv4, TCP with flags, window
 * and len bytes of payload. */
static size_t seg_frame(uint8_t *b, uint8_t flags, uint16_t window, size_t len)
{
	memset(b, 0, FRAME_L4 + TCP_HLEN + len);
	frame_put16(b + 12, ETH_TYPE_IPV4);
	b[FRAME_IP] = 0x45;
	frame_put16(b + FRAME_IP + 2, (uint16_t)(IPV4_HLEN + TCP_HLEN + len));
	b[FRAME_IP + 9] = IPPROTO_NUM_TCP;
	b[FRAME_L4 + 12] = 5 << 4;
	b[FRAME_L4 + 13] = flags;
	frame_put16(b + FRAME_L4 + 14, window);
	return FRAME_L4 + TCP_HLEN + len;
}

struct sent {
	unsigned n;
	uint32_t last_ack;
};

static void sent_one(void *opaque, const uint8_t *frame, size_t len)
{
	struct sent *s = opaque;

	(void)len;
	s->n++;
	s->last_ack = frame_get32(frame + FRAME_L4 + 8);
}

/* Only a pure ACK with an open window, on a flow whose guest writes small,
 * is held; the next frame of its flow replaces it; it goes when due. */
static void test_ack_hold(void **state)
{
	struct ack_hold *h = ack_hold_new();
	struct flow_key a = key(NET_PROTO_TCP, 1, 1), b = key(NET_PROTO_TCP, 1, 2);
	uint8_t f[FRAME_L4 + TCP_HLEN + 100];
	struct sent s = { 0 };
	size_t n;

	(void)state;
	/* Small: short of 16 KiB and of the MSS the guest offered (at MTU
	 * 1500, a bulk sender's full segment is not small). */
	assert_true(ack_hold_small(1024, 0));
	assert_true(ack_hold_small(1024, 1460));
	assert_false(ack_hold_small(1460, 1460));
	assert_true(ack_hold_small(8192, 65480));
	assert_false(ack_hold_small(ACK_HOLD_SMALL, 65480));
	assert_false(ack_hold_small(ACK_HOLD_SMALL, 0));
	n = seg_frame(f, TCP_ACK, 65535, 0);
	assert_false(ack_hold_offer(h, &a, false, f, n, 100)); /* its guest writes large */
	assert_int_equal(ack_hold_timeout(h, 100), -1);
	assert_true(ack_hold_offer(h, &a, true, f, n, 100));
	assert_int_equal(ack_hold_timeout(h, 100), ACK_HOLD_MS);
	frame_put32(f + FRAME_L4 + 8, 7);
	assert_true(ack_hold_offer(h, &a, true, f, n, 101)); /* replaces the first */
	assert_false(ack_hold_offer(h, &b, true, f, seg_frame(f, TCP_ACK, 0, 0), 101)); /* shut */
	assert_false(ack_hold_offer(h, &b, true, f, seg_frame(f, TCP_ACK | TCP_FIN, 9, 0), 101));
	assert_false(ack_hold_offer(h, &b, true, f, seg_frame(f, TCP_ACK, 9, 100), 101)); /* data */
	ack_hold_release(h, 101 + ACK_HOLD_MS - 1, sent_one, &s);
	assert_int_equal(s.n, 0);
	ack_hold_release(h, 101 + ACK_HOLD_MS, sent_one, &s);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.last_ack, 7);
	assert_int_equal(ack_hold_timeout(h, 200), -1);

	/* Data on the flow drops the held ACK: the data carries a later one. */
	assert_true(ack_hold_offer(h, &a, true, f, seg_frame(f, TCP_ACK, 9, 0), 300));
	assert_false(ack_hold_offer(h, &a, true, f, seg_frame(f, TCP_ACK, 9, 10), 300));
	ack_hold_release(h, 400, sent_one, &s);
	assert_int_equal(s.n, 1);

	/* Bounded: a full table holds no more; a cut flow's is forgotten. */
	for (uint16_t i = 0; i < ACK_HOLD_MAX; i++) {
		struct flow_key k = key(NET_PROTO_TCP, 2, i);

		assert_true(ack_hold_offer(h, &k, true, f, seg_frame(f, TCP_ACK, 9, 0), 500));
	}
	assert_false(ack_hold_offer(h, &a, true, f, n, 500));
	b = key(NET_PROTO_TCP, 2, 5);
	ack_hold_drop(h, &b);
	assert_true(ack_hold_offer(h, &a, true, f, n, 500));
	ack_hold_release(h, 500 + ACK_HOLD_MS, sent_one, &s);
	assert_int_equal(s.n, 1 + ACK_HOLD_MAX);
	ack_hold_free(h);
}

static void test_proxy_parse(void **state)
{
	static const char *const bad[] = {
		"proxy:3128",
		"ftp://proxy:21",
		"http://",
		"http://:3128",
		"http://user:pw@proxy:3128",
		"http://proxy:0",
		"http://proxy:65536",
		"http://proxy:31x8",
		"http://proxy:3128/path",
		"socks5://proxy",
		"http://[::1]:3128",
		"http://pro xy:3128",
		"http://proxy;rm:3128",
	};
	gantry_error_t err = NULL;
	struct net_proxy p;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		if (net_proxy_parse(bad[i], &p, &err) == 0)
			fail_msg("`%s` was taken", bad[i]);
		assert_string_equal(err->option, "proxy");
		assert_true(strncmp(gantry_error_str(err), "proxy", 5) == 0);
		assert_null(strchr(gantry_error_str(err), '\n'));
		gantry_error_free(&err);
	}
	assert_int_equal(net_proxy_parse("HTTP://Proxy.Example:3128/", &p, NULL), 0);
	assert_string_equal(p.host, "proxy.example");
	assert_int_equal(p.port, 3128);
	assert_false(p.loopback);
	assert_string_equal(p.guest_url, "http://proxy.example:3128");
	assert_int_equal(net_proxy_parse("https://proxy.example", &p, NULL), 0);
	assert_int_equal(p.port, 443);
	assert_int_equal(net_proxy_parse("http://localhost", &p, NULL), 0);
	assert_int_equal(p.port, 80);
	assert_true(p.loopback);
	assert_int_equal(net_proxy_parse("socks5h://127.0.0.1:1080", &p, NULL), 0);
	assert_true(p.loopback);
	assert_string_equal(p.guest_url, "socks5h://" NET_HOST_STR ":1080");
}

static void test_proxy_env_and_addrs(void **state)
{
	static const char *const want[] = {
		"HTTP_PROXY=http://" NET_HOST_STR ":3128",
		"http_proxy=http://" NET_HOST_STR ":3128",
		"HTTPS_PROXY=http://" NET_HOST_STR ":3128",
		"https_proxy=http://" NET_HOST_STR ":3128",
		"ALL_PROXY=http://" NET_HOST_STR ":3128",
		"all_proxy=http://" NET_HOST_STR ":3128",
		"NO_PROXY=" NET_NO_PROXY_DEFAULT,
		"no_proxy=" NET_NO_PROXY_DEFAULT,
	};
	gantry_error_t err = NULL;
	struct net_proxy p;
	uint32_t ips[4];
	size_t n;
	char **env;

	(void)state;
	assert_int_equal(net_proxy_parse("http://127.0.0.1:3128", &p, NULL), 0);
	env = net_proxy_env(&p, NULL);
	for (size_t i = 0; i < ARRAY_SIZE(want); i++)
		assert_string_equal(env[i], want[i]);
	assert_null(env[ARRAY_SIZE(want)]);
	strv_free(env);
	env = net_proxy_env(&p, "internal.example,10.0.0.0/8");
	assert_string_equal(env[6], "NO_PROXY=internal.example,10.0.0.0/8");
	strv_free(env);
	/* A loopback proxy is the host alias; an address is itself. */
	assert_int_equal(net_proxy_addrs(&p, ips, 4, &n, NULL), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ips[0], NET_HOST);
	assert_int_equal(net_proxy_parse("http://203.0.113.7:8080", &p, NULL), 0);
	assert_int_equal(net_proxy_addrs(&p, ips, 4, &n, NULL), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ips[0], 0xcb007107);
	assert_int_equal(net_no_proxy_check("a.example,*,10.0.0.0/8,[::1]:80", NULL), 0);
	assert_int_equal(net_no_proxy_check("a b", &err), -1);
	gantry_error_free(&err);
}

/* A ClientHello record with a server_name of name (NULL: none). */
static size_t hello(uint8_t *out, const char *name)
{
	uint8_t exts[300], body[400];
	size_t e = 0, b = 0, n = name ? strlen(name) : 0;

	if (name) {
		uint8_t ext[] = { 0,
				  0,
				  (uint8_t)((n + 5) >> 8),
				  (uint8_t)(n + 5),
				  (uint8_t)((n + 3) >> 8),
				  (uint8_t)(n + 3),
				  0,
				  (uint8_t)(n >> 8),
				  (uint8_t)n };

		memcpy(exts, ext, sizeof(ext));
		memcpy(exts + sizeof(ext), name, n);
		e = sizeof(ext) + n;
	}
	body[b++] = 3, body[b++] = 3;
	memset(body + b, 7, 32), b += 32;
	body[b++] = 0; /* no session id */
	body[b++] = 0, body[b++] = 2, body[b++] = 0x13, body[b++] = 1;
	body[b++] = 1, body[b++] = 0;
	body[b++] = (uint8_t)(e >> 8), body[b++] = (uint8_t)e;
	memcpy(body + b, exts, e), b += e;
	out[0] = 22, out[1] = 3, out[2] = 1, out[3] = (uint8_t)((b + 4) >> 8),
	out[4] = (uint8_t)(b + 4);
	out[5] = 1, out[6] = 0, out[7] = (uint8_t)(b >> 8), out[8] = (uint8_t)b;
	memcpy(out + 9, body, b);
	return 9 + b;
}

static void test_tls_hello(void **state)
{
	uint8_t buf[600], split[700];
	char name[TLS_NAME_MAX + 1];
	size_t n = hello(buf, "Allowed.Test."), k;

	(void)state;
	assert_int_equal(tls_hello_name(buf, n, name), TLS_HELLO_NAME);
	assert_string_equal(name, "allowed.test");
	/* Every prefix is "more" until the name is whole. */
	for (k = 0; k < n - 1; k++)
		if (tls_hello_name(buf, k, name) != TLS_HELLO_MORE)
			break;
	assert_true(k >= n - 14);
	/* The handshake over two records. */
	memcpy(split, buf, 5);
	split[3] = 0, split[4] = 20;
	memcpy(split + 5, buf + 5, 20);
	split[25] = 22, split[26] = 3, split[27] = 1, split[28] = 0;
	split[29] = (uint8_t)(n - 5 - 20);
	memcpy(split + 30, buf + 25, n - 25);
	assert_int_equal(tls_hello_name(split, n + 5, name), TLS_HELLO_NAME);
	assert_string_equal(name, "allowed.test");
	n = hello(buf, NULL);
	assert_int_equal(tls_hello_name(buf, n, name), TLS_HELLO_NO_NAME);
	n = hello(buf, "bad name");
	assert_int_equal(tls_hello_name(buf, n, name), TLS_HELLO_BAD);
	assert_int_equal(tls_hello_name((const uint8_t *)"GET / HTTP/1.1\r\n", 16, name),
			 TLS_HELLO_NOT_TLS);
	/* A server's hello is no client's. */
	assert_int_equal(
		tls_hello_name((const uint8_t *)"\x16\x03\x03\x00\x04\x02\x00\x00\x00", 9, name),
		TLS_HELLO_BAD);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find_add_remove),	 cmocka_unit_test(test_full),
		cmocka_unit_test(test_half_open_victim), cmocka_unit_test(test_expiry),
		cmocka_unit_test(test_syn_rate),	 cmocka_unit_test(test_tcp_seen),
		cmocka_unit_test(test_tcp_repeated_syn), cmocka_unit_test(test_ack_hold),
		cmocka_unit_test(test_proxy_parse),	 cmocka_unit_test(test_proxy_env_and_addrs),
		cmocka_unit_test(test_tls_hello),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
