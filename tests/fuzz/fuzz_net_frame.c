/* libFuzzer target for the network worker's frame check (net/filter.c),
 * the frames it answers with (net/frame.c) and the traffic table
 * (net/traffic.c): what a hostile guest kernel could put on the link.
 *
 * Input: one mode byte, then the Ethernet frame.
 *   bit 0: set the guest's MAC and source address first (so the fuzzer
 *          gets past the pinning checks without finding them);
 *   bit 1: fix the IPv4 header checksum; bit 2: fix the TCP/UDP/ICMP one.
 * Checked: a frame the check passes on holds to every rule it enforces
 * (IPv4 from .2, no options or fragments, a safe destination, TCP or UDP,
 * no TCP urgent data, a checksum that was right still right, also after a
 * repeated SYN's MSS option is dropped); every frame built
 * in answer is well-formed with right sums; the table stays bounded.
 * Seeds: tests/fuzz/corpus/net_frame (tests/fuzz/mkcorpus.py). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "net/filter.h"
#include "net/frame.h"
#include "net/net.h"
#include "net/traffic.h"

#define FIX_ADDR   1
#define FIX_IP_SUM 2
#define FIX_L4_SUM 4

static uint8_t frame[NET_FRAME_MAX + 1];
static uint8_t out[NET_FRAME_MAX + 64];
static struct net_filter filter;
static struct traffic *traffic;
static uint64_t clock_ms, runs;

static bool is_ipv4(const uint8_t *f, size_t len)
{
	return len >= FRAME_L4 && frame_get16(f + 12) == ETH_TYPE_IPV4 && f[FRAME_IP] == 0x45;
}

/* The L4 length the IPv4 header claims, clamped to the frame. */
static size_t l4_len(const uint8_t *f, size_t len)
{
	size_t tot = frame_get16(f + FRAME_IP + 2);

	if (tot < IPV4_HLEN || tot > len - FRAME_IP)
		return 0;
	return tot - IPV4_HLEN;
}

static void fix(uint8_t *f, size_t len, uint8_t mode)
{
	static const uint8_t mac[ETH_ALEN] = NET_GUEST_MAC;
	uint8_t *ip = f + FRAME_IP, *l4 = f + FRAME_L4;
	size_t n, off;

	if (len < NET_ETH_HLEN)
		return;
	if (mode & FIX_ADDR) {
		memcpy(f + ETH_ALEN, mac, ETH_ALEN);
		if (frame_get16(f + 12) == ETH_TYPE_ARP && len >= NET_ETH_HLEN + ARP_BODY_LEN) {
			memcpy(f + NET_ETH_HLEN + 8, mac, ETH_ALEN);
			frame_put32(f + NET_ETH_HLEN + 14, NET_GUEST);
		}
		if (len >= FRAME_L4)
			frame_put32(ip + 12, NET_GUEST);
	}
	if (!is_ipv4(f, len))
		return;
	if (mode & FIX_IP_SUM) {
		frame_put16(ip + 10, 0);
		frame_put16(ip + 10, frame_csum_fold(frame_csum_add(0, ip, IPV4_HLEN)));
	}
	n = l4_len(f, len);
	off = ip[9] == IPPROTO_NUM_TCP ? 16 : ip[9] == IPPROTO_NUM_UDP ? 6 : 2;
	if (!(mode & FIX_L4_SUM) || n < off + 2)
		return;
	if (ip[9] == IPPROTO_NUM_UDP && frame_get16(l4 + 4) >= UDP_HLEN && frame_get16(l4 + 4) <= n)
		n = frame_get16(l4 + 4);
	frame_put16(l4 + off, 0);
	frame_put16(l4 + off,
		    frame_csum_fold(frame_csum_add(ip[9] == IPPROTO_NUM_ICMP
							   ? 0
							   : frame_csum_pseudo(frame_get32(ip + 12),
									       frame_get32(ip + 16),
									       ip[9], (uint16_t)n),
						   l4, n)));
}

/* A frame built for the guest: well-formed, sums right, to the guest. */
static void check_built(size_t n, size_t cap)
{
	const uint8_t *ip = out + FRAME_IP;
	static const uint8_t mac[ETH_ALEN] = NET_GUEST_MAC;

	if (n == 0)
		return;
	check(n <= cap);
	check(n >= FRAME_L4);
	check(memcmp(out, mac, ETH_ALEN) == 0);
	check(frame_get16(ip + 2) == n - FRAME_IP);
	check(frame_ipv4_csum_ok(ip));
	check(frame_get32(ip + 16) == NET_GUEST);
	check(frame_l4_csum_ok(ip, out + FRAME_L4, n - FRAME_L4, ip[9]));
	traffic_rx_frame(traffic, out, n, runs & 1, (time_t)runs);
}

static void check_passed(const uint8_t *f, const struct filter_verdict *v, bool tcp_sum_was_ok)
{
	const uint8_t *ip = f + FRAME_IP, *l4 = f + FRAME_L4;
	uint32_t dst;

	check(v->reason == NET_DROP_NONE);
	if (frame_get16(f + 12) == ETH_TYPE_ARP) {
		check(v->proto == NET_PROTO_ARP);
		check(frame_get32(f + NET_ETH_HLEN + 14) == NET_GUEST);
		return;
	}
	check(is_ipv4(f, v->len));
	check(frame_get16(ip + 2) + FRAME_IP == v->len);
	check(frame_ipv4_csum_ok(ip));
	check((frame_get16(ip + 6) & 0x3fff) == 0);
	check(ip[8] != 0);
	check(frame_get32(ip + 12) == NET_GUEST);
	dst = frame_get32(ip + 16);
	check(dst >> 24 != 0 && dst >> 24 != 127 && dst >> 24 < 224);
	check((dst & NET_NETMASK) != NET_NETWORK || dst == NET_HOST ||
	      (dst == NET_GATEWAY && v->port == 53 && v->proto == NET_PROTO_TCP));
	check(ip[9] == IPPROTO_NUM_TCP || ip[9] == IPPROTO_NUM_UDP);
	if (ip[9] == IPPROTO_NUM_TCP) {
		check(!(l4[13] & TCP_URG) && frame_get16(l4 + 18) == 0);
		check(!tcp_sum_was_ok ||
		      frame_l4_csum_ok(ip, l4, v->len - FRAME_L4, IPPROTO_NUM_TCP));
	}
	if (ip[9] == IPPROTO_NUM_UDP)
		check(v->port != 67 && v->port != 69);
}

/* A passed TCP segment as a repeated SYN: its option list walked within
 * its header, its sum still right where it was, its length unchanged. */
static void forget_mss(uint8_t *f, const struct filter_verdict *v, bool tcp_sum_was_ok)
{
	uint8_t *l4 = f + FRAME_L4;
	uint16_t mss;
	size_t hlen;

	if (f[FRAME_IP + 9] != IPPROTO_NUM_TCP)
		return;
	hlen = (size_t)(l4[12] >> 4) * 4;
	check(hlen >= TCP_HLEN && hlen <= v->len - FRAME_L4);
	/* The option the ACK hold reads is the one forgetting finds. */
	mss = frame_tcp_mss(l4, hlen);
	if (!frame_tcp_forget_mss(l4, hlen))
		check(mss == 0);
	else
		check(!tcp_sum_was_ok ||
		      frame_l4_csum_ok(f + FRAME_IP, l4, v->len - FRAME_L4, IPPROTO_NUM_TCP));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct filter_verdict v;
	size_t len, n;
	bool tcp_ok = false;

	if (traffic == NULL) {
		traffic = traffic_new();
		filter_init(&filter, 0);
	}
	if (size < 1)
		return 0;
	len = size - 1 > sizeof(frame) ? sizeof(frame) : size - 1;
	memcpy(frame, data + 1, len);
	fix(frame, len, data[0]);
	if (is_ipv4(frame, len) && frame[FRAME_IP + 9] == IPPROTO_NUM_TCP && l4_len(frame, len))
		tcp_ok = frame_l4_csum_ok(frame + FRAME_IP, frame + FRAME_L4, l4_len(frame, len),
					  IPPROTO_NUM_TCP);
	clock_ms += data[0] & 0xf0;
	runs++;

	filter_frame(&filter, frame, len, clock_ms, &v);
	check(v.len <= len);
	check(net_drop_name(v.reason)[0] != '\0' || v.reason == NET_DROP_NONE);
	check((v.reason == NET_DROP_NONE) ==
	      (v.action == FILTER_SLIRP || v.action == FILTER_DNS || v.action == FILTER_ECHO));
	switch (v.action) {
	case FILTER_SLIRP:
		check_passed(frame, &v, tcp_ok);
		forget_mss(frame, &v, tcp_ok);
		break;
	case FILTER_DNS:
		check(v.payload + v.plen <= v.len);
		n = frame_udp_to_guest(out, sizeof(out), NET_GATEWAY, 53, v.sport,
				       frame + v.payload, v.plen);
		check(n == FRAME_L4 + UDP_HLEN + v.plen);
		check_built(n, sizeof(out));
		break;
	case FILTER_ECHO:
		n = frame_icmp_echo_reply(out, v.len, frame, v.len);
		check(n == v.len);
		check_built(n, v.len);
		break;
	case FILTER_RST:
		check_built(frame_tcp_rst(out, sizeof(out), frame, v.len), sizeof(out));
		break;
	case FILTER_UNREACH:
		check_built(frame_icmp_unreach(out, sizeof(out), frame, v.len, ICMP_PORT_UNREACH),
			    sizeof(out));
		break;
	case FILTER_DROP:
		break;
	}
	/* The builders on whatever came, as the policy will use them. */
	check_built(frame_tcp_rst(out, 60, frame, len), 60);
	check_built(frame_icmp_unreach(out, 70, frame, len, ICMP_ADMIN_PROHIB), 70);
	n = frame_icmp_echo_reply(out, sizeof(out), frame, len);
	check(n <= len);
	check_built(n, sizeof(out));

	traffic_guest(traffic, &v, (time_t)runs);
	traffic_rx_frame(traffic, frame, len, runs & 2, (time_t)runs);
	check(traffic_count(traffic) <= TRAFFIC_MAX);
	if (runs % 4096 == 0) {
		json_t *j = traffic_json(traffic);

		check(json_array_size(json_object_get(j, "destinations")) ==
		      traffic_count(traffic));
		json_decref(j);
	}
	return 0;
}
