/* The network worker's frames and loop (see worker.h, net.h,
 * worker_priv.h): guest frames from the frame fd through the frame check
 * to libslirp, the DNS proxy or an answer made here; frames to the guest
 * through a bounded queue that pushes back on libslirp instead of
 * dropping. worker_ctl.c has the policy, published ports and the control
 * socket; worker_main.c the set-up. */
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
#include "net/worker_priv.h"

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

void worker_backpressure(struct worker *w)
{
	bool was = w->nat.read_host;

	if (w->out_bytes >= OUT_HIGH) {
		w->nat.read_host = false;
		w->out_trim = true;
	} else if (w->out_bytes <= OUT_LOW) {
		w->nat.read_host = true;
	}
	if (was != w->nat.read_host)
		log_debug("%zu bytes wait for the guest: host sockets %s", w->out_bytes,
			  w->nat.read_host ? "read again" : "wait");
}

/* Whether a frame to the guest is on a connection the host opened to a
 * published port. */
static bool inbound(struct worker *w, const uint8_t *frame, size_t len)
{
	struct flow *f;
	struct seg s;

	if (!worker_frame_seg(frame, len, false, &s))
		return false;
	f = flow_find(w->flows, &s.k);
	return f && f->inbound;
}

/* A frame in its own buffer (f) or the caller's (buf, len, f NULL). */
void worker_to_guest(struct worker *w, struct out_frame *f, const uint8_t *buf, size_t len)
{
	if (f) {
		buf = f->data;
		len = f->len;
	}
	traffic_rx_frame(w->traffic, buf, len, inbound(w, buf, len), time(NULL));
	if (w->out_head == NULL && !out_write(w, buf, len)) {
		free(f);
		return;
	}
	if (f == NULL) {
		f = out_new(len);
		memcpy(f->data, buf, len);
	}
	out_queue(w, f);
	worker_backpressure(w);
}

/* Take the frames of flow k out of the guest's queue, so nothing of a cut
 * flow reaches it; *seq gets the sequence number of the first TCP frame
 * taken (where the guest's stream now ends). */
bool worker_out_purge(struct worker *w, const struct flow_key *k, uint32_t *seq)
{
	struct out_frame **p = &w->out_head, *f;
	bool found = false;
	struct seg s;

	w->out_tail = NULL;
	while ((f = *p)) {
		if (worker_frame_seg(f->data, f->len, false, &s) && flow_key_eq(&s.k, k)) {
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

bool worker_frame_seg(const uint8_t *frame, size_t len, bool from_guest, struct seg *s)
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
		s->ack = frame_get32(l4 + 8);
		s->wnd = frame_get16(l4 + 14);
		s->data_off = (uint32_t)(FRAME_IP + ihl + MIN(doff, tot - ihl));
		s->data_len = (uint32_t)(tot - ihl - MIN(doff, tot - ihl));
		s->seqlen = s->data_len + !!(s->flags & TCP_SYN) + !!(s->flags & TCP_FIN);
	} else if (ip[9] == IPPROTO_NUM_UDP) {
		s->k.proto = NET_PROTO_UDP;
		s->flags = 0;
		s->ack = s->wnd = 0;
	} else {
		return false;
	}
	s->k.remote = frame_get32(ip + (from_guest ? 16 : 12));
	s->k.rport = frame_get16(l4 + (from_guest ? 2 : 0));
	s->k.gport = frame_get16(l4 + (from_guest ? 0 : 2));
	return true;
}

/* Whether guest port gport of proto is published (a forward to it). */
bool worker_published(struct worker *w, enum net_proto proto, uint16_t gport)
{
	for (struct forward *f = w->forwards; f; f = f->next)
		if (f->spec.guest_port == gport && f->spec.udp == (proto == NET_PROTO_UDP))
			return true;
	return false;
}

/* What libslirp's segment s says of its side of flow f. */
static void flow_tcp_remote(struct flow *f, const struct seg *s)
{
	if ((s->flags & TCP_SYN) && !f->remote_syn) {
		f->remote_iss = s->seq;
		f->remote_syn = true;
	}
	if (s->flags & TCP_ACK) {
		f->remote_ack = s->ack;
		f->remote_wnd = s->wnd;
		f->remote_acked = true;
	}
}

/* Whether libslirp takes the guest's RST s as ending flow f's connection:
 * at the guest's next sequence number (where its stack sends one), inside
 * the window libslirp last offered (it never shrinks that window's right
 * edge), or all of the stream taken. A RST it would ignore must not end
 * the flow while libslirp's connection goes on. */
static bool guest_rst_taken(const struct flow *f, const struct seg *s)
{
	uint32_t ahead = f->guest_next - f->remote_ack;

	if (!f->guest_seq || s->seq != f->guest_next)
		return false;
	if (!f->remote_acked)
		return true; /* its SYN only: the sequence number it expects */
	return ahead == 0 || ahead < f->remote_wnd;
}

/* Whether a frame libslirp sends may reach the guest: on a flow, not one
 * the policy cut. What reaches a published port and is no flow's yet (a
 * SYN, a datagram) opens an inbound flow, whose replies the policy does
 * not judge. TCP and UDP of no flow do not pass: libslirp's UDP sockets
 * take datagrams from any sender, and a guest that sent to an allowed
 * address must not hear from a denied one on that port (as a NAT that
 * keeps its mappings to their peers does); nor does what a connection
 * whose flow ended still carries. */
static bool rx_admit(struct worker *w, const uint8_t *frame, size_t len, struct flow **out)
{
	struct flow *f;
	struct seg s;
	bool opens;

	*out = NULL;
	if (!worker_frame_seg(frame, len, false, &s) || s.k.remote == NET_GATEWAY)
		return true;
	f = flow_find(w->flows, &s.k);
	opens = s.k.proto == NET_PROTO_UDP || (s.flags & (TCP_SYN | TCP_ACK)) == TCP_SYN;
	if (f == NULL && opens && worker_published(w, s.k.proto, s.k.gport)) {
		f = flow_add(w->flows, &s.k, now_ms());
		if (f == NULL)
			return false;
		f->inbound = true;
		f->generation = w->generation;
	}
	if (f == NULL)
		return false;
	if (f->cut)
		return false;
	f->rx_bytes += len;
	if (s.k.proto == NET_PROTO_TCP) {
		/* libslirp's answer to a segment it refused, its sequence
		 * number the guest's ACK from outside what libslirp sent (or
		 * 0): its connection goes on, and that number is the guest's. */
		if (!(s.flags & TCP_RST) || !f->remote_syn ||
		    s.seq - f->remote_iss <= f->remote_next - f->remote_iss) {
			flow_tcp_seen(f, false, s.flags, s.seq, s.seqlen, now_ms());
			flow_tcp_remote(f, &s);
		}
		*out = f;
	} else {
		f->last_ms = now_ms();
	}
	return true;
}

void worker_slirp_send(void *opaque, const uint8_t *frame, size_t len)
{
	struct worker *w = opaque;
	struct flow *f;

	if (!rx_admit(w, frame, len, &f)) {
		traffic_drop(w->traffic, NET_DROP_POLICY);
		return;
	}
	if (f && ack_hold_offer(w->acks, &f->key, f->guest_small, frame, len, now_ms()))
		return;
	worker_to_guest(w, NULL, frame, len);
}

static void held_ack_send(void *opaque, const uint8_t *frame, size_t len)
{
	worker_to_guest(opaque, NULL, frame, len);
}

void worker_dns_answer(void *opaque, uint16_t guest_port, const uint8_t *msg, size_t len)
{
	struct out_frame *f = out_new(FRAME_L4 + UDP_HLEN + len);

	f->len = frame_udp_to_guest(f->data, f->len, NET_GATEWAY, 53, guest_port, msg, len);
	if (f->len == 0) {
		free(f);
		return;
	}
	worker_to_guest(opaque, f, NULL, 0);
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
	worker_to_guest(w, f, NULL, 0);
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

/* The TCP flow table full: a connection that ended gives up its entry,
 * else the oldest half-open one ends (reset both ways), so that neither
 * churn (on a published port, say) nor a flood of SYNs never followed up
 * holds the table when real connections come. */
static bool end_half_open(struct worker *w, uint64_t now)
{
	struct flow *f = flow_tcp_victim(w->flows);

	if (f == NULL)
		return false;
	worker_flow_reset(w, f);
	flow_remove(w->flows, f);
	w->half_open_ended++;
	if (now - w->half_open_logged >= DROP_LOG_GAP_MS) {
		log_info("flow table full: %llu ended or half-open connections dropped for new ones",
			 (unsigned long long)w->half_open_ended);
		w->half_open_logged = now;
	}
	return true;
}

/* The egress policy: whether a frame the check passed on to libslirp may
 * leave, NET_DROP_NONE or the reason it may not (NET_DROP_POLICY: a
 * refused TCP segment is answered with a RST and a refused datagram with
 * ICMP "administratively prohibited", so the guest fails at once rather
 * than after its timeouts). A flow is judged at its first frame and then
 * only when the policy changes; why gets the policy's reason. */
static enum net_drop egress_verdict(struct worker *w, uint8_t *frame, size_t len,
				    struct filter_verdict *v, char *why, size_t why_len)
{
	uint64_t now = now_ms();
	struct policy_verdict pv;
	enum net_drop r;
	struct flow *f;
	struct seg s;

	why[0] = '\0';
	/* The gateway's own services (DNS over TCP) are not the world. */
	if (v->dst == NET_GATEWAY || !worker_frame_seg(frame, len, true, &s))
		return NET_DROP_NONE;
	f = flow_find(w->flows, &s.k);
	if (f && f->cut) {
		snprintf(why, why_len, "cut by the policy");
		return NET_DROP_POLICY;
	}
	if (f && f->inbound)
		v->inbound = true;
	if (f == NULL) {
		pv = policy_judge(w->policy, &w->wall, w->learned, s.k.remote, s.k.proto, s.k.rport,
				  now);
		policy_verdict_str(&pv, w->learned, s.k.remote, now, why, why_len);
		if (!pv.allow)
			return NET_DROP_POLICY;
		/* Only a SYN opens a TCP flow. Any other segment is of no
		 * connection the worker knows (its flow ended, or never was):
		 * answered with a RST, never passed on, so that a connection
		 * libslirp still holds after its flow is gone carries nothing
		 * the flow's checks would not see. */
		if (s.k.proto == NET_PROTO_TCP && (s.flags & (TCP_SYN | TCP_ACK)) != TCP_SYN)
			return NET_DROP_NO_FLOW;
		if (s.k.proto == NET_PROTO_TCP && !flows_syn_take(w->flows, now))
			return NET_DROP_SYN_RATE;
		f = flow_add(w->flows, &s.k, now);
		if (f == NULL && s.k.proto == NET_PROTO_TCP && end_half_open(w, now))
			f = flow_add(w->flows, &s.k, now);
		if (f == NULL)
			return NET_DROP_FLOW_TABLE;
		f->verdict = pv;
		f->generation = w->generation;
	}
	if (s.k.proto != NET_PROTO_TCP) {
		f->tx_bytes += len;
		f->last_ms = now;
		return NET_DROP_NONE;
	}
	r = worker_tls_check(w, f, frame, &s, why, why_len);
	if (r != NET_DROP_NONE)
		return r;
	f->tx_bytes += len;
	/* Its MSS, read before a repeat of the SYN loses it (a repeat's is
	 * the first's; a header with IP options has none read). */
	if ((s.flags & TCP_SYN) && frame[FRAME_IP] == 0x45)
		f->guest_mss = frame_tcp_mss(frame + FRAME_L4, s.data_off - FRAME_L4);
	/* A RST libslirp would not take ends nothing here either, nor
	 * moves where the guest's stream is. */
	if ((s.flags & TCP_RST) && !guest_rst_taken(f, &s))
		return NET_DROP_NONE;
	if (flow_tcp_seen(f, true, s.flags, s.seq, s.seqlen, now))
		repeated_syn(w, frame, len);
	s.seqlen -= !!(s.flags & TCP_SYN) + !!(s.flags & TCP_FIN);
	if (s.seqlen)
		f->guest_small = ack_hold_small(s.seqlen, f->guest_mss);
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
		refused = v.reason == NET_DROP_POLICY || v.reason == NET_DROP_FLOW_TABLE ||
			  v.reason == NET_DROP_NO_FLOW;
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

/* --- the loop ------------------------------------------------------- */

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
enum { FD_FRAME, FD_SIGNAL, FD_CTL, FD_HTTPS };

bool worker_dns_intercept(void *opaque, const struct dns_question *q)
{
	struct worker *w = opaque;

	for (size_t i = 0; i < w->nr_inject; i++)
		if (strcmp(w->inject_hosts[i], q->name) == 0)
			return true;
	return false;
}

/* Each connection waiting goes to the egress worker, one descriptor a
 * message; one it cannot take now (its socket full: it is that busy) is
 * closed, and counted. */
void worker_https_accept(struct worker *w)
{
	int fd;

	while ((fd = accept4(w->https_listen, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		static const char one = 'c';
		struct iovec iov = { .iov_base = (void *)&one, .iov_len = 1 };
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} u;
		struct msghdr msg = { .msg_iov = &iov,
				      .msg_iovlen = 1,
				      .msg_control = u.buf,
				      .msg_controllen = sizeof(u.buf) };
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

		memset(&u, 0, sizeof(u));
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
		if (sendmsg(w->inject_fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 &&
		    w->https_lost++ % 100 == 0)
			log_warn("egress worker: a connection not handed over: %s",
				 strerror(errno));
		close(fd);
	}
}

void worker_loop(struct worker *w)
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
		push_fd(w, w->https_listen, POLLIN);
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
		/* Each guest frame may make libslirp connect() to one of our
		 * listeners, blocking while its backlog is full: empty them. */
		if (re & POLLIN) {
			dns_proxy_accept(w->dns);
			if (w->https_listen >= 0)
				worker_https_accept(w);
			read_guest(w);
		} else if (re & (POLLHUP | POLLERR | POLLNVAL)) {
			log_info("frame fd closed: stopping");
			w->done = true;
		}
		worker_backpressure(w);
		if (w->fds[FD_HTTPS].revents & POLLIN)
			worker_https_accept(w);
		re = w->fds[FD_CTL].revents;
		if (re & POLLIN)
			worker_read_ctl(w);
		else if (re & (POLLHUP | POLLERR | POLLNVAL)) {
			log_info("control socket closed: stopping");
			w->done = true;
		}
	}
}
