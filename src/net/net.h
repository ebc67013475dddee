/* Guest networking: how the network worker is reached.
 *
 * A networked guest has one virtio-net device (src/virtio/net.c) whose
 * frames go, one Ethernet frame per message, over a SOCK_SEQPACKET
 * socketpair to the network worker: the gantry binary re-executed as
 * `gantry __net-worker`, one thread running our frame check, our DNS proxy
 * and libslirp (src/net/worker.c). The worker's host sockets are the NAT.
 *
 * The address plan is proto/netplan.h. */
#ifndef GANTRY_NET_NET_H
#define GANTRY_NET_NET_H

#include <stdint.h>

#include "proto/netplan.h"

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
 * {"ok":true,"traffic":{...},"events":[...]} (docs/network.md has the
 * fields; events: at most NET_EVENTS_MAX + 1 for the audit since the last
 * snapshot, each {kind, decision, host, reason}). Every answer is
 * {"ok":true,...} or {"ok":false,"error":"one line"}. */
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
#define NET_EVENTS_MAX	    64

/* network-traffic.json in a sandbox's directory: the supervisor's copy of
 * the worker's last traffic snapshot. */
#define NET_TRAFFIC_FILE   "network-traffic.json"
#define NET_WORKER_LOG	   "worker-net.log"

#endif
