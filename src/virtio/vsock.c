/* virtio-vsock (virtio 1.x, section 5.10), stream sockets only, in the
 * "hybrid" model: the guest's streams end in Unix sockets on the host.
 *
 *  - A guest connect to host port P connects to <dir>/P.sock, or to what
 *    the host's connect hook gives (a sandbox's doors); success is
 *    answered OP_RESPONSE, failure OP_RST.
 *  - A host client connects to <dir>/vsock.sock and writes "CONNECT <port>\n";
 *    the guest gets OP_REQUEST from an ephemeral host port, and its
 *    OP_RESPONSE makes us write "OK <hostport>\n" before relaying bytes.
 *
 * This file is the device: its queues, the packets on them, the RSTs owed to
 * packets that match no connection, and its sockets' set-up. The connections
 * themselves, their Unix sockets and their credit are vsock_conn.c's.
 *
 * Threading: everything runs under the device lock. Queue notifications come
 * through the transport; socket, timer and wakeup events through the I/O
 * loop, whose callbacks take the lock. */
#include <endian.h>
#include <errno.h>
#include <linux/virtio_vsock.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/unixsock.h"
#include "common/util.h"
#include "virtio/devices.h"
#include "virtio/vsock_conn.h"
#include "vmm/ioloop.h"

#define VSOCK_RXQ	 0
#define VSOCK_TXQ	 1
#define VSOCK_EVQ	 2
#define VSOCK_RX_BUF_MIN (VSOCK_HDR_SIZE + 1) /* smaller RX buffers go back unused */
#define VSOCK_RX_BUDGET	 512		      /* RX attempts per fill, then requeue */
#define VSOCK_BACKLOG	 64

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
	c = vsock_conn_find(vs, p.dst_port, p.src_port);
	if (p.len > VSOCK_MAX_PKT || p.len != e->out_len - VSOCK_HDR_SIZE ||
	    p.type != VIRTIO_VSOCK_TYPE_STREAM) {
		if (c)
			vsock_conn_reset(c);
		else
			vsock_reply_rst(vs, &p);
		return 0;
	}
	if (c)
		vsock_conn_recv(c, &p, e);
	else if (p.op != VIRTIO_VSOCK_OP_REQUEST || vsock_guest_connect(vs, &p) < 0)
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

/* The next packet c has for the guest, written into e; 0 if none. */
static uint32_t conn_rx_packet(struct vsock_conn *c, const struct virtq_elem *e)
{
	struct virtio_vsock *vs = c->vs;
	uint32_t len;

	if (vsock_conn_can_send(c) && (len = vsock_conn_rx_data(c, e)) > 0)
		return rx_put_hdr(vs, e, c, VIRTIO_VSOCK_OP_RW, 0, len);
	if (c->ctrl & CTRL_RST) {
		len = rx_put_hdr(vs, e, c, VIRTIO_VSOCK_OP_RST, 0, 0);
		vsock_conn_drop(c);
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
		vsock_conn_kick(c); /* round robin: back to the tail if it has more */
		if (len)
			return len;
	}
	return 0;
}

/* Hand the guest what is pending, as far as its RX buffers go. One popped
 * buffer is kept across calls when nothing turned out to be ready. */
void vsock_rx_fill(struct virtio_vsock *vs)
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

/* ---- the device ------------------------------------------------------- */

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
	vs->ctrl_head = vs->ctrl_len = 0;
	vs->rx_held = false;
}

static void vsock_destroy(struct virtio_dev *d)
{
	struct virtio_vsock *vs = d->priv;

	vsock_drop_all(vs);
	vsock_reap(vs);
	if (vs->bound)
		unlink(vs->listen_path);
	ioloop_close(vs->loop, &vs->listen_fd);
	ioloop_close(vs->loop, &vs->timer_fd);
	ioloop_close(vs->loop, &vs->kick_fd);
	free(vs->listen_path);
	free(vs->dir);
	virtio_dev_destroy(d);
	free(vs);
}

/* A save keeps no connection: the host's ends are this process's sockets.
 * An RX buffer held for a packet not yet written goes back to the ring,
 * so the restored guest has it again. */
static int vsock_save(struct virtio_dev *d, void *data, size_t *len, gantry_error_t *err)
{
	struct virtio_vsock *vs = d->priv;

	(void)err;
	(void)data;
	if (vs->rx_held) {
		virtq_unpop(&d->vqs[VSOCK_RXQ], 1);
		vs->rx_held = false;
	}
	*len = 0;
	return 0;
}

/* A restored VM's connections are gone with the VM that was saved: a
 * transport reset has its driver close each of them (its listening
 * sockets stay) and read the guest CID again. It needs an event buffer,
 * which a driver keeps posted; without one it learns of each connection
 * by its RST. The VM saved live keeps its connections: nothing to say. */
static void vsock_resumed(struct virtio_dev *d, bool restored)
{
	struct virtq *vq = &d->vqs[VSOCK_EVQ];
	struct virtio_vsock_event ev = { .id = htole32(VIRTIO_VSOCK_EVENT_TRANSPORT_RESET) };
	struct virtq_elem *e;
	int r;

	if (!restored || !vq->ready || !virtio_dev_driver_ok(d))
		return;
	e = xmalloc(sizeof(*e));
	r = virtq_pop(vq, e);
	if (r == VIRTQ_BROKEN)
		virtio_dev_needs_reset(d);
	if (r == VIRTQ_ELEM || r == VIRTQ_BAD_CHAIN) {
		uint32_t n = 0;

		if (r == VIRTQ_ELEM && e->in_len >= sizeof(ev))
			n = (uint32_t)virtq_elem_write(e, 0, &ev, sizeof(ev));
		virtq_push(vq, e->head, n);
		virtio_dev_signal(d, vq);
	}
	free(e);
}

static const struct virtio_dev_ops vsock_ops = {
	.name = "virtio-vsock",
	.device_id = VSOCK_DEVICE_ID,
	.num_queues = 3,
	.queue_notify = vsock_queue_notify,
	.reset = vsock_reset,
	.destroy = vsock_destroy,
	.save = vsock_save,
	.resumed = vsock_resumed,
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
				       uint64_t guest_cid, const char *dir,
				       const struct vmm_vsock_host *host, gantry_error_t *err)
{
	struct sockaddr_un sa;
	struct virtio_vsock *vs;

	/* CIDs 0-2 are reserved, the upper 32 bits too, and -1U means "any". */
	if (guest_cid <= VSOCK_HOST_CID || guest_cid >= 0xffffffffULL) {
		gantry_error(err, EINVAL, "vsock: guest CID %llu is reserved",
			     (unsigned long long)guest_cid);
		return NULL;
	}
	/* dir: its listener's, where none is handed; its dials', where no
	 * one dials for it. */
	if (host && host->connect && host->listen_fd > 0) {
		dir = NULL;
	} else if (dir == NULL) {
		gantry_error(err, EINVAL, "vsock: no directory for its sockets");
		return NULL;
	} else if (strlen(dir) + sizeof("/4294967295.sock") > sizeof(sa.sun_path)) {
		gantry_error(err, ENAMETOOLONG, "vsock: directory `%s` is too long for a socket",
			     dir);
		return NULL;
	}
	vs = xzalloc(sizeof(*vs));
	vs->cid = guest_cid;
	vs->loop = loop;
	vs->listen_fd = vs->timer_fd = vs->kick_fd = -1;
	if (dir) {
		vs->dir = xstrdup(dir);
		xasprintf(&vs->listen_path, "%s/%s", dir, VSOCK_LISTEN_NAME);
	} else {
		vs->listen_fd = host->listen_fd;
	}
	if (host && host->connect) {
		vs->connect = host->connect;
		vs->connect_opaque = host->opaque;
	}
	vs->next_port = VSOCK_EPHEMERAL_BASE;
	link_init(&vs->conns);
	link_init(&vs->rxq);
	link_init(&vs->graveyard);
	vs->config.guest_cid = htole64(guest_cid);
	virtio_dev_init(&vs->dev, &vsock_ops, vs, mem, VIRTIO_DEV_EVENT_IDX, &vs->config, sizeof(vs->config));

	if (vs->dir && vsock_listen(vs, err) < 0)
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
	if ((vs->listen_fd >= 0 && ioloop_add(loop, vs->listen_fd, vsock_listen_event, vs, err) < 0) ||
	    ioloop_add(loop, vs->timer_fd, vsock_timer_event, vs, err) < 0 ||
	    ioloop_add(loop, vs->kick_fd, vsock_kick_event, vs, err) < 0)
		goto fail;
	return &vs->dev;
fail:
	gantry_error_prefix(err, "vsock");
	vsock_destroy(&vs->dev);
	return NULL;
}
