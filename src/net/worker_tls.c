/* The TLS name check (docs/network.md, "TLS names"). A TCP connection
 * the egress policy admits only because DNS learned its address for an
 * allowed name could reach any site that shares the address (a CDN's):
 * so its first bytes are read, and when they are a TLS ClientHello its
 * server name must be one of the names learned for the address, or the
 * connection is cut before the hello's end reaches the server.
 *
 * The bytes are read in stream order as the guest sends them: a segment
 * ahead of what was read is dropped (TCP sends it again), and so is one
 * libslirp would not take as sent (a bad checksum, an ACK of more than it
 * sent, data on a SYN): no byte of the hello reaches libslirp unread, and
 * none is read that libslirp drops. Each flow holds at most
 * FLOW_HELLO_MAX bytes while it waits, all flows FLOW_HELLO_BYTES; a
 * hello larger than that, without a name, or malformed is refused too.
 * A stream that is not TLS passes: the check is for TLS names. */
#include <arpa/inet.h>
#include <stdio.h>

#include "net/frame.h"
#include "net/tls_hello.h"
#include "net/worker_priv.h"

static enum net_drop refuse(struct worker *w, struct flow *f, const char *name, char *why,
			    size_t why_len, const char *fmt)
{
	char ip[INET_ADDRSTRLEN];
	struct in_addr a = { .s_addr = htonl(f->key.remote) };

	inet_ntop(AF_INET, &a, ip, sizeof(ip));
	snprintf(why, why_len, fmt, name);
	worker_event(w, "tls", "refused", ip, why);
	worker_flow_cut(w, f, why);
	return NET_DROP_TLS_NAME;
}

/* Whether libslirp takes s's data as the guest sent it: a valid TCP
 * checksum, ACK set and no more than it sent, no RST. What it would drop
 * must not be read as the stream's bytes (the guest could show the check
 * one hello and the server another). */
static bool slirp_takes(const struct flow *f, const uint8_t *frame, const struct seg *s)
{
	const uint8_t *ip = frame + FRAME_IP, *l4 = frame + FRAME_L4;
	size_t ihl = (size_t)(ip[0] & 0xf) * 4, tot = frame_get16(ip + 2);
	uint32_t ack = frame_get32(l4 + 8);

	if (ihl != IPV4_HLEN || !frame_l4_csum_ok(ip, l4, tot - ihl, IPPROTO_NUM_TCP))
		return false;
	if ((s->flags & (TCP_ACK | TCP_RST | TCP_SYN)) != TCP_ACK)
		return false;
	/* Between its SYN's end and what it sent: below, libslirp still
	 * waiting for the handshake's ACK drops the segment (and resets). */
	return f->remote_seq && f->remote_syn && (int32_t)(ack - (f->remote_iss + 1)) >= 0 &&
	       (int32_t)(ack - f->remote_next) <= 0;
}

enum net_drop worker_tls_check(struct worker *w, struct flow *f, const uint8_t *frame,
			       const struct seg *s, char *why, size_t why_len)
{
	char name[TLS_NAME_MAX + 1];
	int64_t at, skip;

	if (s->flags & TCP_SYN) {
		if (f->tls == FLOW_TLS_WAIT && s->data_len)
			return NET_DROP_TLS_ORDER; /* data on a SYN: not read, so not taken */
		/* Another SYN on the connection being read would move where
		 * the check reads from, and not where libslirp does. */
		if (f->tls == FLOW_TLS_WAIT && !f->closed && s->seq + 1 != f->hello_seq)
			return NET_DROP_TLS_ORDER;
		/* A connection: read from its start. A SYN again on one being
		 * read (a retransmission, or a forgery) changes nothing. */
		if (f->tls == FLOW_TLS_NONE || f->hello_len == 0 || f->closed) {
			flow_hello_drop(w->flows, f);
			f->tls = f->verdict.why == POLICY_WHY_LEARNED && !f->inbound
					 ? FLOW_TLS_WAIT
					 : FLOW_TLS_NONE;
			f->hello_seq = s->seq + 1;
		}
		return NET_DROP_NONE;
	}
	if (f->tls != FLOW_TLS_WAIT || s->data_len == 0)
		return NET_DROP_NONE;
	if (!slirp_takes(f, frame, s))
		return NET_DROP_TLS_ORDER;
	/* Where the segment starts in the stream, from the SYN on: bytes
	 * before the first or already read are libslirp's to trim; what is
	 * past them is read before it goes on. */
	at = (int32_t)(s->seq - f->hello_seq);
	if (at > (int64_t)f->hello_len)
		return NET_DROP_TLS_ORDER;
	skip = (int64_t)f->hello_len - at;
	if (skip >= (int64_t)s->data_len)
		return NET_DROP_NONE;
	if (!flow_hello_append(w->flows, f, frame + s->data_off + skip, s->data_len - (size_t)skip))
		return refuse(w, f, "", why, why_len,
			      "a TLS hello larger than the network can hold to read its name%s");
	switch (tls_hello_name(f->hello, f->hello_len, name)) {
	case TLS_HELLO_MORE:
		if (f->hello_len < FLOW_HELLO_MAX)
			return NET_DROP_NONE;
		return refuse(w, f, "", why, why_len, "a TLS hello larger than 16 KiB%s");
	case TLS_HELLO_NOT_TLS:
		break;
	case TLS_HELLO_NAME:
		if (learned_has_name(w->learned, f->key.remote, name, now_ms()))
			break;
		return refuse(w, f, name, why, why_len,
			      "TLS name %s is not a name DNS gave this address for");
	case TLS_HELLO_NO_NAME:
		return refuse(w, f, "", why, why_len,
			      "a TLS hello without a server name to an address learned by name%s");
	case TLS_HELLO_BAD:
		return refuse(w, f, "", why, why_len, "a malformed TLS hello%s");
	}
	f->tls = FLOW_TLS_DONE;
	flow_hello_drop(w->flows, f);
	return NET_DROP_NONE;
}
