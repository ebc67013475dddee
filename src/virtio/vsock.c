/* virtio-vsock (virtio 1.x, section 5.10), stream sockets only, in the
 * "hybrid" model: the guest's streams end in Unix sockets on the host.
 *
 *  - A guest connect to host port P connects to <dir>/P.sock; success is
 *    answered OP_RESPONSE, failure OP_RST.
 *  - A host client connects to <dir>/vsock.sock and writes "CONNECT <port>\n";
 *    the guest gets OP_REQUEST from an ephemeral host port, and its
 *    OP_RESPONSE makes us write "OK <hostport>\n" before relaying bytes.
 *
 * Flow control is the spec's credit scheme in both directions. Guest to host:
 * we advertise VSOCK_BUF_ALLOC and fwd_cnt (bytes written onward to the Unix
 * socket), so what the guest may have in flight, and so what we may have to
 * hold when the socket is full, is at most VSOCK_BUF_ALLOC per connection; a
 * guest that sends more is reset. Host to guest: we read from the socket only
 * into an RX buffer the guest gave us and only as much as its credit allows,
 * so nothing is buffered on that side.
 *
 * Threading: everything runs under the device lock. Queue notifications come
 * through the transport; socket, timer and wakeup events through the I/O
 * loop, whose callbacks take the lock. Sockets are edge-triggered: a
 * connection remembers whether it may read or write until a call says EAGAIN.
 * A dropped connection goes to a graveyard and is freed only by a loop
 * callback, so a callback of the loop thread that is already waiting for the
 * lock never finds its connection freed. */
#include <endian.h>
#include <errno.h>
#include <linux/virtio_vsock.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/unixsock.h"
#include "virtio/devices.h"
#include "virtio/vsock.h"
#include "vmm/ioloop.h"

#define VSOCK_RXQ	       0
#define VSOCK_TXQ	       1
#define VSOCK_EVQ	       2
#define VSOCK_HDR_SIZE	       ((uint32_t)sizeof(struct virtio_vsock_hdr))
#define VSOCK_RX_BUF_MIN       (VSOCK_HDR_SIZE + 1)  /* smaller RX buffers go back unused */
#define VSOCK_CREDIT_LOW       (VSOCK_BUF_ALLOC / 2) /* update the guest below this much */
#define VSOCK_CTRL_MAX	       128		     /* RSTs to stray packets awaiting RX */
#define VSOCK_RX_BUDGET	       512		     /* RX attempts per fill, then requeue */
#define VSOCK_ACCEPT_BUDGET    16		     /* host clients accepted per event */
#define VSOCK_BACKLOG	       64
#define VSOCK_HASH_SIZE	       256
#define VSOCK_CLOSE_TIMEOUT_MS 8000 /* flushing to a closed-by-guest socket */
#define VSOCK_RST_TIMEOUT_MS   2000 /* an RST the guest never takes an RX buffer for */
#define VSOCK_TICK_MS	       250
#define VSOCK_PORT_ANY	       0xffffffffu

struct link {
	struct link *prev, *next;
};

enum conn_state {
	CONN_LINE,	 /* host client: reading its CONNECT line */
	CONN_CONNECTING, /* guest connect: Unix connect in progress */
	CONN_REQUESTED,	 /* host connect: waiting for the guest's RESPONSE */
	CONN_OPEN,
	CONN_CLOSING, /* the guest shut down both ways: flush, then RST */
	CONN_RESET,   /* socket closed; an RST to the guest is pending */
};

/* Packets a connection owes the guest. */
enum {
	CTRL_REQUEST = 1 << 0,
	CTRL_RESPONSE = 1 << 1,
	CTRL_SHUTDOWN = 1 << 2,
	CTRL_CREDIT = 1 << 3,
	CTRL_RST = 1 << 4,
};

struct virtio_vsock;

struct vsock_conn {
	struct virtio_vsock *vs;
	struct link node; /* vs->conns, or vs->graveyard once dead */
	struct link rxq;  /* vs->rxq while it has something for the guest */
	struct vsock_conn *hnext;
	bool hashed, dead, timed;
	enum conn_state state;
	int fd;
	uint32_t local_port, peer_port; /* host side, guest side */
	unsigned int ctrl;
	uint64_t deadline_ms;
	bool readable, writable; /* until a call says EAGAIN */
	bool unix_eof;		 /* the socket said EOF: guest told SHUTDOWN SEND */
	bool guest_rcv_shut, guest_send_shut, wr_shut;
	/* Guest to host: bytes received, written to the socket, last advertised. */
	uint32_t rx_cnt, fwd_cnt, last_fwd_cnt;
	uint8_t *out; /* VSOCK_BUF_ALLOC bytes while the socket lags behind */
	uint32_t out_off, out_len;
	/* Host to guest: the guest's window and what we sent into it. */
	uint32_t peer_buf_alloc, peer_fwd_cnt, tx_cnt;
};

/* An RST owed to a packet that matches no connection. */
struct vsock_ctrl {
	uint64_t src_cid;
	uint32_t src_port, dst_port;
};

struct virtio_vsock {
	struct virtio_dev dev;
	struct virtio_vsock_config config;
	uint64_t cid;
	struct ioloop *loop;
	char *dir;
	char *listen_path;
	int listen_fd, timer_fd, kick_fd;
	bool bound; /* listen_path is our socket, to unlink */
	bool timer_armed;
	struct link conns, rxq, graveyard;
	struct vsock_conn *hash[VSOCK_HASH_SIZE];
	unsigned int nr_conns;
	uint32_t next_port;
	struct vsock_ctrl ctrl[VSOCK_CTRL_MAX];
	unsigned int ctrl_head, ctrl_len;
	bool rx_held; /* rx_elem is popped and not yet used */
	struct virtq_elem rx_elem;
};

/* Header fields in host order. */
struct vsock_pkt {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port, len;
	uint16_t type, op;
	uint32_t flags, buf_alloc, fwd_cnt;
};

static void vsock_conn_event(void *opaque, int fd, unsigned int events);
static void conn_reset(struct vsock_conn *c);

/* ---- small helpers ---------------------------------------------------- */

#define conn_of(l, member) ((struct vsock_conn *)((char *)(l)-offsetof(struct vsock_conn, member)))

static void link_init(struct link *h)
{
	h->prev = h->next = h;
}

static bool link_empty(const struct link *h)
{
	return h->next == h;
}

static void link_add_tail(struct link *h, struct link *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}

static void link_del(struct link *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	link_init(n);
}

/* Wake the loop: it frees dead connections and resumes an RX fill. */
static void vsock_kick(struct virtio_vsock *vs)
{
	uint64_t one = 1;

	(void)!write(vs->kick_fd, &one, sizeof(one));
}

/* Gather up to len bytes of iov[first, last) starting skip bytes in. */
static unsigned int iov_slice(const struct iovec *iov, unsigned int first, unsigned int last,
			      uint64_t skip, uint64_t len, struct iovec *out)
{
	unsigned int n = 0;

	for (unsigned int i = first; i < last && len > 0; i++) {
		uint64_t l = iov[i].iov_len;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		out[n].iov_base = (uint8_t *)iov[i].iov_base + skip;
		out[n].iov_len = MIN(l - skip, len);
		len -= out[n].iov_len;
		skip = 0;
		n++;
	}
	return n;
}

/* ---- connection table ------------------------------------------------- */

static unsigned int conn_bucket(uint32_t local, uint32_t peer)
{
	return (local * 2654435761u ^ peer * 40503u) % VSOCK_HASH_SIZE;
}

static struct vsock_conn *conn_find(struct virtio_vsock *vs, uint32_t local, uint32_t peer)
{
	struct vsock_conn *c = vs->hash[conn_bucket(local, peer)];

	while (c && (c->local_port != local || c->peer_port != peer))
		c = c->hnext;
	return c;
}

static void conn_hash(struct vsock_conn *c, uint32_t local, uint32_t peer)
{
	struct vsock_conn **b = &c->vs->hash[conn_bucket(local, peer)];

	c->local_port = local;
	c->peer_port = peer;
	c->hnext = *b;
	*b = c;
	c->hashed = true;
}

static void conn_unhash(struct vsock_conn *c)
{
	struct vsock_conn **p = &c->vs->hash[conn_bucket(c->local_port, c->peer_port)];

	if (!c->hashed)
		return;
	while (*p != c)
		p = &(*p)->hnext;
	*p = c->hnext;
	c->hashed = false;
}

static uint32_t vsock_alloc_port(struct virtio_vsock *vs, uint32_t peer)
{
	for (;;) {
		uint32_t port = vs->next_port++;

		if (vs->next_port == VSOCK_PORT_ANY)
			vs->next_port = VSOCK_EPHEMERAL_BASE;
		if (conn_find(vs, port, peer) == NULL)
			return port;
	}
}

static void vsock_arm_timer(struct virtio_vsock *vs, bool on)
{
	struct itimerspec its = { 0 };

	if (vs->timer_armed == on)
		return;
	if (on) {
		its.it_value.tv_nsec = VSOCK_TICK_MS * 1000000L;
		its.it_interval = its.it_value;
	}
	timerfd_settime(vs->timer_fd, 0, &its, NULL);
	vs->timer_armed = on;
}

static void conn_set_deadline(struct vsock_conn *c, unsigned int ms)
{
	c->deadline_ms = now_ms() + ms;
	c->timed = true;
	vsock_arm_timer(c->vs, true);
}

static struct vsock_conn *conn_new(struct virtio_vsock *vs, int fd, enum conn_state state)
{
	struct vsock_conn *c = xzalloc(sizeof(*c));

	c->vs = vs;
	c->fd = fd;
	c->state = state;
	c->readable = c->writable = true;
	link_init(&c->rxq);
	if (ioloop_add_events(vs->loop, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
			      vsock_conn_event, c, NULL) < 0) {
		close(fd);
		free(c);
		return NULL;
	}
	link_add_tail(&vs->conns, &c->node);
	vs->nr_conns++;
	return c;
}

static void conn_close_fd(struct vsock_conn *c)
{
	if (c->fd >= 0) {
		ioloop_remove(c->vs->loop, c->fd);
		close(c->fd);
		c->fd = -1;
	}
	free(c->out);
	c->out = NULL;
	c->out_off = c->out_len = 0;
}

/* Forget c; its memory is freed by vsock_reap on the loop thread. */
static void conn_drop(struct vsock_conn *c)
{
	struct virtio_vsock *vs = c->vs;

	conn_close_fd(c);
	conn_unhash(c);
	link_del(&c->rxq);
	link_del(&c->node);
	vs->nr_conns--;
	c->dead = true;
	if (link_empty(&vs->graveyard))
		vsock_kick(vs);
	link_add_tail(&vs->graveyard, &c->node);
}

static void vsock_reap(struct virtio_vsock *vs)
{
	while (!link_empty(&vs->graveyard)) {
		struct vsock_conn *c = conn_of(vs->graveyard.next, node);

		link_del(&c->node);
		free(c);
	}
}

static uint32_t peer_credit(const struct vsock_conn *c)
{
	uint32_t inflight = c->tx_cnt - c->peer_fwd_cnt;

	return inflight >= c->peer_buf_alloc ? 0 : c->peer_buf_alloc - inflight;
}

static bool conn_can_send_data(const struct vsock_conn *c)
{
	return c->state == CONN_OPEN && c->readable && !c->unix_eof && !c->guest_rcv_shut &&
	       !(c->ctrl & (CTRL_REQUEST | CTRL_RESPONSE)) && peer_credit(c) > 0;
}

/* Queue c for the RX filler if it has something for the guest. */
static void conn_kick(struct vsock_conn *c)
{
	if (c->dead || !link_empty(&c->rxq))
		return;
	if (c->ctrl || conn_can_send_data(c))
		link_add_tail(&c->vs->rxq, &c->rxq);
}

/* The socket went away or the guest broke the protocol: close the socket
 * and owe the guest an RST. */
static void conn_reset(struct vsock_conn *c)
{
	if (!c->hashed) {
		conn_drop(c); /* a host client the guest never heard of */
		return;
	}
	conn_close_fd(c);
	c->state = CONN_RESET;
	c->ctrl = CTRL_RST;
	conn_set_deadline(c, VSOCK_RST_TIMEOUT_MS);
	conn_kick(c);
}

static void vsock_drop_all(struct virtio_vsock *vs)
{
	while (!link_empty(&vs->conns))
		conn_drop(conn_of(vs->conns.next, node));
	vs->ctrl_head = vs->ctrl_len = 0;
}

/* ---- guest to host: data into the Unix socket ------------------------- */

static ssize_t sock_send(int fd, const struct iovec *iov, unsigned int n)
{
	struct msghdr msg = { .msg_iov = (struct iovec *)iov, .msg_iovlen = n };
	ssize_t r;

	do
		r = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	return r;
}

/* n more bytes reached the socket: maybe the guest should hear about it. */
static void conn_forwarded(struct vsock_conn *c, uint32_t n)
{
	uint32_t guest_view_free = VSOCK_BUF_ALLOC - (c->rx_cnt - c->last_fwd_cnt);

	c->fwd_cnt += n;
	if (n && guest_view_free < VSOCK_CREDIT_LOW && !c->guest_send_shut)
		c->ctrl |= CTRL_CREDIT;
}

/* Write out what the socket would not take before; then finish a guest's
 * shutdown once nothing is left. */
static void conn_flush(struct vsock_conn *c)
{
	while (c->out_len && c->writable) {
		struct iovec iov = { c->out + c->out_off, c->out_len };
		ssize_t n = sock_send(c->fd, &iov, 1);

		if (n < 0 && errno == EAGAIN) {
			c->writable = false;
			return;
		}
		if (n <= 0) {
			conn_reset(c);
			return;
		}
		c->out_off += (uint32_t)n;
		c->out_len -= (uint32_t)n;
		conn_forwarded(c, (uint32_t)n);
	}
	if (c->out_len)
		return;
	free(c->out);
	c->out = NULL;
	c->out_off = 0;
	if (c->guest_send_shut && !c->wr_shut) {
		shutdown(c->fd, SHUT_WR);
		c->wr_shut = true;
	}
	if (c->state == CONN_CLOSING)
		conn_reset(c); /* the orderly end: the guest waits for our RST */
}

/* An RW payload of len bytes at offset VSOCK_HDR_SIZE of e. */
static int conn_recv_data(struct vsock_conn *c, const struct virtq_elem *e, uint32_t len)
{
	uint32_t inflight = c->rx_cnt - c->last_fwd_cnt; /* as the guest must count */
	uint32_t done = 0;

	/* Beyond the window we advertised; this also bounds what we hold, as
	 * rx_cnt - fwd_cnt <= rx_cnt - last_fwd_cnt. */
	if (inflight > VSOCK_BUF_ALLOC || len > VSOCK_BUF_ALLOC - inflight)
		return -1;
	c->rx_cnt += len;
	if (len == 0)
		return 0;
	if (c->out_len == 0 && c->writable) {
		struct iovec iov[VIRTQ_MAX_CHAIN];
		unsigned int n = iov_slice(e->iov, 0, e->nr_out, VSOCK_HDR_SIZE, len, iov);
		ssize_t r = sock_send(c->fd, iov, n);

		if (r < 0 && errno != EAGAIN)
			return -1;
		if (r < 0)
			c->writable = false;
		done = r > 0 ? (uint32_t)r : 0;
		conn_forwarded(c, done);
	}
	if (done < len) {
		/* out_len + len - done <= rx_cnt - fwd_cnt <= VSOCK_BUF_ALLOC. */
		if (c->out == NULL)
			c->out = xmalloc(VSOCK_BUF_ALLOC);
		if (c->out_off + c->out_len + (len - done) > VSOCK_BUF_ALLOC) {
			memmove(c->out, c->out + c->out_off, c->out_len);
			c->out_off = 0;
		}
		virtq_elem_read(e, VSOCK_HDR_SIZE + done, c->out + c->out_off + c->out_len,
				len - done);
		c->out_len += len - done;
	}
	return 0;
}

static void conn_guest_shutdown(struct vsock_conn *c, uint32_t flags)
{
	if ((flags & VIRTIO_VSOCK_SHUTDOWN_RCV) && !c->guest_rcv_shut) {
		c->guest_rcv_shut = true;
		shutdown(c->fd, SHUT_RD);
	}
	if (flags & VIRTIO_VSOCK_SHUTDOWN_SEND)
		c->guest_send_shut = true;
	if (c->guest_rcv_shut && c->guest_send_shut && c->state == CONN_OPEN) {
		c->state = CONN_CLOSING;
		conn_set_deadline(c, VSOCK_CLOSE_TIMEOUT_MS);
	}
	conn_flush(c);
}

/* The guest accepted a host client's connection. */
static void conn_accepted(struct vsock_conn *c)
{
	char line[VSOCK_LINE_MAX];
	int n = snprintf(line, sizeof(line), "OK %u\n", c->local_port);

	c->state = CONN_OPEN;
	c->timed = false;
	/* The client has not been sent a byte yet: the socket has room. */
	if (send(c->fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n)
		conn_reset(c);
}

/* ---- guest to host: the TX queue -------------------------------------- */

static void vsock_reply_rst(struct virtio_vsock *vs, const struct vsock_pkt *p)
{
	struct vsock_ctrl *r;

	if (p->op == VIRTIO_VSOCK_OP_RST || vs->ctrl_len == VSOCK_CTRL_MAX)
		return; /* never answer an RST; a flood of strays loses some */
	r = &vs->ctrl[(vs->ctrl_head + vs->ctrl_len++) % VSOCK_CTRL_MAX];
	r->src_cid = p->dst_cid;
	r->src_port = p->dst_port;
	r->dst_port = p->src_port;
}

static void vsock_guest_connect(struct virtio_vsock *vs, const struct vsock_pkt *p)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct vsock_conn *c;
	int fd, r;

	if (vs->nr_conns >= VSOCK_MAX_CONNS)
		goto refuse;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto refuse;
	/* The length of dir was checked at create for any port. */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%u.sock", vs->dir, p->dst_port);
	r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (r < 0 && errno != EINPROGRESS) {
		close(fd);
		goto refuse;
	}
	c = conn_new(vs, fd, r == 0 ? CONN_OPEN : CONN_CONNECTING);
	if (c == NULL)
		goto refuse;
	conn_hash(c, p->dst_port, p->src_port);
	c->peer_buf_alloc = p->buf_alloc;
	c->peer_fwd_cnt = p->fwd_cnt;
	if (r == 0)
		c->ctrl |= CTRL_RESPONSE;
	else
		conn_set_deadline(c, VSOCK_CONNECT_TIMEOUT_MS);
	conn_kick(c);
	return;
refuse:
	vsock_reply_rst(vs, p);
}

/* A well-formed packet for connection c. */
static void conn_recv(struct vsock_conn *c, const struct vsock_pkt *p, const struct virtq_elem *e)
{
	if (p->op == VIRTIO_VSOCK_OP_RST) {
		conn_drop(c);
		return;
	}
	if (c->state == CONN_RESET)
		return; /* our RST is on its way */
	c->peer_buf_alloc = p->buf_alloc;
	c->peer_fwd_cnt = p->fwd_cnt;
	switch (p->op) {
	case VIRTIO_VSOCK_OP_RESPONSE:
		if (c->state != CONN_REQUESTED)
			goto reset;
		conn_accepted(c);
		break;
	case VIRTIO_VSOCK_OP_RW:
		if (c->state != CONN_OPEN || c->guest_send_shut || conn_recv_data(c, e, p->len) < 0)
			goto reset;
		break;
	case VIRTIO_VSOCK_OP_CREDIT_UPDATE:
		break;
	case VIRTIO_VSOCK_OP_CREDIT_REQUEST:
		c->ctrl |= CTRL_CREDIT;
		break;
	case VIRTIO_VSOCK_OP_SHUTDOWN:
		if (c->state != CONN_OPEN && c->state != CONN_CLOSING)
			goto reset;
		conn_guest_shutdown(c, p->flags);
		break;
	default: /* a second REQUEST, or an op we do not know */
		goto reset;
	}
	conn_kick(c);
	return;
reset:
	conn_reset(c);
}

static uint32_t vsock_tx_serve(struct virtio_dev *d, const struct virtq_elem *e)
{
	struct virtio_vsock *vs = d->priv;
	struct virtio_vsock_hdr h;
	struct vsock_conn *c;
	struct vsock_pkt p;

	if (virtq_elem_read(e, 0, &h, sizeof(h)) != sizeof(h))
		return 0;
	p = (struct vsock_pkt){
		.src_cid = le64toh(h.src_cid),
		.dst_cid = le64toh(h.dst_cid),
		.src_port = le32toh(h.src_port),
		.dst_port = le32toh(h.dst_port),
		.len = le32toh(h.len),
		.type = le16toh(h.type),
		.op = le16toh(h.op),
		.flags = le32toh(h.flags),
		.buf_alloc = le32toh(h.buf_alloc),
		.fwd_cnt = le32toh(h.fwd_cnt),
	};
	if (p.src_cid != vs->cid)
		return 0; /* not this guest's address: nobody to answer */
	if (p.dst_cid != VSOCK_HOST_CID) {
		vsock_reply_rst(vs, &p);
		return 0;
	}
	c = conn_find(vs, p.dst_port, p.src_port);
	if (p.len > VSOCK_MAX_PKT || p.len != e->out_len - VSOCK_HDR_SIZE ||
	    p.type != VIRTIO_VSOCK_TYPE_STREAM) {
		if (c)
			conn_reset(c);
		else
			vsock_reply_rst(vs, &p);
		return 0;
	}
	if (c)
		conn_recv(c, &p, e);
	else if (p.op == VIRTIO_VSOCK_OP_REQUEST)
		vsock_guest_connect(vs, &p);
	else
		vsock_reply_rst(vs, &p);
	return 0;
}

/* ---- host to guest: the RX queue -------------------------------------- */

static uint32_t rx_put_hdr(struct virtio_vsock *vs, const struct virtq_elem *e,
			   struct vsock_conn *c, uint16_t op, uint32_t flags, uint32_t len)
{
	struct virtio_vsock_hdr h = {
		.src_cid = htole64(VSOCK_HOST_CID),
		.dst_cid = htole64(vs->cid),
		.src_port = htole32(c->local_port),
		.dst_port = htole32(c->peer_port),
		.len = htole32(len),
		.type = htole16(VIRTIO_VSOCK_TYPE_STREAM),
		.op = htole16(op),
		.flags = htole32(flags),
		.buf_alloc = htole32(VSOCK_BUF_ALLOC),
		.fwd_cnt = htole32(c->fwd_cnt),
	};

	c->last_fwd_cnt = c->fwd_cnt;
	virtq_elem_write(e, 0, &h, sizeof(h));
	return VSOCK_HDR_SIZE + len;
}

/* Read from c's socket straight into the guest's buffer, within its credit. */
static uint32_t conn_rx_data(struct vsock_conn *c, const struct virtq_elem *e)
{
	struct iovec iov[VIRTQ_MAX_CHAIN];
	uint64_t want = MIN(MIN(e->in_len - VSOCK_HDR_SIZE, VSOCK_MAX_PKT), peer_credit(c));
	unsigned int n =
		iov_slice(e->iov, e->nr_out, e->nr_out + e->nr_in, VSOCK_HDR_SIZE, want, iov);
	ssize_t r = readv(c->fd, iov, (int)n);

	if (r > 0) {
		c->tx_cnt += (uint32_t)r;
		c->ctrl &= ~CTRL_CREDIT; /* the header carries it */
		return rx_put_hdr(c->vs, e, c, VIRTIO_VSOCK_OP_RW, 0, (uint32_t)r);
	}
	if (r == 0) {
		c->unix_eof = true;
		c->ctrl |= CTRL_SHUTDOWN;
	} else if (errno == EAGAIN) {
		c->readable = false;
	} else if (errno != EINTR) {
		conn_reset(c);
	}
	return 0;
}

/* The next packet c has for the guest, written into e; 0 if none. */
static uint32_t conn_rx_packet(struct vsock_conn *c, const struct virtq_elem *e)
{
	struct virtio_vsock *vs = c->vs;
	uint32_t len;

	if (conn_can_send_data(c) && (len = conn_rx_data(c, e)) > 0)
		return len;
	if (c->ctrl & CTRL_RST) {
		len = rx_put_hdr(vs, e, c, VIRTIO_VSOCK_OP_RST, 0, 0);
		conn_drop(c);
		return len;
	}
	if (c->ctrl & CTRL_REQUEST) {
		c->ctrl &= ~CTRL_REQUEST;
		return rx_put_hdr(vs, e, c, VIRTIO_VSOCK_OP_REQUEST, 0, 0);
	}
	if (c->ctrl & CTRL_RESPONSE) {
		c->ctrl &= ~CTRL_RESPONSE;
		return rx_put_hdr(vs, e, c, VIRTIO_VSOCK_OP_RESPONSE, 0, 0);
	}
	if (c->ctrl & CTRL_SHUTDOWN) {
		c->ctrl &= ~CTRL_SHUTDOWN;
		return rx_put_hdr(vs, e, c, VIRTIO_VSOCK_OP_SHUTDOWN, VIRTIO_VSOCK_SHUTDOWN_SEND,
				  0);
	}
	if (c->ctrl & CTRL_CREDIT) {
		c->ctrl &= ~CTRL_CREDIT;
		return rx_put_hdr(vs, e, c, VIRTIO_VSOCK_OP_CREDIT_UPDATE, 0, 0);
	}
	return 0;
}

static uint32_t vsock_rx_next(struct virtio_vsock *vs, const struct virtq_elem *e)
{
	if (vs->ctrl_len) {
		const struct vsock_ctrl *r = &vs->ctrl[vs->ctrl_head];
		struct virtio_vsock_hdr h = {
			.src_cid = htole64(r->src_cid),
			.dst_cid = htole64(vs->cid),
			.src_port = htole32(r->src_port),
			.dst_port = htole32(r->dst_port),
			.type = htole16(VIRTIO_VSOCK_TYPE_STREAM),
			.op = htole16(VIRTIO_VSOCK_OP_RST),
		};

		vs->ctrl_head = (vs->ctrl_head + 1) % VSOCK_CTRL_MAX;
		vs->ctrl_len--;
		virtq_elem_write(e, 0, &h, sizeof(h));
		return VSOCK_HDR_SIZE;
	}
	while (!link_empty(&vs->rxq)) {
		struct vsock_conn *c = conn_of(vs->rxq.next, rxq);
		uint32_t len;

		link_del(&c->rxq);
		len = conn_rx_packet(c, e);
		conn_kick(c); /* round robin: back to the tail if it has more */
		if (len)
			return len;
	}
	return 0;
}

/* Hand the guest what is pending, as far as its RX buffers go. One popped
 * buffer is kept across calls when nothing turned out to be ready. */
static void vsock_rx_fill(struct virtio_vsock *vs)
{
	struct virtio_dev *d = &vs->dev;
	struct virtq *vq = &d->vqs[VSOCK_RXQ];
	unsigned int budget = VSOCK_RX_BUDGET;
	bool pushed = false;

	if (!vq->ready || !virtio_dev_driver_ok(d))
		return;
	while (vs->ctrl_len || !link_empty(&vs->rxq)) {
		uint32_t len;

		if (budget-- == 0) {
			vsock_kick(vs); /* more next time round the loop */
			break;
		}
		if (!vs->rx_held) {
			int r = virtq_pop(vq, &vs->rx_elem);

			if (r == VIRTQ_EMPTY)
				break;
			if (r == VIRTQ_BROKEN) {
				virtio_dev_needs_reset(d);
				break;
			}
			if (r == VIRTQ_BAD_CHAIN || vs->rx_elem.in_len < VSOCK_RX_BUF_MIN) {
				virtq_push(vq, vs->rx_elem.head, 0);
				pushed = true;
				continue;
			}
			vs->rx_held = true;
		}
		len = vsock_rx_next(vs, &vs->rx_elem);
		if (len == 0)
			continue;
		virtq_push(vq, vs->rx_elem.head, len);
		vs->rx_held = false;
		pushed = true;
	}
	if (pushed)
		virtio_dev_signal(d, vq);
}

/* ---- host side: sockets and timers ------------------------------------ */

/* A host client's "CONNECT <port>\n", taken without reading past it. */
static void conn_read_line(struct vsock_conn *c, unsigned int events)
{
	struct virtio_vsock *vs = c->vs;
	char buf[VSOCK_LINE_MAX + 1];
	uint64_t port;
	ssize_t n = recv(c->fd, buf, VSOCK_LINE_MAX, MSG_PEEK);
	char *nl;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0)
		goto drop;
	nl = memchr(buf, '\n', (size_t)n);
	if (nl == NULL) {
		if (n == VSOCK_LINE_MAX || (events & (EPOLLRDHUP | EPOLLHUP)))
			goto drop; /* overlong, or it will never end */
		return;
	}
	n = nl - buf + 1;
	if (recv(c->fd, buf, (size_t)n, 0) != n)
		goto drop;
	buf[n - 1] = '\0';
	if (strncmp(buf, "CONNECT ", 8) != 0 || parse_u64(buf + 8, VSOCK_PORT_ANY - 1, &port) < 0)
		goto drop;
	conn_hash(c, vsock_alloc_port(vs, (uint32_t)port), (uint32_t)port);
	c->state = CONN_REQUESTED;
	c->ctrl |= CTRL_REQUEST;
	conn_set_deadline(c, VSOCK_CONNECT_TIMEOUT_MS);
	return;
drop:
	conn_drop(c);
}

static void conn_connected(struct vsock_conn *c)
{
	int e = 0;
	socklen_t len = sizeof(e);

	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0 || e != 0) {
		conn_reset(c);
		return;
	}
	c->state = CONN_OPEN;
	c->timed = false;
	c->ctrl |= CTRL_RESPONSE;
}

static void vsock_conn_event(void *opaque, int fd, unsigned int events)
{
	struct vsock_conn *c = opaque;
	struct virtio_vsock *vs = c->vs;

	(void)fd;
	pthread_mutex_lock(&vs->dev.lock);
	if (c->dead)
		goto out; /* dropped by another thread while we waited */
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		c->readable = true;
	if (events & (EPOLLOUT | EPOLLHUP | EPOLLERR))
		c->writable = true;
	switch (c->state) {
	case CONN_LINE:
		conn_read_line(c, events);
		break;
	case CONN_CONNECTING:
		if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			conn_connected(c);
		break;
	case CONN_OPEN:
	case CONN_CLOSING:
		conn_flush(c);
		break;
	default:
		break;
	}
	conn_kick(c);
	vsock_rx_fill(vs);
out:
	vsock_reap(vs);
	pthread_mutex_unlock(&vs->dev.lock);
}

static void vsock_listen_event(void *opaque, int fd, unsigned int events)
{
	struct virtio_vsock *vs = opaque;

	(void)events;
	pthread_mutex_lock(&vs->dev.lock);
	for (unsigned int i = 0; i < VSOCK_ACCEPT_BUDGET; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct vsock_conn *c;

		if (cfd < 0 && errno == ECONNABORTED)
			continue;
		if (cfd < 0)
			break;
		if (vs->nr_conns >= VSOCK_MAX_CONNS) {
			close(cfd); /* full: the client sees EOF */
			continue;
		}
		c = conn_new(vs, cfd, CONN_LINE);
		if (c)
			conn_set_deadline(c, VSOCK_CONNECT_TIMEOUT_MS);
	}
	vsock_reap(vs);
	pthread_mutex_unlock(&vs->dev.lock);
}

static void vsock_timer_event(void *opaque, int fd, unsigned int events)
{
	struct virtio_vsock *vs = opaque;
	uint64_t now = now_ms(), ticks;
	bool timed = false;

	(void)events;
	pthread_mutex_lock(&vs->dev.lock);
	(void)!read(fd, &ticks, sizeof(ticks));
	for (struct link *l = vs->conns.next, *next; l != &vs->conns; l = next) {
		struct vsock_conn *c = conn_of(l, node);

		next = l->next; /* c may move to the graveyard */
		if (!c->timed)
			continue;
		if (now < c->deadline_ms) {
			timed = true;
		} else if (c->state == CONN_LINE || c->state == CONN_RESET) {
			conn_drop(c);
		} else if (c->state != CONN_OPEN) {
			conn_reset(c); /* sets a fresh deadline for its RST */
			timed = true;
		}
	}
	vsock_arm_timer(vs, timed);
	vsock_rx_fill(vs);
	vsock_reap(vs);
	pthread_mutex_unlock(&vs->dev.lock);
}

static void vsock_kick_event(void *opaque, int fd, unsigned int events)
{
	struct virtio_vsock *vs = opaque;
	uint64_t n;

	(void)events;
	pthread_mutex_lock(&vs->dev.lock);
	(void)!read(fd, &n, sizeof(n));
	vsock_rx_fill(vs);
	vsock_reap(vs);
	pthread_mutex_unlock(&vs->dev.lock);
}

/* ---- the device ------------------------------------------------------- */

static void vsock_queue_notify(struct virtio_dev *d, unsigned int q)
{
	struct virtio_vsock *vs = d->priv;

	if (q == VSOCK_TXQ)
		virtio_dev_serve_queue(d, q, vsock_tx_serve);
	if (q == VSOCK_TXQ || q == VSOCK_RXQ)
		vsock_rx_fill(vs);
	/* The event queue only holds buffers for events we never send. */
}

static void vsock_reset(struct virtio_dev *d)
{
	struct virtio_vsock *vs = d->priv;

	vsock_drop_all(vs);
	vs->rx_held = false;
}

static void vsock_close_fd(struct virtio_vsock *vs, int *fd)
{
	if (*fd < 0)
		return;
	ioloop_remove(vs->loop, *fd);
	close(*fd);
	*fd = -1;
}

static void vsock_destroy(struct virtio_dev *d)
{
	struct virtio_vsock *vs = d->priv;

	vsock_drop_all(vs);
	vsock_reap(vs);
	if (vs->bound)
		unlink(vs->listen_path);
	vsock_close_fd(vs, &vs->listen_fd);
	vsock_close_fd(vs, &vs->timer_fd);
	vsock_close_fd(vs, &vs->kick_fd);
	free(vs->listen_path);
	free(vs->dir);
	virtio_dev_destroy(d);
	free(vs);
}

static const struct virtio_dev_ops vsock_ops = {
	.name = "virtio-vsock",
	.device_id = VSOCK_DEVICE_ID,
	.num_queues = 3,
	.queue_notify = vsock_queue_notify,
	.reset = vsock_reset,
	.destroy = vsock_destroy,
};

static int vsock_listen(struct virtio_vsock *vs, gantry_error_t *err)
{
	vs->listen_fd = unix_listen(vs->listen_path, VSOCK_BACKLOG, err);
	if (vs->listen_fd < 0)
		return -1;
	vs->bound = true;
	return 0;
}

struct virtio_dev *virtio_vsock_create(const struct guest_mem *mem, struct ioloop *loop,
				       uint64_t guest_cid, const char *dir, gantry_error_t *err)
{
	struct sockaddr_un sa;
	struct virtio_vsock *vs;

	/* CIDs 0-2 are reserved, the upper 32 bits too, and -1U means "any". */
	if (guest_cid <= VSOCK_HOST_CID || guest_cid >= 0xffffffffULL) {
		gantry_error(err, EINVAL, "vsock: guest CID %llu is reserved",
			     (unsigned long long)guest_cid);
		return NULL;
	}
	if (strlen(dir) + sizeof("/4294967295.sock") > sizeof(sa.sun_path)) {
		gantry_error(err, ENAMETOOLONG, "vsock: directory `%s` is too long for a socket",
			     dir);
		return NULL;
	}
	vs = xzalloc(sizeof(*vs));
	vs->cid = guest_cid;
	vs->loop = loop;
	vs->dir = xstrdup(dir);
	xasprintf(&vs->listen_path, "%s/%s", dir, VSOCK_LISTEN_NAME);
	vs->listen_fd = vs->timer_fd = vs->kick_fd = -1;
	vs->next_port = VSOCK_EPHEMERAL_BASE;
	link_init(&vs->conns);
	link_init(&vs->rxq);
	link_init(&vs->graveyard);
	vs->config.guest_cid = htole64(guest_cid);
	virtio_dev_init(&vs->dev, &vsock_ops, vs, mem, 0, &vs->config, sizeof(vs->config));

	if (vsock_listen(vs, err) < 0)
		goto fail;
	vs->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (vs->timer_fd < 0) {
		gantry_error_errno(err, "timerfd_create");
		goto fail;
	}
	vs->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (vs->kick_fd < 0) {
		gantry_error_errno(err, "eventfd");
		goto fail;
	}
	if (ioloop_add(loop, vs->listen_fd, vsock_listen_event, vs, err) < 0 ||
	    ioloop_add(loop, vs->timer_fd, vsock_timer_event, vs, err) < 0 ||
	    ioloop_add(loop, vs->kick_fd, vsock_kick_event, vs, err) < 0)
		goto fail;
	return &vs->dev;
fail:
	gantry_error_prefix(err, "vsock");
	vsock_destroy(&vs->dev);
	return NULL;
}
