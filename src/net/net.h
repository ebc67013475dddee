/* Guest networking: the address plan every part agrees on, and how the
 * network worker is reached.
 *
 * A networked guest has one virtio-net device (src/virtio/net.c) whose
 * frames go, one Ethernet frame per message, over a SOCK_SEQPACKET
 * socketpair to the network worker: the gantry binary re-executed as
 * `gantry __net-worker`, one thread running our frame check, our DNS proxy
 * and libslirp (src/net/worker.c). The worker's host sockets are the NAT.
 *
 * Address plan (the Go original's): 192.168.127.0/24; the gateway and DNS
 * server at .1; the guest at .2; .254 reaches the host's 127.0.0.1; .3 is
 * the DNS address libslirp insists on having and nothing answers there.
 * IPv4 only: IPv6 frames are dropped. */
#ifndef GANTRY_NET_NET_H
#define GANTRY_NET_NET_H

#include <stdint.h>

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

/* The worker: `gantry __net-worker --frame-fd N [--ctl-fd N] [--dns IP:PORT]
 * [-p SPEC]... [--policy FILE] [--allow-local-net] [--proxy IP:PORT]...
 * [--proxy-enforce]`. --frame-fd carries one Ethernet frame per read and write
 * (the VMM's SEQPACKET socket, or a TAP for tests); --ctl-fd is a
 * SEQPACKET socket carrying one JSON request per message, each answered by
 * one JSON message (NET_CTL_*). The worker exits when either closes. Its
 * stderr is its log. --policy is the egress policy it starts with (none:
 * the default, policy.h); --proxy, once per address of the workload's
 * proxy, puts a rule allowing TCP to it in front of every policy it is
 * given, and --proxy-enforce rules denying direct web traffic after it. */
#define NET_WORKER_ROLE	   "__net-worker"
#define NET_DNS_ENV	   "GANTRY_NET_DNS" /* IP:PORT, overrides /etc/resolv.conf */

/* Control requests: {"op":"publish","spec":S}, {"op":"unpublish","spec":S}
 * (S a canonical port spec, portspec.h), {"op":"traffic"} answered with
 * {"ok":true,"traffic":{...}} (docs/network.md has the fields). Every answer
 * is {"ok":true,...} or {"ok":false,"error":"one line"}. */
#define NET_CTL_PUBLISH	   "publish"
#define NET_CTL_UNPUBLISH  "unpublish"
#define NET_CTL_TRAFFIC	   "traffic"
/* {"op":"policy","policy":P,"allowLocal":B}: P a policy document
 * (policy.h) or null for the default; answered {"ok":true,"generation":N,
 * "cut":N} once it is in force and the flows it denies are cut.
 * {"op":"policy_show"}: {"ok":true,"policy":P,"generation":N,
 * "learned":[...],"flows":{"tcp":N,"udp":N}}. */
#define NET_CTL_POLICY	   "policy"
#define NET_CTL_POLICY_SHOW "policy_show"
#define NET_CTL_MSG_MAX	   (512 * 1024)

/* network-traffic.json in a sandbox's directory: the supervisor's copy of
 * the worker's last traffic snapshot. */
#define NET_TRAFFIC_FILE   "network-traffic.json"
#define NET_WORKER_LOG	   "worker-net.log"

#endif
