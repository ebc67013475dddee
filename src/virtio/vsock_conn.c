/* virtio-vsock's connections (the device and its queues are vsock.c's): the
 * table that maps (host port, guest port) to a connection, the relay between
 * a guest stream and its Unix socket, host clients' CONNECT lines, and the
 * deadlines for what never completes.
 *
 * Flow control is the spec's credit scheme in both directions. Guest to host:
 * we advertise VSOCK_BUF_ALLOC and fwd_cnt (bytes written onward to the Unix
 * socket), so what the guest may have in flight, and so what we may have to
 * hold when the socket is full, is at most VSOCK_BUF_ALLOC per connection; a
 * guest that sends more is reset. Host to guest: we read from the socket only
 * into an RX buffer the guest gave us and only as much as its credit allows,
 * so nothing is buffered on that side.
 *
 * Sockets are edge-triggered: a connection remembers whether it may read or
 * write until a call says EAGAIN. A dropped connection goes to a graveyard
 * and is freed only by a loop callback, so a callback of the loop thread that
 * is already waiting for the device lock never finds its connection freed. */
#include <errno.h>
#include <linux/virtio_vsock.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "virtio/vsock_conn.h"
#include "vmm/ioloop.h"

#define VSOCK_CREDIT_LOW       (VSOCK_BUF_ALLOC / 2) /* update the guest below this much */
#define VSOCK_ACCEPT_BUDGET    16		     /* host clients accepted per event */
#define VSOCK_CLOSE_TIMEOUT_MS 8000		     /* flushing to a closed-by-guest socket */
#define VSOCK_RST_TIMEOUT_MS   2000 /* an RST the guest never takes an RX buffer for */
#define VSOCK_TICK_MS	       250
#define VSOCK_PORT_ANY	       0xffffffffu

static void vsock_conn_event(void *opaque, int fd, unsigned int events);

void vsock_kick(struct virtio_vsock *vs)
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

/* ---- the connection table --------------------------------------------- */

static unsigned int conn_bucket(uint32_t local, uint32_t peer)
{
	return (local * 2654435761u ^ peer * 40503u) % VSOCK_HASH_SIZE;
}

struct vsock_conn *vsock_conn_find(struct virtio_vsock *vs, uint32_t local, uint32_t peer)
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
		if (vsock_conn_find(vs, port, peer) == NULL)
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
	ioloop_close(c->vs->loop, &c->fd);
	free(c->out);
	c->out = NULL;
	c->out_off = c->out_len = 0;
}

void vsock_conn_drop(struct vsock_conn *c)
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

void vsock_reap(struct virtio_vsock *vs)
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

bool vsock_conn_can_send(const struct vsock_conn *c)
{
	return c->state == CONN_OPEN && c->readable && !c->unix_eof && !c->guest_rcv_shut &&
	       !(c->ctrl & (CTRL_REQUEST | CTRL_RESPONSE)) && peer_credit(c) > 0;
}

void vsock_conn_kick(struct vsock_conn *c)
{
	if (c->dead || !link_empty(&c->rxq))
		return;
	if (c->ctrl || vsock_conn_can_send(c))
		link_add_tail(&c->vs->rxq, &c->rxq);
}

void vsock_conn_reset(struct vsock_conn *c)
{
	if (!c->hashed) {
		vsock_conn_drop(c); /* a host client the guest never heard of */
		return;
	}
	conn_close_fd(c);
	c->state = CONN_RESET;
	c->ctrl = CTRL_RST;
	conn_set_deadline(c, VSOCK_RST_TIMEOUT_MS);
	vsock_conn_kick(c);
}

void vsock_drop_all(struct virtio_vsock *vs)
{
	while (!link_empty(&vs->conns))
		vsock_conn_drop(conn_of(vs->conns.next, node));
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
			vsock_conn_reset(c);
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
		vsock_conn_reset(c); /* the orderly end: the guest waits for our RST */
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

/* ---- the guest's packets ---------------------------------------------- */

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
		vsock_conn_reset(c);
}

int vsock_guest_connect(struct virtio_vsock *vs, const struct vsock_pkt *p)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct vsock_conn *c;
	int fd, r;

	if (vs->nr_conns >= VSOCK_MAX_CONNS)
		return -1;
	if (vs->connect) {
		/* Whoever confines us connected it (or refused the port). */
		fd = vs->connect(vs->connect_opaque, p->dst_port);
		if (fd < 0)
			return -1;
		r = 0;
	} else {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		/* The length of dir was checked at create for any port. */
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%u.sock", vs->dir, p->dst_port);
		r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		if (r < 0 && errno != EINPROGRESS) {
			close(fd);
			return -1;
		}
	}
	c = conn_new(vs, fd, r == 0 ? CONN_OPEN : CONN_CONNECTING);
	if (c == NULL)
		return -1;
	conn_hash(c, p->dst_port, p->src_port);
	c->peer_buf_alloc = p->buf_alloc;
	c->peer_fwd_cnt = p->fwd_cnt;
	if (r == 0)
		c->ctrl |= CTRL_RESPONSE;
	else
		conn_set_deadline(c, VSOCK_CONNECT_TIMEOUT_MS);
	vsock_conn_kick(c);
	return 0;
}

void vsock_conn_recv(struct vsock_conn *c, const struct vsock_pkt *p, const struct virtq_elem *e)
{
	if (p->op == VIRTIO_VSOCK_OP_RST) {
		vsock_conn_drop(c);
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
	vsock_conn_kick(c);
	return;
reset:
	vsock_conn_reset(c);
}

/* ---- host to guest: data out of the Unix socket ----------------------- */

uint32_t vsock_conn_rx_data(struct vsock_conn *c, const struct virtq_elem *e)
{
	struct iovec iov[VIRTQ_MAX_CHAIN];
	uint64_t want = MIN(MIN(e->in_len - VSOCK_HDR_SIZE, VSOCK_MAX_PKT), peer_credit(c));
	unsigned int n =
		iov_slice(e->iov, e->nr_out, e->nr_out + e->nr_in, VSOCK_HDR_SIZE, want, iov);
	ssize_t r = readv(c->fd, iov, (int)n);

	if (r > 0) {
		c->tx_cnt += (uint32_t)r;
		c->ctrl &= ~CTRL_CREDIT; /* the header carries it */
		return (uint32_t)r;
	}
	if (r == 0) {
		c->unix_eof = true;
		c->ctrl |= CTRL_SHUTDOWN;
	} else if (errno == EAGAIN) {
		c->readable = false;
	} else if (errno != EINTR) {
		vsock_conn_reset(c);
	}
	return 0;
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
	vsock_conn_drop(c);
}

static void conn_connected(struct vsock_conn *c)
{
	int e = 0;
	socklen_t len = sizeof(e);

	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0 || e != 0) {
		vsock_conn_reset(c);
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
	vsock_conn_kick(c);
	vsock_rx_fill(vs);
out:
	vsock_reap(vs);
	pthread_mutex_unlock(&vs->dev.lock);
}

void vsock_listen_event(void *opaque, int fd, unsigned int events)
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

void vsock_timer_event(void *opaque, int fd, unsigned int events)
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
			vsock_conn_drop(c);
		} else if (c->state != CONN_OPEN) {
			vsock_conn_reset(c); /* sets a fresh deadline for its RST */
			timed = true;
		}
	}
	vsock_arm_timer(vs, timed);
	vsock_rx_fill(vs);
	vsock_reap(vs);
	pthread_mutex_unlock(&vs->dev.lock);
}
