/* The network worker's frame check, frame builders and traffic table:
 * each drop rule on a frame that differs from a good one in that one
 * field; URG cleared with the checksum still right; where DNS, echo and
 * refused gateway traffic go; the ARP token bucket; the table's bound,
 * eviction and JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/util.h"
#include "net/filter.h"
#include "net/frame.h"
#include "net/net.h"
#include "net/traffic.h"

#define IP(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (d))

static const uint8_t guest_mac[6] = NET_GUEST_MAC;
static const uint8_t gw_mac[6] = NET_GATEWAY_MAC;

struct pkt {
	uint8_t b[2048];
	size_t len;
};

static void eth(struct pkt *p, uint16_t type)
{
	memcpy(p->b, gw_mac, 6);
	memcpy(p->b + 6, guest_mac, 6);
	frame_put16(p->b + 12, type);
}

static void ip_sum(struct pkt *p)
{
	uint8_t *ip = p->b + FRAME_IP;

	frame_put16(ip + 10, 0);
	frame_put16(ip + 10, frame_csum_fold(frame_csum_add(0, ip, IPV4_HLEN)));
}

static void l4_sum(struct pkt *p)
{
	uint8_t *ip = p->b + FRAME_IP, *l4 = p->b + FRAME_L4;
	size_t l4_len = frame_get16(ip + 2) - IPV4_HLEN;
	size_t off = ip[9] == IPPROTO_NUM_TCP ? 16 : ip[9] == IPPROTO_NUM_UDP ? 6 : 2;
	uint32_t s = 0;

	frame_put16(l4 + off, 0);
	if (ip[9] != IPPROTO_NUM_ICMP)
		s = frame_csum_pseudo(frame_get32(ip + 12), frame_get32(ip + 16), ip[9],
				      (uint16_t)l4_len);
	frame_put16(l4 + off, frame_csum_fold(frame_csum_add(s, l4, l4_len)));
}

/* A well-formed IPv4 datagram from the guest, l4_len bytes of payload. */
static void ipv4(struct pkt *p, uint8_t proto, uint32_t dst, size_t l4_len)
{
	uint8_t *ip = p->b + FRAME_IP;

	memset(p->b, 0, sizeof(p->b));
	eth(p, ETH_TYPE_IPV4);
	ip[0] = 0x45;
	frame_put16(ip + 2, (uint16_t)(IPV4_HLEN + l4_len));
	frame_put16(ip + 6, 0x4000);
	ip[8] = 64;
	ip[9] = proto;
	frame_put32(ip + 12, NET_GUEST);
	frame_put32(ip + 16, dst);
	ip_sum(p);
	p->len = FRAME_L4 + l4_len;
}

static void tcp(struct pkt *p, uint32_t dst, uint16_t dport, uint8_t flags, size_t data)
{
	uint8_t *t = p->b + FRAME_L4;

	ipv4(p, IPPROTO_NUM_TCP, dst, TCP_HLEN + data);
	frame_put16(t, 40000);
	frame_put16(t + 2, dport);
	frame_put32(t + 4, 1000);
	frame_put32(t + 8, (flags & TCP_ACK) ? 5000 : 0);
	t[12] = 5 << 4;
	t[13] = flags;
	frame_put16(t + 14, 65535);
	for (size_t i = 0; i < data; i++)
		t[TCP_HLEN + i] = (uint8_t)(i * 7);
	l4_sum(p);
}

static void udp(struct pkt *p, uint32_t dst, uint16_t dport, size_t data)
{
	uint8_t *u = p->b + FRAME_L4;

	ipv4(p, IPPROTO_NUM_UDP, dst, UDP_HLEN + data);
	frame_put16(u, 33333);
	frame_put16(u + 2, dport);
	frame_put16(u + 4, (uint16_t)(UDP_HLEN + data));
	for (size_t i = 0; i < data; i++)
		u[UDP_HLEN + i] = (uint8_t)(i + 1);
	l4_sum(p);
}

static void icmp_echo(struct pkt *p, uint32_t dst, size_t data)
{
	uint8_t *c = p->b + FRAME_L4;

	ipv4(p, IPPROTO_NUM_ICMP, dst, ICMP_HLEN + data);
	c[0] = ICMP_ECHO;
	frame_put16(c + 4, 0x1234);
	frame_put16(c + 6, 7);
	for (size_t i = 0; i < data; i++)
		c[ICMP_HLEN + i] = (uint8_t)i;
	l4_sum(p);
}

static void arp(struct pkt *p, uint16_t op, uint32_t sender, uint32_t target)
{
	uint8_t *a = p->b + NET_ETH_HLEN;

	memset(p->b, 0, sizeof(p->b));
	eth(p, ETH_TYPE_ARP);
	memset(p->b, 0xff, 6);
	frame_put16(a, 1);
	frame_put16(a + 2, ETH_TYPE_IPV4);
	a[4] = 6;
	a[5] = 4;
	frame_put16(a + 6, op);
	memcpy(a + 8, guest_mac, 6);
	frame_put32(a + 14, sender);
	frame_put32(a + 24, target);
	p->len = NET_ETH_HLEN + ARP_BODY_LEN;
}

static struct filter_verdict run(struct pkt *p)
{
	struct net_filter f;
	struct filter_verdict v;

	filter_init(&f, 1000);
	filter_frame(&f, p->b, p->len, 1000, &v);
	return v;
}

static void expect_drop(struct pkt *p, enum net_drop reason)
{
	struct filter_verdict v = run(p);

	assert_int_equal(v.action, FILTER_DROP);
	assert_string_equal(net_drop_name(v.reason), net_drop_name(reason));
}

static void test_good_frames_pass(void **state)
{
	struct pkt p;
	struct filter_verdict v;

	(void)state;
	tcp(&p, IP(203, 0, 113, 10), 443, TCP_SYN, 0);
	v = run(&p);
	assert_int_equal(v.action, FILTER_SLIRP);
	assert_int_equal(v.reason, NET_DROP_NONE);
	assert_true(v.has_dst);
	assert_int_equal(v.dst, IP(203, 0, 113, 10));
	assert_int_equal(v.proto, NET_PROTO_TCP);
	assert_int_equal(v.port, 443);
	udp(&p, IP(198, 51, 100, 1), 5000, 10);
	assert_int_equal(run(&p).action, FILTER_SLIRP);
	icmp_echo(&p, IP(198, 51, 100, 1), 56);
	expect_drop(&p, NET_DROP_ICMP_FORWARD); /* only the gateway answers ICMP */
	icmp_echo(&p, NET_HOST, 56);
	expect_drop(&p, NET_DROP_ICMP_FORWARD);
	tcp(&p, NET_HOST, 8080, TCP_SYN, 0);
	assert_int_equal(run(&p).action, FILTER_SLIRP);
	tcp(&p, NET_GATEWAY, 53, TCP_SYN, 0);
	assert_int_equal(run(&p).action, FILTER_SLIRP);
	arp(&p, 1, NET_GUEST, NET_GATEWAY);
	v = run(&p);
	assert_int_equal(v.action, FILTER_SLIRP);
	assert_int_equal(v.proto, NET_PROTO_ARP);
	assert_int_equal(v.dst, NET_GATEWAY);
}

static void test_ethernet_rules(void **state)
{
	struct pkt p;

	(void)state;
	tcp(&p, IP(203, 0, 113, 10), 80, TCP_SYN, 0);
	p.len = 13;
	expect_drop(&p, NET_DROP_FRAME_SIZE);
	assert_false(run(&p).has_dst);
	p.len = NET_FRAME_MAX + 1;
	expect_drop(&p, NET_DROP_FRAME_SIZE);
	tcp(&p, IP(203, 0, 113, 10), 80, TCP_SYN, 0);
	p.b[11] ^= 1;
	expect_drop(&p, NET_DROP_SRC_MAC);
	tcp(&p, IP(203, 0, 113, 10), 80, TCP_SYN, 0);
	frame_put16(p.b + 12, 0x86dd); /* IPv6 */
	expect_drop(&p, NET_DROP_ETHERTYPE);
	frame_put16(p.b + 12, 0x8100); /* VLAN */
	expect_drop(&p, NET_DROP_ETHERTYPE);
	frame_put16(p.b + 12, 0x88f8); /* NC-SI */
	expect_drop(&p, NET_DROP_ETHERTYPE);
}

static void test_arp_rules(void **state)
{
	struct pkt p;

	(void)state;
	arp(&p, 1, NET_GUEST, NET_GATEWAY);
	p.len = NET_ETH_HLEN + ARP_BODY_LEN - 1;
	expect_drop(&p, NET_DROP_ARP_MALFORMED);
	arp(&p, 3, NET_GUEST, NET_GATEWAY); /* RARP request */
	expect_drop(&p, NET_DROP_ARP_MALFORMED);
	arp(&p, 1, NET_GUEST, NET_GATEWAY);
	p.b[NET_ETH_HLEN + 5] = 16;
	expect_drop(&p, NET_DROP_ARP_MALFORMED);
	arp(&p, 2, NET_ADDR(7), NET_GATEWAY);
	expect_drop(&p, NET_DROP_ARP_SPOOF);
	arp(&p, 2, NET_GUEST, NET_GATEWAY);
	p.b[NET_ETH_HLEN + 8] ^= 2;
	expect_drop(&p, NET_DROP_ARP_SPOOF);
}

static void test_arp_rate(void **state)
{
	struct net_filter f;
	struct filter_verdict v;
	struct pkt p;
	int passed = 0;

	(void)state;
	arp(&p, 1, NET_GUEST, NET_GATEWAY);
	filter_init(&f, 5000);
	for (int i = 0; i < 500; i++) {
		filter_frame(&f, p.b, p.len, 5000, &v);
		passed += v.action == FILTER_SLIRP;
	}
	assert_int_equal(passed, FILTER_ARP_BURST);
	assert_int_equal(v.reason, NET_DROP_ARP_RATE);
	/* 100 ms later: ten more. */
	passed = 0;
	for (int i = 0; i < 500; i++) {
		filter_frame(&f, p.b, p.len, 5100, &v);
		passed += v.action == FILTER_SLIRP;
	}
	assert_int_equal(passed, 10);
	/* A long pause refills the bucket, no more than full. */
	passed = 0;
	for (int i = 0; i < 500; i++) {
		filter_frame(&f, p.b, p.len, 100000, &v);
		passed += v.action == FILTER_SLIRP;
	}
	assert_int_equal(passed, FILTER_ARP_BURST);
}

static void test_ipv4_header_rules(void **state)
{
	struct pkt p;
	uint8_t *ip = p.b + FRAME_IP;

	(void)state;
	udp(&p, IP(203, 0, 113, 10), 5000, 4);
	p.len = FRAME_L4 - 1;
	expect_drop(&p, NET_DROP_IP_HEADER);
	udp(&p, IP(203, 0, 113, 10), 5000, 4);
	ip[0] = 0x65;
	ip_sum(&p);
	expect_drop(&p, NET_DROP_IP_HEADER);
	ip[0] = 0x44;
	ip_sum(&p);
	expect_drop(&p, NET_DROP_IP_HEADER);
	ip[0] = 0x46;
	ip_sum(&p);
	expect_drop(&p, NET_DROP_IP_OPTIONS);
	udp(&p, IP(203, 0, 113, 10), 5000, 4);
	frame_put16(ip + 2, (uint16_t)(p.len - FRAME_IP + 1));
	ip_sum(&p);
	expect_drop(&p, NET_DROP_IP_LENGTH);
	frame_put16(ip + 2, 19);
	ip_sum(&p);
	expect_drop(&p, NET_DROP_IP_LENGTH);
	udp(&p, IP(203, 0, 113, 10), 5000, 4);
	ip[10] ^= 0x10;
	expect_drop(&p, NET_DROP_IP_CHECKSUM);
	udp(&p, IP(203, 0, 113, 10), 5000, 4);
	frame_put16(ip + 6, 0x2000); /* MF */
	ip_sum(&p);
	expect_drop(&p, NET_DROP_FRAGMENT);
	assert_true(run(&p).has_dst);
	frame_put16(ip + 6, 0x0001); /* offset 8 */
	ip_sum(&p);
	expect_drop(&p, NET_DROP_FRAGMENT);
	udp(&p, IP(203, 0, 113, 10), 5000, 4);
	ip[8] = 0;
	ip_sum(&p);
	expect_drop(&p, NET_DROP_TTL);
	udp(&p, IP(203, 0, 113, 10), 5000, 4);
	frame_put32(ip + 12, NET_ADDR(9));
	ip_sum(&p);
	expect_drop(&p, NET_DROP_IP_SPOOF);
	ipv4(&p, 47 /* GRE */, IP(203, 0, 113, 10), 8);
	expect_drop(&p, NET_DROP_IP_PROTO);
	assert_int_equal(run(&p).proto, NET_PROTO_OTHER);
	/* Ethernet padding past the total length is allowed and not counted. */
	udp(&p, IP(203, 0, 113, 10), 5000, 4);
	p.len += 10;
	assert_int_equal(run(&p).action, FILTER_SLIRP);
	assert_int_equal(run(&p).len, p.len - 10);
}

static void test_destination_rules(void **state)
{
	static const struct {
		uint32_t dst;
		enum net_drop reason;
	} rows[] = {
		{ IP(127, 0, 0, 1), NET_DROP_DST_LOOPBACK },
		{ IP(127, 255, 0, 9), NET_DROP_DST_LOOPBACK },
		{ IP(0, 0, 0, 0), NET_DROP_DST_ZERO },
		{ IP(0, 1, 2, 3), NET_DROP_DST_ZERO },
		{ IP(255, 255, 255, 255), NET_DROP_DST_BROADCAST },
		{ NET_BROADCAST, NET_DROP_DST_BROADCAST },
		{ IP(224, 0, 0, 251), NET_DROP_DST_MULTICAST },
		{ IP(239, 1, 1, 1), NET_DROP_DST_MULTICAST },
		{ IP(240, 0, 0, 1), NET_DROP_DST_RESERVED },
		{ NET_SLIRP_DNS, NET_DROP_DST_LOCAL },
		{ NET_NETWORK, NET_DROP_DST_LOCAL },
		{ NET_GUEST, NET_DROP_DST_LOCAL },
		{ NET_ADDR(100), NET_DROP_DST_LOCAL },
		{ NET_ADDR(253), NET_DROP_DST_LOCAL },
	};
	struct pkt p;

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		tcp(&p, rows[i].dst, 80, TCP_SYN, 0);
		expect_drop(&p, rows[i].reason);
		assert_int_equal(run(&p).port, 80); /* filed under its port */
		udp(&p, rows[i].dst, 5000, 4);
		expect_drop(&p, rows[i].reason);
		icmp_echo(&p, rows[i].dst, 4);
		expect_drop(&p, rows[i].reason);
	}
}

static void test_l4_rules(void **state)
{
	struct pkt p;

	(void)state;
	ipv4(&p, IPPROTO_NUM_TCP, IP(203, 0, 113, 10), TCP_HLEN - 1);
	expect_drop(&p, NET_DROP_TCP_HEADER);
	tcp(&p, IP(203, 0, 113, 10), 80, TCP_ACK, 0);
	p.b[FRAME_L4 + 12] = 4 << 4;
	expect_drop(&p, NET_DROP_TCP_HEADER);
	p.b[FRAME_L4 + 12] = 6 << 4; /* 24 bytes of header in a 20-byte segment */
	expect_drop(&p, NET_DROP_TCP_HEADER);
	tcp(&p, IP(203, 0, 113, 10), 80, TCP_SYN | TCP_FIN, 0);
	expect_drop(&p, NET_DROP_TCP_FLAGS);
	tcp(&p, IP(203, 0, 113, 10), 80, TCP_SYN | TCP_RST, 0);
	expect_drop(&p, NET_DROP_TCP_FLAGS);
	ipv4(&p, IPPROTO_NUM_UDP, IP(203, 0, 113, 10), UDP_HLEN - 1);
	expect_drop(&p, NET_DROP_UDP_HEADER);
	udp(&p, IP(203, 0, 113, 10), 5000, 4);
	frame_put16(p.b + FRAME_L4 + 4, 7);
	expect_drop(&p, NET_DROP_UDP_HEADER);
	frame_put16(p.b + FRAME_L4 + 4, UDP_HLEN + 5);
	expect_drop(&p, NET_DROP_UDP_HEADER);
	udp(&p, IP(203, 0, 113, 10), 67, 4);
	expect_drop(&p, NET_DROP_DHCP_TFTP);
	udp(&p, NET_HOST, 69, 4);
	expect_drop(&p, NET_DROP_DHCP_TFTP);
	ipv4(&p, IPPROTO_NUM_ICMP, IP(203, 0, 113, 10), ICMP_HLEN - 1);
	expect_drop(&p, NET_DROP_ICMP_HEADER);
}

/* The TCP checksum over the segment as it is now. */
static bool tcp_sum_ok(const struct pkt *p)
{
	const uint8_t *ip = p->b + FRAME_IP;

	return frame_l4_csum_ok(ip, p->b + FRAME_L4, frame_get16(ip + 2) - IPV4_HLEN,
				IPPROTO_NUM_TCP);
}

static void test_urg_cleared(void **state)
{
	struct pkt p;
	struct filter_verdict v;

	(void)state;
	for (unsigned urp = 0; urp < 70000; urp += 997) {
		tcp(&p, IP(203, 0, 113, 10), 80, TCP_ACK | TCP_URG | TCP_PSH, 33);
		frame_put16(p.b + FRAME_L4 + 18, (uint16_t)urp);
		l4_sum(&p);
		assert_true(tcp_sum_ok(&p));
		v = run(&p);
		assert_int_equal(v.action, FILTER_SLIRP);
		assert_true(v.urg_cleared);
		assert_int_equal(p.b[FRAME_L4 + 13] & TCP_URG, 0);
		assert_int_equal(p.b[FRAME_L4 + 13], TCP_ACK | TCP_PSH);
		assert_int_equal(frame_get16(p.b + FRAME_L4 + 18), 0);
		assert_true(tcp_sum_ok(&p));
	}
	/* An urgent pointer without the flag goes too. */
	tcp(&p, IP(203, 0, 113, 10), 80, TCP_ACK, 3);
	frame_put16(p.b + FRAME_L4 + 18, 0xffff);
	l4_sum(&p);
	assert_true(run(&p).urg_cleared);
	assert_true(tcp_sum_ok(&p));
	/* Nothing to clear: the segment is untouched. */
	tcp(&p, IP(203, 0, 113, 10), 80, TCP_ACK, 3);
	assert_false(run(&p).urg_cleared);
}

static void test_gateway_services(void **state)
{
	struct pkt p;
	struct filter_verdict v;

	(void)state;
	udp(&p, NET_GATEWAY, 53, 29);
	v = run(&p);
	assert_int_equal(v.action, FILTER_DNS);
	assert_int_equal(v.sport, 33333);
	assert_int_equal(v.payload, FRAME_L4 + UDP_HLEN);
	assert_int_equal(v.plen, 29);
	assert_int_equal(p.b[v.payload], 1);
	/* A bad UDP sum on a datagram we answer ourselves. */
	p.b[FRAME_L4 + UDP_HLEN] ^= 0x40;
	expect_drop(&p, NET_DROP_CHECKSUM);
	/* No sum at all is allowed (RFC 768). */
	frame_put16(p.b + FRAME_L4 + 6, 0);
	assert_int_equal(run(&p).action, FILTER_DNS);
	/* UDP/53 elsewhere is any datagram. */
	udp(&p, IP(198, 51, 100, 53), 53, 29);
	assert_int_equal(run(&p).action, FILTER_SLIRP);
	udp(&p, NET_GATEWAY, 123, 4);
	v = run(&p);
	assert_int_equal(v.action, FILTER_UNREACH);
	assert_int_equal(v.reason, NET_DROP_GATEWAY);
	tcp(&p, NET_GATEWAY, 22, TCP_SYN, 0);
	v = run(&p);
	assert_int_equal(v.action, FILTER_RST);
	assert_int_equal(v.reason, NET_DROP_GATEWAY);
	tcp(&p, NET_GATEWAY, 22, TCP_RST | TCP_ACK, 0);
	expect_drop(&p, NET_DROP_GATEWAY);
	icmp_echo(&p, NET_GATEWAY, 56);
	assert_int_equal(run(&p).action, FILTER_ECHO);
	p.b[FRAME_L4 + 9] ^= 1;
	expect_drop(&p, NET_DROP_CHECKSUM);
	icmp_echo(&p, NET_GATEWAY, 56);
	p.b[FRAME_L4] = 13; /* timestamp */
	l4_sum(&p);
	expect_drop(&p, NET_DROP_GATEWAY);
	ipv4(&p, 47, NET_GATEWAY, 8);
	expect_drop(&p, NET_DROP_IP_PROTO);
}

/* A built frame is itself one the guest side would accept: IPv4 and L4
 * sums right, from src to the guest's MAC and address. */
static void check_built(const uint8_t *b, size_t len, uint32_t src, uint8_t proto)
{
	const uint8_t *ip = b + FRAME_IP;

	assert_true(len >= FRAME_L4);
	assert_memory_equal(b, guest_mac, 6);
	assert_memory_equal(b + 6, gw_mac, 6);
	assert_int_equal(frame_get16(b + 12), ETH_TYPE_IPV4);
	assert_int_equal(frame_get16(ip + 2), len - FRAME_IP);
	assert_true(frame_ipv4_csum_ok(ip));
	assert_int_equal(ip[9], proto);
	assert_int_equal(frame_get32(ip + 12), src);
	assert_int_equal(frame_get32(ip + 16), NET_GUEST);
	assert_true(frame_l4_csum_ok(ip, b + FRAME_L4, len - FRAME_L4, proto));
}

static void test_builders(void **state)
{
	uint8_t out[2048];
	struct pkt p;
	size_t n;
	const uint8_t msg[] = "answer bytes";

	(void)state;
	n = frame_udp_to_guest(out, sizeof(out), NET_GATEWAY, 53, 4444, msg, sizeof(msg));
	assert_int_equal(n, FRAME_L4 + UDP_HLEN + sizeof(msg));
	check_built(out, n, NET_GATEWAY, IPPROTO_NUM_UDP);
	assert_int_equal(frame_get16(out + FRAME_L4), 53);
	assert_int_equal(frame_get16(out + FRAME_L4 + 2), 4444);
	assert_memory_equal(out + FRAME_L4 + UDP_HLEN, msg, sizeof(msg));
	assert_int_equal(frame_udp_to_guest(out, n - 1, NET_GATEWAY, 53, 1, msg, sizeof(msg)), 0);

	/* RST to a SYN: ACK of SYN's sequence + 1. */
	tcp(&p, NET_GATEWAY, 22, TCP_SYN, 0);
	n = frame_tcp_rst(out, sizeof(out), p.b, p.len);
	assert_int_equal(n, FRAME_L4 + TCP_HLEN);
	check_built(out, n, NET_GATEWAY, IPPROTO_NUM_TCP);
	assert_int_equal(out[FRAME_L4 + 13], TCP_RST | TCP_ACK);
	assert_int_equal(frame_get32(out + FRAME_L4 + 8), 1001);
	assert_int_equal(frame_get16(out + FRAME_L4), 22);
	assert_int_equal(frame_get16(out + FRAME_L4 + 2), 40000);
	/* RST to an ACK: sequence from it, no ACK. */
	tcp(&p, NET_GATEWAY, 22, TCP_ACK, 10);
	n = frame_tcp_rst(out, sizeof(out), p.b, p.len);
	check_built(out, n, NET_GATEWAY, IPPROTO_NUM_TCP);
	assert_int_equal(out[FRAME_L4 + 13], TCP_RST);
	assert_int_equal(frame_get32(out + FRAME_L4 + 4), 5000);
	tcp(&p, NET_GATEWAY, 22, TCP_RST, 0);
	assert_int_equal(frame_tcp_rst(out, sizeof(out), p.b, p.len), 0);

	udp(&p, NET_GATEWAY, 123, 40);
	n = frame_icmp_unreach(out, sizeof(out), p.b, p.len, ICMP_PORT_UNREACH);
	assert_int_equal(n, FRAME_L4 + ICMP_HLEN + IPV4_HLEN + 8);
	check_built(out, n, NET_GATEWAY, IPPROTO_NUM_ICMP);
	assert_int_equal(out[FRAME_L4], ICMP_UNREACH);
	assert_int_equal(out[FRAME_L4 + 1], ICMP_PORT_UNREACH);
	assert_memory_equal(out + FRAME_L4 + ICMP_HLEN, p.b + FRAME_IP, IPV4_HLEN + 8);

	icmp_echo(&p, NET_GATEWAY, 100);
	n = frame_icmp_echo_reply(out, sizeof(out), p.b, p.len);
	assert_int_equal(n, p.len);
	check_built(out, n, NET_GATEWAY, IPPROTO_NUM_ICMP);
	assert_int_equal(out[FRAME_L4], ICMP_ECHO_REPLY);
	assert_memory_equal(out + FRAME_L4 + 4, p.b + FRAME_L4 + 4, 4 + 100);
	assert_int_equal(frame_icmp_echo_reply(out, 50, p.b, p.len), 0);
	/* Truncated input makes nothing. */
	assert_int_equal(frame_icmp_echo_reply(out, sizeof(out), p.b, FRAME_L4 + 4), 0);
	assert_int_equal(frame_tcp_rst(out, sizeof(out), p.b, 20), 0);
}

static void test_csum_replace(void **state)
{
	uint8_t data[64];
	uint16_t c;

	(void)state;
	for (unsigned seed = 1; seed < 2000; seed++) {
		for (size_t i = 0; i < sizeof(data); i++)
			data[i] = (uint8_t)(seed * 31 + i * seed);
		frame_put16(data + 10, 0);
		frame_put16(data + 10, frame_csum_fold(frame_csum_add(0, data, sizeof(data))));
		c = frame_get16(data + 20);
		frame_put16(data + 20, (uint16_t)(seed * 77));
		frame_csum_replace16(data + 10, c, (uint16_t)(seed * 77));
		assert_int_equal(frame_csum_fold(frame_csum_add(0, data, sizeof(data))), 0);
	}
}

/* A repeated SYN's MSS option becomes NOPs wherever it sits in the list,
 * the other options and the checksum right; a malformed list is left. */
static void test_forget_mss(void **state)
{
	static const struct {
		uint8_t opts[20];
		size_t len;
		int mss; /* where the MSS option is, -1: none to find */
	} cases[] = {
		{ { 2, 4, 0xff, 0xd8 }, 4, 0 },
		{ { 1, 2, 4, 0x05, 0xb4, 1, 1, 1 }, 8, 1 },
		{ { 4, 2, 2, 4, 0x80, 0x00, 1, 1 }, 8, 2 },
		{ { 1, 1, 8, 10, 2, 4, 2, 4, 5, 6, 7, 8, 2, 4, 0xff, 0xd8, 1, 3, 3, 7 }, 20, 12 },
		{ { 4, 2, 1, 1 }, 4, -1 },		   /* no MSS */
		{ { 0, 0, 2, 4, 1, 2, 0, 0 }, 8, -1 },	   /* after the end of list */
		{ { 8, 0, 2, 4, 1, 2, 0, 0 }, 8, -1 },	   /* length 0 */
		{ { 8, 12, 2, 4, 1, 2, 0, 0 }, 8, -1 },   /* past the header */
		{ { 1, 1, 1, 2 }, 4, -1 },		   /* a kind without its length */
		{ { 2, 3, 1, 1 }, 4, -1 },		   /* MSS of a wrong length */
	};
	uint8_t want[20];
	struct pkt p;
	uint8_t *t;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		tcp(&p, IP(203, 0, 113, 10), 80, TCP_SYN, cases[i].len);
		t = p.b + FRAME_L4;
		/* The options take the payload's place: the offset covers them. */
		memcpy(t + TCP_HLEN, cases[i].opts, cases[i].len);
		t[12] = (uint8_t)(((TCP_HLEN + cases[i].len) / 4) << 4);
		l4_sum(&p);
		/* Read as the flow table reads it, then forgotten. */
		assert_int_equal(frame_tcp_mss(t, TCP_HLEN + cases[i].len),
				 cases[i].mss < 0 ? 0 :
						    cases[i].opts[cases[i].mss + 2] << 8 |
							    cases[i].opts[cases[i].mss + 3]);
		memcpy(want, cases[i].opts, cases[i].len);
		if (cases[i].mss >= 0)
			memset(want + cases[i].mss, 1, 4);
		assert_int_equal(frame_tcp_forget_mss(t, TCP_HLEN + cases[i].len),
				 cases[i].mss >= 0);
		assert_memory_equal(t + TCP_HLEN, want, cases[i].len);
		assert_true(frame_l4_csum_ok(p.b + FRAME_IP, t, p.len - FRAME_L4, IPPROTO_NUM_TCP));
	}
}

static void tx(struct traffic *t, uint32_t dst, uint16_t port, enum net_drop reason, time_t now)
{
	struct filter_verdict v = { .has_dst = true,
				    .dst = dst,
				    .proto = NET_PROTO_TCP,
				    .port = port,
				    .len = 100,
				    .reason = reason };

	traffic_guest(t, &v, now);
}

static void test_traffic_table(void **state)
{
	struct traffic *t = traffic_new();
	struct filter_verdict nodst = { .reason = NET_DROP_SRC_MAC };
	json_t *j, *d, *first;

	(void)state;
	tx(t, IP(203, 0, 113, 10), 443, NET_DROP_NONE, 1764590400);
	tx(t, IP(203, 0, 113, 10), 443, NET_DROP_NONE, 1764590401);
	traffic_rx(t, IP(203, 0, 113, 10), NET_PROTO_TCP, 443, 1500, 1764590402);
	tx(t, IP(127, 0, 0, 1), 22, NET_DROP_DST_LOOPBACK, 1764590403);
	traffic_guest(t, &nodst, 1764590404);
	assert_int_equal(traffic_count(t), 2);
	assert_int_equal(traffic_drops(t, NET_DROP_SRC_MAC), 1);
	assert_int_equal(traffic_drops(t, NET_DROP_DST_LOOPBACK), 1);

	j = traffic_json(t);
	d = json_object_get(j, "destinations");
	assert_int_equal(json_array_size(d), 2);
	first = json_array_get(d, 0); /* most recent first */
	assert_string_equal(json_string_value(json_object_get(first, "addr")), "127.0.0.1");
	assert_string_equal(json_string_value(json_object_get(first, "verdict")), "dropped");
	assert_string_equal(json_string_value(json_object_get(first, "reason")), "dst_loopback");
	first = json_array_get(d, 1);
	assert_string_equal(json_string_value(json_object_get(first, "addr")), "203.0.113.10");
	assert_string_equal(json_string_value(json_object_get(first, "proto")), "tcp");
	assert_int_equal(json_integer_value(json_object_get(first, "port")), 443);
	assert_string_equal(json_string_value(json_object_get(first, "verdict")), "allowed");
	assert_string_equal(json_string_value(json_object_get(first, "reason")), "");
	assert_int_equal(json_integer_value(json_object_get(first, "tx_bytes")), 200);
	assert_int_equal(json_integer_value(json_object_get(first, "tx_packets")), 2);
	assert_int_equal(json_integer_value(json_object_get(first, "rx_bytes")), 1500);
	assert_int_equal(json_integer_value(json_object_get(first, "rx_packets")), 1);
	assert_string_equal(json_string_value(json_object_get(first, "first_seen")),
			    "2025-12-01T12:00:00Z");
	assert_string_equal(json_string_value(json_object_get(first, "last_seen")),
			    "2025-12-01T12:00:02Z");
	assert_int_equal(
		json_integer_value(json_object_get(json_object_get(j, "drops"), "src_mac")), 1);
	assert_int_equal(json_integer_value(json_object_get(j, "evicted")), 0);
	json_decref(j);
	traffic_free(t);
}

static void test_traffic_eviction(void **state)
{
	struct traffic *t = traffic_new();
	json_t *j, *d;

	(void)state;
	for (uint32_t i = 0; i < TRAFFIC_MAX; i++)
		tx(t, IP(10, 0, i >> 8, i & 0xff), 80, NET_DROP_NONE, 1000 + i);
	assert_int_equal(traffic_count(t), TRAFFIC_MAX);
	assert_int_equal(traffic_evicted(t), 0);
	/* Touch the oldest so the second oldest is the one to go. */
	tx(t, IP(10, 0, 0, 0), 80, NET_DROP_NONE, 5000);
	tx(t, IP(192, 0, 2, 1), 80, NET_DROP_NONE, 5001);
	assert_int_equal(traffic_count(t), TRAFFIC_MAX);
	assert_int_equal(traffic_evicted(t), 1);
	/* Many more: the table stays bounded, each newcomer found again. */
	for (uint32_t i = 0; i < 5000; i++) {
		tx(t, IP(198, 51, i >> 8, i & 0xff), 443, NET_DROP_NONE, 6000 + i);
		tx(t, IP(198, 51, i >> 8, i & 0xff), 443, NET_DROP_NONE, 6000 + i);
	}
	assert_int_equal(traffic_count(t), TRAFFIC_MAX);
	assert_int_equal(traffic_evicted(t), 5001);
	j = traffic_json(t);
	d = json_object_get(j, "destinations");
	assert_int_equal(json_array_size(d), TRAFFIC_MAX);
	for (size_t i = 0; i < json_array_size(d); i++)
		assert_int_equal(
			json_integer_value(json_object_get(json_array_get(d, i), "tx_packets")), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(d, 0), "addr")),
			    "198.51.19.135"); /* 4999 */
	assert_int_equal(json_integer_value(json_object_get(j, "evicted")), 5001);
	json_decref(j);
	traffic_free(t);
}

static void test_traffic_rx_frame(void **state)
{
	struct traffic *t = traffic_new();
	uint8_t out[256];
	size_t n;
	json_t *j, *e;

	(void)state;
	n = frame_udp_to_guest(out, sizeof(out), NET_GATEWAY, 53, 4444, (const uint8_t *)"x", 1);
	traffic_rx_frame(t, out, n, false, 100);
	traffic_rx_frame(t, out, 10, false, 100); /* too short: ignored */
	assert_int_equal(traffic_count(t), 1);
	j = traffic_json(t);
	e = json_array_get(json_object_get(j, "destinations"), 0);
	assert_string_equal(json_string_value(json_object_get(e, "addr")), NET_GATEWAY_STR);
	assert_string_equal(json_string_value(json_object_get(e, "proto")), "udp");
	assert_int_equal(json_integer_value(json_object_get(e, "port")), 53);
	assert_int_equal(json_integer_value(json_object_get(e, "rx_bytes")), n);
	json_decref(j);
	traffic_free(t);
}

static void test_drop_names(void **state)
{
	(void)state;
	for (int r = NET_DROP_NONE + 1; r < NET_DROP_COUNT; r++) {
		assert_non_null(net_drop_name(r));
		assert_true(strlen(net_drop_name(r)) > 0);
		for (int s = r + 1; s < NET_DROP_COUNT; s++)
			assert_string_not_equal(net_drop_name(r), net_drop_name(s));
	}
	assert_string_equal(net_drop_name(NET_DROP_COUNT), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_frames_pass),  cmocka_unit_test(test_ethernet_rules),
		cmocka_unit_test(test_arp_rules),	  cmocka_unit_test(test_arp_rate),
		cmocka_unit_test(test_ipv4_header_rules), cmocka_unit_test(test_destination_rules),
		cmocka_unit_test(test_l4_rules),	  cmocka_unit_test(test_urg_cleared),
		cmocka_unit_test(test_gateway_services),  cmocka_unit_test(test_builders),
		cmocka_unit_test(test_csum_replace),	  cmocka_unit_test(test_traffic_table),
		cmocka_unit_test(test_traffic_eviction),  cmocka_unit_test(test_traffic_rx_frame),
		cmocka_unit_test(test_drop_names),	  cmocka_unit_test(test_forget_mss),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
