/* Checksums and the frames the network worker makes itself (see frame.h). */
#include <string.h>

#include "net/frame.h"
#include "net/net.h"

#define REPLY_TTL 64

static const uint8_t guest_mac[ETH_ALEN] = NET_GUEST_MAC;
static const uint8_t gateway_mac[ETH_ALEN] = NET_GATEWAY_MAC;

uint32_t frame_csum_add(uint32_t sum, const uint8_t *p, size_t len)
{
	uint64_t s = sum;
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		s += frame_get16(p + i);
	if (i < len)
		s += (uint32_t)p[i] << 8;
	while (s >> 32)
		s = (s & 0xffffffffu) + (s >> 32);
	return (uint32_t)s;
}

uint16_t frame_csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

uint32_t frame_csum_pseudo(uint32_t src, uint32_t dst, uint8_t proto, uint16_t l4_len)
{
	uint64_t s = (src >> 16) + (src & 0xffff) + (dst >> 16) + (dst & 0xffff) + proto + l4_len;

	return (uint32_t)((s & 0xffffffffu) + (s >> 32));
}

void frame_csum_replace16(uint8_t *csum, uint16_t old, uint16_t new)
{
	uint32_t s = (uint16_t)~frame_get16(csum);

	s += (uint16_t)~old;
	s += new;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	frame_put16(csum, (uint16_t)~s);
}

#define TCPOPT_EOL  0
#define TCPOPT_NOP  1
#define TCPOPT_MSS  2
#define TCPOLEN_MSS 4

/* Bytes [at, at + len) of a TCP header set to v, word by word, each
 * word's change folded into the checksum (RFC 1624). */
static void tcp_fill(uint8_t *tcp, size_t at, size_t len, uint8_t v)
{
	for (size_t w = at & ~(size_t)1; w < at + len; w += 2) {
		uint16_t old = frame_get16(tcp + w);

		for (size_t b = w; b < w + 2; b++)
			if (b >= at && b < at + len)
				tcp[b] = v;
		frame_csum_replace16(tcp + 16, old, frame_get16(tcp + w));
	}
}

/* Where option kind of olen bytes is in the TCP header at tcp (hlen
 * bytes, options included), or 0: none, or options that do not parse. */
static size_t tcp_option(const uint8_t *tcp, size_t hlen, uint8_t kind, size_t want)
{
	size_t i = TCP_HLEN, olen;

	while (i < hlen && tcp[i] != TCPOPT_EOL) {
		if (tcp[i] == TCPOPT_NOP) {
			i++;
			continue;
		}
		if (i + 1 >= hlen)
			return 0;
		olen = tcp[i + 1];
		if (olen < 2 || olen > hlen - i)
			return 0;
		if (tcp[i] == kind && olen == want)
			return i;
		i += olen;
	}
	return 0;
}

bool frame_tcp_forget_mss(uint8_t *tcp, size_t hlen)
{
	size_t at = tcp_option(tcp, hlen, TCPOPT_MSS, TCPOLEN_MSS);

	if (at == 0)
		return false;
	tcp_fill(tcp, at, TCPOLEN_MSS, TCPOPT_NOP);
	return true;
}

uint16_t frame_tcp_mss(const uint8_t *tcp, size_t hlen)
{
	size_t at = tcp_option(tcp, hlen, TCPOPT_MSS, TCPOLEN_MSS);

	return at ? frame_get16(tcp + at + 2) : 0;
}

int frame_ipv4_csum_ok(const uint8_t *ip)
{
	return frame_csum_fold(frame_csum_add(0, ip, IPV4_HLEN)) == 0;
}

int frame_l4_csum_ok(const uint8_t *ip, const uint8_t *l4, size_t l4_len, uint8_t proto)
{
	uint32_t s = 0;

	/* A UDP checksum of zero means "none" (RFC 768). */
	if (proto == IPPROTO_NUM_UDP && l4_len >= UDP_HLEN && frame_get16(l4 + 6) == 0)
		return 1;
	if (proto != IPPROTO_NUM_ICMP)
		s = frame_csum_pseudo(frame_get32(ip + 12), frame_get32(ip + 16), proto,
				      (uint16_t)l4_len);
	return frame_csum_fold(frame_csum_add(s, l4, l4_len)) == 0;
}

/* Ethernet and IPv4 headers from src to the guest; l4_len after them. */
static void put_headers(uint8_t *buf, uint32_t src, uint8_t proto, size_t l4_len)
{
	uint8_t *ip = buf + FRAME_IP;

	memcpy(buf, guest_mac, ETH_ALEN);
	memcpy(buf + ETH_ALEN, gateway_mac, ETH_ALEN);
	frame_put16(buf + 12, ETH_TYPE_IPV4);
	memset(ip, 0, IPV4_HLEN);
	ip[0] = 0x45;
	frame_put16(ip + 2, (uint16_t)(IPV4_HLEN + l4_len));
	frame_put16(ip + 6, 0x4000); /* DF */
	ip[8] = REPLY_TTL;
	ip[9] = proto;
	frame_put32(ip + 12, src);
	frame_put32(ip + 16, NET_GUEST);
	frame_put16(ip + 10, frame_csum_fold(frame_csum_add(0, ip, IPV4_HLEN)));
}

static void put_l4_csum(uint8_t *buf, size_t l4_len, uint8_t proto, size_t csum_off)
{
	uint8_t *l4 = buf + FRAME_L4;
	uint32_t s = 0;
	uint16_t c;

	if (proto != IPPROTO_NUM_ICMP)
		s = frame_csum_pseudo(frame_get32(buf + FRAME_IP + 12), NET_GUEST, proto,
				      (uint16_t)l4_len);
	c = frame_csum_fold(frame_csum_add(s, l4, l4_len));
	if (c == 0 && proto == IPPROTO_NUM_UDP)
		c = 0xffff; /* zero would mean "no checksum" */
	frame_put16(l4 + csum_off, c);
}

size_t frame_udp_to_guest(uint8_t *buf, size_t cap, uint32_t src, uint16_t sport, uint16_t dport,
			  const uint8_t *payload, size_t len)
{
	size_t l4_len = UDP_HLEN + len;
	uint8_t *udp = buf + FRAME_L4;

	if (l4_len > NET_MTU - IPV4_HLEN || cap < FRAME_L4 + l4_len)
		return 0;
	put_headers(buf, src, IPPROTO_NUM_UDP, l4_len);
	frame_put16(udp, sport);
	frame_put16(udp + 2, dport);
	frame_put16(udp + 4, (uint16_t)l4_len);
	frame_put16(udp + 6, 0);
	memcpy(udp + UDP_HLEN, payload, len);
	put_l4_csum(buf, l4_len, IPPROTO_NUM_UDP, 6);
	return FRAME_L4 + l4_len;
}

/* The guest datagram's IPv4 total length, or 0 when the frame cannot hold
 * a 20-byte header and min_l4 bytes after it. */
static size_t guest_ip_len(const uint8_t *frame, size_t len, size_t min_l4)
{
	size_t tot;

	if (len < FRAME_L4 + min_l4 || frame[FRAME_IP] != 0x45)
		return 0;
	tot = frame_get16(frame + FRAME_IP + 2);
	if (tot < IPV4_HLEN + min_l4 || tot > len - FRAME_IP)
		return 0;
	return tot;
}

size_t frame_tcp_rst(uint8_t *buf, size_t cap, const uint8_t *frame, size_t len)
{
	const uint8_t *ip = frame + FRAME_IP, *tcp = frame + FRAME_L4;
	size_t tot = guest_ip_len(frame, len, TCP_HLEN), doff, seg_len;
	uint8_t flags, *out = buf + FRAME_L4;

	if (tot == 0 || ip[9] != IPPROTO_NUM_TCP || cap < FRAME_L4 + TCP_HLEN)
		return 0;
	flags = tcp[13];
	doff = (size_t)(tcp[12] >> 4) * 4;
	if (flags & TCP_RST || doff < TCP_HLEN || doff > tot - IPV4_HLEN)
		return 0;
	seg_len = tot - IPV4_HLEN - doff + !!(flags & TCP_SYN) + !!(flags & TCP_FIN);
	put_headers(buf, frame_get32(ip + 16), IPPROTO_NUM_TCP, TCP_HLEN);
	memset(out, 0, TCP_HLEN);
	memcpy(out, tcp + 2, 2);
	memcpy(out + 2, tcp, 2);
	if (flags & TCP_ACK) {
		memcpy(out + 4, tcp + 8, 4); /* SEQ = SEG.ACK */
		out[13] = TCP_RST;
	} else {
		frame_put32(out + 8, frame_get32(tcp + 4) + (uint32_t)seg_len);
		out[13] = TCP_RST | TCP_ACK;
	}
	out[12] = (TCP_HLEN / 4) << 4;
	put_l4_csum(buf, TCP_HLEN, IPPROTO_NUM_TCP, 16);
	return FRAME_L4 + TCP_HLEN;
}

size_t frame_tcp_rst_flow(uint8_t *buf, size_t cap, bool to_guest, uint32_t remote, uint16_t rport,
			  uint16_t gport, uint32_t seq, uint32_t ack)
{
	uint8_t *ip = buf + FRAME_IP, *out = buf + FRAME_L4;
	uint32_t src = to_guest ? remote : NET_GUEST, dst = to_guest ? NET_GUEST : remote;

	if (cap < FRAME_L4 + TCP_HLEN)
		return 0;
	put_headers(buf, remote, IPPROTO_NUM_TCP, TCP_HLEN);
	if (!to_guest) {
		memcpy(buf, gateway_mac, ETH_ALEN);
		memcpy(buf + ETH_ALEN, guest_mac, ETH_ALEN);
		frame_put32(ip + 12, src);
		frame_put32(ip + 16, dst);
		frame_put16(ip + 10, 0);
		frame_put16(ip + 10, frame_csum_fold(frame_csum_add(0, ip, IPV4_HLEN)));
	}
	memset(out, 0, TCP_HLEN);
	frame_put16(out, to_guest ? rport : gport);
	frame_put16(out + 2, to_guest ? gport : rport);
	frame_put32(out + 4, seq);
	frame_put32(out + 8, ack);
	out[12] = (TCP_HLEN / 4) << 4;
	out[13] = TCP_RST | TCP_ACK;
	frame_put16(out + 16, frame_csum_fold(frame_csum_add(
				      frame_csum_pseudo(src, dst, IPPROTO_NUM_TCP, TCP_HLEN), out,
				      TCP_HLEN)));
	return FRAME_L4 + TCP_HLEN;
}

size_t frame_icmp_unreach(uint8_t *buf, size_t cap, const uint8_t *frame, size_t len, uint8_t code)
{
	size_t tot = guest_ip_len(frame, len, 0), quote, l4_len;
	uint8_t *icmp = buf + FRAME_L4;

	if (tot == 0)
		return 0;
	quote = IPV4_HLEN + (tot - IPV4_HLEN < 8 ? tot - IPV4_HLEN : 8);
	l4_len = ICMP_HLEN + quote;
	if (cap < FRAME_L4 + l4_len)
		return 0;
	put_headers(buf, NET_GATEWAY, IPPROTO_NUM_ICMP, l4_len);
	memset(icmp, 0, ICMP_HLEN);
	icmp[0] = ICMP_UNREACH;
	icmp[1] = code;
	memcpy(icmp + ICMP_HLEN, frame + FRAME_IP, quote);
	put_l4_csum(buf, l4_len, IPPROTO_NUM_ICMP, 2);
	return FRAME_L4 + l4_len;
}

size_t frame_icmp_echo_reply(uint8_t *buf, size_t cap, const uint8_t *frame, size_t len)
{
	size_t tot = guest_ip_len(frame, len, ICMP_HLEN), l4_len;
	uint8_t *icmp = buf + FRAME_L4;

	if (tot == 0 || frame[FRAME_IP + 9] != IPPROTO_NUM_ICMP || frame[FRAME_L4] != ICMP_ECHO)
		return 0;
	l4_len = tot - IPV4_HLEN;
	if (cap < FRAME_L4 + l4_len)
		return 0;
	put_headers(buf, frame_get32(frame + FRAME_IP + 16), IPPROTO_NUM_ICMP, l4_len);
	memcpy(icmp, frame + FRAME_L4, l4_len);
	icmp[0] = ICMP_ECHO_REPLY;
	icmp[1] = 0;
	frame_put16(icmp + 2, 0);
	put_l4_csum(buf, l4_len, IPPROTO_NUM_ICMP, 2);
	return FRAME_L4 + l4_len;
}
