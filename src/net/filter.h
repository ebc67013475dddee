/* The frame check: every frame the guest sends passes here before libslirp
 * or the DNS proxy sees it (research note 2.3, 3.1). It keeps only what a
 * Linux guest on our link sends: Ethernet from the guest's MAC, ARP and
 * IPv4 from 192.168.127.2, no IP options, no fragments, to addresses that
 * libslirp may safely take; it clears TCP urgent data (libslirp's
 * out-of-band code is CVE-2026-9539) and says where the rest goes.
 *
 * A pure function over one frame buffer and a little state (the ARP token
 * bucket): no I/O, so it is unit tested and fuzzed as it runs. Whether a
 * structurally valid frame may leave is not decided here: that is the
 * egress policy's question, asked by the worker afterwards. */
#ifndef GANTRY_NET_FILTER_H
#define GANTRY_NET_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Why a frame was dropped; the names appear in the traffic report. */
enum net_drop {
	NET_DROP_NONE,
	NET_DROP_FRAME_SIZE,	/* shorter than Ethernet, longer than NET_FRAME_MAX */
	NET_DROP_SRC_MAC,	/* not the guest's MAC */
	NET_DROP_ETHERTYPE,	/* IPv6, VLAN, anything but ARP and IPv4 */
	NET_DROP_ARP_MALFORMED, /* not an Ethernet/IPv4 request or reply */
	NET_DROP_ARP_SPOOF,	/* sender is not (guest MAC, .2) */
	NET_DROP_ARP_RATE,	/* over the token bucket */
	NET_DROP_IP_HEADER,	/* version, IHL shorter than 5, truncated */
	NET_DROP_IP_OPTIONS,	/* IHL above 5 */
	NET_DROP_IP_LENGTH,	/* total length disagrees with the frame */
	NET_DROP_IP_CHECKSUM,
	NET_DROP_FRAGMENT, /* MF or a fragment offset */
	NET_DROP_TTL,	   /* TTL 0 */
	NET_DROP_IP_SPOOF, /* source is not .2 */
	NET_DROP_IP_PROTO, /* not TCP, UDP or ICMP */
	NET_DROP_DST_LOOPBACK,
	NET_DROP_DST_ZERO,
	NET_DROP_DST_BROADCAST,
	NET_DROP_DST_MULTICAST,
	NET_DROP_DST_RESERVED,
	NET_DROP_DST_LOCAL,    /* the /24 but for .1 and .254 */
	NET_DROP_GATEWAY,      /* .1 on a port with no service: refused */
	NET_DROP_DHCP_TFTP,    /* UDP to 67 or 69 */
	NET_DROP_TCP_HEADER,   /* truncated, data offset out of range */
	NET_DROP_TCP_FLAGS,    /* SYN with FIN, or with RST */
	NET_DROP_UDP_HEADER,   /* truncated, length out of range */
	NET_DROP_ICMP_HEADER,  /* truncated */
	NET_DROP_CHECKSUM,     /* bad L4 sum on a datagram the worker answers itself */
	NET_DROP_ICMP_FORWARD, /* ICMP beyond the gateway: libslirp's echo is a UDP/7 fallback */
	NET_DROP_DNS_BUSY,     /* too many TCP connections to .1:53 at once */
	NET_DROP_POLICY,       /* the egress policy said no, or cut the flow */
	NET_DROP_FLOW_TABLE,   /* a new TCP connection with the flow table full */
	NET_DROP_SYN_RATE,     /* new TCP connections over the rate limit */
	NET_DROP_GUEST_QUEUE,  /* a frame to the guest past the hard bound, or refused */
	NET_DROP_TLS_NAME,  /* a TLS hello to a learned address names a host not learned for it */
	NET_DROP_TLS_ORDER, /* a segment ahead of the hello's bytes read: sent again later */
	NET_DROP_NO_FLOW,   /* a TCP segment (not a SYN) of no connection known: a RST */
	NET_DROP_COUNT
};

const char *net_drop_name(enum net_drop r);

/* Protocols as the traffic report names them. */
enum net_proto { NET_PROTO_TCP, NET_PROTO_UDP, NET_PROTO_ICMP, NET_PROTO_ARP, NET_PROTO_OTHER };

const char *net_proto_name(enum net_proto p);

/* Where a checked frame goes. */
enum filter_action {
	FILTER_DROP,	/* nowhere: reason says why */
	FILTER_SLIRP,	/* slirp_input, once the egress policy agrees */
	FILTER_DNS,	/* UDP to .1:53: dns_proxy_udp_query with the payload */
	FILTER_ECHO,	/* ICMP echo to .1: answered by the worker */
	FILTER_RST,	/* TCP to .1 without a service: answered with a RST */
	FILTER_UNREACH, /* UDP to .1 without a service: ICMP port unreachable */
};

struct filter_verdict {
	enum filter_action action;
	enum net_drop reason; /* NONE unless DROP, RST or UNREACH */
	/* The destination, once the ARP body or IPv4 header was valid. */
	bool has_dst;
	uint32_t dst; /* host order: IPv4 destination or ARP target */
	enum net_proto proto;
	uint16_t port; /* TCP/UDP destination port, else 0 */
	uint16_t sport;
	size_t len;	      /* bytes of the frame that count (Ethernet padding cut) */
	size_t payload, plen; /* UDP payload (FILTER_DNS) */
	bool urg_cleared;
	bool inbound; /* on a connection from the host to a published port (the worker's) */
};

#define FILTER_ARP_RATE	 100 /* ARP frames per second, */
#define FILTER_ARP_BURST 100 /* with bursts of this many */

struct net_filter {
	bool https; /* the gateway serves TCP 443 too (the egress worker's) */
	uint32_t arp_tokens;
	uint64_t arp_refill_ms;
};

void filter_init(struct net_filter *f, uint64_t now_ms);
/* Check frame (len bytes, which it may change: URG cleared) at now_ms. */
void filter_frame(struct net_filter *f, uint8_t *frame, size_t len, uint64_t now_ms,
		  struct filter_verdict *v);

#endif
