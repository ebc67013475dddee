/* The frame check (see filter.h). Rules in the order a frame meets them:
 * Ethernet, ARP or the IPv4 header, the destination's class, the L4
 * header, then the gateway's services. */
#include <string.h>

#include "common/util.h"
#include "net/filter.h"
#include "net/frame.h"
#include "net/net.h"

#define DNS_PORT  53
#define HTTPS_PORT 443
#define DHCP_PORT 67
#define TFTP_PORT 69

#define ARP_REQUEST 1
#define ARP_REPLY   2

static const uint8_t guest_mac[ETH_ALEN] = NET_GUEST_MAC;

static const char *const drop_names[NET_DROP_COUNT] = {
	[NET_DROP_NONE] = "",
	[NET_DROP_FRAME_SIZE] = "frame_size",
	[NET_DROP_SRC_MAC] = "src_mac",
	[NET_DROP_ETHERTYPE] = "ethertype",
	[NET_DROP_ARP_MALFORMED] = "arp_malformed",
	[NET_DROP_ARP_SPOOF] = "arp_spoof",
	[NET_DROP_ARP_RATE] = "arp_rate",
	[NET_DROP_IP_HEADER] = "ip_header",
	[NET_DROP_IP_OPTIONS] = "ip_options",
	[NET_DROP_IP_LENGTH] = "ip_length",
	[NET_DROP_IP_CHECKSUM] = "ip_checksum",
	[NET_DROP_FRAGMENT] = "fragment",
	[NET_DROP_TTL] = "ttl",
	[NET_DROP_IP_SPOOF] = "ip_spoof",
	[NET_DROP_IP_PROTO] = "ip_proto",
	[NET_DROP_DST_LOOPBACK] = "dst_loopback",
	[NET_DROP_DST_ZERO] = "dst_zero",
	[NET_DROP_DST_BROADCAST] = "dst_broadcast",
	[NET_DROP_DST_MULTICAST] = "dst_multicast",
	[NET_DROP_DST_RESERVED] = "dst_reserved",
	[NET_DROP_DST_LOCAL] = "dst_local",
	[NET_DROP_GATEWAY] = "gateway_port",
	[NET_DROP_DHCP_TFTP] = "dhcp_tftp",
	[NET_DROP_TCP_HEADER] = "tcp_header",
	[NET_DROP_TCP_FLAGS] = "tcp_flags",
	[NET_DROP_UDP_HEADER] = "udp_header",
	[NET_DROP_ICMP_HEADER] = "icmp_header",
	[NET_DROP_CHECKSUM] = "checksum",
	[NET_DROP_ICMP_FORWARD] = "icmp_forward",
	[NET_DROP_DNS_BUSY] = "dns_busy",
	[NET_DROP_POLICY] = "policy",
	[NET_DROP_FLOW_TABLE] = "flow_table",
	[NET_DROP_SYN_RATE] = "syn_rate",
	[NET_DROP_GUEST_QUEUE] = "guest_queue",
	[NET_DROP_TLS_NAME] = "tls_name",
	[NET_DROP_TLS_ORDER] = "tls_order",
	[NET_DROP_NO_FLOW] = "no_flow",
};

const char *net_drop_name(enum net_drop r)
{
	return (unsigned)r < NET_DROP_COUNT ? drop_names[r] : "unknown";
}

const char *net_proto_name(enum net_proto p)
{
	static const char *const names[] = { "tcp", "udp", "icmp", "arp", "other" };

	return (unsigned)p < ARRAY_SIZE(names) ? names[p] : "other";
}

void filter_init(struct net_filter *f, uint64_t now_ms)
{
	f->arp_tokens = FILTER_ARP_BURST;
	f->arp_refill_ms = now_ms;
}

static void drop(struct filter_verdict *v, enum net_drop reason)
{
	v->action = FILTER_DROP;
	v->reason = reason;
}

static bool arp_token(struct net_filter *f, uint64_t now_ms)
{
	uint64_t per = 1000 / FILTER_ARP_RATE, n;

	if (now_ms > f->arp_refill_ms) {
		n = (now_ms - f->arp_refill_ms) / per;
		if (n >= FILTER_ARP_BURST - f->arp_tokens) {
			f->arp_tokens = FILTER_ARP_BURST;
			f->arp_refill_ms = now_ms;
		} else {
			f->arp_tokens += (uint32_t)n;
			f->arp_refill_ms += n * per;
		}
	}
	if (f->arp_tokens == 0)
		return false;
	f->arp_tokens--;
	return true;
}

static void check_arp(struct net_filter *f, const uint8_t *frame, size_t len, uint64_t now_ms,
		      struct filter_verdict *v)
{
	const uint8_t *a = frame + NET_ETH_HLEN;
	uint16_t op;

	if (len < NET_ETH_HLEN + ARP_BODY_LEN)
		return drop(v, NET_DROP_ARP_MALFORMED);
	op = frame_get16(a + 6);
	if (frame_get16(a) != 1 || frame_get16(a + 2) != ETH_TYPE_IPV4 || a[4] != ETH_ALEN ||
	    a[5] != 4 || (op != ARP_REQUEST && op != ARP_REPLY))
		return drop(v, NET_DROP_ARP_MALFORMED);
	v->has_dst = true;
	v->dst = frame_get32(a + 24);
	v->proto = NET_PROTO_ARP;
	v->len = NET_ETH_HLEN + ARP_BODY_LEN;
	if (memcmp(a + 8, guest_mac, ETH_ALEN) != 0 || frame_get32(a + 14) != NET_GUEST)
		return drop(v, NET_DROP_ARP_SPOOF);
	if (!arp_token(f, now_ms))
		return drop(v, NET_DROP_ARP_RATE);
	v->action = FILTER_SLIRP;
}

/* Destinations no frame may reach: libslirp would connect() or sendto()
 * them on the host (research note 2.3). NONE for .1, .254 and the world. */
static enum net_drop dst_class(uint32_t dst)
{
	uint8_t top = (uint8_t)(dst >> 24);

	if (dst == 0xffffffffu || dst == NET_BROADCAST)
		return NET_DROP_DST_BROADCAST;
	if (top == 0)
		return NET_DROP_DST_ZERO;
	if (top == 127)
		return NET_DROP_DST_LOOPBACK;
	if (top >= 224 && top < 240)
		return NET_DROP_DST_MULTICAST;
	if (top >= 240)
		return NET_DROP_DST_RESERVED;
	if ((dst & NET_NETMASK) == NET_NETWORK && dst != NET_GATEWAY && dst != NET_HOST)
		return NET_DROP_DST_LOCAL;
	return NET_DROP_NONE;
}

/* RFC 1624: the flag and urgent-pointer words change, the sum follows. */
static void clear_urg(uint8_t *tcp, struct filter_verdict *v)
{
	uint16_t old = frame_get16(tcp + 12);
	uint16_t urp = frame_get16(tcp + 18);

	if (!(tcp[13] & TCP_URG) && urp == 0)
		return;
	tcp[13] &= (uint8_t)~TCP_URG;
	frame_csum_replace16(tcp + 16, old, frame_get16(tcp + 12));
	frame_put16(tcp + 18, 0);
	frame_csum_replace16(tcp + 16, urp, 0);
	v->urg_cleared = true;
}

static void check_tcp(const struct net_filter *f, uint8_t *l4, size_t l4_len, uint32_t dst,
		      struct filter_verdict *v)
{
	size_t doff;
	uint8_t flags;

	v->proto = NET_PROTO_TCP;
	if (l4_len < TCP_HLEN)
		return drop(v, NET_DROP_TCP_HEADER);
	v->sport = frame_get16(l4);
	v->port = frame_get16(l4 + 2);
	doff = (size_t)(l4[12] >> 4) * 4;
	if (doff < TCP_HLEN || doff > l4_len)
		return drop(v, NET_DROP_TCP_HEADER);
	flags = l4[13];
	if ((flags & TCP_SYN) && (flags & (TCP_FIN | TCP_RST)))
		return drop(v, NET_DROP_TCP_FLAGS);
	if (dst == NET_GATEWAY && v->port != DNS_PORT && !(f->https && v->port == HTTPS_PORT)) {
		v->reason = NET_DROP_GATEWAY;
		v->action = (flags & TCP_RST) ? FILTER_DROP : FILTER_RST;
		return;
	}
	clear_urg(l4, v);
	v->action = FILTER_SLIRP;
}

static void check_udp(const uint8_t *ip, const uint8_t *l4, size_t l4_len, uint32_t dst,
		      struct filter_verdict *v)
{
	size_t ulen;

	v->proto = NET_PROTO_UDP;
	if (l4_len < UDP_HLEN)
		return drop(v, NET_DROP_UDP_HEADER);
	v->sport = frame_get16(l4);
	v->port = frame_get16(l4 + 2);
	ulen = frame_get16(l4 + 4);
	if (ulen < UDP_HLEN || ulen > l4_len)
		return drop(v, NET_DROP_UDP_HEADER);
	if (v->port == DHCP_PORT || v->port == TFTP_PORT)
		return drop(v, NET_DROP_DHCP_TFTP);
	if (dst != NET_GATEWAY) {
		v->action = FILTER_SLIRP;
		return;
	}
	if (v->port != DNS_PORT) {
		v->reason = NET_DROP_GATEWAY;
		v->action = FILTER_UNREACH;
		return;
	}
	if (!frame_l4_csum_ok(ip, l4, ulen, IPPROTO_NUM_UDP))
		return drop(v, NET_DROP_CHECKSUM);
	v->payload = FRAME_L4 + UDP_HLEN;
	v->plen = ulen - UDP_HLEN;
	v->action = FILTER_DNS;
}

static void check_icmp(const uint8_t *ip, const uint8_t *l4, size_t l4_len, uint32_t dst,
		       struct filter_verdict *v)
{
	v->proto = NET_PROTO_ICMP;
	if (l4_len < ICMP_HLEN)
		return drop(v, NET_DROP_ICMP_HEADER);
	/* Only the gateway answers ICMP: libslirp's echo needs ping sockets,
	 * else raw ones, else sends UDP to port 7 of the target. */
	if (dst != NET_GATEWAY)
		return drop(v, NET_DROP_ICMP_FORWARD);
	if (l4[0] != ICMP_ECHO || l4[1] != 0)
		return drop(v, NET_DROP_GATEWAY);
	if (!frame_l4_csum_ok(ip, l4, l4_len, IPPROTO_NUM_ICMP))
		return drop(v, NET_DROP_CHECKSUM);
	v->action = FILTER_ECHO;
}

static void check_ipv4(const struct net_filter *f, uint8_t *frame, size_t len,
		       struct filter_verdict *v)
{
	uint8_t *ip = frame + FRAME_IP, *l4 = frame + FRAME_L4;
	size_t tot, l4_len;
	uint32_t dst;
	enum net_drop cls;

	if (len < FRAME_L4 || ip[0] >> 4 != 4 || (ip[0] & 0xf) < 5)
		return drop(v, NET_DROP_IP_HEADER);
	if ((ip[0] & 0xf) != 5)
		return drop(v, NET_DROP_IP_OPTIONS);
	tot = frame_get16(ip + 2);
	if (tot < IPV4_HLEN || tot > len - FRAME_IP)
		return drop(v, NET_DROP_IP_LENGTH);
	if (!frame_ipv4_csum_ok(ip))
		return drop(v, NET_DROP_IP_CHECKSUM);
	dst = frame_get32(ip + 16);
	v->has_dst = true;
	v->dst = dst;
	v->proto = NET_PROTO_OTHER;
	v->len = FRAME_IP + tot;
	if (ip[9] == IPPROTO_NUM_TCP)
		v->proto = NET_PROTO_TCP;
	else if (ip[9] == IPPROTO_NUM_UDP)
		v->proto = NET_PROTO_UDP;
	else if (ip[9] == IPPROTO_NUM_ICMP)
		v->proto = NET_PROTO_ICMP;
	l4_len = tot - IPV4_HLEN;
	/* Protocol and ports for the traffic report, before any drop. A
	 * fragment's "ports" are whatever its payload starts with. */
	if ((ip[9] == IPPROTO_NUM_TCP || ip[9] == IPPROTO_NUM_UDP) && l4_len >= 4) {
		v->sport = frame_get16(l4);
		v->port = frame_get16(l4 + 2);
	}
	if (frame_get16(ip + 6) & 0x3fff)
		return drop(v, NET_DROP_FRAGMENT);
	if (ip[8] == 0)
		return drop(v, NET_DROP_TTL);
	if (frame_get32(ip + 12) != NET_GUEST)
		return drop(v, NET_DROP_IP_SPOOF);
	cls = dst_class(dst);
	if (cls != NET_DROP_NONE)
		return drop(v, cls);
	switch (ip[9]) {
	case IPPROTO_NUM_TCP:
		return check_tcp(f, l4, l4_len, dst, v);
	case IPPROTO_NUM_UDP:
		return check_udp(ip, l4, l4_len, dst, v);
	case IPPROTO_NUM_ICMP:
		return check_icmp(ip, l4, l4_len, dst, v);
	default:
		return drop(v, NET_DROP_IP_PROTO);
	}
}

void filter_frame(struct net_filter *f, uint8_t *frame, size_t len, uint64_t now_ms,
		  struct filter_verdict *v)
{
	uint16_t type;

	*v = (struct filter_verdict){ .action = FILTER_DROP, .len = len };
	if (len < NET_ETH_HLEN || len > NET_FRAME_MAX)
		return drop(v, NET_DROP_FRAME_SIZE);
	if (memcmp(frame + ETH_ALEN, guest_mac, ETH_ALEN) != 0)
		return drop(v, NET_DROP_SRC_MAC);
	type = frame_get16(frame + 12);
	if (type == ETH_TYPE_ARP)
		return check_arp(f, frame, len, now_ms, v);
	if (type == ETH_TYPE_IPV4)
		return check_ipv4(f, frame, len, v);
	drop(v, NET_DROP_ETHERTYPE);
}
