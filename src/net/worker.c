/* The network worker (see worker.h, net.h): guest frames from the frame fd
 * through the frame check to libslirp, the DNS proxy or an answer made
 * here; frames to the guest through a bounded queue that pushes back on
 * libslirp instead of dropping; published ports and the traffic report
 * over the control socket. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/files.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "confine/confine.h"
#include "net/ackhold.h"
#include "net/dns.h"
#include "net/filter.h"
#include "net/flow.h"
#include "net/frame.h"
#include "net/net.h"
#include "net/policy.h"
#include "net/portspec.h"
#include "net/slirp.h"
#include "net/spawn.h"
#include "net/traffic.h"
#include "net/worker.h"

/* Frames waiting for the guest: above OUT_HIGH libslirp stops reading host
 * sockets (resuming below OUT_LOW); above OUT_FULL guest frames wait in the
 * VMM too. What libslirp still sends then (ACKs, retransmissions) queues
 * on; only past OUT_HARD, a guest that takes nothing for long, is a frame
 * dropped, and counted. */
#define OUT_LOW		(4 * MiB)
#define OUT_HIGH	(8 * MiB)
#define OUT_FULL	(16 * MiB)
#define OUT_HARD	(64 * MiB)
#define RX_BUDGET	64   /* guest frames per wakeup */
#define DNS_POLL_MAX	1024 /* slots offered to the DNS proxy */
#define DNS_SYN_ROUND	8    /* new TCP connections to .1:53 per wakeup */
#define MAX_FORWARDS	1024
#define CTL_SEND_MS	1000 /* an answer the supervisor does not take in this long is lost */
#define DROP_LOG_GAP_MS 1000
#define PROXY_IPS_MAX	16
#define FLOWS_EXPIRE_MS 1000
#define SHOW_LEARNED_MAX 256

struct out_frame {
	struct out_frame *next;
	size_t len;
	uint8_t data[];
};

struct forward {
	struct forward *next;
	struct port_spec spec;
};

struct worker {
	int frame_fd, ctl_fd, sig_fd;
	struct nat nat;
	struct dns_proxy *dns;
	char *dns_dir, *dns_path;
	int dns_cleaner; /* write end of the pipe the directory's cleaner waits on */
	char *dns_slirp_path; /* where libslirp dials it: dns_path, or its path in our own root */
	struct net_filter filter;
	struct traffic *traffic;
	struct forward *forwards;
	size_t nr_forwards;
	struct out_frame *out_head, *out_tail;
	size_t out_bytes;
	bool out_trim; /* the queue was deep: give its memory back once empty */
	uint8_t *rx;
	struct pollfd *fds;
	size_t nfds, cap;
	unsigned dns_syns;
	bool done;
	/* The egress policy in force, and what it keeps. */
	struct policy *policy;
	bool allow_local;
	struct policy_wall wall;
	struct learned *learned;
	struct flows *flows;
	struct ack_hold *acks;
	uint64_t generation, flows_expired_ms, dns_logged;
	uint32_t proxy_ips[PROXY_IPS_MAX];
	size_t nr_proxy_ips;
	uint16_t proxy_port;
	bool proxy_enforce;
	uint64_t write_error_logged;
	uint64_t repeated_syns; /* SYNs the guest sent again, their MSS dropped */
	uint64_t drop_logged[NET_DROP_COUNT];
	uint64_t drop_quiet[NET_DROP_COUNT];
};

/* --- frames to the guest --------------------------------------------- */

static struct out_frame *out_new(size_t len)
{
	struct out_frame *f = xmalloc(sizeof(*f) + len);

	f->next = NULL;
	f->len = len;
	return f;
}

/* Write one frame to the guest's side: 0 when it is gone (sent, or refused
 * for good), 1 when the peer is full and it is to wait. */
static int out_write(struct worker *w, const uint8_t *buf, size_t len)
{
	ssize_t n;

	do
		n = write(w->frame_fd, buf, len);
	while (n < 0 && errno == EINTR);
	if (n >= 0)
		return 0;
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
		return 1;
	if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN) {
		log_info("frame fd closed by the peer");
		w->done = true;
	} else {
		traffic_drop(w->traffic, NET_DROP_GUEST_QUEUE);
		if (now_ms() - w->write_error_logged >= DROP_LOG_GAP_MS) {
			log_warn("frame of %zu bytes to the guest not sent: %s", len,
				 strerror(errno));
			w->write_error_logged = now_ms();
		}
	}
	return 0;
}

static void out_flush(struct worker *w)
{
	struct out_frame *f;

	while ((f = w->out_head) && !w->done) {
		if (out_write(w, f->data, f->len))
			return;
		w->out_head = f->next;
		if (w->out_head == NULL)
			w->out_tail = NULL;
		w->out_bytes -= f->len;
		free(f);
	}
	/* A burst's frames came and went through the heap: without this the
	 * worker would keep its peak (up to OUT_HARD) for good. */
	if (w->out_head == NULL && w->out_trim) {
		malloc_trim(0);
		w->out_trim = false;
	}
}

static void out_queue(struct worker *w, struct out_frame *f)
{
	if (w->out_bytes + f->len > OUT_HARD) {
		traffic_drop(w->traffic, NET_DROP_GUEST_QUEUE);
		free(f);
		return;
	}
	if (w->out_tail)
		w->out_tail->next = f;
	else
		w->out_head = f;
	w->out_tail = f;
	w->out_bytes += f->len;
}

static void backpressure(struct worker *w)
{
	bool was = w->nat.read_host;

	if (w->out_bytes >= OUT_HIGH) {
		w->nat.read_host = false;
		w->out_trim = true;
	}
	else if (w->out_bytes <= OUT_LOW)
		w->nat.read_host = true;
	if (was != w->nat.read_host)
		log_debug("%zu bytes wait for the guest: host sockets %s", w->out_bytes,
			  w->nat.read_host ? "read again" : "wait");
}

/* A frame in its own buffer (f) or the caller's (buf, len, f NULL). */
static void to_guest(struct worker *w, struct out_frame *f, const uint8_t *buf, size_t len)
{
	if (f) {
		buf = f->data;
		len = f->len;
	}
	traffic_rx_frame(w->traffic, buf, len, time(NULL));
	if (w->out_head == NULL && !out_write(w, buf, len)) {
		free(f);
		return;
	}
	if (f == NULL) {
		f = out_new(len);
		memcpy(f->data, buf, len);
	}
	out_queue(w, f);
	backpressure(w);
}

/* A TCP or UDP frame to or from the guest, as a flow key: its protocol,
 * the far end and both ports; and for TCP its flags, sequence number and
 * length in sequence space. false for anything else. */
struct seg {
	struct flow_key k;
	uint8_t flags;
	uint32_t seq, seqlen;
};

static bool frame_seg(const uint8_t *frame, size_t len, bool from_guest, struct seg *s)
{
	const uint8_t *ip = frame + FRAME_IP, *l4;
	size_t ihl, tot;

	if (len < FRAME_L4 || frame_get16(frame + 12) != ETH_TYPE_IPV4 || ip[0] >> 4 != 4)
		return false;
	ihl = (size_t)(ip[0] & 0xf) * 4;
	tot = frame_get16(ip + 2);
	if (ihl < IPV4_HLEN || tot > len - FRAME_IP || tot < ihl + 8 || (frame_get16(ip + 6) & 0x1fff))
		return false;
	l4 = ip + ihl;
	if (ip[9] == IPPROTO_NUM_TCP && tot >= ihl + TCP_HLEN) {
		size_t doff = (size_t)(l4[12] >> 4) * 4;

		s->k.proto = NET_PROTO_TCP;
		s->flags = l4[13];
		s->seq = frame_get32(l4 + 4);
		s->seqlen = (uint32_t)(tot - ihl - MIN(doff, tot - ihl)) + !!(s->flags & TCP_SYN) +
			    !!(s->flags & TCP_FIN);
	} else if (ip[9] == IPPROTO_NUM_UDP) {
		s->k.proto = NET_PROTO_UDP;
		s->flags = 0;
	} else {
		return false;
	}
	s->k.remote = frame_get32(ip + (from_guest ? 16 : 12));
	s->k.rport = frame_get16(l4 + (from_guest ? 2 : 0));
	s->k.gport = frame_get16(l4 + (from_guest ? 0 : 2));
	return true;
}

/* Whether guest port gport of proto is published (a forward to it). */
static bool published(struct worker *w, enum net_proto proto, uint16_t gport)
{
	for (struct forward *f = w->forwards; f; f = f->next)
		if (f->spec.guest_port == gport && f->spec.udp == (proto == NET_PROTO_UDP))
			return true;
	return false;
}

/* Whether a frame libslirp sends may reach the guest: not on a flow the
 * policy cut. What reaches a published port and is no flow's yet (a SYN,
 * a datagram) opens an inbound flow, whose replies the policy does not
 * judge. */
static bool rx_admit(struct worker *w, const uint8_t *frame, size_t len, struct flow **out)
{
	struct flow *f;
	struct seg s;
	bool opens;

	*out = NULL;
	if (!frame_seg(frame, len, false, &s) || s.k.remote == NET_GATEWAY)
		return true;
	f = flow_find(w->flows, &s.k);
	opens = s.k.proto == NET_PROTO_UDP || (s.flags & (TCP_SYN | TCP_ACK)) == TCP_SYN;
	if (f == NULL && opens && published(w, s.k.proto, s.k.gport)) {
		f = flow_add(w->flows, &s.k, now_ms());
		if (f == NULL)
			return false;
		f->inbound = true;
		f->generation = w->generation;
	}
	if (f == NULL)
		return true;
	if (f->cut)
		return false;
	f->rx_bytes += len;
	if (s.k.proto == NET_PROTO_TCP) {
		flow_tcp_seen(f, false, s.flags, s.seq, s.seqlen, now_ms());
		*out = f;
	} else {
		f->last_ms = now_ms();
	}
	return true;
}

static void slirp_send(void *opaque, const uint8_t *frame, size_t len)
{
	struct worker *w = opaque;
	struct flow *f;

	if (!rx_admit(w, frame, len, &f)) {
		traffic_drop(w->traffic, NET_DROP_POLICY);
		return;
	}
	if (f && ack_hold_offer(w->acks, &f->key, f->guest_small, frame, len, now_ms()))
		return;
	to_guest(w, NULL, frame, len);
}

static void held_ack_send(void *opaque, const uint8_t *frame, size_t len)
{
	to_guest(opaque, NULL, frame, len);
}

static void dns_answer(void *opaque, uint16_t guest_port, const uint8_t *msg, size_t len)
{
	struct out_frame *f = out_new(FRAME_L4 + UDP_HLEN + len);

	f->len = frame_udp_to_guest(f->data, f->len, NET_GATEWAY, 53, guest_port, msg, len);
	if (f->len == 0) {
		free(f);
		return;
	}
	to_guest(opaque, f, NULL, 0);
}

/* An answer made here to guest frame (len bytes): built into a frame of
 * at most cap bytes. */
static void answer(struct worker *w, const uint8_t *frame, size_t len, enum filter_action what,
		   uint8_t code)
{
	size_t cap = what == FILTER_ECHO ? len : FRAME_L4 + ICMP_HLEN + IPV4_HLEN + 8 + TCP_HLEN;
	struct out_frame *f = out_new(cap);

	if (what == FILTER_ECHO)
		f->len = frame_icmp_echo_reply(f->data, cap, frame, len);
	else if (what == FILTER_RST)
		f->len = frame_tcp_rst(f->data, cap, frame, len);
	else
		f->len = frame_icmp_unreach(f->data, cap, frame, len, code);
	if (f->len == 0) {
		free(f);
		return;
	}
	to_guest(w, f, NULL, 0);
}

/* --- frames from the guest ------------------------------------------- */

/* A SYN or SYN-ACK the guest sends again on a connection libslirp holds:
 * libslirp 4.7 takes the MSS option of every SYN, and sizing the socket's
 * buffers for it again empties them, so the bytes held for either side
 * would vanish from a stream that goes on (docs/upstream/
 * libslirp-repeated-syn.md). A slow guest repeats its SYN whenever the
 * answer waits in the queue longer than its retransmission timer. The
 * first SYN's MSS stands: the repeat loses the option. */
static void repeated_syn(struct worker *w, uint8_t *frame, size_t len)
{
	size_t hlen = (size_t)(frame[FRAME_L4 + 12] >> 4) * 4;

	if (hlen > len - FRAME_L4 || !frame_tcp_forget_mss(frame + FRAME_L4, hlen))
		return;
	w->repeated_syns++;
	log_debug("a repeated SYN from the guest: its MSS option dropped (%llu so far)",
		  (unsigned long long)w->repeated_syns);
}

/* The egress policy: whether a frame the check passed on to libslirp may
 * leave, NET_DROP_NONE or the reason it may not (NET_DROP_POLICY: a
 * refused TCP segment is answered with a RST and a refused datagram with
 * ICMP "administratively prohibited", so the guest fails at once rather
 * than after its timeouts). A flow is judged at its first frame and then
 * only when the policy changes; why gets the policy's reason. */
static enum net_drop egress_verdict(struct worker *w, uint8_t *frame, size_t len,
				    const struct filter_verdict *v, char *why, size_t why_len)
{
	uint64_t now = now_ms();
	struct policy_verdict pv;
	struct flow *f;
	struct seg s;

	why[0] = '\0';
	/* The gateway's own services (DNS over TCP) are not the world. */
	if (v->dst == NET_GATEWAY || !frame_seg(frame, len, true, &s))
		return NET_DROP_NONE;
	f = flow_find(w->flows, &s.k);
	if (f && f->cut) {
		snprintf(why, why_len, "cut by the policy");
		return NET_DROP_POLICY;
	}
	if (f == NULL) {
		pv = policy_judge(w->policy, &w->wall, w->learned, s.k.remote, s.k.proto, s.k.rport,
				  now);
		policy_verdict_str(&pv, w->learned, s.k.remote, now, why, why_len);
		if (!pv.allow)
			return NET_DROP_POLICY;
		/* Only a SYN opens a TCP flow; a stray segment the policy
		 * allows goes to libslirp, which answers it. */
		if (s.k.proto == NET_PROTO_TCP && (s.flags & (TCP_SYN | TCP_ACK)) != TCP_SYN)
			return NET_DROP_NONE;
		if (s.k.proto == NET_PROTO_TCP && !flows_syn_take(w->flows, now))
			return NET_DROP_SYN_RATE;
		f = flow_add(w->flows, &s.k, now);
		if (f == NULL)
			return NET_DROP_FLOW_TABLE;
		f->verdict = pv;
		f->generation = w->generation;
	}
	f->tx_bytes += len;
	if (s.k.proto != NET_PROTO_TCP) {
		f->last_ms = now;
		return NET_DROP_NONE;
	}
	if (flow_tcp_seen(f, true, s.flags, s.seq, s.seqlen, now))
		repeated_syn(w, frame, len);
	s.seqlen -= !!(s.flags & TCP_SYN) + !!(s.flags & TCP_FIN);
	if (s.seqlen)
		f->guest_small = s.seqlen < ACK_HOLD_SMALL;
	return NET_DROP_NONE;
}

static void log_drop(struct worker *w, const struct filter_verdict *v)
{
	uint64_t now = now_ms();
	char ip[INET_ADDRSTRLEN] = "-";
	struct in_addr a = { .s_addr = htonl(v->dst) };

	if (w->drop_logged[v->reason] && now - w->drop_logged[v->reason] < DROP_LOG_GAP_MS) {
		w->drop_quiet[v->reason]++;
		return;
	}
	if (v->has_dst)
		inet_ntop(AF_INET, &a, ip, sizeof(ip));
	log_info("guest frame dropped: %s (to %s %s/%u; %llu more like it not shown)",
		 net_drop_name(v->reason), ip, net_proto_name(v->proto), v->port,
		 (unsigned long long)w->drop_quiet[v->reason]);
	w->drop_logged[v->reason] = now;
	w->drop_quiet[v->reason] = 0;
}

/* libslirp connects each guest connection to .1:53 to the proxy's socket
 * with a blocking connect(): a burst of them must not fill its backlog. */
static bool dns_syn_over(struct worker *w, const uint8_t *frame, const struct filter_verdict *v)
{
	uint8_t flags = frame[FRAME_L4 + 13];

	if (v->proto != NET_PROTO_TCP || v->dst != NET_GATEWAY ||
	    (flags & (TCP_SYN | TCP_ACK)) != TCP_SYN)
		return false;
	return ++w->dns_syns > DNS_SYN_ROUND;
}

static void guest_frame(struct worker *w, uint8_t *frame, size_t len)
{
	struct filter_verdict v;
	char why[TRAFFIC_WHY_MAX] = "";
	bool refused;

	filter_frame(&w->filter, frame, len, now_ms(), &v);
	if (v.action == FILTER_SLIRP && v.proto != NET_PROTO_ARP) {
		v.reason = egress_verdict(w, frame, v.len, &v, why, sizeof(why));
		if (v.reason == NET_DROP_NONE && dns_syn_over(w, frame, &v))
			v.reason = NET_DROP_DNS_BUSY;
		if (v.reason != NET_DROP_NONE)
			v.action = FILTER_DROP;
		refused = v.reason == NET_DROP_POLICY || v.reason == NET_DROP_FLOW_TABLE;
		if (refused && v.proto == NET_PROTO_TCP && !(frame[FRAME_L4 + 13] & TCP_RST))
			v.action = FILTER_RST;
		else if (refused && v.proto == NET_PROTO_UDP)
			v.action = FILTER_UNREACH;
	} else if (v.reason == NET_DROP_DST_LOCAL && v.len >= FRAME_L4 + TCP_HLEN) {
		/* Nothing lives there: say so at once rather than let the
		 * guest's connect run into its timeout. */
		if (v.proto == NET_PROTO_TCP && !(frame[FRAME_L4 + 13] & TCP_RST))
			v.action = FILTER_RST;
		else if (v.proto == NET_PROTO_UDP)
			v.action = FILTER_UNREACH;
	}
	traffic_guest(w->traffic, &v, time(NULL));
	if (v.reason == NET_DROP_POLICY && v.has_dst)
		traffic_policy(w->traffic, v.dst, v.proto, v.port, why, time(NULL));
	if (v.reason != NET_DROP_NONE)
		log_drop(w, &v);
	switch (v.action) {
	case FILTER_SLIRP:
		nat_input(&w->nat, frame, v.len);
		break;
	case FILTER_DNS:
		dns_proxy_udp_query(w->dns, v.sport, frame + v.payload, v.plen);
		break;
	case FILTER_ECHO:
	case FILTER_RST:
	case FILTER_UNREACH:
		answer(w, frame, v.len, v.action,
		       v.reason == NET_DROP_POLICY || v.reason == NET_DROP_FLOW_TABLE
			       ? ICMP_ADMIN_PROHIB
		       : v.reason == NET_DROP_DST_LOCAL ? ICMP_HOST_UNREACH
							: ICMP_PORT_UNREACH);
		break;
	case FILTER_DROP:
		break;
	}
}

static void read_guest(struct worker *w)
{
	ssize_t n;

	for (int i = 0; i < RX_BUDGET && w->out_bytes < OUT_FULL && !w->done; i++) {
		n = read(w->frame_fd, w->rx, NET_FRAME_MAX + 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0 && errno != ECONNRESET) {
			log_error("frame fd: %s", strerror(errno));
			w->done = true;
			return;
		}
		if (n <= 0) {
			log_info("frame fd closed: stopping");
			w->done = true;
			return;
		}
		guest_frame(w, w->rx, (size_t)n);
	}
}

/* --- the egress policy ------------------------------------------------ */

/* Take the frames of flow k out of the guest's queue, so nothing of a cut
 * flow reaches it; *seq gets the sequence number of the first TCP frame
 * taken (where the guest's stream now ends). */
static bool out_purge(struct worker *w, const struct flow_key *k, uint32_t *seq)
{
	struct out_frame **p = &w->out_head, *f;
	bool found = false;
	struct seg s;

	w->out_tail = NULL;
	while ((f = *p)) {
		if (frame_seg(f->data, f->len, false, &s) && s.k.remote == k->remote &&
		    s.k.rport == k->rport && s.k.gport == k->gport && s.k.proto == k->proto) {
			if (!found && s.k.proto == NET_PROTO_TCP)
				*seq = s.seq;
			found = true;
			*p = f->next;
			w->out_bytes -= f->len;
			free(f);
			continue;
		}
		w->out_tail = f;
		p = &f->next;
	}
	return found;
}

/* End flow f for good: its queued frames to the guest dropped, and for TCP
 * a RST to the guest and one into libslirp, which closes its host socket. */
static void flow_cut(struct worker *w, struct flow *f, const char *why)
{
	uint8_t buf[FRAME_L4 + TCP_HLEN];
	uint32_t seq = f->remote_next;
	char ip[INET_ADDRSTRLEN];
	struct in_addr a = { .s_addr = htonl(f->key.remote) };
	bool purged = out_purge(w, &f->key, &seq);
	size_t n;

	ack_hold_drop(w->acks, &f->key);
	f->cut = true;
	f->until_ms = now_ms() + FLOW_CUT_MS;
	traffic_policy(w->traffic, f->key.remote, f->key.proto, f->key.rport, why, time(NULL));
	inet_ntop(AF_INET, &a, ip, sizeof(ip));
	log_info("flow %s/%u -> %s:%u cut: %s", net_proto_name(f->key.proto), f->key.gport, ip,
		 f->key.rport, why);
	if (f->key.proto != NET_PROTO_TCP || f->closed)
		return;
	if (f->remote_seq || purged) {
		n = frame_tcp_rst_flow(buf, sizeof(buf), true, f->key.remote, f->key.rport,
				       f->key.gport, seq, f->guest_next);
		to_guest(w, NULL, buf, n);
	}
	if (f->guest_seq) {
		n = frame_tcp_rst_flow(buf, sizeof(buf), false, f->key.remote, f->key.rport,
				       f->key.gport, f->guest_next, f->remote_next);
		nat_input(&w->nat, buf, n);
	}
}

struct rejudge {
	struct worker *w;
	uint64_t now;
	unsigned cut;
};

static void rejudge(void *opaque, struct flow *f)
{
	struct rejudge *r = opaque;
	struct worker *w = r->w;
	struct policy_verdict pv;
	char why[TRAFFIC_WHY_MAX];

	if (f->inbound || f->cut)
		return;
	pv = policy_judge(w->policy, &w->wall, w->learned, f->key.remote, f->key.proto,
			  f->key.rport, r->now);
	f->generation = w->generation;
	f->verdict = pv;
	if (pv.allow)
		return;
	policy_verdict_str(&pv, w->learned, f->key.remote, r->now, why, sizeof(why));
	flow_cut(w, f, why);
	r->cut++;
}

/* Make p (NULL: the default) the policy in force, at once: what was
 * learned for names it still allows stays, every flow is judged again
 * and those it denies are cut. Returns how many were. */
static unsigned policy_install(struct worker *w, struct policy *p, bool allow_local)
{
	struct rejudge r = { .w = w, .now = now_ms() };

	if (p == NULL)
		p = policy_default(false);
	if (allow_local)
		p->allow_local = true;
	if (w->nr_proxy_ips)
		policy_add_proxy(p, w->proxy_ips, w->nr_proxy_ips, w->proxy_port, w->proxy_enforce);
	policy_free(w->policy);
	w->policy = p;
	w->allow_local = allow_local;
	w->generation++;
	policy_wall_host_addrs(&w->wall);
	learned_retain(w->learned, p, r.now);
	flows_each(w->flows, rejudge, &r);
	backpressure(w);
	log_info("egress policy %llu in force: default %s, %zu rules, %zu+%zu domains%s; %u flows cut",
		 (unsigned long long)w->generation, p->default_allow ? "allow" : "deny",
		 p->nr_rules, p->nr_allow, p->nr_resolve,
		 p->allow_local ? ", local network allowed" : "", r.cut);
	return r.cut;
}

static bool dns_allow(void *opaque, const struct dns_question *q)
{
	struct worker *w = opaque;
	enum policy_dns d = policy_dns_name(w->policy, q->name);

	traffic_dns(w->traffic, q->name, q->qtype,
		    d == POLICY_DNS_REFUSE  ? "refused"
		    : d == POLICY_DNS_LEARN ? "learned"
					    : "resolved",
		    time(NULL));
	if (d == POLICY_DNS_REFUSE && now_ms() - w->dns_logged >= DROP_LOG_GAP_MS) {
		log_info("DNS query for `%s` refused: not allowed by the policy", q->name);
		w->dns_logged = now_ms();
	}
	return d != POLICY_DNS_REFUSE;
}

static bool dns_learn(void *opaque, const struct dns_question *q)
{
	struct worker *w = opaque;

	return policy_dns_name(w->policy, q->name) == POLICY_DNS_LEARN;
}

static void dns_learned(void *opaque, const struct dns_question *q, const char *owner,
			struct in_addr ip, uint32_t ttl)
{
	struct worker *w = opaque;

	(void)owner;
	/* The policy may have changed while the query was out. */
	if (policy_dns_name(w->policy, q->name) == POLICY_DNS_LEARN)
		learned_add(w->learned, ntohl(ip.s_addr), q->name, ttl, now_ms());
}

/* The policy in force and what it keeps; the learned addresses cut to
 * SHOW_LEARNED_MAX, so the answer fits one control message. */
static json_t *policy_show(struct worker *w)
{
	json_t *learned = learned_json(w->learned, now_ms());
	size_t total = json_array_size(learned);

	while (json_array_size(learned) > SHOW_LEARNED_MAX)
		json_array_remove(learned, json_array_size(learned) - 1);
	return json_pack("{s:b, s:o, s:b, s:I, s:o, s:I, s:{s:i, s:i}}", "ok", 1, "policy",
			 policy_to_json(w->policy), "allowLocal", w->allow_local, "generation",
			 (json_int_t)w->generation, "learned", learned, "learned_total",
			 (json_int_t)total, "flows", "tcp", (int)flows_count(w->flows, NET_PROTO_TCP),
			 "udp", (int)flows_count(w->flows, NET_PROTO_UDP));
}

/* --- published ports ------------------------------------------------- */

/* "127.0.0.1:8080/tcp": how errors name a forward. */
static void bind_str(const struct port_spec *s, char *buf, size_t len)
{
	char ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &s->host_ip, ip, sizeof(ip));
	snprintf(buf, len, "%s:%u/%s", ip, s->host_port, s->udp ? "udp" : "tcp");
}

static struct forward **forward_find(struct worker *w, const struct port_spec *s)
{
	struct forward **p;

	for (p = &w->forwards; *p; p = &(*p)->next)
		if (port_spec_same_bind(&(*p)->spec, s))
			break;
	return p;
}

static int publish(struct worker *w, const char *text, struct port_spec *out, gantry_error_t *err)
{
	struct port_spec s;
	struct forward *f;
	char name[PORT_SPEC_MAX + 8];

	if (port_spec_parse(text, &s, err) < 0)
		return -1;
	if (s.host_port == 0 && port_spec_pick(&s, err) < 0)
		return -1;
	bind_str(&s, name, sizeof(name));
	if (*forward_find(w, &s))
		return gantry_error(err, 0, "port %s: already published", name);
	if (w->nr_forwards >= MAX_FORWARDS)
		return gantry_error(err, 0, "port %s: too many published ports", name);
	if (nat_forward_add(&w->nat, s.udp, s.host_ip, s.host_port, s.guest_port) < 0) {
		if (errno == EADDRINUSE)
			return gantry_error(err, 0, "port %s: address in use", name);
		return gantry_error_errno(err, "port %s", name);
	}
	f = xzalloc(sizeof(*f));
	f->spec = s;
	f->next = w->forwards;
	w->forwards = f;
	w->nr_forwards++;
	*out = s;
	log_info("published %s to guest port %u", name, s.guest_port);
	return 0;
}

struct unpublished {
	struct worker *w;
	const struct port_spec *s;
};

static void cut_inbound(void *opaque, struct flow *f)
{
	struct unpublished *u = opaque;

	if (f->inbound && !f->cut && f->key.gport == u->s->guest_port &&
	    (f->key.proto == NET_PROTO_UDP) == u->s->udp)
		flow_cut(u->w, f, "port unpublished");
}

static int unpublish(struct worker *w, const char *text, gantry_error_t *err)
{
	struct port_spec s;
	struct forward **p, *f;
	char name[PORT_SPEC_MAX + 8];

	if (port_spec_parse(text, &s, err) < 0)
		return -1;
	bind_str(&s, name, sizeof(name));
	p = forward_find(w, &s);
	if (*p == NULL || nat_forward_remove(&w->nat, s.udp, s.host_ip, s.host_port) < 0)
		return gantry_error(err, 0, "port %s: not published", name);
	f = *p;
	*p = f->next;
	free(f);
	w->nr_forwards--;
	log_info("unpublished %s", name);
	/* Its connections go too, unless another forward still leads to the
	 * same guest port (an inbound flow does not say which one it came by). */
	if (!published(w, s.udp ? NET_PROTO_UDP : NET_PROTO_TCP, s.guest_port)) {
		struct unpublished u = { .w = w, .s = &s };

		flows_each(w->flows, cut_inbound, &u);
	}
	return 0;
}

/* --- the control socket ---------------------------------------------- */

/* One answer, one message; a supervisor that does not take it in a while
 * loses it rather than stalling the guest's network. */
static void ctl_send(struct worker *w, json_t *answer)
{
	cleanup_free char *s = json_dumps(answer, JSON_COMPACT);
	struct pollfd p = { .fd = w->ctl_fd, .events = POLLOUT };
	uint64_t deadline = now_ms() + CTL_SEND_MS;
	ssize_t n;

	json_decref(answer);
	if (s == NULL)
		return;
	for (;;) {
		n = send(w->ctl_fd, s, strlen(s), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n >= 0)
			return;
		if (errno == EINTR)
			continue;
		if ((errno != EAGAIN && errno != EWOULDBLOCK) || now_ms() >= deadline ||
		    poll(&p, 1, (int)(deadline - now_ms())) < 0) {
			log_warn("control answer not sent: %s", strerror(errno));
			return;
		}
	}
}

static json_t *ctl_error(gantry_error_t *err)
{
	json_t *j = json_pack("{s:b, s:s}", "ok", 0, "error", gantry_error_str(*err));

	gantry_error_free(err);
	return j;
}

static json_t *ctl_op(struct worker *w, json_t *req)
{
	cleanup_free char *op = NULL, *spec = NULL;
	gantry_error_t err = NULL;
	struct port_spec s;
	char canon[PORT_SPEC_MAX];

	if (!json_is_object(req)) {
		gantry_error(&err, 0, "request: not a JSON object");
		return ctl_error(&err);
	}
	if (jsonh_string(req, "op", true, &op, &err) < 0)
		return ctl_error(&err);
	if (strcmp(op, NET_CTL_TRAFFIC) == 0)
		return json_pack("{s:b, s:o}", "ok", 1, "traffic", traffic_json(w->traffic));
	if (strcmp(op, NET_CTL_POLICY_SHOW) == 0)
		return policy_show(w);
	if (strcmp(op, NET_CTL_POLICY) == 0) {
		json_t *pj = json_object_get(req, "policy");
		struct policy *p = NULL;
		unsigned cut;

		if (pj && !json_is_null(pj) && policy_from_json(pj, &p, &err) < 0) {
			gantry_error_prefix(&err, "policy");
			return ctl_error(&err);
		}
		cut = policy_install(w, p, json_is_true(json_object_get(req, "allowLocal")));
		return json_pack("{s:b, s:I, s:i}", "ok", 1, "generation",
				 (json_int_t)w->generation, "cut", (int)cut);
	}
	if (strcmp(op, NET_CTL_PUBLISH) != 0 && strcmp(op, NET_CTL_UNPUBLISH) != 0) {
		gantry_error(&err, 0, "unknown op `%.40s`", op);
		gantry_error_sanitize(&err, 200);
		return ctl_error(&err);
	}
	if (jsonh_string(req, "spec", true, &spec, &err) < 0)
		return ctl_error(&err);
	if (strcmp(op, NET_CTL_UNPUBLISH) == 0) {
		if (unpublish(w, spec, &err) < 0)
			return ctl_error(&err);
		return json_pack("{s:b}", "ok", 1);
	}
	if (publish(w, spec, &s, &err) < 0)
		return ctl_error(&err);
	port_spec_format(&s, canon);
	return json_pack("{s:b, s:s}", "ok", 1, "spec", canon);
}

static json_t *ctl_request(struct worker *w, const char *buf, size_t len)
{
	gantry_error_t err = NULL;
	json_t *req = jsonh_load(buf, len, "request", &err), *answer;

	if (req == NULL)
		return ctl_error(&err);
	answer = ctl_op(w, req);
	json_decref(req);
	return answer;
}

static void read_ctl(struct worker *w)
{
	cleanup_free char *buf = NULL;
	gantry_error_t err = NULL;
	ssize_t n;
	char c;

	/* The message's length first (MSG_TRUNC), so the buffer fits it. */
	n = recv(w->ctl_fd, &c, 1, MSG_DONTWAIT | MSG_PEEK | MSG_TRUNC);
	if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	if (n <= 0) {
		if (n < 0)
			log_error("control socket: %s", strerror(errno));
		else
			log_info("control socket closed: stopping");
		w->done = true;
		return;
	}
	if (n > NET_CTL_MSG_MAX) {
		recv(w->ctl_fd, &c, 1, MSG_DONTWAIT);
		gantry_error(&err, 0, "request over %d bytes", NET_CTL_MSG_MAX);
		ctl_send(w, ctl_error(&err));
		return;
	}
	buf = xmalloc((size_t)n);
	n = recv(w->ctl_fd, buf, (size_t)n, MSG_DONTWAIT);
	if (n <= 0)
		return;
	ctl_send(w, ctl_request(w, buf, (size_t)n));
}

/* --- set-up and the loop --------------------------------------------- */

struct args {
	int frame_fd, ctl_fd;
	struct sockaddr_in dns;
	bool have_dns;
	char **ports;
	size_t nr_ports;
	const char *policy;
	bool allow_local;
	struct sockaddr_in proxy[PROXY_IPS_MAX];
	size_t nr_proxy;
	bool proxy_enforce;
	struct confine_opts confine; /* mode off: not confined */
	bool self_test;
};

static int parse_fd(const char *s, int *out)
{
	uint64_t v;

	if (s == NULL || parse_u64(s, INT_MAX, &v) < 0)
		return -1;
	*out = (int)v;
	return 0;
}

static int parse_ip_port(const char *s, struct sockaddr_in *out)
{
	char ip[INET_ADDRSTRLEN];
	const char *colon = s ? strrchr(s, ':') : NULL;
	uint64_t port;

	if (colon == NULL || (size_t)(colon - s) >= sizeof(ip) ||
	    parse_u64(colon + 1, 65535, &port) < 0 || port == 0)
		return -1;
	memcpy(ip, s, (size_t)(colon - s));
	ip[colon - s] = '\0';
	*out = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	return inet_pton(AF_INET, ip, &out->sin_addr) == 1 ? 0 : -1;
}

static int load_filter(void *opaque, bool log, char *why, size_t len)
{
	(void)opaque;
	return confine_filter_net(log, why, len);
}

static int parse_args(int argc, char **argv, struct args *a)
{
	*a = (struct args){ .frame_fd = -1, .ctl_fd = -1 };
	a->ports = xzalloc(sizeof(char *) * ((size_t)argc + 1));
	for (int i = 0; i < argc; i++) {
		const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		int n = confine_arg(&a->confine, opt, val);

		if (n < 0)
			return -1;
		if (n > 0)
			i += n - 1;
		else if (strcmp(opt, "--self-test") == 0)
			a->self_test = true;
		else if (strcmp(opt, "--frame-fd") == 0 && parse_fd(val, &a->frame_fd) == 0)
			i++;
		else if (strcmp(opt, "--ctl-fd") == 0 && parse_fd(val, &a->ctl_fd) == 0)
			i++;
		else if (strcmp(opt, "--dns") == 0 && parse_ip_port(val, &a->dns) == 0) {
			a->have_dns = true;
			i++;
		} else if (strcmp(opt, "-p") == 0 && val && a->nr_ports < MAX_FORWARDS) {
			a->ports[a->nr_ports++] = argv[++i];
		} else if (strcmp(opt, "--policy") == 0 && val) {
			a->policy = argv[++i];
		} else if (strcmp(opt, "--allow-local-net") == 0) {
			a->allow_local = true;
		} else if (strcmp(opt, "--proxy") == 0 && a->nr_proxy < PROXY_IPS_MAX &&
			   parse_ip_port(val, &a->proxy[a->nr_proxy]) == 0 &&
			   (a->nr_proxy == 0 || a->proxy[0].sin_port == a->proxy[a->nr_proxy].sin_port)) {
			a->nr_proxy++;
			i++;
		} else if (strcmp(opt, "--proxy-enforce") == 0) {
			a->proxy_enforce = true;
		} else {
			return -1;
		}
	}
	a->confine.role = "net";
	a->confine.load_filter = load_filter;
	/* Root without a user namespace keeps the one capability a
	 * published port below 1024 needs. */
	a->confine.keep_bind_cap = geteuid() == 0 && !(a->confine.spawn.ns & CLONE_NEWUSER);
	return a->frame_fd >= 0 || a->self_test ? 0 : -1;
}

static int nonblock(int fd, const char *what, gantry_error_t *err)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return gantry_error_errno(err, "%s", what);
	return 0;
}

/* A directory of the host's holds the DNS socket, and the filters will
 * not let us remove it: a child made now, before the layers, removes it
 * once we are gone (its end of a pipe we never write reads EOF, however we
 * end), and does nothing else. */
static int dns_dir_cleaner(struct worker *w, gantry_error_t *err)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return gantry_error_errno(err, "DNS proxy: pipe");
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return gantry_error_errno(err, "DNS proxy: fork");
	}
	if (pid == 0) {
		char c;

		signal(SIGINT, SIG_IGN); /* a Ctrl-C to the group: we go with the worker */
		signal(SIGTERM, SIG_IGN);
		if (dup2(p[0], 3) == 3)
			close_range(4, ~0U, 0);
		while (read(3, &c, 1) < 0 && errno == EINTR)
			;
		unlink(w->dns_path);
		rmdir(w->dns_dir);
		_exit(0);
	}
	close(p[0]);
	w->dns_cleaner = p[1];
	return 0;
}

/* The DNS proxy's Unix socket for TCP queries: in the worker's own root
 * when it has one (where libslirp finds it as /dns.sock once that is /),
 * else in a private directory. */
static int dns_socket_dir(struct worker *w, const struct args *a, gantry_error_t *err)
{
	const char *base = getenv("XDG_RUNTIME_DIR");
	char *dir;

	if (confine_root_prepare(&a->confine)) {
		xasprintf(&w->dns_path, "%s/dns.sock", CONFINE_ROOT);
		w->dns_slirp_path = xstrdup("/dns.sock");
		return 0;
	}
	if (base == NULL || base[0] != '/' || access(base, W_OK) < 0)
		base = getenv("TMPDIR");
	if (base == NULL || base[0] != '/' || access(base, W_OK) < 0)
		base = "/tmp";
	xasprintf(&dir, "%s/gantry-net-XXXXXX", base);
	if (mkdtemp(dir) == NULL) {
		free(dir);
		return gantry_error_errno(err, "DNS proxy: cannot make a directory in %s", base);
	}
	w->dns_dir = dir;
	xasprintf(&w->dns_path, "%s/dns.sock", dir);
	w->dns_slirp_path = xstrdup(w->dns_path);
	if (strlen(w->dns_path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return gantry_error(err, 0, "DNS proxy: socket path `%s` too long", w->dns_path);
	return a->confine.mode == CONFINE_OFF ? 0 : dns_dir_cleaner(w, err);
}

static int signals(struct worker *w, gantry_error_t *err)
{
	sigset_t set;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0 ||
	    (w->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0)
		return gantry_error_errno(err, "signalfd");
	return 0;
}

static int load_policy(const char *path, struct policy **out, gantry_error_t *err)
{
	cleanup_free char *buf = NULL;
	size_t len;

	*out = NULL;
	if (read_file_max(path, POLICY_FILE_MAX, &buf, &len, err) < 0)
		return -1;
	if (buf == NULL)
		return gantry_error(err, ENOENT, "policy `%s`", path);
	if (policy_parse(buf, len, path, out, err) < 0)
		return gantry_error_prefix(err, "policy `%s`", path);
	return 0;
}

static int setup(struct worker *w, const struct args *a, gantry_error_t *err)
{
	const struct dns_hooks hooks = { .opaque = w,
					 .udp_answer = dns_answer,
					 .allow = dns_allow,
					 .learn = dns_learn,
					 .learned = dns_learned,
					 .ttl_cap = POLICY_TTL_CAP };
	struct policy *policy = NULL;
	struct port_spec s;

	w->frame_fd = a->frame_fd;
	w->ctl_fd = a->ctl_fd;
	filter_init(&w->filter, now_ms());
	w->traffic = traffic_new();
	w->rx = xmalloc(NET_FRAME_MAX + 1);
	w->learned = learned_new();
	w->flows = flows_new();
	w->acks = ack_hold_new();
	for (size_t i = 0; i < a->nr_proxy; i++)
		w->proxy_ips[w->nr_proxy_ips++] = ntohl(a->proxy[i].sin_addr.s_addr);
	w->proxy_port = a->nr_proxy ? ntohs(a->proxy[0].sin_port) : 0;
	w->proxy_enforce = a->proxy_enforce && a->nr_proxy;
	if (a->policy && load_policy(a->policy, &policy, err) < 0)
		return -1;
	policy_install(w, policy, a->allow_local);
	if (signals(w, err) < 0 || nonblock(w->frame_fd, "frame fd", err) < 0 ||
	    (w->ctl_fd >= 0 && nonblock(w->ctl_fd, "control fd", err) < 0))
		return -1;
	if (dns_socket_dir(w, a, err) < 0)
		return -1;
	if (dns_proxy_new(&w->dns, &hooks, a->have_dns ? &a->dns : NULL, a->have_dns ? 1 : 0,
			  w->dns_path, err) < 0)
		return gantry_error_prefix(err, "DNS proxy");
	if (w->dns_cleaner >= 0) /* it removes the socket once we are gone */
		dns_proxy_keep_path(w->dns);
	w->nat.send = slirp_send;
	w->nat.opaque = w;
	if (nat_init(&w->nat, w->dns_slirp_path, err) < 0)
		return -1;
	for (size_t i = 0; i < a->nr_ports; i++)
		if (publish(w, a->ports[i], &s, err) < 0)
			return -1;
	return 0;
}

static void teardown(struct worker *w)
{
	struct out_frame *f;
	struct forward *fw;

	nat_cleanup(&w->nat);
	if (w->dns)
		dns_proxy_free(w->dns);
	/* Where a cleaner waits, it removes them once we have exited. */
	if (w->dns_path && w->dns_cleaner < 0)
		unlink(w->dns_path);
	if (w->dns_dir && w->dns_cleaner < 0)
		rmdir(w->dns_dir);
	free(w->dns_path);
	free(w->dns_slirp_path);
	free(w->dns_dir);
	while ((f = w->out_head)) {
		w->out_head = f->next;
		free(f);
	}
	while ((fw = w->forwards)) {
		w->forwards = fw->next;
		free(fw);
	}
	if (w->traffic)
		traffic_free(w->traffic);
	policy_free(w->policy);
	if (w->learned)
		learned_free(w->learned);
	if (w->flows)
		flows_free(w->flows);
	ack_hold_free(w->acks);
	free(w->rx);
	free(w->fds);
}

static void push_fd(struct worker *w, int fd, short events)
{
	if (w->nfds == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 64;
		w->fds = xrealloc(w->fds, w->cap * sizeof(*w->fds));
	}
	w->fds[w->nfds++] = (struct pollfd){ .fd = fd, .events = events };
}

static void fds_reserve(struct worker *w, size_t more)
{
	if (w->cap - w->nfds >= more)
		return;
	w->cap = w->nfds + more;
	w->fds = xrealloc(w->fds, w->cap * sizeof(*w->fds));
}

static int min_timeout(int a, int b)
{
	if (a < 0)
		return b;
	if (b < 0)
		return a;
	return MIN(a, b);
}

/* Indices of the fixed entries in the poll set. */
enum { FD_FRAME, FD_SIGNAL, FD_CTL };

static void loop(struct worker *w)
{
	size_t dns_base, dns_n;
	int timeout, r;
	short re;

	while (!w->done) {
		w->nfds = 0;
		push_fd(w, w->frame_fd,
			(short)((w->out_bytes < OUT_FULL ? POLLIN : 0) |
				(w->out_head ? POLLOUT : 0)));
		push_fd(w, w->sig_fd, POLLIN);
		push_fd(w, w->ctl_fd, POLLIN); /* -1: ignored by poll() */
		fds_reserve(w, DNS_POLL_MAX);
		dns_base = w->nfds;
		dns_n = dns_proxy_pollfds(w->dns, w->fds + dns_base, DNS_POLL_MAX);
		w->nfds += dns_n;
		timeout = nat_pollfds(&w->nat, &w->fds, &w->nfds, &w->cap);
		timeout = min_timeout(timeout, dns_proxy_timeout_ms(w->dns));
		timeout = min_timeout(timeout, ack_hold_timeout(w->acks, now_ms()));

		r = poll(w->fds, w->nfds, timeout);
		if (r < 0 && errno != EINTR) {
			log_error("poll: %s", strerror(errno));
			return;
		}
		w->dns_syns = 0;
		if (now_ms() - w->flows_expired_ms >= FLOWS_EXPIRE_MS) {
			flows_expire(w->flows, now_ms());
			w->flows_expired_ms = now_ms();
		}
		nat_dispatch(&w->nat, r < 0);
		ack_hold_release(w->acks, now_ms(), held_ack_send, w);
		if (r > 0)
			dns_proxy_dispatch(w->dns, w->fds + dns_base, dns_n);
		dns_proxy_tick(w->dns);
		if (r <= 0)
			continue;
		if (w->fds[FD_SIGNAL].revents & POLLIN) {
			log_info("stopping on a signal");
			return;
		}
		re = w->fds[FD_FRAME].revents;
		if (re & POLLOUT)
			out_flush(w);
		if (re & POLLIN)
			read_guest(w);
		else if (re & (POLLHUP | POLLERR | POLLNVAL)) {
			log_info("frame fd closed: stopping");
			w->done = true;
		}
		backpressure(w);
		re = w->fds[FD_CTL].revents;
		if (re & POLLIN)
			read_ctl(w);
		else if (re & (POLLHUP | POLLERR | POLLNVAL)) {
			log_info("control socket closed: stopping");
			w->done = true;
		}
	}
}

static void handshake(int ctl_fd, const char *error, json_t *isolation)
{
	json_t *j = error ? json_pack("{s:b, s:s}", "ok", 0, "error", error)
			  : json_pack("{s:b}", "ok", 1);
	cleanup_free char *s = NULL;

	if (isolation)
		json_object_set(j, "isolation", isolation);
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (ctl_fd >= 0 && s && send(ctl_fd, s, strlen(s), MSG_NOSIGNAL) < 0)
		log_warn("control socket: %s", strerror(errno));
}

/* After set-up, before anything from the guest is read: the layers of
 * confine.h, and the report. NULL with why set when the mode is required
 * and a property does not hold. */
static json_t *confine(struct args *a, char *why, size_t len)
{
	a->confine.nofile = NET_WORKER_NOFILE;
	return confine_run(&a->confine, why, len);
}

int net_worker_main(int argc, char **argv)
{
	static struct worker w = { .frame_fd = -1, .ctl_fd = -1, .sig_fd = -1, .dns_cleaner = -1 };
	gantry_error_t err = NULL;
	json_t *isolation;
	char why[256] = "";
	struct args a;
	int rc;

	log_init("net-worker", -1);
	/* Started by hand: started again as a sandbox starts it. */
	if ((rc = confine_self_test_again(argc, argv, NET_WORKER_ROLE, 0)) >= 0)
		return rc;
	if (parse_args(argc, argv, &a) < 0) {
		log_error("%s is for Gantry's own use: --frame-fd N [--ctl-fd N] [--dns IP:PORT] "
			  "[-p SPEC]... [--policy FILE] [--allow-local-net] "
			  "[--proxy IP:PORT]... [--proxy-enforce]",
			  NET_WORKER_ROLE);
		free(a.ports);
		return 2;
	}
	if (a.self_test) {
		free(a.ports);
		a.confine.nofile = NET_WORKER_NOFILE;
		return confine_self_test(&a.confine);
	}
	if (setup(&w, &a, &err) < 0) {
		log_error("%s", gantry_error_str(err));
		handshake(a.ctl_fd, gantry_error_str(err), NULL);
		gantry_error_free(&err);
		teardown(&w);
		free(a.ports);
		return 1;
	}
	free(a.ports);
	isolation = confine(&a, why, sizeof(why));
	if (confine_root_prepare(&a.confine)) {
		/* The DNS socket is in our own root, which goes with us. */
		dns_proxy_keep_path(w.dns);
		free(w.dns_path);
		w.dns_path = NULL;
	}
	if (isolation == NULL && *why) {
		log_error("%s", why);
		handshake(w.ctl_fd, why, NULL);
		teardown(&w);
		return 1;
	}
	handshake(w.ctl_fd, NULL, isolation);
	json_decref(isolation);
	log_info("ready: %s/%d, gateway and DNS %s, host at %s", NET_GUEST_STR, NET_PREFIX,
		 NET_GATEWAY_STR, NET_HOST_STR);
	loop(&w);
	teardown(&w);
	return 0;
}
