/* The DNS proxy at the gateway (see dns.h): guest queries judged, local
 * names answered here, the rest sent upstream from a fresh socket each and
 * the answers relayed under the guest's ID. Message checks: dns_wire.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/outq.h"
#include "common/settings.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "net/dns.h"
#include "net/dns_wire.h"
#include "net/net.h"

#define TIMEOUT_MS	  5000	       /* a query unanswered this long: SERVFAIL */
#define RATE_PER_S	  50	       /* queries sent upstream, per second ... */
#define RATE_BURST	  200	       /* ... after a burst of this many */
#define LOCAL_TTL	  60	       /* seconds, for the local zone's answers */
#define TCP_IDLE_MS	  30000	       /* a TCP connection quiet this long is closed */
#define TCP_CONN_INFLIGHT 16	       /* queries one connection may have upstream */
#define TCP_OUT_CAP	  (256 * 1024) /* answers waiting for a slow reader */
#define TCP_OUT_PAUSE	  (64 * 1024)  /* read no more queries past this */
#define UPSTREAM_READS	  8	       /* datagrams read from one socket per wakeup */
/* Header, the longest question (a 253-byte name is 255 on the wire) and one A record. */
#define LOCAL_ANSWER_MAX (DNS_HDR_LEN + 255 + 4 + 16)

enum slot_kind { SLOT_LISTEN, SLOT_CONN, SLOT_QUERY };

struct dns_client {
	int conn; /* -1: UDP, to port; else the TCP connection with this serial */
	uint64_t serial;
	uint16_t port;
};

struct dns_pending {
	int fd; /* -1: slot free */
	uint16_t upstream_id;
	size_t upstream;
	struct dns_question q; /* q.id: the guest's ID */
	struct dns_client from;
	bool learn;   /* the answer's addresses go to hooks.learned */
	uint8_t *msg; /* the query as sent, for the next upstream */
	size_t len;
	uint64_t deadline, give_up;
};

struct dns_conn {
	int fd; /* -1: slot free */
	uint64_t serial;
	uint8_t *in; /* 2 + DNS_MSG_MAX bytes */
	size_t in_len;
	struct outq out;
	uint64_t active_at;
	unsigned inflight;
	bool eof;
};

struct dns_proxy {
	struct dns_hooks hooks;
	struct sockaddr_in up[DNS_MAX_UPSTREAM];
	size_t nr_up;
	bool warned;
	int listen_fd;
	char *tcp_path;
	struct dns_conn conns[DNS_TCP_CONNS];
	uint64_t serial;
	struct dns_pending pending[DNS_INFLIGHT_MAX];
	size_t nr_pending;
	uint64_t tokens, tokens_at; /* thousandths of a query */
	uint64_t skew;
	struct dns_stats stats;
	struct {
		uint8_t kind;
		uint16_t idx;
	} slots[DNS_POLLFDS_MAX];
	size_t nr_slots;
	uint8_t rnd[64];
	size_t rnd_left;
	uint8_t buf[DNS_MSG_MAX];
	uint8_t frame[2 + DNS_MSG_MAX];
};

static uint64_t clock_ms(const struct dns_proxy *p)
{
	return now_ms() + p->skew;
}

void dns_proxy_clock_skew(struct dns_proxy *p, uint64_t ms)
{
	p->skew += ms;
}

/* ---- answers built here ---------------------------------------------- */

/* An answer to query msg (its question echoed when qend > 0) with rcode
 * and, when a is set, one A record for the question's name. */
static size_t build_answer(uint8_t *out, const uint8_t *msg, size_t qend, int rcode,
			   const struct in_addr *a)
{
	uint16_t flags = DNS_FLAG_QR | DNS_FLAG_RA | (uint16_t)rcode;
	size_t n = DNS_HDR_LEN;

	memset(out, 0, DNS_HDR_LEN);
	memcpy(out, msg, 2);
	flags |= dns_get16(msg + 2) & DNS_FLAG_RD;
	dns_put16(out + 2, flags);
	if (qend) {
		dns_put16(out + 4, 1);
		memcpy(out + n, msg + DNS_HDR_LEN, qend - DNS_HDR_LEN);
		n = qend;
	}
	if (a) {
		static const uint8_t rr[] = { 0xc0, DNS_HDR_LEN, 0, DNS_TYPE_A, 0, DNS_CLASS_IN,
					      0,    0,		 0, LOCAL_TTL,	0, 4 };

		dns_put16(out + 6, 1);
		memcpy(out + n, rr, sizeof(rr));
		memcpy(out + n + sizeof(rr), a, 4);
		n += sizeof(rr) + 4;
	}
	return n;
}

/* The local zones: the gateway and the host under each, nothing else. */
static const char *const local_zones[] = { "gantry.internal", "docker.internal",
					   "containers.internal" };

/* -1: not a local name; else the RCODE, with *a set for a name that has
 * an address (zero when it has none). */
static int local_lookup(const char *name, struct in_addr *a)
{
	a->s_addr = 0;
	for (size_t i = 0; i < ARRAY_SIZE(local_zones); i++) {
		const char *z = local_zones[i];
		size_t nl = strlen(name), zl = strlen(z);

		if (strcmp(name, z) == 0)
			return DNS_RCODE_NOERROR;
		if (nl <= zl || name[nl - zl - 1] != '.' || strcmp(name + nl - zl, z) != 0)
			continue;
		if (nl - zl - 1 == 7 && strncmp(name, "gateway", 7) == 0)
			a->s_addr = htonl(NET_GATEWAY);
		else if (nl - zl - 1 == 4 && strncmp(name, "host", 4) == 0)
			a->s_addr = htonl(NET_HOST);
		else
			return DNS_RCODE_NXDOMAIN;
		return DNS_RCODE_NOERROR;
	}
	return -1;
}

/* ---- sending to the guest --------------------------------------------- */

static struct dns_conn *client_conn(struct dns_proxy *p, const struct dns_client *c)
{
	struct dns_conn *conn;

	if (c->conn < 0)
		return NULL;
	conn = &p->conns[c->conn];
	return conn->fd >= 0 && conn->serial == c->serial ? conn : NULL;
}

static void conn_close(struct dns_proxy *p, struct dns_conn *c)
{
	(void)p;
	close(c->fd);
	c->fd = -1;
	outq_free(&c->out);
	free(c->in);
	c->in = NULL;
	c->in_len = 0;
}

/* An answer to a guest: msg may be cut (to its question, TC set) for UDP. */
static void reply(struct dns_proxy *p, const struct dns_client *to, uint8_t *msg, size_t len,
		  size_t qend)
{
	struct dns_conn *c;

	if (to->conn < 0) {
		if (len > DNS_UDP_MAX) {
			dns_put16(msg + 2, dns_get16(msg + 2) | DNS_FLAG_TC);
			memset(msg + 6, 0, 6);
			len = qend;
		}
		if (p->hooks.udp_answer)
			p->hooks.udp_answer(p->hooks.opaque, to->port, msg, len);
		return;
	}
	c = client_conn(p, to);
	if (!c)
		return;
	dns_put16(p->frame, (uint16_t)len);
	memcpy(p->frame + 2, msg, len);
	/* A reader that lets answers pile up past the cap is cut off. */
	if (outq_send(&c->out, c->fd, p->frame, 2 + len, -1) < 0)
		conn_close(p, c);
}

static void reply_rcode(struct dns_proxy *p, const struct dns_client *to, const uint8_t *msg,
			size_t qend, int rcode)
{
	uint8_t out[LOCAL_ANSWER_MAX];

	reply(p, to, out, build_answer(out, msg, qend, rcode, NULL), qend);
}

/* ---- upstream ---------------------------------------------------------- */

static void conn_process(struct dns_proxy *p, struct dns_conn *c);

static int random_id(struct dns_proxy *p, uint16_t *id)
{
	if (p->rnd_left < 2) {
		ssize_t n = getrandom(p->rnd, sizeof(p->rnd), GRND_NONBLOCK);

		if (n < 2)
			return -1;
		p->rnd_left = (size_t)n;
	}
	p->rnd_left -= 2;
	*id = dns_get16(p->rnd + p->rnd_left);
	return 0;
}

/* Send q's query to upstream i from a fresh socket connected to it. */
static int send_upstream(struct dns_proxy *p, struct dns_pending *q, size_t i)
{
	int fd;

	if (random_id(p, &q->upstream_id) < 0)
		return -1;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	dns_put16(q->msg, q->upstream_id);
	if (connect(fd, (struct sockaddr *)&p->up[i], sizeof(p->up[i])) < 0 ||
	    send(fd, q->msg, q->len, MSG_DONTWAIT) != (ssize_t)q->len) {
		close(fd);
		return -1;
	}
	q->fd = fd;
	q->upstream = i;
	return 0;
}

static void pending_free(struct dns_proxy *p, struct dns_pending *q)
{
	struct dns_conn *c = client_conn(p, &q->from);

	if (c)
		c->inflight--;
	if (q->fd >= 0)
		close(q->fd);
	q->fd = -1;
	free(q->msg);
	q->msg = NULL;
	p->nr_pending--;
}

/* The upstreams after q's current one, each given an equal share of what
 * is left of the time; none left: SERVFAIL. */
static void try_next(struct dns_proxy *p, struct dns_pending *q, uint64_t now)
{
	close(q->fd);
	q->fd = -1;
	for (size_t i = q->upstream + 1; i < p->nr_up && now < q->give_up; i++) {
		if (send_upstream(p, q, i) == 0) {
			q->deadline = now + (q->give_up - now) / (p->nr_up - i);
			return;
		}
	}
	dns_put16(q->msg, q->q.id); /* the guest's query again */
	p->stats.servfail++;
	reply_rcode(p, &q->from, q->msg, q->q.end, DNS_RCODE_SERVFAIL);
	pending_free(p, q);
}

static void forward(struct dns_proxy *p, const struct dns_client *from, const uint8_t *msg,
		    size_t len, const struct dns_question *dq, bool learn)
{
	uint64_t now = clock_ms(p);
	struct dns_pending *q = NULL;
	struct dns_conn *c;

	if (p->nr_up == 0) {
		if (!p->warned)
			log_warn("dns: no upstream nameserver: queries are answered SERVFAIL");
		p->warned = true;
		goto servfail;
	}
	for (size_t i = 0; i < DNS_INFLIGHT_MAX && !q; i++)
		if (p->pending[i].fd < 0 && !p->pending[i].msg)
			q = &p->pending[i];
	if (!q)
		goto servfail;
	q->q = *dq;
	q->from = *from;
	q->learn = learn;
	q->msg = xmalloc(len);
	memcpy(q->msg, msg, len);
	q->len = len;
	q->give_up = now + TIMEOUT_MS;
	q->upstream = 0;
	p->nr_pending++;
	c = client_conn(p, from);
	if (c)
		c->inflight++;
	p->stats.forwarded++;
	for (size_t i = 0; i < p->nr_up; i++) {
		if (send_upstream(p, q, i) == 0) {
			q->deadline = now + TIMEOUT_MS / (p->nr_up - i);
			return;
		}
	}
	p->stats.servfail++;
	reply_rcode(p, from, msg, dq->end, DNS_RCODE_SERVFAIL);
	pending_free(p, q);
	return;
servfail:
	p->stats.servfail++;
	reply_rcode(p, from, msg, dq->end, DNS_RCODE_SERVFAIL);
}

/* Whether one more query may go upstream now. */
static bool rate_take(struct dns_proxy *p)
{
	uint64_t now = clock_ms(p);

	p->tokens = MIN(p->tokens + (now - p->tokens_at) * RATE_PER_S, RATE_BURST * 1000ull);
	p->tokens_at = now;
	if (p->tokens < 1000)
		return false;
	p->tokens -= 1000;
	return true;
}

/* Datagrams on q's socket: only an answer to what was sent is taken. */
static void upstream_readable(struct dns_proxy *p, struct dns_pending *q)
{
	for (int i = 0; i < UPSTREAM_READS; i++) {
		ssize_t n = recv(q->fd, p->buf, DNS_MSG_MAX, MSG_DONTWAIT);
		struct dns_client from;
		struct dns_conn *c;
		int qend;

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n < 0) { /* ECONNREFUSED and the like: the next one */
			try_next(p, q, clock_ms(p));
			return;
		}
		if ((size_t)n < DNS_HDR_LEN || dns_get16(p->buf) != q->upstream_id)
			continue;
		qend = dns_answer_learn(p->buf, (size_t)n, &q->q, q->learn ? &p->hooks : NULL);
		if (qend < 0)
			continue;
		if (q->learn && p->hooks.ttl_cap)
			dns_answer_cap_ttl(p->buf, (size_t)n, (size_t)qend, p->hooks.ttl_cap);
		dns_put16(p->buf, q->q.id);
		from = q->from;
		pending_free(p, q);
		reply(p, &from, p->buf, (size_t)n, (size_t)qend);
		/* Room for the connection's next queries, read or not yet. */
		c = client_conn(p, &from);
		if (c)
			conn_process(p, c);
		return;
	}
}

/* ---- judging a guest query ---------------------------------------------- */

static void judge(struct dns_proxy *p, const struct dns_client *from, const uint8_t *msg,
		  size_t len)
{
	uint8_t out[LOCAL_ANSWER_MAX];
	struct dns_question q;
	struct in_addr a;
	int rc;

	p->stats.queries++;
	rc = dns_query_parse(msg, len, &q);
	if (len < DNS_HDR_LEN) { /* no ID to answer to */
		p->stats.formerr++;
		return;
	}
	if (rc != 0 || len > DNS_UDP_MAX) {
		p->stats.formerr++;
		reply_rcode(p, from, msg, q.end, DNS_RCODE_FORMERR);
		return;
	}
	rc = local_lookup(q.name, &a);
	if (rc >= 0) {
		bool has = a.s_addr && (q.qtype == DNS_TYPE_A || q.qtype == DNS_TYPE_ANY);

		p->stats.answered_local++;
		reply(p, from, out, build_answer(out, msg, q.end, rc, has ? &a : NULL), q.end);
		return;
	}
	if (p->hooks.allow && !p->hooks.allow(p->hooks.opaque, &q)) {
		p->stats.refused++;
		reply_rcode(p, from, msg, q.end, DNS_RCODE_REFUSED);
		return;
	}
	if (p->hooks.intercept && p->hooks.intercept(p->hooks.opaque, &q)) {
		bool has = q.qtype == DNS_TYPE_A || q.qtype == DNS_TYPE_ANY;

		a.s_addr = htonl(NET_GATEWAY);
		p->stats.answered_local++;
		reply(p, from, out,
		      build_answer(out, msg, q.end, DNS_RCODE_NOERROR, has ? &a : NULL), q.end);
		return;
	}
	if (!rate_take(p)) {
		p->stats.rate_limited++;
		reply_rcode(p, from, msg, q.end, DNS_RCODE_REFUSED);
		return;
	}
	forward(p, from, msg, len, &q,
		p->hooks.learned && (!p->hooks.learn || p->hooks.learn(p->hooks.opaque, &q)));
}

void dns_proxy_udp_query(struct dns_proxy *p, uint16_t guest_port, const uint8_t *msg, size_t len)
{
	struct dns_client from = { .conn = -1, .port = guest_port };

	judge(p, &from, msg, len);
}

/* ---- TCP ----------------------------------------------------------------- */

static bool conn_paused(const struct dns_conn *c)
{
	return c->inflight >= TCP_CONN_INFLIGHT || c->out.bytes > TCP_OUT_PAUSE;
}

/* Judge the whole messages read so far, while the connection may have
 * more in flight. */
static void conn_process(struct dns_proxy *p, struct dns_conn *c)
{
	size_t off = 0;

	while (c->fd >= 0 && !conn_paused(c) && c->in_len - off >= 2) {
		size_t mlen = dns_get16(c->in + off);
		struct dns_client from = { .conn = (int)(c - p->conns), .serial = c->serial };

		if (mlen < DNS_HDR_LEN) { /* not a DNS message: the stream is garbage */
			p->stats.formerr++;
			conn_close(p, c);
			return;
		}
		if (c->in_len - off - 2 < mlen)
			break;
		judge(p, &from, c->in + off + 2, mlen);
		off += 2 + mlen;
	}
	if (c->fd < 0)
		return;
	memmove(c->in, c->in + off, c->in_len - off);
	c->in_len -= off;
	if (c->eof && c->in_len < 2 && !c->inflight && !outq_pending(&c->out))
		conn_close(p, c);
}

/* hup: the peer closed both ways, so no answer can reach it any more. */
static void conn_readable(struct dns_proxy *p, struct dns_conn *c, bool hup)
{
	ssize_t n;

	if (!c->in)
		c->in = xmalloc(2 + DNS_MSG_MAX);
	if (c->in_len == 2 + DNS_MSG_MAX) { /* a whole message waits its turn */
		conn_process(p, c);
		return;
	}
	n = read(c->fd, c->in + c->in_len, 2 + DNS_MSG_MAX - c->in_len);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0 || (n == 0 && hup)) {
		conn_close(p, c);
		return;
	}
	if (n == 0)
		c->eof = true;
	c->in_len += (size_t)n;
	c->active_at = clock_ms(p);
	conn_process(p, c);
}

static void conn_writable(struct dns_proxy *p, struct dns_conn *c)
{
	if (outq_flush(&c->out, c->fd) < 0) {
		conn_close(p, c);
		return;
	}
	conn_process(p, c);
}

static void accept_conns(struct dns_proxy *p)
{
	for (;;) {
		int fd = accept4(p->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct dns_conn *c = NULL;

		if (fd < 0)
			return;
		for (size_t i = 0; i < DNS_TCP_CONNS && !c; i++)
			if (p->conns[i].fd < 0)
				c = &p->conns[i];
		if (!c) { /* full: closed at once, so the backlog never fills */
			close(fd);
			continue;
		}
		memset(c, 0, sizeof(*c));
		c->fd = fd;
		c->serial = ++p->serial;
		c->active_at = clock_ms(p);
		outq_init(&c->out, TCP_OUT_CAP);
	}
}

void dns_proxy_accept(struct dns_proxy *p)
{
	if (p->listen_fd >= 0)
		accept_conns(p);
}

/* ---- setup and the poll loop ------------------------------------------- */

size_t dns_resolv_conf(const char *path, struct sockaddr_in *out, size_t max)
{
	cleanup_fclose FILE *f = fopen(path, "re");
	char line[512], addr[64];
	size_t n = 0;

	if (!f)
		return 0;
	while (n < max && fgets(line, sizeof(line), f)) {
		struct in_addr a;

		if (sscanf(line, " nameserver %63s", addr) != 1 ||
		    inet_pton(AF_INET, addr, &a) != 1)
			continue;
		out[n] = (struct sockaddr_in){ .sin_family = AF_INET,
					       .sin_port = htons(53),
					       .sin_addr = a };
		n++;
	}
	return n;
}

/* IP:PORT, as NET_DNS_ENV and the worker's --dns carry it. */
static int parse_ip_port(const char *s, struct sockaddr_in *out)
{
	char ip[INET_ADDRSTRLEN];
	const char *colon = strrchr(s, ':');
	uint64_t port;

	if (!colon || (size_t)(colon - s) >= sizeof(ip))
		return -1;
	memcpy(ip, s, (size_t)(colon - s));
	ip[colon - s] = '\0';
	*out = (struct sockaddr_in){ .sin_family = AF_INET };
	if (inet_pton(AF_INET, ip, &out->sin_addr) != 1 || parse_u64(colon + 1, 65535, &port) < 0 ||
	    port == 0)
		return -1;
	out->sin_port = htons((uint16_t)port);
	return 0;
}

int dns_upstreams(struct sockaddr_in *out, size_t *n, gantry_error_t *err)
{
	const char *env = gantry_setting(NET_DNS_ENV);

	if (env && *env) {
		if (parse_ip_port(env, &out[0]) < 0)
			return gantry_error(err, EINVAL, "%s=`%s`: not IP:PORT", NET_DNS_ENV, env);
		*n = 1;
		return 0;
	}
	*n = dns_resolv_conf("/etc/resolv.conf", out, DNS_MAX_UPSTREAM);
	return 0;
}

int dns_proxy_new(struct dns_proxy **out, const struct dns_hooks *hooks,
		  const struct sockaddr_in *upstreams, size_t nr_upstreams, const char *tcp_path,
		  gantry_error_t *err)
{
	struct dns_proxy *p = xzalloc(sizeof(*p));

	p->hooks = *hooks;
	p->listen_fd = -1;
	for (size_t i = 0; i < DNS_TCP_CONNS; i++)
		p->conns[i].fd = -1;
	for (size_t i = 0; i < DNS_INFLIGHT_MAX; i++)
		p->pending[i].fd = -1;
	p->tokens = RATE_BURST * 1000ull;
	p->tokens_at = clock_ms(p);
	if (upstreams) {
		p->nr_up = MIN(nr_upstreams, (size_t)DNS_MAX_UPSTREAM);
		memcpy(p->up, upstreams, p->nr_up * sizeof(*upstreams));
	} else if (dns_upstreams(p->up, &p->nr_up, err) < 0) {
		free(p);
		return -1;
	}
	if (tcp_path) {
		p->listen_fd = unix_listen(tcp_path, DNS_TCP_BACKLOG, err);
		if (p->listen_fd < 0) {
			free(p);
			return gantry_error_prefix(err, "DNS over TCP");
		}
		p->tcp_path = xstrdup(tcp_path);
	}
	*out = p;
	return 0;
}

void dns_proxy_free(struct dns_proxy *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < DNS_INFLIGHT_MAX; i++)
		if (p->pending[i].msg)
			pending_free(p, &p->pending[i]);
	for (size_t i = 0; i < DNS_TCP_CONNS; i++)
		if (p->conns[i].fd >= 0)
			conn_close(p, &p->conns[i]);
	if (p->listen_fd >= 0) {
		close(p->listen_fd);
		if (p->tcp_path)
			unlink(p->tcp_path);
	}
	free(p->tcp_path);
	free(p);
}

void dns_proxy_keep_path(struct dns_proxy *p)
{
	free(p->tcp_path);
	p->tcp_path = NULL;
}

static void add_slot(struct dns_proxy *p, struct pollfd *fds, size_t max, int fd, short events,
		     enum slot_kind kind, size_t idx)
{
	if (p->nr_slots >= max)
		return;
	fds[p->nr_slots] = (struct pollfd){ .fd = fd, .events = events };
	p->slots[p->nr_slots].kind = (uint8_t)kind;
	p->slots[p->nr_slots].idx = (uint16_t)idx;
	p->nr_slots++;
}

size_t dns_proxy_pollfds(struct dns_proxy *p, struct pollfd *fds, size_t max)
{
	max = MIN(max, (size_t)DNS_POLLFDS_MAX);
	p->nr_slots = 0;
	if (p->listen_fd >= 0)
		add_slot(p, fds, max, p->listen_fd, POLLIN, SLOT_LISTEN, 0);
	for (size_t i = 0; i < DNS_TCP_CONNS; i++) {
		struct dns_conn *c = &p->conns[i];
		short ev = 0;

		if (c->fd < 0)
			continue;
		if (!c->eof && !conn_paused(c) && c->in_len < 2 + DNS_MSG_MAX)
			ev |= POLLIN;
		if (outq_pending(&c->out))
			ev |= POLLOUT;
		add_slot(p, fds, max, c->fd, ev, SLOT_CONN, i);
	}
	for (size_t i = 0; i < DNS_INFLIGHT_MAX; i++)
		if (p->pending[i].fd >= 0)
			add_slot(p, fds, max, p->pending[i].fd, POLLIN, SLOT_QUERY, i);
	return p->nr_slots;
}

void dns_proxy_dispatch(struct dns_proxy *p, const struct pollfd *fds, size_t n)
{
	n = MIN(n, p->nr_slots);
	for (size_t i = 0; i < n; i++) {
		size_t idx = p->slots[i].idx;

		/* What closed since pollfds() (a reused fd number included)
		 * costs at most one read that finds nothing. */
		if (!fds[i].revents)
			continue;
		switch (p->slots[i].kind) {
		case SLOT_LISTEN:
			if (p->listen_fd == fds[i].fd)
				accept_conns(p);
			break;
		case SLOT_CONN:
			if (p->conns[idx].fd != fds[i].fd)
				break;
			if (fds[i].revents & POLLOUT)
				conn_writable(p, &p->conns[idx]);
			if (p->conns[idx].fd == fds[i].fd && (fds[i].revents & ~POLLOUT))
				conn_readable(p, &p->conns[idx], fds[i].revents & POLLHUP);
			break;
		case SLOT_QUERY:
			if (p->pending[idx].fd == fds[i].fd)
				upstream_readable(p, &p->pending[idx]);
			break;
		}
	}
}

int dns_proxy_timeout_ms(const struct dns_proxy *p)
{
	uint64_t now = clock_ms(p), next = UINT64_MAX;

	for (size_t i = 0; i < DNS_INFLIGHT_MAX; i++)
		if (p->pending[i].fd >= 0)
			next = MIN(next, p->pending[i].deadline);
	for (size_t i = 0; i < DNS_TCP_CONNS; i++) {
		const struct dns_conn *c = &p->conns[i];

		if (c->fd < 0)
			continue;
		if (!c->inflight) /* else its queries' deadlines come first */
			next = MIN(next, c->active_at + TCP_IDLE_MS);
		if (outq_pending(&c->out)) /* outq keeps the unskewed clock */
			next = MIN(next, c->out.progress_at + OUTQ_STALL_MS + p->skew);
	}
	if (next == UINT64_MAX)
		return -1;
	return next <= now ? 0 : (int)MIN(next - now, (uint64_t)TCP_IDLE_MS);
}

void dns_proxy_tick(struct dns_proxy *p)
{
	uint64_t now = clock_ms(p);

	for (size_t i = 0; i < DNS_INFLIGHT_MAX; i++)
		if (p->pending[i].fd >= 0 && now >= p->pending[i].deadline)
			try_next(p, &p->pending[i], now);
	for (size_t i = 0; i < DNS_TCP_CONNS; i++) {
		struct dns_conn *c = &p->conns[i];

		if (c->fd < 0)
			continue;
		/* Quiet past the idle time, or not reading what it is sent. */
		if ((now >= c->active_at + TCP_IDLE_MS && !c->inflight) ||
		    outq_stalled(&c->out, now_ms(), OUTQ_STALL_MS))
			conn_close(p, c);
	}
}

void dns_proxy_stats(const struct dns_proxy *p, struct dns_stats *out)
{
	*out = p->stats;
}
