/* virtio-net (virtio 1.x, section 5.1): a dumb pipe of Ethernet frames
 * between the guest and the network worker, one frame per message on a
 * SOCK_SEQPACKET socket. No segmentation offload and no checksum offload
 * from the guest (libslirp checks every sum itself); towards the guest,
 * GUEST_CSUM marks each frame's sums as checked (DATA_VALID), since the
 * worker sends only frames whose sums it or libslirp made. One queue pair,
 * no control queue; a 64 KiB MTU and mergeable RX buffers.
 *
 *  - TX: each chain is the 12-byte header and a frame, sent straight from
 *    guest memory. A full socket holds the chain (never dropped) and waits
 *    for the socket to turn writable.
 *  - RX: a frame is read straight into the guest's RX buffers, as many as
 *    the last frame needed, with a bounce buffer behind them for the rest;
 *    buffers it did not need go back unused (virtq_unpop). What landed in
 *    the bounce buffer is copied over more buffers. A ring that runs dry
 *    stops reading the socket, holding any frame in part, so the worker
 *    feels the backpressure, until the driver adds buffers.
 *  - The worker hanging up takes the link down for good: a config interrupt
 *    tells the driver, and TX chains come back unsent.
 *
 * Threading: everything runs under the device lock. Queue notifications come
 * through the transport; socket events through the I/O loop, whose callback
 * takes the lock. Neither blocks: the socket is only used with MSG_DONTWAIT. */
#include <endian.h>
#include <errno.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_net.h>
#include <stddef.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "proto/netplan.h"
#include "virtio/devices.h"
#include "vmm/ioloop.h"

#define NET_RXQ	    0
#define NET_TXQ	    1
#define NET_HDR_LEN ((uint32_t)sizeof(struct virtio_net_hdr_mrg_rxbuf)) /* 12 with VERSION_1 */
/* Frames one round moves each way before the other devices get their turn. */
#define NET_TX_BUDGET 256
#define NET_RX_BUDGET 256
/* Guest buffer pieces one read fills, and the bounce buffer behind them. */
#define NET_RX_IOV 1024

/* Not VIRTIO_DEV_EVENT_IDX: with event indices, host-to-guest TCP at MTU
 * 1500 ran about a fifth slower in the nested test host (bench/net --mode
 * vm, one VM: 0.12-0.16 against 0.17-0.19 Gbit/s), and no direction
 * gained. Linux's driver then asks by flag, which the device keeps. */
#define NET_FEATURES                                                                               \
	((1ULL << VIRTIO_NET_F_MAC) | (1ULL << VIRTIO_NET_F_MTU) |                                 \
	 (1ULL << VIRTIO_NET_F_MRG_RXBUF) | (1ULL << VIRTIO_NET_F_STATUS) |                        \
	 (1ULL << VIRTIO_NET_F_GUEST_CSUM))

/* The first fields of struct virtio_net_config: all that our features use. */
struct net_config {
	uint8_t mac[6];
	uint16_t status;
	uint16_t max_virtqueue_pairs;
	uint16_t mtu;
};
_Static_assert(sizeof(struct net_config) == 12, "virtio-net config layout");

/* Where placing a frame into RX buffers stands. */
enum net_rx_result {
	RX_PLACED,  /* all of it is in the guest's buffers, pushed */
	RX_DROPPED, /* no room it could ever fit: buffers returned empty */
	RX_DRY,	    /* the ring ran out first: frame and buffers held */
};

struct virtio_net {
	struct virtio_dev dev;
	struct ioloop *loop;
	int fd;
	unsigned int watching; /* epoll events we are registered for; 0 = none */
	bool link_up;
	struct net_config config;
	struct virtio_net_stats stats;

	/* TX: a chain the socket had no room for, sent once it has. */
	bool tx_held;
	struct virtq_elem tx_elem;

	/* RX: the frame being placed and the buffers it took so far. */
	bool rx_blocked; /* not reading the socket until the driver adds buffers */
	bool rx_have;
	uint32_t rx_len;     /* the frame's length */
	uint32_t rx_off;     /* header and frame bytes in the guest's buffers */
	uint32_t rx_direct;  /* frame bytes read straight into them; rx_buf has the rest */
	uint32_t rx_guess;   /* the last frame's length: how much room to take */
	unsigned int rx_nr;
	uint16_t rx_heads[VIRTQ_MAX_SIZE];
	uint32_t rx_lens[VIRTQ_MAX_SIZE];
	struct virtq_elem rx_first; /* the buffer whose header gets num_buffers */
	struct virtq_elem rx_elem;
	uint8_t *rx_buf;
	struct iovec rx_iov[NET_RX_IOV];
};

static void net_fd_event(void *opaque, int fd, unsigned int events);

static bool net_mergeable(const struct virtio_net *n)
{
	return n->dev.driver_features & (1ULL << VIRTIO_NET_F_MRG_RXBUF);
}

static bool net_queue_usable(struct virtio_net *n, unsigned int q)
{
	return n->dev.vqs[q].ready && !n->dev.vqs[q].broken && virtio_dev_driver_ok(&n->dev);
}

static void net_link_down(struct virtio_net *n, const char *why);

/* Register for exactly the socket events the device's state waits on. */
static void net_watch(struct virtio_net *n)
{
	unsigned int want = 0;
	gantry_error_t err = NULL;

	if (n->link_up) {
		if (!n->rx_blocked)
			want |= EPOLLIN;
		if (n->tx_held)
			want |= EPOLLOUT;
	}
	if (want == n->watching)
		return;
	if (n->watching)
		ioloop_remove(n->loop, n->fd);
	n->watching = 0;
	if (want == 0)
		return;
	if (ioloop_add_events(n->loop, n->fd, want, net_fd_event, n, &err) < 0) {
		/* Unwatched, the socket would never be served again. */
		net_link_down(n, gantry_error_str(err));
		gantry_error_free(&err);
		return;
	}
	n->watching = want;
}

static void net_link_down(struct virtio_net *n, const char *why)
{
	if (!n->link_up)
		return;
	log_warn("virtio-net: network worker gone (%s): link down", why);
	n->link_up = false;
	n->config.status = htole16(0);
	virtio_dev_config_changed(&n->dev);
	net_watch(n);
}

/* ---- guest to worker: the TX queue ------------------------------------ */

/* Whether e is a frame we send; drops are counted. */
static bool net_tx_valid(struct virtio_net *n, const struct virtq_elem *e)
{
	struct virtio_net_hdr_mrg_rxbuf h;

	if (e->out_len < NET_HDR_LEN + NET_ETH_HLEN) {
		n->stats.tx_runt++;
		return false;
	}
	if (e->out_len > NET_HDR_LEN + NET_FRAME_MAX) {
		n->stats.tx_oversize++;
		return false;
	}
	virtq_elem_read(e, 0, &h, sizeof(h));
	if (h.hdr.flags != 0 || h.hdr.gso_type != VIRTIO_NET_HDR_GSO_NONE) {
		n->stats.tx_bad_hdr++; /* offloads we never offered */
		return false;
	}
	return true;
}

/* Send e's frame, its buffers past the header, as one message. Returns
 * -EAGAIN when the socket is full, else 0 (sent, or dropped and counted). */
static int net_tx_send(struct virtio_net *n, const struct virtq_elem *e)
{
	struct iovec iov[VIRTQ_MAX_CHAIN];
	struct msghdr msg = { .msg_iov = iov };
	uint64_t skip = NET_HDR_LEN;
	ssize_t r;

	for (unsigned int i = 0; i < e->nr_out; i++) {
		uint8_t *base = e->iov[i].iov_base;
		size_t len = e->iov[i].iov_len;

		if (skip >= len) {
			skip -= len;
			continue;
		}
		iov[msg.msg_iovlen].iov_base = base + skip;
		iov[msg.msg_iovlen].iov_len = len - skip;
		msg.msg_iovlen++;
		skip = 0;
	}
	r = sendmsg(n->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (r >= 0) {
		n->stats.tx_frames++;
		n->stats.tx_bytes += (uint64_t)r;
		return 0;
	}
	switch (errno) {
	case EAGAIN:
	case EINTR:
		return -EAGAIN;
	case EPIPE:
	case ECONNRESET:
	case ECONNREFUSED:
	case ENOTCONN:
		net_link_down(n, strerror(errno));
		return 0;
	default:
		n->stats.tx_error++; /* EMSGSIZE, ENOBUFS: this frame only */
		return 0;
	}
}

/* Send what the ring holds, up to a budget; a full socket stops the round
 * with the chain held. A dead link completes every chain unsent. */
static void net_tx(struct virtio_net *n)
{
	struct virtio_dev *d = &n->dev;
	struct virtq *vq = &d->vqs[NET_TXQ];
	bool bounded = d->queue_fds[NET_TXQ] >= 0;
	unsigned int served = 0;
	uint64_t one = 1;

	if (!net_queue_usable(n, NET_TXQ))
		return;
	while (!(bounded && served == NET_TX_BUDGET)) {
		if (!n->tx_held) {
			int r = virtq_pop(vq, &n->tx_elem);

			if (r == VIRTQ_EMPTY)
				break;
			if (r == VIRTQ_BROKEN) {
				virtio_dev_needs_reset(d);
				break;
			}
			if (r == VIRTQ_BAD_CHAIN || !n->link_up || !net_tx_valid(n, &n->tx_elem)) {
				virtq_push(vq, n->tx_elem.head, 0);
				served++;
				continue;
			}
			n->tx_held = true;
		}
		if (n->link_up && net_tx_send(n, &n->tx_elem) == -EAGAIN)
			break; /* held until the socket is writable */
		n->tx_held = false;
		virtq_push(vq, n->tx_elem.head, 0);
		served++;
	}
	if (served)
		virtio_dev_signal(d, vq);
	if (bounded && served == NET_TX_BUDGET)
		(void)!write(d->queue_fds[NET_TXQ], &one, sizeof(one)); /* the rest next round */
	net_watch(n);
}

/* ---- worker to guest: the RX queue ------------------------------------ */

/* The virtio-net header at the head of the frame's first buffer; the
 * buffer count is written once the frame is placed. */
static void net_rx_header(struct virtio_net *n)
{
	struct virtio_net_hdr_mrg_rxbuf h = { .num_buffers = htole16(1) };

	/* Every frame the worker sends carries sums it made or checked
	 * (libslirp's, its own answers'): the guest need not check them again. */
	if (n->dev.driver_features & (1ULL << VIRTIO_NET_F_GUEST_CSUM))
		h.hdr.flags = VIRTIO_NET_HDR_F_DATA_VALID;
	virtq_elem_write(&n->rx_first, 0, &h, sizeof(h));
}

/* Take buffers for the next frame: as many as the last one needed, fewer if
 * the ring has fewer, each added to rx_iov past the header's room. A buffer
 * unfit for any frame goes back empty at once if it comes first; later, it
 * ends the run (given back, to come first next time), so those taken are
 * always the last popped, which virtq_unpop() can give back. Returns
 * the iovec count (0: none taken), rx_lens[] holding each buffer's room. */
static unsigned int net_rx_take(struct virtio_net *n, unsigned int max, bool *pushed)
{
	struct virtq *vq = &n->dev.vqs[NET_RXQ];
	uint64_t room = 0;
	unsigned int iovs = 0;

	n->rx_nr = 0;
	while (n->rx_nr < max && (n->rx_nr == 0 || room < NET_HDR_LEN + n->rx_guess)) {
		struct virtq_elem *e = n->rx_nr == 0 ? &n->rx_first : &n->rx_elem;
		const struct iovec *in;
		uint64_t skip = n->rx_nr == 0 ? NET_HDR_LEN : 0;
		int r = virtq_pop(vq, e);

		if (r == VIRTQ_EMPTY)
			break;
		if (r == VIRTQ_BROKEN) {
			virtio_dev_needs_reset(&n->dev);
			break;
		}
		/* The driver drops a first buffer shorter than a header and an
		 * Ethernet header; later ones need only be writable. */
		if (r == VIRTQ_BAD_CHAIN || e->nr_in == 0 ||
		    (n->rx_nr == 0 && e->in_len < NET_HDR_LEN + NET_ETH_HLEN)) {
			if (n->rx_nr > 0) {
				virtq_unpop(vq, 1); /* the next frame's first */
				break;
			}
			n->stats.rx_bad_buf++;
			virtq_push(vq, e->head, 0);
			*pushed = true;
			continue;
		}
		if (iovs + e->nr_in >= NET_RX_IOV) {
			virtq_unpop(vq, 1); /* the next frame's, or a copy's */
			break;
		}
		in = e->iov + e->nr_out;
		for (unsigned int i = 0; i < e->nr_in; i++) {
			if (skip >= in[i].iov_len) {
				skip -= in[i].iov_len;
				continue;
			}
			n->rx_iov[iovs].iov_base = (uint8_t *)in[i].iov_base + skip;
			n->rx_iov[iovs].iov_len = in[i].iov_len - skip;
			iovs++;
			skip = 0;
		}
		n->rx_heads[n->rx_nr] = e->head;
		n->rx_lens[n->rx_nr] = (uint32_t)MIN(e->in_len, (uint64_t)UINT32_MAX);
		room += e->in_len;
		n->rx_nr++;
	}
	return n->rx_nr ? iovs : 0;
}

/* Read the next frame into the buffers taken (and rx_buf past them). Returns
 * 1 with a frame held, 0 when there is none now (or the link went down), -1
 * for a frame dropped; but for 1 the buffers are given back. */
static int net_rx_read(struct virtio_net *n, unsigned int iovs)
{
	struct virtq *vq = &n->dev.vqs[NET_RXQ];
	struct msghdr msg = { .msg_iov = n->rx_iov, .msg_iovlen = iovs + 1 };
	uint64_t left, direct = 0;
	unsigned int used = 0;
	ssize_t r;

	for (unsigned int i = 0; i < iovs; i++)
		direct += n->rx_iov[i].iov_len;
	n->rx_iov[iovs].iov_base = n->rx_buf;
	n->rx_iov[iovs].iov_len = NET_FRAME_MAX;
	r = recvmsg(n->fd, &msg, MSG_DONTWAIT | MSG_TRUNC);
	if (r <= 0 || r > NET_FRAME_MAX || r < NET_ETH_HLEN) {
		virtq_unpop(vq, n->rx_nr); /* what they hold is no frame of theirs */
		n->rx_nr = 0;
	}
	if (r < 0) {
		if (errno != EAGAIN && errno != EINTR)
			net_link_down(n, strerror(errno));
		return 0;
	}
	if (r == 0) {
		net_link_down(n, "end of file");
		return 0;
	}
	if (r > NET_FRAME_MAX || (msg.msg_flags & MSG_TRUNC)) {
		n->stats.rx_trunc++; /* MSG_TRUNC gave the whole length */
		return -1;
	}
	if (r < NET_ETH_HLEN) {
		n->stats.rx_runt++;
		return -1;
	}
	n->rx_guess = (uint32_t)r;
	n->rx_len = (uint32_t)r;
	n->rx_direct = (uint32_t)MIN((uint64_t)r, direct);
	/* Buffers in the order taken, each full before the next. */
	left = NET_HDR_LEN + (uint64_t)n->rx_direct;
	while (used < n->rx_nr && left > 0) {
		uint32_t fill = (uint32_t)MIN(left, (uint64_t)n->rx_lens[used]);

		n->rx_lens[used++] = fill;
		left -= fill;
	}
	virtq_unpop(vq, n->rx_nr - used);
	n->rx_nr = used;
	n->rx_off = NET_HDR_LEN + n->rx_direct;
	n->rx_have = true;
	net_rx_header(n);
	return 1;
}

/* Hand back the buffers the held frame took, empty. */
static void net_rx_drop(struct virtio_net *n)
{
	struct virtq *vq = &n->dev.vqs[NET_RXQ];

	for (unsigned int i = 0; i < n->rx_nr; i++)
		virtq_push(vq, n->rx_heads[i], 0);
	n->stats.rx_dropped++;
	n->rx_have = false;
	n->rx_nr = 0;
}

/* Copy what fits of the frame's rest (in rx_buf) into e, the rx_nr'th
 * buffer. */
static void net_rx_copy(struct virtio_net *n, const struct virtq_elem *e)
{
	uint32_t total = NET_HDR_LEN + n->rx_len;
	uint64_t chunk = MIN(e->in_len, (uint64_t)(total - n->rx_off));

	virtq_elem_write(e, 0, n->rx_buf + (n->rx_off - NET_HDR_LEN - n->rx_direct), chunk);
	n->rx_off += (uint32_t)chunk;
	n->rx_heads[n->rx_nr] = e->head;
	n->rx_lens[n->rx_nr] = (uint32_t)chunk;
	n->rx_nr++;
}

/* Place the rest of the held frame: take RX buffers until it fits, then
 * push them all with the count in the first header. Buffers unfit for any
 * frame go back empty at once, so they never sit between the frame's own. */
static enum net_rx_result net_rx_place(struct virtio_net *n, bool *pushed)
{
	struct virtio_dev *d = &n->dev;
	struct virtq *vq = &d->vqs[NET_RXQ];
	/* The guest cannot add buffers while we hold all it has. */
	unsigned int max = net_mergeable(n) ? vq->num : 1;
	uint16_t count;

	while (n->rx_off < NET_HDR_LEN + n->rx_len) {
		struct virtq_elem *e = &n->rx_elem;
		int r;

		if (n->rx_nr >= max) {
			net_rx_drop(n);
			*pushed = true;
			return RX_DROPPED;
		}
		r = virtq_pop(vq, e);
		if (r == VIRTQ_EMPTY)
			return RX_DRY;
		if (r == VIRTQ_BROKEN) {
			virtio_dev_needs_reset(d);
			return RX_DRY; /* and so it stays until a reset */
		}
		if (r == VIRTQ_BAD_CHAIN || e->nr_in == 0) {
			n->stats.rx_bad_buf++;
			virtq_push(vq, e->head, 0);
			*pushed = true;
			continue;
		}
		net_rx_copy(n, e);
	}
	count = htole16((uint16_t)n->rx_nr);
	virtq_elem_write(&n->rx_first, offsetof(struct virtio_net_hdr_mrg_rxbuf, num_buffers),
			 &count, sizeof(count));
	/* All at once: a driver polling beside us that saw the first buffer
	 * before the rest were published would drop the frame, then take the
	 * rest for frames of their own. */
	virtq_push_many(vq, n->rx_heads, n->rx_lens, n->rx_nr);
	n->stats.rx_frames++;
	n->stats.rx_bytes += n->rx_len;
	n->rx_have = false;
	n->rx_nr = 0;
	*pushed = true;
	return RX_PLACED;
}

/* Move frames from the socket into the guest, up to a budget; a level-
 * triggered watch brings us back for the rest. One interrupt per round. */
static void net_rx(struct virtio_net *n)
{
	bool pushed = false;

	if (!net_queue_usable(n, NET_RXQ)) {
		n->rx_blocked = true; /* the driver's first notify unblocks it */
		net_watch(n);
		return;
	}
	for (unsigned int frames = 0; frames < NET_RX_BUDGET; frames++) {
		if (!n->rx_have) {
			struct virtq *vq = &n->dev.vqs[NET_RXQ];
			unsigned int iovs;
			int r = 0;

			if (!n->link_up || n->rx_blocked)
				break;
			iovs = net_rx_take(n, net_mergeable(n) ? vq->num : 1, &pushed);
			if (n->rx_nr == 0) {
				n->rx_blocked = true; /* dry: read nothing */
				break;
			}
			r = net_rx_read(n, iovs);
			if (r == 0)
				break;
			if (r < 0)
				continue;
		}
		if (net_rx_place(n, &pushed) == RX_DRY) {
			n->rx_blocked = true;
			break;
		}
	}
	if (pushed)
		virtio_dev_signal(&n->dev, &n->dev.vqs[NET_RXQ]);
	net_watch(n);
}

/* ---- the device ------------------------------------------------------- */

static void net_fd_event(void *opaque, int fd, unsigned int events)
{
	struct virtio_net *n = opaque;

	(void)fd;
	(void)events; /* the state says what to do; errors surface in the calls */
	pthread_mutex_lock(&n->dev.lock);
	/* Frames the worker sent before hanging up come first. */
	if (!n->rx_blocked)
		net_rx(n);
	if (n->tx_held || !n->link_up)
		net_tx(n); /* a dead link completes what the guest queued meanwhile */
	pthread_mutex_unlock(&n->dev.lock);
}

static void net_queue_notify(struct virtio_dev *d, unsigned int q)
{
	struct virtio_net *n = d->priv;

	if (q == NET_TXQ && !n->tx_held)
		net_tx(n); /* a held chain waits for the socket, not for kicks */
	if (q == NET_RXQ) {
		n->rx_blocked = false;
		net_rx(n);
	}
}

static void net_reset(struct virtio_dev *d)
{
	struct virtio_net *n = d->priv;

	/* The queues are gone: held chains and buffers with them. */
	n->tx_held = false;
	if (n->rx_have)
		n->stats.rx_dropped++;
	n->rx_have = false;
	n->rx_nr = 0;
	n->rx_blocked = true;
	net_watch(n);
}

static void net_destroy(struct virtio_dev *d)
{
	struct virtio_net *n = d->priv;

	if (n->watching)
		ioloop_remove(n->loop, n->fd);
	free(n->rx_buf);
	virtio_dev_destroy(d);
	free(n);
}

/* A save keeps no frame in flight: the network worker is the saved
 * VM's, and a restored VM gets a fresh one. A TX chain held for the
 * socket goes back to the ring (the restored device sends it to its own
 * worker); the buffers a frame half placed took go back too, and the
 * frame is lost, as on a wire. Both were the last popped of their ring. */
static int net_save(struct virtio_dev *d, void *data, size_t *len, gantry_error_t *err)
{
	struct virtio_net *n = d->priv;

	(void)err;
	(void)data;
	if (n->tx_held)
		virtq_unpop(&d->vqs[NET_TXQ], 1);
	n->tx_held = false;
	if (n->rx_have && n->rx_nr)
		virtq_unpop(&d->vqs[NET_RXQ], n->rx_nr);
	n->rx_have = false;
	n->rx_nr = 0;
	*len = 0;
	return 0;
}

/* The rings are the saved ones: read frames for them from the start. */
static void net_resumed(struct virtio_dev *d, bool restored)
{
	struct virtio_net *n = d->priv;

	(void)restored;
	n->rx_blocked = false;
	net_watch(n);
}

static const struct virtio_dev_ops net_ops = {
	.name = "virtio-net",
	.device_id = VIRTIO_ID_NET,
	.num_queues = 2,
	.queue_notify = net_queue_notify,
	.reset = net_reset,
	.destroy = net_destroy,
	.save = net_save,
	.resumed = net_resumed,
};

struct virtio_dev *virtio_net_create(const struct guest_mem *mem, struct ioloop *loop, int frame_fd,
				     const uint8_t mac[6], gantry_error_t *err)
{
	struct virtio_net *n;
	int type;
	socklen_t len = sizeof(type);

	if (getsockopt(frame_fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0) {
		gantry_error_errno(err, "virtio-net: frame fd %d", frame_fd);
		return NULL;
	}
	if (type != SOCK_SEQPACKET) {
		gantry_error(err, EINVAL, "virtio-net: frame fd %d is not a SOCK_SEQPACKET socket",
			     frame_fd);
		return NULL;
	}
	n = xzalloc(sizeof(*n));
	n->loop = loop;
	n->fd = frame_fd;
	n->link_up = true;
	n->rx_blocked = true; /* until the driver is up with RX buffers */
	n->rx_buf = xmalloc(NET_FRAME_MAX);
	memcpy(n->config.mac, mac, sizeof(n->config.mac));
	n->config.status = htole16(VIRTIO_NET_S_LINK_UP);
	n->config.max_virtqueue_pairs = htole16(1);
	n->config.mtu = htole16(NET_MTU);
	virtio_dev_init(&n->dev, &net_ops, n, mem, NET_FEATURES, &n->config, sizeof(n->config));
	return &n->dev;
}

struct virtio_net_stats virtio_net_stats(struct virtio_dev *d)
{
	struct virtio_net *n = d->priv;
	struct virtio_net_stats s;

	pthread_mutex_lock(&d->lock);
	s = n->stats;
	pthread_mutex_unlock(&d->lock);
	return s;
}

bool virtio_net_link_up(struct virtio_dev *d)
{
	struct virtio_net *n = d->priv;
	bool up;

	pthread_mutex_lock(&d->lock);
	up = n->link_up;
	pthread_mutex_unlock(&d->lock);
	return up;
}
