/* What the vsock device's tests share (test_vsock.c, test_vsock_host.c):
 * a fake guest driver that brings the device up through the virtio-mmio
 * registers over a calloc'd guest RAM, sends packets on the TX queue and
 * reads what the device puts into its RX buffers, with the credit
 * bookkeeping of the guest's end of a stream; the host side, real Unix
 * sockets in a temporary directory; and the fixture. The I/O loop is
 * driven on the test thread with ioloop_run_once, so every step is
 * deterministic: a Unix socket write is visible to epoll at once.
 * Include after <cmocka.h>. */
#ifndef GANTRY_TESTS_UNIT_VSOCK_RIG_H
#define GANTRY_TESTS_UNIT_VSOCK_RIG_H

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_ring.h>
#include <linux/virtio_vsock.h>

#include "common/util.h"
#include "virtio/devices.h"
#include "virtio/mmio.h"
#include "virtio/vsock.h"
#include "vmm/ioloop.h"
#include "../virtio_driver.h"

#define GUEST_CID    42
#define HDR	     ((uint32_t)sizeof(struct virtio_vsock_hdr))
#define QN	     64
#define RXQ	     0
#define TXQ	     1
#define EVQ	     2
#define RAM_SIZE     (4 * MiB)
#define DESC_GPA(q)  (0x10000ULL + (uint64_t)(q)*0x4000)
#define RXBUF_SIZE   (HDR + 4096) /* what Linux's driver offers */
#define RXBUF_GPA(i) (0x100000ULL + (uint64_t)(i)*RXBUF_SIZE)
#define EVBUF_GPA    0x180000ULL
#define TX_HDR_GPA   0x200000ULL
#define TX_DATA_GPA  0x201000ULL
#define TX_DATA_MAX  (128 * KiB)
#define STREAM_LEN   (1 * MiB)

#define S_ACK VIRTIO_CONFIG_S_ACKNOWLEDGE
#define S_DRV VIRTIO_CONFIG_S_DRIVER
#define S_FOK VIRTIO_CONFIG_S_FEATURES_OK
#define S_DOK VIRTIO_CONFIG_S_DRIVER_OK

/* A packet the guest received. */
struct pkt {
	struct virtio_vsock_hdr h;
	uint32_t len;
	uint8_t *data;
};

struct fx {
	uint8_t *ram;
	struct guest_mem mem;
	struct ioloop loop;
	struct virtio_dev *d;
	char dir[64];
	struct vdrv drv;
	bool threaded; /* the loop runs on its own thread: never run it here */
	struct pkt *pkts;
	size_t nr_pkts, pkt_head, pkt_cap;
};

/* The guest's end of one stream, with its credit bookkeeping. */
struct gconn {
	uint32_t gport, hport;
	uint32_t buf_alloc; /* our window */
	uint32_t fwd_cnt;   /* bytes our application consumed */
	uint32_t adv_fwd;   /* fwd_cnt in the last packet we sent */
	uint32_t rx_cnt;    /* bytes the device sent us */
	uint32_t peer_buf_alloc, peer_fwd_cnt, tx_cnt;
};

/* ---- the fake guest driver (virtio_driver.h) ------------------------- */

/* Initialisation as Linux's driver does it, all RX buffers offered. */
static void driver_up(struct fx *f)
{
	uint64_t feat;

	vdrv_begin(&f->drv);
	feat = vdrv_dev_features(&f->drv);
	assert_int_equal(feat, (1ULL << VIRTIO_F_VERSION_1_BIT) | (1ULL << VIRTIO_RING_F_EVENT_IDX));
	/* This driver keeps no event indices. */
	assert_int_equal(vdrv_features_ok(&f->drv, 1ULL << VIRTIO_F_VERSION_1_BIT),
			 S_ACK | S_DRV | S_FOK);
	assert_true(vdrv_queues_up(&f->drv));
	vdrv_driver_ok(&f->drv);
	for (unsigned int i = 0; i < QN; i++) {
		vdrv_set_desc(&f->drv, RXQ, i, RXBUF_GPA(i), RXBUF_SIZE, VRING_DESC_F_WRITE, 0);
		vdrv_offer(&f->drv, RXQ, (uint16_t)i);
	}
	for (unsigned int i = 0; i < 4; i++) {
		vdrv_set_desc(&f->drv, EVQ, i, EVBUF_GPA + 8 * i, 8, VRING_DESC_F_WRITE, 0);
		vdrv_offer(&f->drv, EVQ, (uint16_t)i);
	}
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NOTIFY, RXQ);
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NOTIFY, EVQ);
}

/* Take what the device put in the RX queue, giving each buffer back. */
static void guest_poll(struct fx *f)
{
	bool again = true;

	while (again) {
		uint32_t id, len;

		again = false;
		while (vdrv_used_next(&f->drv, RXQ, &id, &len)) {
			struct pkt *p;

			assert_true(id < QN);
			assert_true(len >= HDR && len <= RXBUF_SIZE);
			if (f->nr_pkts == f->pkt_cap) {
				f->pkt_cap = f->pkt_cap ? 2 * f->pkt_cap : 64;
				f->pkts = xrealloc(f->pkts, f->pkt_cap * sizeof(*f->pkts));
			}
			p = &f->pkts[f->nr_pkts++];
			memcpy(&p->h, f->ram + RXBUF_GPA(id), HDR);
			p->len = len - HDR;
			assert_int_equal(p->h.len, p->len);
			assert_int_equal(p->h.dst_cid, GUEST_CID);
			assert_int_equal(p->h.type, VIRTIO_VSOCK_TYPE_STREAM);
			p->data = xmalloc(p->len);
			memcpy(p->data, f->ram + RXBUF_GPA(id) + HDR, p->len);
			vdrv_offer(&f->drv, RXQ, (uint16_t)id);
			again = true;
		}
		if (again)
			vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NOTIFY, RXQ);
	}
}

/* Run the loop until it has nothing more to do right now. */
static void pump(struct fx *f)
{
	int n;

	if (f->threaded) {
		guest_poll(f);
		return;
	}
	do {
		n = ioloop_run_once(&f->loop, 0);
		assert_true(n >= 0);
		guest_poll(f);
	} while (n > 0);
}

/* The next packet the guest got, or NULL; the caller frees its data. */
static struct pkt *pkt_next(struct fx *f)
{
	if (f->pkt_head == f->nr_pkts) {
		f->pkt_head = f->nr_pkts = 0;
		return NULL;
	}
	return &f->pkts[f->pkt_head++];
}

static void expect_pkt(struct fx *f, uint16_t op, uint32_t src_port, uint32_t dst_port)
{
	struct pkt *p = pkt_next(f);

	assert_non_null(p);
	assert_int_equal(p->h.src_cid, VSOCK_HOST_CID);
	assert_int_equal(p->h.op, op);
	assert_int_equal(p->h.src_port, src_port);
	assert_int_equal(p->h.dst_port, dst_port);
	free(p->data);
}

static void drain_pkts(struct fx *f)
{
	struct pkt *p;

	while ((p = pkt_next(f)) != NULL)
		free(p->data);
}

static void expect_no_pkt(struct fx *f)
{
	struct pkt *p = pkt_next(f);

	if (p)
		fail_msg("unexpected packet op %u %u -> %u", p->h.op, p->h.src_port, p->h.dst_port);
}

static void mk_hdr(struct virtio_vsock_hdr *h, uint32_t src_port, uint32_t dst_port, uint16_t op,
		   uint32_t len)
{
	*h = (struct virtio_vsock_hdr){
		.src_cid = GUEST_CID,
		.dst_cid = VSOCK_HOST_CID,
		.src_port = src_port,
		.dst_port = dst_port,
		.len = len,
		.type = VIRTIO_VSOCK_TYPE_STREAM,
		.op = op,
		.buf_alloc = 64 * KiB,
	};
}

/* One TX packet: hdr_len bytes of header, then len bytes of payload. */
static void tx_raw(struct fx *f, const void *hdr, uint32_t hdr_len, const void *data, uint32_t len)
{
	uint16_t before = vdrv_used_idx(&f->drv, TXQ);

	assert_true(len <= TX_DATA_MAX);
	memcpy(f->ram + TX_HDR_GPA, hdr, hdr_len);
	if (len)
		memcpy(f->ram + TX_DATA_GPA, data, len);
	vdrv_set_desc(&f->drv, TXQ, 0, TX_HDR_GPA, hdr_len, len ? VRING_DESC_F_NEXT : 0, 1);
	vdrv_set_desc(&f->drv, TXQ, 1, TX_DATA_GPA, len, 0, 0);
	vdrv_offer(&f->drv, TXQ, 0);
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NOTIFY, TXQ);
	assert_int_equal(vdrv_used_idx(&f->drv, TXQ), (uint16_t)(before + 1));
	guest_poll(f);
}

static void tx(struct fx *f, const struct virtio_vsock_hdr *h, const void *data, uint32_t len)
{
	tx_raw(f, h, HDR, data, len);
}

static void gc_send(struct fx *f, struct gconn *gc, uint16_t op, uint32_t flags, const void *data,
		    uint32_t len)
{
	struct virtio_vsock_hdr h;

	mk_hdr(&h, gc->gport, gc->hport, op, len);
	h.flags = flags;
	h.buf_alloc = gc->buf_alloc;
	h.fwd_cnt = gc->fwd_cnt;
	gc->adv_fwd = gc->fwd_cnt;
	if (op == VIRTIO_VSOCK_OP_RW)
		gc->tx_cnt += len;
	tx(f, &h, data, len);
}

/* Account for a packet of gc: the device's credit, and that it kept to ours. */
static void gc_take(struct gconn *gc, const struct pkt *p)
{
	assert_int_equal(p->h.src_port, gc->hport);
	assert_int_equal(p->h.dst_port, gc->gport);
	assert_int_equal(p->h.buf_alloc, VSOCK_BUF_ALLOC);
	gc->peer_buf_alloc = p->h.buf_alloc;
	gc->peer_fwd_cnt = p->h.fwd_cnt;
	if (p->h.op == VIRTIO_VSOCK_OP_RW) {
		assert_true(gc->rx_cnt - gc->adv_fwd + p->len <= gc->buf_alloc);
		gc->rx_cnt += p->len;
	}
}

static uint32_t gc_credit(const struct gconn *gc)
{
	return gc->peer_buf_alloc - (gc->tx_cnt - gc->peer_fwd_cnt);
}

/* ---- the host side ---------------------------------------------------- */

static void sock_path(struct fx *f, char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", f->dir, name);
}

static int host_listen(struct fx *f, uint32_t port)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char name[32];
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	snprintf(name, sizeof(name), "%u.sock", port);
	sock_path(f, sa.sun_path, sizeof(sa.sun_path), name);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 2048), 0);
	return fd;
}

static void set_nonblock(int fd)
{
	assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
}

static int host_accept(int lfd)
{
	int fd;

	set_nonblock(lfd);
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	return fd;
}

static int host_client(struct fx *f)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	sock_path(f, sa.sun_path, sizeof(sa.sun_path), VSOCK_LISTEN_NAME);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Whether the peer closed fd (after any data, which is discarded). */
static bool host_closed(int fd)
{
	char buf[256];
	ssize_t n;

	set_nonblock(fd);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		;
	return n == 0 || (n < 0 && errno == ECONNRESET);
}

static void host_write(int fd, const char *s)
{
	assert_int_equal(write_full(fd, s, strlen(s)), 0);
}

/* Read exactly len bytes that are already there. */
static void host_read(int fd, void *buf, size_t len)
{
	set_nonblock(fd);
	assert_int_equal(read(fd, buf, len), (ssize_t)len);
}

/* ---- fixture ---------------------------------------------------------- */

static int fx_setup(void **state)
{
	struct fx *f = xzalloc(sizeof(*f));
	gantry_error_t err = NULL;
	const char *tmp = getenv("TMPDIR");

	snprintf(f->dir, sizeof(f->dir), "%s/gantry-vsock-XXXXXX", tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(f->dir));
	f->ram = xzalloc(RAM_SIZE);
	guest_mem_init_buffer(&f->mem, f->ram, RAM_SIZE);
	assert_int_equal(ioloop_init(&f->loop, &err), 0);
	f->d = virtio_vsock_create(&f->mem, &f->loop, GUEST_CID, f->dir, NULL, &err);
	if (f->d == NULL)
		fail_msg("virtio_vsock_create: %s", gantry_error_str(err));
	vdrv_init(&f->drv, f->ram, f->d, QN, 3, DESC_GPA(0), DESC_GPA(1) - DESC_GPA(0));
	driver_up(f);
	pump(f);
	expect_no_pkt(f);
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;
	char cmd[256];

	f->d->ops->destroy(f->d);
	ioloop_destroy(&f->loop);
	while (f->pkt_head < f->nr_pkts)
		free(f->pkts[f->pkt_head++].data);
	free(f->pkts);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f->ram);
	free(f);
	return 0;
}

/* A guest connect to host port hport, accepted on lfd; returns the host fd. */
static int guest_connect(struct fx *f, struct gconn *gc, uint32_t gport, uint32_t hport, int lfd)
{
	int afd;

	*gc = (struct gconn){ .gport = gport, .hport = hport, .buf_alloc = 64 * KiB };
	gc_send(f, gc, VIRTIO_VSOCK_OP_REQUEST, 0, NULL, 0);
	pump(f);
	{
		struct pkt *p = pkt_next(f);

		assert_non_null(p);
		assert_int_equal(p->h.op, VIRTIO_VSOCK_OP_RESPONSE);
		gc_take(gc, p);
		free(p->data);
	}
	afd = host_accept(lfd);
	assert_true(afd >= 0);
	return afd;
}

#endif
