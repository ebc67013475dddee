/* The guest network's address plan: what the guest's init, the VMM's
 * virtio-net and the network worker agree on.
 *
 * The Go original's plan: 192.168.127.0/24; the gateway and DNS
 * server at .1; the guest at .2; .254 reaches the host's 127.0.0.1; .3 is
 * the DNS address libslirp insists on having and nothing answers there.
 * IPv4 only: IPv6 frames are dropped. */
#ifndef GANTRY_PROTO_NETPLAN_H
#define GANTRY_PROTO_NETPLAN_H

/* Host byte order. */
#define NET_ADDR(d)	   ((192u << 24) | (168u << 16) | (127u << 8) | (d))
#define NET_NETWORK	   NET_ADDR(0)
#define NET_NETMASK	   0xffffff00u
#define NET_PREFIX	   24
#define NET_GATEWAY	   NET_ADDR(1)
#define NET_GUEST	   NET_ADDR(2)
#define NET_SLIRP_DNS	   NET_ADDR(3)
#define NET_HOST	   NET_ADDR(254)
#define NET_BROADCAST	   NET_ADDR(255)
#define NET_GUEST_STR	   "192.168.127.2"
#define NET_GATEWAY_STR	   "192.168.127.1"
#define NET_HOST_STR	   "192.168.127.254"

/* The guest's MAC, pinned by the frame check; the gateway's is what
 * libslirp answers ARP with for .1 (52:55 and the address). */
#define NET_GUEST_MAC	   { 0x5a, 0x94, 0xef, 0xe4, 0x0c, 0xee }
#define NET_GATEWAY_MAC	   { 0x52, 0x55, 0xc0, 0xa8, 0x7f, 0x01 }

/* libslirp terminates every TCP connection, so the link's MTU never meets
 * a wire: the largest one it takes (65521) rounded to a multiple of 8
 * is the offload that counts. A frame is at most MTU + 14 bytes. */
#define NET_MTU		   65520
#define NET_ETH_HLEN	   14
#define NET_FRAME_MAX	   (NET_MTU + NET_ETH_HLEN)

/* Kernel command line for a networked guest (gantry-init parses it):
 * address/prefix, gateway, DNS server. Absent: no network, only lo. */
#define NET_GUEST_CMDLINE  "gantry.net=192.168.127.2/24,192.168.127.1,192.168.127.1"

#endif
