/* Ethernet/ARP/IPv4 frames by hand: big-endian field access, the Internet
 * checksum (RFC 1071) and its incremental update (RFC 1624), and the few
 * frames the network worker makes itself instead of libslirp: DNS answers
 * from the gateway, TCP resets, ICMP errors and echo replies. Pure
 * functions over caller buffers; nothing here allocates. */
#ifndef GANTRY_NET_FRAME_H
#define GANTRY_NET_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ETH_ALEN      6
#define ETH_TYPE_IPV4 0x0800
#define ETH_TYPE_ARP  0x0806
#define ARP_BODY_LEN  28
#define IPV4_HLEN     20 /* IHL 5: options are dropped */
#define UDP_HLEN      8
#define TCP_HLEN      20
#define ICMP_HLEN     8

#define IPPROTO_NUM_ICMP 1
#define IPPROTO_NUM_TCP	 6
#define IPPROTO_NUM_UDP	 17

#define TCP_FIN 0x01
#define TCP_SYN 0x02
#define TCP_RST 0x04
#define TCP_PSH 0x08
#define TCP_ACK 0x10
#define TCP_URG 0x20

#define ICMP_ECHO_REPLY	  0
#define ICMP_UNREACH	  3
#define ICMP_ECHO	  8
#define ICMP_HOST_UNREACH 1  /* code of ICMP_UNREACH */
#define ICMP_PORT_UNREACH 3  /* code of ICMP_UNREACH */
#define ICMP_ADMIN_PROHIB 13 /* code: communication administratively prohibited */

/* Offsets in a frame with a 20-byte IPv4 header. */
#define FRAME_IP 14
#define FRAME_L4 (FRAME_IP + IPV4_HLEN)

static inline uint16_t frame_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t frame_get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void frame_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void frame_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* One's complement sum of len bytes (an odd last byte padded with zero)
 * added to sum; fold it into the 16-bit checksum with frame_csum_fold. */
uint32_t frame_csum_add(uint32_t sum, const uint8_t *p, size_t len);
uint16_t frame_csum_fold(uint32_t sum);
/* The TCP/UDP pseudo-header's sum (addresses in host order). */
uint32_t frame_csum_pseudo(uint32_t src, uint32_t dst, uint8_t proto, uint16_t l4_len);
/* A 16-bit word covered by the checksum at csum changed from old to new:
 * fix the checksum without summing the packet again (RFC 1624, eqn. 3). */
void frame_csum_replace16(uint8_t *csum, uint16_t old, uint16_t new);
/* Whether the IPv4 header at ip (20 bytes) and an L4 segment of l4_len
 * bytes after it carry valid checksums. */
int frame_ipv4_csum_ok(const uint8_t *ip);
int frame_l4_csum_ok(const uint8_t *ip, const uint8_t *l4, size_t l4_len, uint8_t proto);
/* Turn the MSS option of the TCP header at tcp (hlen bytes, options
 * included, as its data offset says) into NOPs, its checksum following;
 * whether it had one. A malformed option list is left as it is. */
bool frame_tcp_forget_mss(uint8_t *tcp, size_t hlen);
/* The MSS option's value in the TCP header at tcp (hlen bytes), or 0. */
uint16_t frame_tcp_mss(const uint8_t *tcp, size_t hlen);

/* The frames below answer a guest frame (Ethernet + 20-byte IPv4 header +
 * what its length says, as the frame check passed it): from the address
 * the guest wrote to and the gateway's MAC, to the guest's own MAC and
 * address. Each returns the length written into buf, or 0 when cap is too
 * small or the guest frame too short for it. */

/* A UDP datagram from the gateway (.1:sport) to the guest's dport. */
size_t frame_udp_to_guest(uint8_t *buf, size_t cap, uint32_t src, uint16_t sport, uint16_t dport,
			  const uint8_t *payload, size_t len);
/* The RST that refuses guest TCP segment (RFC 793 "Reset Generation"); 0
 * for a segment that is itself a RST. */
size_t frame_tcp_rst(uint8_t *buf, size_t cap, const uint8_t *frame, size_t len);
/* A RST|ACK from remote:rport to the guest's gport (to_guest), or the
 * other way, as if the guest sent it (into libslirp, which then closes
 * its host socket): for a flow the egress policy cuts. */
size_t frame_tcp_rst_flow(uint8_t *buf, size_t cap, bool to_guest, uint32_t remote, uint16_t rport,
			  uint16_t gport, uint32_t seq, uint32_t ack);
/* ICMP destination unreachable (code) quoting the guest datagram's header
 * and first 8 bytes. */
size_t frame_icmp_unreach(uint8_t *buf, size_t cap, const uint8_t *frame, size_t len, uint8_t code);
/* The echo reply to a guest echo request, same identifier and data. */
size_t frame_icmp_echo_reply(uint8_t *buf, size_t cap, const uint8_t *frame, size_t len);

#endif
