/* Unit tests for virtio/vsock.c and vsock_conn.c. A fake guest driver brings
 * the device up through the virtio-mmio registers over a calloc'd guest RAM,
 * sends packets on the TX queue and reads what the device puts into its RX
 * buffers; the host side is real Unix sockets in a temporary directory. The
 * I/O loop is driven on the test thread with ioloop_run_once, so every step
 * is deterministic: a Unix socket write is visible to epoll at once. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_ring.h>
#include <linux/virtio_vsock.h>

#include "common/util.h"
#include "skip.h"
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

/* ---- tests ------------------------------------------------------------ */

static void test_config(void **state)
{
	struct fx *f = *state;
	char path[256];
	struct stat st;
	uint64_t cid = 0;
	uint8_t b;

	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_DEVICE_ID), VSOCK_DEVICE_ID);
	for (unsigned int i = 0; i < 8; i++) {
		virtio_mmio_access(f->d, VIRTIO_MMIO_CONFIG + i, &b, 1, false);
		cid |= (uint64_t)b << (8 * i);
	}
	assert_int_equal(cid, GUEST_CID);
	/* The guest cannot change its CID. */
	b = 7;
	virtio_mmio_access(f->d, VIRTIO_MMIO_CONFIG, &b, 1, true);
	virtio_mmio_access(f->d, VIRTIO_MMIO_CONFIG, &b, 1, false);
	assert_int_equal(b, GUEST_CID);
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_SEL, 3);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_NUM_MAX), 0);

	sock_path(f, path, sizeof(path), VSOCK_LISTEN_NAME);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
}

static void test_create_errors(void **state)
{
	struct fx *f = *state;
	gantry_error_t err = NULL;
	char longdir[200];

	assert_null(virtio_vsock_create(&f->mem, &f->loop, 2, f->dir, NULL, &err));
	assert_non_null(strstr(gantry_error_str(err), "reserved"));
	gantry_error_free(&err);
	assert_null(virtio_vsock_create(&f->mem, &f->loop, 1ULL << 32, f->dir, NULL, &err));
	gantry_error_free(&err);
	memset(longdir, 'a', sizeof(longdir) - 1);
	longdir[sizeof(longdir) - 1] = '\0';
	assert_null(virtio_vsock_create(&f->mem, &f->loop, 3, longdir, NULL, &err));
	assert_non_null(strstr(gantry_error_str(err), "too long"));
	gantry_error_free(&err);
	assert_null(virtio_vsock_create(&f->mem, &f->loop, 3, "/nonexistent-gantry-dir", NULL, &err));
	assert_non_null(strstr(gantry_error_str(err), "bind"));
	gantry_error_free(&err);
}

static void test_guest_connect(void **state)
{
	struct fx *f = *state;
	int lfd = host_listen(f, 5000);
	struct gconn gc;
	int afd = guest_connect(f, &gc, 40000, 5000, lfd);
	char buf[16];
	struct pkt *p;

	gc_send(f, &gc, VIRTIO_VSOCK_OP_RW, 0, "hello", 5);
	host_read(afd, buf, 5);
	assert_memory_equal(buf, "hello", 5);

	host_write(afd, "world");
	pump(f);
	p = pkt_next(f);
	assert_non_null(p);
	assert_int_equal(p->h.op, VIRTIO_VSOCK_OP_RW);
	gc_take(&gc, p);
	assert_int_equal(p->len, 5);
	assert_memory_equal(p->data, "world", 5);
	free(p->data);
	expect_no_pkt(f);

	/* A CREDIT_REQUEST is answered. */
	gc_send(f, &gc, VIRTIO_VSOCK_OP_CREDIT_REQUEST, 0, NULL, 0);
	pump(f);
	p = pkt_next(f);
	assert_non_null(p);
	assert_int_equal(p->h.op, VIRTIO_VSOCK_OP_CREDIT_UPDATE);
	assert_int_equal(p->h.fwd_cnt, 5);
	free(p->data);
	close(afd);
	close(lfd);
}

static void test_no_listener(void **state)
{
	struct fx *f = *state;
	struct virtio_vsock_hdr h;

	mk_hdr(&h, 40001, 5999, VIRTIO_VSOCK_OP_REQUEST, 0);
	tx(f, &h, NULL, 0);
	pump(f);
	expect_pkt(f, VIRTIO_VSOCK_OP_RST, 5999, 40001);
	expect_no_pkt(f);
	/* Data for a stream that does not exist is answered RST too, an RST not. */
	mk_hdr(&h, 40001, 5999, VIRTIO_VSOCK_OP_RW, 3);
	tx(f, &h, "abc", 3);
	mk_hdr(&h, 40001, 5999, VIRTIO_VSOCK_OP_RST, 0);
	tx(f, &h, NULL, 0);
	pump(f);
	expect_pkt(f, VIRTIO_VSOCK_OP_RST, 5999, 40001);
	expect_no_pkt(f);
}

static uint8_t pattern(uint32_t i, uint8_t seed)
{
	return (uint8_t)(i * 131 + (i >> 9) * 7 + seed);
}

static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

#define FNV_INIT 0xcbf29ce484222325ULL

/* 1 MiB each way at once: the guest keeps to the device's credit and the
 * device to the guest's 64 KiB window; the host reads only now and then, so
 * the device has to hold data and update the guest's credit as it drains. */
static void test_transfer(void **state)
{
	struct fx *f = *state;
	int lfd = host_listen(f, 5001);
	struct gconn gc;
	int afd = guest_connect(f, &gc, 40002, 5001, lfd);
	static uint8_t out[STREAM_LEN], chunk[VSOCK_MAX_PKT];
	uint64_t want = FNV_INIT, got_host = FNV_INIT, got_guest = FNV_INIT;
	uint32_t h2g_sent = 0, g2h_sent = 0, h2g_recv = 0, g2h_recv = 0;
	unsigned int rounds = 0, stalls = 0;

	for (uint32_t i = 0; i < STREAM_LEN; i++)
		out[i] = pattern(i, 1);
	want = fnv1a(want, out, STREAM_LEN);
	set_nonblock(afd);

	while (h2g_recv < STREAM_LEN || g2h_recv < STREAM_LEN) {
		bool progress = false;
		struct pkt *p;
		ssize_t n;

		assert_true(++rounds < 100000);
		/* Host writes what its socket takes. */
		if (h2g_sent < STREAM_LEN) {
			n = write(afd, out + h2g_sent, STREAM_LEN - h2g_sent);
			if (n > 0) {
				h2g_sent += (uint32_t)n;
				progress = true;
			} else {
				assert_true(errno == EAGAIN);
			}
		}
		/* Guest sends what its credit allows, in packets of up to 64 KiB. */
		while (g2h_sent < STREAM_LEN && gc_credit(&gc) > 0) {
			uint32_t len =
				MIN(MIN(gc_credit(&gc), VSOCK_MAX_PKT), STREAM_LEN - g2h_sent);

			for (uint32_t i = 0; i < len; i++)
				chunk[i] = pattern(g2h_sent + i, 2);
			gc_send(f, &gc, VIRTIO_VSOCK_OP_RW, 0, chunk, len);
			g2h_sent += len;
			progress = true;
		}
		/* Host reads every fourth round only. */
		if (rounds % 4 == 0) {
			while ((n = read(afd, chunk, sizeof(chunk))) > 0) {
				for (ssize_t i = 0; i < n; i++)
					assert_int_equal(chunk[i],
							 pattern(g2h_recv + (uint32_t)i, 2));
				got_host = fnv1a(got_host, chunk, (size_t)n);
				g2h_recv += (uint32_t)n;
				progress = true;
			}
			assert_true(n < 0 && errno == EAGAIN);
		}
		pump(f);
		/* Guest consumes, and tells the device when it freed half its window. */
		while ((p = pkt_next(f)) != NULL) {
			gc_take(&gc, p);
			if (p->h.op == VIRTIO_VSOCK_OP_RW) {
				got_guest = fnv1a(got_guest, p->data, p->len);
				h2g_recv += p->len;
				gc.fwd_cnt += p->len;
				progress = true;
			} else {
				assert_int_equal(p->h.op, VIRTIO_VSOCK_OP_CREDIT_UPDATE);
			}
			free(p->data);
		}
		if (gc.fwd_cnt - gc.adv_fwd >= gc.buf_alloc / 2)
			gc_send(f, &gc, VIRTIO_VSOCK_OP_CREDIT_UPDATE, 0, NULL, 0);
		stalls = progress ? 0 : stalls + 1;
		assert_true(stalls < 16); /* nothing moved for many rounds: stuck */
	}
	assert_int_equal(h2g_recv, STREAM_LEN);
	assert_int_equal(g2h_recv, STREAM_LEN);
	assert_true(got_guest == fnv1a(FNV_INIT, out, STREAM_LEN));
	for (uint32_t i = 0; i < STREAM_LEN; i++)
		out[i] = pattern(i, 2);
	assert_true(got_host == fnv1a(FNV_INIT, out, STREAM_LEN));
	close(afd);
	close(lfd);
}

static void test_host_connect(void **state)
{
	struct fx *f = *state;
	int cfd = host_client(f);
	struct gconn gc = { .gport = 6000, .buf_alloc = 64 * KiB };
	char line[32], expect[32];
	struct pkt *p;

	/* Bytes written right after the line wait for the stream. */
	host_write(cfd, "CONNECT 6000\nearly");
	pump(f);
	p = pkt_next(f);
	assert_non_null(p);
	assert_int_equal(p->h.op, VIRTIO_VSOCK_OP_REQUEST);
	assert_int_equal(p->h.dst_port, 6000);
	assert_true(p->h.src_port >= VSOCK_EPHEMERAL_BASE);
	assert_int_equal(p->h.buf_alloc, VSOCK_BUF_ALLOC);
	gc.hport = p->h.src_port;
	gc_take(&gc, p);
	free(p->data);
	expect_no_pkt(f);

	gc_send(f, &gc, VIRTIO_VSOCK_OP_RESPONSE, 0, NULL, 0);
	pump(f);
	snprintf(expect, sizeof(expect), "OK %u\n", gc.hport);
	host_read(cfd, line, strlen(expect));
	assert_memory_equal(line, expect, strlen(expect));
	p = pkt_next(f);
	assert_non_null(p);
	assert_int_equal(p->h.op, VIRTIO_VSOCK_OP_RW);
	gc_take(&gc, p);
	assert_int_equal(p->len, 5);
	assert_memory_equal(p->data, "early", 5);
	free(p->data);

	gc_send(f, &gc, VIRTIO_VSOCK_OP_RW, 0, "ping", 4);
	host_read(cfd, line, 4);
	assert_memory_equal(line, "ping", 4);
	host_write(cfd, "pong");
	pump(f);
	p = pkt_next(f);
	assert_non_null(p);
	assert_memory_equal(p->data, "pong", 4);
	free(p->data);

	/* A second client gets another host port. */
	{
		int c2 = host_client(f);

		host_write(c2, "CONNECT 6000\n");
		pump(f);
		p = pkt_next(f);
		assert_non_null(p);
		assert_int_equal(p->h.op, VIRTIO_VSOCK_OP_REQUEST);
		assert_true(p->h.src_port != gc.hport);
		free(p->data);
		close(c2);
	}
	close(cfd);
}

static void test_host_connect_refused(void **state)
{
	struct fx *f = *state;
	int cfd = host_client(f);
	struct virtio_vsock_hdr h;
	struct pkt *p;
	uint32_t hport;

	host_write(cfd, "CONNECT 6001\n");
	pump(f);
	p = pkt_next(f);
	assert_non_null(p);
	hport = p->h.src_port;
	free(p->data);
	mk_hdr(&h, 6001, hport, VIRTIO_VSOCK_OP_RST, 0);
	tx(f, &h, NULL, 0);
	pump(f);
	assert_true(host_closed(cfd));
	expect_no_pkt(f);
	close(cfd);
}

static void test_host_connect_malformed(void **state)
{
	struct fx *f = *state;
	static const char *const lines[] = {
		"CONNEC 1\n",
		"CONNECT\n",
		"CONNECT abc\n",
		"CONNECT -1\n",
		"CONNECT 1 2\n",
		"connect 1\n",
		"CONNECT 4294967295\n",
		"CONNECT 99999999999\n",
		"CONNECT 000000000000000000000000001\n",
		"CONNECT 1234567890123456789012345678901234567890",
	};
	int fds[ARRAY_SIZE(lines)];

	for (unsigned int i = 0; i < ARRAY_SIZE(lines); i++) {
		fds[i] = host_client(f);
		host_write(fds[i], lines[i]);
	}
	pump(f);
	for (unsigned int i = 0; i < ARRAY_SIZE(lines); i++) {
		if (!host_closed(fds[i]))
			fail_msg("line %u `%s` was not refused", i, lines[i]);
		close(fds[i]);
	}
	expect_no_pkt(f);
	/* A client that hangs up halfway through its line. */
	fds[0] = host_client(f);
	host_write(fds[0], "CONNECT 12");
	shutdown(fds[0], SHUT_WR);
	pump(f);
	assert_true(host_closed(fds[0]));
	close(fds[0]);
	expect_no_pkt(f);
}

/* Run the loop (sleeping in epoll only) until fd is closed by the device. */
static bool wait_closed(struct fx *f, int fd, unsigned int ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };

		assert_true(ioloop_run_once(&f->loop, 50) >= 0);
		guest_poll(f);
		if (poll(&pfd, 1, 0) == 1 && host_closed(fd))
			return true;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms)
			return false;
	}
}

static void test_host_connect_timeout(void **state)
{
	struct fx *f = *state;
	int silent = host_client(f), ignored = host_client(f);
	struct pkt *p;
	uint32_t hport;

	host_write(ignored, "CONNECT 6002\n");
	pump(f);
	p = pkt_next(f);
	assert_non_null(p);
	assert_int_equal(p->h.op, VIRTIO_VSOCK_OP_REQUEST);
	hport = p->h.src_port;
	free(p->data);
	/* The guest never answers; the other client never writes its line. */
	assert_true(wait_closed(f, ignored, 3 * VSOCK_CONNECT_TIMEOUT_MS));
	assert_true(wait_closed(f, silent, 3 * VSOCK_CONNECT_TIMEOUT_MS));
	pump(f);
	expect_pkt(f, VIRTIO_VSOCK_OP_RST, hport, 6002);
	expect_no_pkt(f);
	close(silent);
	close(ignored);
}

/* The guest sends exactly the credit it has, the host reading nothing, and
 * then one byte more. */
static void test_credit_overrun(void **state)
{
	struct fx *f = *state;
	int lfd = host_listen(f, 5002);
	struct gconn gc;
	int afd = guest_connect(f, &gc, 40003, 5002, lfd);
	static uint8_t chunk[VSOCK_MAX_PKT];
	uint64_t sent = 0;
	uint32_t len;
	struct pkt *p;

	memset(chunk, 0x5a, sizeof(chunk));
	for (;;) {
		pump(f);
		while ((p = pkt_next(f)) != NULL) {
			assert_int_equal(p->h.op, VIRTIO_VSOCK_OP_CREDIT_UPDATE);
			gc_take(&gc, p);
			free(p->data);
		}
		if (gc_credit(&gc) == 0)
			break;
		len = MIN(gc_credit(&gc), VSOCK_MAX_PKT);
		gc_send(f, &gc, VIRTIO_VSOCK_OP_RW, 0, chunk, len);
		sent += len;
		assert_true(sent < 64 * MiB);
	}
	/* The socket is full and the device holds a whole window. */
	assert_int_equal(gc.tx_cnt - gc.peer_fwd_cnt, VSOCK_BUF_ALLOC);
	gc_send(f, &gc, VIRTIO_VSOCK_OP_RW, 0, chunk, 1);
	pump(f);
	expect_pkt(f, VIRTIO_VSOCK_OP_RST, 5002, 40003);
	expect_no_pkt(f);
	assert_true(host_closed(afd));
	close(afd);
	close(lfd);
}

/* Malformed packets on a live stream reset it; strays get an RST or nothing. */
static void test_hostile_packets(void **state)
{
	struct fx *f = *state;
	int lfd = host_listen(f, 5003);
	static uint8_t big[VSOCK_MAX_PKT + 16];
	struct virtio_vsock_hdr h;
	struct gconn gc;
	int afd;

	struct {
		uint32_t hdr_len, len; /* what hdr.len says, what the buffers hold */
		uint16_t op, type;
	} cases[] = {
		{ 100, 50, VIRTIO_VSOCK_OP_RW, VIRTIO_VSOCK_TYPE_STREAM },
		{ 50, 100, VIRTIO_VSOCK_OP_RW, VIRTIO_VSOCK_TYPE_STREAM },
		{ VSOCK_MAX_PKT + 1, VSOCK_MAX_PKT + 1, VIRTIO_VSOCK_OP_RW,
		  VIRTIO_VSOCK_TYPE_STREAM },
		{ 0xffffffff, 4, VIRTIO_VSOCK_OP_RW, VIRTIO_VSOCK_TYPE_STREAM },
		{ 0, 0, 99, VIRTIO_VSOCK_TYPE_STREAM },
		{ 0, 0, VIRTIO_VSOCK_OP_INVALID, VIRTIO_VSOCK_TYPE_STREAM },
		{ 0, 0, VIRTIO_VSOCK_OP_CREDIT_UPDATE, VIRTIO_VSOCK_TYPE_SEQPACKET },
		{ 0, 0, VIRTIO_VSOCK_OP_REQUEST, VIRTIO_VSOCK_TYPE_STREAM },
		{ 0, 0, VIRTIO_VSOCK_OP_RESPONSE, VIRTIO_VSOCK_TYPE_STREAM },
	};

	for (unsigned int i = 0; i < ARRAY_SIZE(cases); i++) {
		afd = guest_connect(f, &gc, 41000 + i, 5003, lfd);
		mk_hdr(&h, gc.gport, 5003, cases[i].op, cases[i].hdr_len);
		h.type = cases[i].type;
		tx(f, &h, big, cases[i].len);
		pump(f);
		expect_pkt(f, VIRTIO_VSOCK_OP_RST, 5003, gc.gport);
		expect_no_pkt(f);
		if (!host_closed(afd))
			fail_msg("case %u: host socket left open", i);
		close(afd);
	}

	afd = guest_connect(f, &gc, 42000, 5003, lfd);
	/* Not from this guest's CID: dropped, the stream goes on. */
	mk_hdr(&h, gc.gport, 5003, VIRTIO_VSOCK_OP_RST, 0);
	h.src_cid = GUEST_CID + 1;
	tx(f, &h, NULL, 0);
	/* A header cut short: dropped. */
	mk_hdr(&h, gc.gport, 5003, VIRTIO_VSOCK_OP_RST, 0);
	tx_raw(f, &h, HDR - 1, NULL, 0);
	/* To another CID: answered RST from that CID. */
	mk_hdr(&h, gc.gport, 5003, VIRTIO_VSOCK_OP_REQUEST, 0);
	h.dst_cid = 7;
	tx(f, &h, NULL, 0);
	pump(f);
	{
		struct pkt *p = pkt_next(f);

		assert_non_null(p);
		assert_int_equal(p->h.op, VIRTIO_VSOCK_OP_RST);
		assert_int_equal(p->h.src_cid, 7);
		assert_int_equal(p->h.dst_port, gc.gport);
		free(p->data);
	}
	expect_no_pkt(f);
	/* A REQUEST whose length lies makes no connection. */
	mk_hdr(&h, 42001, 5003, VIRTIO_VSOCK_OP_REQUEST, 10);
	tx(f, &h, NULL, 0);
	pump(f);
	expect_pkt(f, VIRTIO_VSOCK_OP_RST, 5003, 42001);
	assert_true(host_accept(lfd) < 0 && errno == EAGAIN);
	/* The first stream still works. */
	gc_send(f, &gc, VIRTIO_VSOCK_OP_RW, 0, "ok", 2);
	{
		char buf[2];

		host_read(afd, buf, 2);
		assert_memory_equal(buf, "ok", 2);
	}
	close(afd);
	close(lfd);
}

static void test_shutdown(void **state)
{
	struct fx *f = *state;
	int lfd = host_listen(f, 5004);
	struct gconn gc;
	int afd = guest_connect(f, &gc, 40005, 5004, lfd);
	char buf[8];
	struct pkt *p;

	/* Guest stops sending: the host reads the data, then EOF. */
	gc_send(f, &gc, VIRTIO_VSOCK_OP_RW, 0, "last", 4);
	gc_send(f, &gc, VIRTIO_VSOCK_OP_SHUTDOWN, VIRTIO_VSOCK_SHUTDOWN_SEND, NULL, 0);
	host_read(afd, buf, 4);
	assert_memory_equal(buf, "last", 4);
	assert_int_equal(read(afd, buf, sizeof(buf)), 0);
	/* The other way still flows. */
	host_write(afd, "more");
	pump(f);
	p = pkt_next(f);
	assert_non_null(p);
	assert_int_equal(p->h.op, VIRTIO_VSOCK_OP_RW);
	assert_memory_equal(p->data, "more", 4);
	free(p->data);
	/* Host stops sending: the guest gets SHUTDOWN SEND. */
	shutdown(afd, SHUT_WR);
	pump(f);
	p = pkt_next(f);
	assert_non_null(p);
	assert_int_equal(p->h.op, VIRTIO_VSOCK_OP_SHUTDOWN);
	assert_int_equal(p->h.flags, VIRTIO_VSOCK_SHUTDOWN_SEND);
	free(p->data);
	expect_no_pkt(f);
	/* Guest closes: RST, and the stream is gone. */
	gc_send(f, &gc, VIRTIO_VSOCK_OP_SHUTDOWN,
		VIRTIO_VSOCK_SHUTDOWN_RCV | VIRTIO_VSOCK_SHUTDOWN_SEND, NULL, 0);
	pump(f);
	expect_pkt(f, VIRTIO_VSOCK_OP_RST, 5004, 40005);
	expect_no_pkt(f);
	gc_send(f, &gc, VIRTIO_VSOCK_OP_RW, 0, "x", 1);
	pump(f);
	expect_pkt(f, VIRTIO_VSOCK_OP_RST, 5004, 40005);
	close(afd);

	/* Guest stops receiving: the host's writes fail. */
	afd = guest_connect(f, &gc, 40006, 5004, lfd);
	gc_send(f, &gc, VIRTIO_VSOCK_OP_SHUTDOWN, VIRTIO_VSOCK_SHUTDOWN_RCV, NULL, 0);
	assert_true(send(afd, "x", 1, MSG_NOSIGNAL) < 0 && errno == EPIPE);
	close(afd);
	pump(f);
	expect_no_pkt(f); /* the guest wants nothing more from this side */
	/* Its data has nowhere to go now: reset. */
	gc_send(f, &gc, VIRTIO_VSOCK_OP_RW, 0, "x", 1);
	pump(f);
	expect_pkt(f, VIRTIO_VSOCK_OP_RST, 5004, 40006);
	expect_no_pkt(f);

	/* Host writes and closes at once: data, then SHUTDOWN; guest's RST ends it. */
	afd = guest_connect(f, &gc, 40007, 5004, lfd);
	host_write(afd, "bye");
	close(afd);
	pump(f);
	p = pkt_next(f);
	assert_non_null(p);
	assert_int_equal(p->h.op, VIRTIO_VSOCK_OP_RW);
	assert_memory_equal(p->data, "bye", 3);
	free(p->data);
	expect_pkt(f, VIRTIO_VSOCK_OP_SHUTDOWN, 5004, 40007);
	gc_send(f, &gc, VIRTIO_VSOCK_OP_RST, 0, NULL, 0);
	pump(f);
	expect_no_pkt(f);
	close(lfd);
}

/* Guest data the host socket cannot take yet is flushed before the close. */
static void test_shutdown_flushes(void **state)
{
	struct fx *f = *state;
	int lfd = host_listen(f, 5005);
	struct gconn gc;
	int afd = guest_connect(f, &gc, 40008, 5005, lfd);
	static uint8_t chunk[VSOCK_MAX_PKT], in[VSOCK_MAX_PKT];
	uint32_t sent = 0, recvd = 0;
	struct pkt *p;
	ssize_t n;

	for (;;) {
		pump(f);
		while ((p = pkt_next(f)) != NULL) {
			gc_take(&gc, p);
			free(p->data);
		}
		if (gc_credit(&gc) == 0)
			break;
		for (uint32_t i = 0; i < MIN(gc_credit(&gc), VSOCK_MAX_PKT); i++)
			chunk[i] = pattern(sent + i, 3);
		n = MIN(gc_credit(&gc), VSOCK_MAX_PKT);
		gc_send(f, &gc, VIRTIO_VSOCK_OP_RW, 0, chunk, (uint32_t)n);
		sent += (uint32_t)n;
	}
	gc_send(f, &gc, VIRTIO_VSOCK_OP_SHUTDOWN,
		VIRTIO_VSOCK_SHUTDOWN_RCV | VIRTIO_VSOCK_SHUTDOWN_SEND, NULL, 0);
	pump(f);
	expect_no_pkt(f); /* not before everything reached the socket */
	set_nonblock(afd);
	for (;;) {
		n = read(afd, in, sizeof(in));
		if (n > 0) {
			for (ssize_t i = 0; i < n; i++)
				assert_int_equal(in[i], pattern(recvd + (uint32_t)i, 3));
			recvd += (uint32_t)n;
			continue;
		}
		if (n == 0)
			break;
		assert_true(errno == EAGAIN);
		pump(f);
	}
	assert_int_equal(recvd, sent);
	p = pkt_next(f);
	assert_non_null(p);
	assert_int_equal(p->h.op, VIRTIO_VSOCK_OP_RST);
	free(p->data);
	close(afd);
	close(lfd);
}

static void test_reset(void **state)
{
	struct fx *f = *state;
	int lfd = host_listen(f, 5006);
	struct gconn gc1, gc2;
	int a1 = guest_connect(f, &gc1, 40010, 5006, lfd);
	int a2 = guest_connect(f, &gc2, 40011, 5006, lfd);
	int cfd = host_client(f), c2;
	char buf[8];

	host_write(cfd, "CONNECT 7000\n");
	c2 = host_client(f); /* still to write its line */
	host_write(a1, "pending");
	pump(f);
	drain_pkts(f);

	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, 0);
	pump(f);
	assert_true(host_closed(a1));
	assert_true(host_closed(a2));
	assert_true(host_closed(cfd));
	assert_true(host_closed(c2));

	driver_up(f);
	pump(f);
	expect_no_pkt(f);
	close(a1);
	a1 = guest_connect(f, &gc1, 40010, 5006, lfd);
	gc_send(f, &gc1, VIRTIO_VSOCK_OP_RW, 0, "again", 5);
	host_read(a1, buf, 5);
	assert_memory_equal(buf, "again", 5);
	close(a1);
	close(a2);
	close(cfd);
	close(c2);
	close(lfd);
}

static void test_conn_cap(void **state)
{
	struct fx *f = *state;
	struct rlimit rl;
	int lfd, cfd;
	struct virtio_vsock_hdr h;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max < VSOCK_MAX_CONNS + 128) {
		skip_because("the hard RLIMIT_NOFILE (%llu) is below the %d fds the device needs "
			     "(one per stream)",
			     (unsigned long long)rl.rlim_max, VSOCK_MAX_CONNS + 128);
		return;
	}
	if (rl.rlim_cur < VSOCK_MAX_CONNS + 128) {
		rl.rlim_cur = VSOCK_MAX_CONNS + 128;
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	lfd = host_listen(f, 5007);
	for (uint32_t i = 0; i < VSOCK_MAX_CONNS; i++) {
		mk_hdr(&h, 50000 + i, 5007, VIRTIO_VSOCK_OP_REQUEST, 0);
		tx(f, &h, NULL, 0);
		pump(f);
		expect_pkt(f, VIRTIO_VSOCK_OP_RESPONSE, 5007, 50000 + i);
	}
	mk_hdr(&h, 60000, 5007, VIRTIO_VSOCK_OP_REQUEST, 0);
	tx(f, &h, NULL, 0);
	pump(f);
	expect_pkt(f, VIRTIO_VSOCK_OP_RST, 5007, 60000);
	/* Host clients are turned away too. */
	cfd = host_client(f);
	pump(f);
	assert_true(host_closed(cfd));
	close(cfd);
	/* One stream closes; a new one fits. */
	mk_hdr(&h, 50000, 5007, VIRTIO_VSOCK_OP_RST, 0);
	tx(f, &h, NULL, 0);
	mk_hdr(&h, 60000, 5007, VIRTIO_VSOCK_OP_REQUEST, 0);
	tx(f, &h, NULL, 0);
	pump(f);
	expect_pkt(f, VIRTIO_VSOCK_OP_RESPONSE, 5007, 60000);
	expect_no_pkt(f);
	close(lfd);
}

/* Packets wait for RX buffers: more RSTs are owed than the guest offered
 * buffers, and the rest go out as it gives buffers back. */
static void test_rx_starved(void **state)
{
	struct fx *f = *state;
	struct virtio_vsock_hdr h;
	struct pkt *p;

	for (unsigned int i = 0; i < QN + 8; i++) {
		uint16_t before = vdrv_used_idx(&f->drv, TXQ);

		mk_hdr(&h, 43000 + i, 5999, VIRTIO_VSOCK_OP_RW, 0);
		memcpy(f->ram + TX_HDR_GPA, &h, HDR);
		vdrv_set_desc(&f->drv, TXQ, 0, TX_HDR_GPA, HDR, 0, 0);
		vdrv_offer(&f->drv, TXQ, 0);
		vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NOTIFY, TXQ);
		assert_int_equal(vdrv_used_idx(&f->drv, TXQ), (uint16_t)(before + 1));
	}
	/* The guest has not looked at its RX queue yet: all QN buffers used. */
	assert_int_equal(vdrv_used_idx(&f->drv, RXQ), QN);
	pump(f);
	for (unsigned int i = 0; i < QN + 8; i++) {
		p = pkt_next(f);
		assert_non_null(p);
		assert_int_equal(p->h.op, VIRTIO_VSOCK_OP_RST);
		assert_int_equal(p->h.dst_port, 43000 + i);
		free(p->data);
	}
	expect_no_pkt(f);
}

/* With the loop on its own thread, as in the VMM: the guest (this thread)
 * waits for the device's interrupt, an eventfd, and resets the device while
 * the loop thread may be handling its sockets. */
static void test_threaded(void **state)
{
	struct fx *f = *state;
	int lfd = host_listen(f, 5009), irq = eventfd(0, EFD_CLOEXEC), afd;
	gantry_error_t err = NULL;
	struct gconn gc;
	uint64_t n;

	assert_true(irq >= 0);
	f->d->irqfd = irq; /* closed by the device */
	assert_int_equal(ioloop_start(&f->loop, &err), 0);
	f->threaded = true;
	afd = guest_connect(f, &gc, 40030, 5009, lfd);
	for (unsigned int round = 0; round < 50; round++) {
		struct pollfd pfd = { .fd = irq, .events = POLLIN };
		struct pkt *p = NULL;

		host_write(afd, "threaded");
		while (p == NULL) {
			assert_int_equal(poll(&pfd, 1, 5000), 1);
			assert_int_equal(read(irq, &n, sizeof(n)), sizeof(n));
			guest_poll(f);
			p = pkt_next(f);
		}
		gc_take(&gc, p);
		assert_int_equal(p->h.op, VIRTIO_VSOCK_OP_RW);
		assert_int_equal(p->len, 8); /* one write, one read */
		assert_memory_equal(p->data, "threaded", 8);
		gc.fwd_cnt += p->len;
		free(p->data);
		expect_no_pkt(f);
		gc_send(f, &gc, VIRTIO_VSOCK_OP_RW, 0, "back", 4);
		{
			char buf[4];

			assert_int_equal(read(afd, buf, 4), 4);
		}
		if (round % 10 == 9) {
			/* Reset with the host still writing, then start over. */
			host_write(afd, "racing");
			vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, 0);
			assert_true(host_closed(afd));
			close(afd);
			driver_up(f);
			drain_pkts(f);
			afd = guest_connect(f, &gc, 40030, 5009, lfd);
		}
	}
	ioloop_stop(&f->loop);
	f->threaded = false;
	close(afd);
	close(lfd);
}

/* The I/O loop behaviour the device relies on: a callback may remove (and
 * close) a watch whose event is later in the same batch, and it is not
 * called; edge-triggered watches fire once per change. */
struct loop_ctx {
	struct ioloop *l;
	int fds[2];
	unsigned int calls[2];
};

static void loop_cb(void *opaque, int fd, unsigned int events)
{
	struct loop_ctx *x = opaque;
	unsigned int i = fd == x->fds[1];

	(void)events;
	x->calls[i]++;
	ioloop_remove(x->l, x->fds[!i]);
	ioloop_remove(x->l, fd);
	close(x->fds[!i]);
	x->fds[!i] = -1;
}

static void count_cb(void *opaque, int fd, unsigned int events)
{
	(void)fd;
	(void)events;
	(*(unsigned int *)opaque)++;
}

static void test_ioloop_semantics(void **state)
{
	struct ioloop l;
	gantry_error_t err = NULL;
	struct loop_ctx x = { .l = &l };
	unsigned int et = 0, lt = 0;
	uint64_t one = 1;
	int efd, lfd;

	(void)state;
	assert_int_equal(ioloop_init(&l, &err), 0);
	for (unsigned int i = 0; i < 2; i++) {
		x.fds[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		assert_int_equal(ioloop_add(&l, x.fds[i], loop_cb, &x, &err), 0);
		assert_int_equal(write(x.fds[i], &one, sizeof(one)), sizeof(one));
	}
	assert_int_equal(ioloop_run_once(&l, 1000), 2); /* one batch, both ready */
	assert_int_equal(x.calls[0] + x.calls[1], 1);
	assert_int_equal(ioloop_run_once(&l, 0), 0);
	close(x.fds[0] >= 0 ? x.fds[0] : x.fds[1]);

	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	lfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	assert_int_equal(ioloop_add_events(&l, efd, EPOLLIN | EPOLLET, count_cb, &et, &err), 0);
	assert_int_equal(ioloop_add(&l, lfd, count_cb, &lt, &err), 0);
	assert_int_equal(write(efd, &one, sizeof(one)), sizeof(one));
	assert_int_equal(write(lfd, &one, sizeof(one)), sizeof(one));
	for (unsigned int i = 0; i < 3; i++)
		assert_true(ioloop_run_once(&l, 0) >= 0);
	assert_int_equal(et, 1); /* never read, but no new edge */
	assert_int_equal(lt, 3); /* still readable, every time */
	assert_int_equal(write(efd, &one, sizeof(one)), sizeof(one));
	ioloop_remove(&l, lfd);
	assert_int_equal(ioloop_run_once(&l, 0), 1);
	assert_int_equal(et, 2);
	ioloop_destroy(&l);
	close(efd);
	close(lfd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ioloop_semantics),
		cmocka_unit_test_setup_teardown(test_config, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_create_errors, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_guest_connect, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_no_listener, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_transfer, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_host_connect, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_host_connect_refused, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_host_connect_malformed, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_host_connect_timeout, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_credit_overrun, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_hostile_packets, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_shutdown, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_shutdown_flushes, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_reset, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_conn_cap, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rx_starved, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_threaded, fx_setup, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
