/* Unit tests for virtio/net.c. A fake guest driver brings the device up
 * through the virtio-mmio registers over a calloc'd guest RAM, sends frames
 * on the TX queue and reads what the device puts into its RX buffers; the
 * network worker's end is the other half of a real SOCK_SEQPACKET
 * socketpair. The I/O loop is driven on the test thread with
 * ioloop_run_once, so every step is deterministic. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_net.h>
#include <linux/virtio_ring.h>

#include "common/util.h"
#include "net/net.h"
#include "virtio/dev.h"
#include "virtio/devices.h"
#include "virtio/mmio.h"
#include "vmm/ioloop.h"
#include "../virtio_driver.h"

#define HDR	     12u
#define QN	     64
#define RXQ	     0
#define TXQ	     1
#define RAM_SIZE     (4 * MiB)
#define DESC_GPA(q)  (0x10000ULL + (uint64_t)(q)*0x4000)
#define RXBUF_SIZE   1536 /* about what Linux's mergeable buffers hold */
#define RXBUF_STRIDE 2048
#define RXBUF_GPA(i) (0x100000ULL + (uint64_t)(i)*RXBUF_STRIDE)
#define TX_GPA(slot) (0x200000ULL + (uint64_t)(slot)*0x20000)
#define TX_SLOTS     8
#define NET_FEATS                                                                                  \
	((1ULL << VIRTIO_NET_F_MAC) | (1ULL << VIRTIO_NET_F_MTU) |                                 \
	 (1ULL << VIRTIO_NET_F_MRG_RXBUF) | (1ULL << VIRTIO_NET_F_STATUS) |                        \
	 (1ULL << VIRTIO_NET_F_GUEST_CSUM) | (1ULL << VIRTIO_F_VERSION_1_BIT))

#define S_ACK VIRTIO_CONFIG_S_ACKNOWLEDGE
#define S_DRV VIRTIO_CONFIG_S_DRIVER
#define S_FOK VIRTIO_CONFIG_S_FEATURES_OK
#define S_DOK VIRTIO_CONFIG_S_DRIVER_OK

static const uint8_t guest_mac[6] = NET_GUEST_MAC;

struct fx {
	uint8_t *ram;
	struct guest_mem mem;
	struct ioloop loop;
	struct virtio_dev *d;
	int dev_fd, worker_fd;
	struct vdrv drv;
	uint16_t next_desc[2];
	unsigned int tx_slot;
	uint64_t feat; /* what the driver took */
};

/* The RX header's flags: DATA_VALID where GUEST_CSUM was taken. */
static uint8_t rx_flags(const struct fx *f)
{
	return f->feat & (1ULL << VIRTIO_NET_F_GUEST_CSUM) ? VIRTIO_NET_HDR_F_DATA_VALID : 0;
}

/* ---- the fake guest driver (virtio_driver.h) ------------------------- */

/* The next used entry of q the test has not looked at; there must be one. */
static void used_next(struct fx *f, unsigned int q, uint32_t *id, uint32_t *len)
{
	assert_true(vdrv_used_next(&f->drv, q, id, len));
}

static void driver_up_with(struct fx *f, uint64_t feat)
{
	assert_true(vdrv_negotiate(&f->drv, feat) & S_FOK);
	f->feat = feat;
	memset(f->next_desc, 0, sizeof(f->next_desc));
	assert_true(vdrv_queues_up(&f->drv));
	vdrv_driver_ok(&f->drv);
}

/* Offer count RX buffers of size bytes, one descriptor each. */
static void rx_offer(struct fx *f, unsigned int count, uint32_t size)
{
	for (unsigned int i = 0; i < count; i++) {
		uint16_t id = f->next_desc[RXQ]++ % QN;

		vdrv_set_desc(&f->drv, RXQ, id, RXBUF_GPA(id), size, VRING_DESC_F_WRITE, 0);
		vdrv_offer(&f->drv, RXQ, id);
	}
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NOTIFY, RXQ);
}

static uint8_t pattern(uint32_t i, uint8_t seed)
{
	return (uint8_t)(i * 7 + seed + (i >> 8));
}

static void fill(uint8_t *p, uint32_t len, uint8_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		p[i] = pattern(i, seed);
}

/* Queue one TX chain: hdr (hdr_len bytes) then a len-byte frame patterned
 * with seed, cut into descriptors at the offsets in cuts (ascending, inside
 * the hdr_len + len bytes). joined = 0 cuts keeps it all in one. Does not
 * notify. */
static void tx_queue(struct fx *f, const void *hdr, uint32_t hdr_len, uint32_t len, uint8_t seed,
		     const uint32_t *cuts, unsigned int nr_cuts)
{
	uint64_t gpa = TX_GPA(f->tx_slot++ % TX_SLOTS);
	uint8_t *p = f->ram + gpa;
	uint32_t total = hdr_len + len, start = 0;
	uint16_t head = f->next_desc[TXQ] % QN, id = head;

	memcpy(p, hdr, hdr_len);
	fill(p + hdr_len, len, seed);
	for (unsigned int i = 0; i <= nr_cuts; i++) {
		uint32_t end = i < nr_cuts ? cuts[i] : total;
		bool last = i == nr_cuts;
		uint16_t next = (uint16_t)((id + 1) % QN);

		vdrv_set_desc(&f->drv, TXQ, id, gpa + start, end - start,
			      last ? 0 : VRING_DESC_F_NEXT, next);
		start = end;
		id = next;
	}
	f->next_desc[TXQ] = (uint16_t)(f->next_desc[TXQ] + nr_cuts + 1);
	vdrv_offer(&f->drv, TXQ, head);
}

static const struct virtio_net_hdr_mrg_rxbuf zero_hdr;

static void tx_kick(struct fx *f)
{
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NOTIFY, TXQ);
}

/* The worker reads one frame and checks it is len bytes of seed's pattern. */
static void worker_expect(struct fx *f, uint32_t len, uint8_t seed)
{
	uint8_t *buf = xmalloc(NET_FRAME_MAX + 1);
	ssize_t n = recv(f->worker_fd, buf, NET_FRAME_MAX + 1, MSG_DONTWAIT);

	if (n < 0)
		fail_msg("worker recv: %s", strerror(errno));
	assert_int_equal(n, len);
	for (uint32_t i = 0; i < len; i++) {
		if (buf[i] != pattern(i, seed))
			fail_msg("frame byte %u: %#x, expected %#x", i, buf[i], pattern(i, seed));
	}
	free(buf);
}

static void worker_expect_none(struct fx *f)
{
	uint8_t b;

	assert_int_equal(recv(f->worker_fd, &b, 1, MSG_DONTWAIT), -1);
	assert_int_equal(errno, EAGAIN);
}

static void worker_send(struct fx *f, uint32_t len, uint8_t seed)
{
	uint8_t *buf = xmalloc(len ? len : 1);

	fill(buf, len, seed);
	assert_int_equal(send(f->worker_fd, buf, len, MSG_DONTWAIT), (ssize_t)len);
	free(buf);
}

static void pump(struct fx *f)
{
	for (unsigned int i = 0; i < 64 && ioloop_run_once(&f->loop, 0) > 0; i++)
		;
}

/* The guest takes one received frame from the used ring: its buffers are
 * consecutive used entries, the first header says how many. Checks it is
 * len bytes of seed's pattern; returns the buffer count. */
static unsigned int guest_expect(struct fx *f, uint32_t len, uint8_t seed)
{
	struct virtio_net_hdr_mrg_rxbuf h;
	uint32_t id, blen, got = 0;
	unsigned int nbufs;
	uint8_t *frame = xmalloc(len + RXBUF_SIZE);

	used_next(f, RXQ, &id, &blen);
	assert_true(id < QN);
	assert_true(blen >= HDR + NET_ETH_HLEN);
	memcpy(&h, f->ram + RXBUF_GPA(id), HDR);
	assert_int_equal(h.hdr.flags, rx_flags(f));
	assert_int_equal(h.hdr.gso_type, 0);
	nbufs = h.num_buffers;
	assert_true(nbufs >= 1);
	memcpy(frame, f->ram + RXBUF_GPA(id) + HDR, blen - HDR);
	got = blen - HDR;
	for (unsigned int b = 1; b < nbufs; b++) {
		used_next(f, RXQ, &id, &blen);
		assert_true(id < QN);
		assert_true(got + blen <= len);
		memcpy(frame + got, f->ram + RXBUF_GPA(id), blen);
		got += blen;
	}
	assert_int_equal(got, len);
	for (uint32_t i = 0; i < len; i++) {
		if (frame[i] != pattern(i, seed))
			fail_msg("rx byte %u: %#x, expected %#x", i, frame[i], pattern(i, seed));
	}
	free(frame);
	return nbufs;
}

static int fx_setup(void **state)
{
	struct fx *f = xzalloc(sizeof(*f));
	gantry_error_t err = NULL;
	int sv[2];

	f->ram = xzalloc(RAM_SIZE);
	guest_mem_init_buffer(&f->mem, f->ram, RAM_SIZE);
	assert_int_equal(ioloop_init(&f->loop, &err), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	f->dev_fd = sv[0];
	f->worker_fd = sv[1];
	f->d = virtio_net_create(&f->mem, &f->loop, f->dev_fd, guest_mac, &err);
	if (f->d == NULL)
		fail_msg("virtio_net_create: %s", gantry_error_str(err));
	vdrv_init(&f->drv, f->ram, f->d, QN, 2, DESC_GPA(0), DESC_GPA(1) - DESC_GPA(0));
	driver_up_with(f, NET_FEATS);
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	f->d->ops->destroy(f->d);
	ioloop_destroy(&f->loop);
	close(f->dev_fd);
	if (f->worker_fd >= 0)
		close(f->worker_fd);
	free(f->ram);
	free(f);
	return 0;
}

/* ---- tests ------------------------------------------------------------ */

static void test_config(void **state)
{
	struct fx *f = *state;
	uint8_t cfg[12];
	uint16_t v;

	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_DEVICE_ID), VIRTIO_ID_NET);
	assert_int_equal(vdrv_dev_features(&f->drv), NET_FEATS);
	for (unsigned int i = 0; i < sizeof(cfg); i++)
		virtio_mmio_access(f->d, VIRTIO_MMIO_CONFIG + i, &cfg[i], 1, false);
	assert_memory_equal(cfg, guest_mac, 6);
	memcpy(&v, cfg + 6, 2);
	assert_int_equal(v, VIRTIO_NET_S_LINK_UP);
	memcpy(&v, cfg + 8, 2);
	assert_int_equal(v, 1);
	memcpy(&v, cfg + 10, 2);
	assert_int_equal(v, NET_MTU);
	/* 16-bit reads as Linux's virtio_cread16 does them. */
	virtio_mmio_access(f->d, VIRTIO_MMIO_CONFIG + 10, (uint8_t *)&v, 2, false);
	assert_int_equal(v, 65520);
	/* The guest cannot change its MAC. */
	cfg[0] = 0xff;
	virtio_mmio_access(f->d, VIRTIO_MMIO_CONFIG, cfg, 1, true);
	virtio_mmio_access(f->d, VIRTIO_MMIO_CONFIG, cfg, 1, false);
	assert_int_equal(cfg[0], guest_mac[0]);
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_SEL, 2);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_NUM_MAX), 0);

	/* Offloads and queues we never offered are refused; subsets are fine. */
	assert_false(vdrv_negotiate(&f->drv, NET_FEATS | (1ULL << VIRTIO_NET_F_CSUM)) & S_FOK);
	assert_false(vdrv_negotiate(&f->drv, NET_FEATS | (1ULL << VIRTIO_NET_F_HOST_TSO4)) & S_FOK);
	assert_false(vdrv_negotiate(&f->drv, NET_FEATS | (1ULL << VIRTIO_NET_F_CTRL_VQ)) & S_FOK);
	assert_false(vdrv_negotiate(&f->drv, NET_FEATS | (1ULL << VIRTIO_NET_F_MQ)) & S_FOK);
	/* Event indices are not offered here (net.c says why). */
	assert_false(vdrv_negotiate(&f->drv, NET_FEATS | (1ULL << VIRTIO_RING_F_EVENT_IDX)) &
		     S_FOK);
	assert_false(vdrv_negotiate(&f->drv, NET_FEATS & ~(1ULL << VIRTIO_F_VERSION_1_BIT)) &
		     S_FOK);
	assert_true(vdrv_negotiate(&f->drv, 1ULL << VIRTIO_F_VERSION_1_BIT) & S_FOK);
	driver_up_with(f, NET_FEATS);
}

static void test_create_errors(void **state)
{
	struct fx *f = *state;
	gantry_error_t err = NULL;
	int sv[2], p[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_null(virtio_net_create(&f->mem, &f->loop, sv[0], guest_mac, &err));
	assert_non_null(strstr(gantry_error_str(err), "SOCK_SEQPACKET"));
	gantry_error_free(&err);
	assert_int_equal(pipe(p), 0);
	assert_null(virtio_net_create(&f->mem, &f->loop, p[0], guest_mac, &err));
	assert_non_null(err);
	gantry_error_free(&err);
	close(sv[0]);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
}

static void expect_tx_done(struct fx *f, unsigned int count)
{
	for (unsigned int i = 0; i < count; i++) {
		uint32_t id, len;

		used_next(f, TXQ, &id, &len);
		assert_int_equal(len, 0);
	}
	assert_int_equal(f->drv.q[TXQ].used_seen, vdrv_used_idx(&f->drv, TXQ));
}

/* Header in its own descriptor, sharing the frame's, split itself, and the
 * frame over one to many descriptors: the worker gets the frame alone. */
static void test_tx_layouts(void **state)
{
	struct fx *f = *state;
	const uint32_t lens[] = { NET_ETH_HLEN, 60, 1514, 9000, NET_FRAME_MAX };
	uint32_t cuts[40];
	uint8_t seed = 1;

	for (unsigned int l = 0; l < ARRAY_SIZE(lens); l++) {
		uint32_t len = lens[l];

		tx_queue(f, &zero_hdr, HDR, len, seed, NULL, 0); /* joined */
		tx_kick(f);
		expect_tx_done(f, 1);
		worker_expect(f, len, seed++);

		cuts[0] = HDR; /* split at the header */
		tx_queue(f, &zero_hdr, HDR, len, seed, cuts, 1);
		tx_kick(f);
		expect_tx_done(f, 1);
		worker_expect(f, len, seed++);

		cuts[0] = 5; /* the header itself split, and shared with the frame */
		cuts[1] = HDR + len / 2;
		tx_queue(f, &zero_hdr, HDR, len, seed, cuts, 2);
		tx_kick(f);
		expect_tx_done(f, 1);
		worker_expect(f, len, seed++);

		/* Many descriptors: 1..40 equal pieces after the header. */
		for (unsigned int n = 1; n <= ARRAY_SIZE(cuts) && n < len; n += 13) {
			cuts[0] = HDR;
			for (unsigned int i = 1; i < n; i++)
				cuts[i] = HDR + (uint32_t)((uint64_t)len * i / n);
			tx_queue(f, &zero_hdr, HDR, len, seed, cuts, n);
			tx_kick(f);
			expect_tx_done(f, 1);
			worker_expect(f, len, seed++);
		}
	}
	worker_expect_none(f);
	assert_int_equal(virtio_net_stats(f->d).tx_frames, seed - 1);
	assert_int_equal(virtio_net_stats(f->d).tx_bad_hdr, 0);
}

/* Runts, oversize frames and offload headers come back unsent, len 0. */
static void test_tx_drops(void **state)
{
	struct fx *f = *state;
	struct virtio_net_hdr_mrg_rxbuf h = { 0 };
	struct virtio_net_stats s;
	uint32_t cut = HDR;

	tx_queue(f, &zero_hdr, HDR, NET_ETH_HLEN - 1, 1, NULL, 0);
	tx_queue(f, &zero_hdr, HDR - 1, 0, 1, NULL, 0); /* a header cut short */
	tx_queue(f, &zero_hdr, HDR, NET_FRAME_MAX + 1, 1, &cut, 1);
	h.hdr.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
	tx_queue(f, &h, HDR, 100, 1, NULL, 0);
	h.hdr.flags = VIRTIO_NET_HDR_F_DATA_VALID;
	tx_queue(f, &h, HDR, 100, 1, &cut, 1);
	h.hdr.flags = 0;
	h.hdr.gso_type = VIRTIO_NET_HDR_GSO_TCPV4;
	tx_queue(f, &h, HDR, 100, 1, NULL, 0);
	/* Only writable buffers: nothing to send. */
	vdrv_set_desc(&f->drv, TXQ, 60, TX_GPA(0), 200, VRING_DESC_F_WRITE, 0);
	vdrv_offer(&f->drv, TXQ, 60);
	/* A chain that leaves guest RAM. */
	vdrv_set_desc(&f->drv, TXQ, 61, RAM_SIZE - 8, 100, 0, 0);
	vdrv_offer(&f->drv, TXQ, 61);
	/* The fields after flags and gso_type are ignored. */
	h.hdr.gso_type = 0;
	h.hdr.hdr_len = 0xffff;
	h.hdr.csum_start = 77;
	h.num_buffers = 9;
	tx_queue(f, &h, HDR, 100, 42, NULL, 0);
	tx_kick(f);
	expect_tx_done(f, 9);
	worker_expect(f, 100, 42);
	worker_expect_none(f);
	s = virtio_net_stats(f->d);
	assert_int_equal(s.tx_runt, 3);
	assert_int_equal(s.tx_oversize, 1);
	assert_int_equal(s.tx_bad_hdr, 3);
	assert_int_equal(s.tx_frames, 1);
	assert_true(virtio_net_link_up(f->d));
}

/* A full socket holds the chain: not dropped, not completed, sent in order
 * once the worker reads. */
static void test_tx_eagain(void **state)
{
	struct fx *f = *state;
	const unsigned int total = 40;
	const uint32_t len = 4000;
	unsigned int queued = 0, received = 0, sent_before;
	int small = 4096;

	assert_int_equal(setsockopt(f->dev_fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	for (; queued < 8; queued++)
		tx_queue(f, &zero_hdr, HDR, len, (uint8_t)queued, NULL, 0);
	tx_kick(f);
	sent_before = vdrv_used_idx(&f->drv, TXQ);
	assert_true(sent_before >= 1 && sent_before < 8);
	/* Kicks while held change nothing. */
	tx_kick(f);
	tx_kick(f);
	/* Nothing to do until the worker reads: the loop stays quiet. */
	assert_int_equal(ioloop_run_once(&f->loop, 0), 0);
	assert_int_equal(vdrv_used_idx(&f->drv, TXQ), sent_before);
	assert_int_equal(virtio_net_stats(f->d).tx_frames, sent_before);

	while (received < total) {
		uint16_t done = vdrv_used_idx(&f->drv, TXQ);

		/* Completed chains are exactly the frames in the socket or read. */
		assert_int_equal(done, virtio_net_stats(f->d).tx_frames);
		if (received < done) {
			worker_expect(f, len, (uint8_t)received);
			received++;
		}
		pump(f);
		/* Keep the ring topped up behind the held chain. */
		while (queued < total &&
		       (uint16_t)(queued - vdrv_used_idx(&f->drv, TXQ)) < TX_SLOTS - 1) {
			tx_queue(f, &zero_hdr, HDR, len, (uint8_t)queued, NULL, 0);
			queued++;
			tx_kick(f);
		}
	}
	worker_expect_none(f);
	pump(f);
	assert_int_equal(vdrv_used_idx(&f->drv, TXQ), total);
	expect_tx_done(f, total);
	assert_int_equal(virtio_net_stats(f->d).tx_error, 0);
}

static void test_rx_single(void **state)
{
	struct fx *f = *state;

	unsigned long irqs;

	rx_offer(f, 8, RXBUF_SIZE);
	irqs = f->d->irqs_raised;
	worker_send(f, 60, 3);
	worker_send(f, RXBUF_SIZE - HDR, 4); /* exactly one buffer */
	worker_send(f, 1000, 5);
	pump(f);
	assert_int_equal(f->d->irqs_raised, irqs + 1); /* one interrupt for the batch */
	assert_int_equal(guest_expect(f, 60, 3), 1);
	assert_int_equal(guest_expect(f, RXBUF_SIZE - HDR, 4), 1);
	assert_int_equal(guest_expect(f, 1000, 5), 1);
	assert_int_equal(vdrv_used_idx(&f->drv, RXQ), 3);
	assert_int_equal(virtio_net_stats(f->d).rx_frames, 3);
}

/* A look at an empty socket takes RX buffers and gives them back; a save
 * after it gives back nothing more: the ring stays where the guest has
 * it, or a restored device would hand it buffers it already got back. */
static void test_save_after_an_empty_read(void **state)
{
	struct fx *f = *state;
	uint8_t extra[VIRTIO_DEV_EXTRA_MAX];
	gantry_error_t err = NULL;
	size_t len = 0;

	rx_offer(f, 8, RXBUF_SIZE);
	worker_send(f, 60, 3);
	pump(f);
	assert_int_equal(guest_expect(f, 60, 3), 1);
	assert_int_equal(f->d->vqs[RXQ].last_avail, 1);
	pthread_mutex_lock(&f->d->lock);
	f->d->ops->queue_notify(f->d, RXQ); /* nothing to read */
	assert_int_equal(f->d->vqs[RXQ].last_avail, 1);
	assert_int_equal(f->d->ops->save(f->d, extra, &len, &err), 0);
	pthread_mutex_unlock(&f->d->lock);
	assert_int_equal(f->d->vqs[RXQ].last_avail, 1);
	assert_int_equal(len, 0);
}

/* A 64 KiB frame spread over mergeable buffers, num_buffers counting them. */
static void test_rx_scatter(void **state)
{
	struct fx *f = *state;
	unsigned int need = (HDR + NET_FRAME_MAX + RXBUF_SIZE - 1) / RXBUF_SIZE;

	rx_offer(f, QN - 4, RXBUF_SIZE);
	worker_send(f, NET_FRAME_MAX, 5);
	worker_send(f, RXBUF_SIZE, 6); /* one byte of it spills over */
	pump(f);
	assert_int_equal(guest_expect(f, NET_FRAME_MAX, 5), need);
	assert_int_equal(guest_expect(f, RXBUF_SIZE, 6), 2);
	assert_int_equal(vdrv_used_idx(&f->drv, RXQ), need + 2);
	assert_int_equal(virtio_net_stats(f->d).rx_bytes, NET_FRAME_MAX + RXBUF_SIZE);
}

/* The ring runs dry in the middle of a frame: the frame waits, the socket
 * is not read meanwhile, and more buffers finish it with nothing lost. */
/* Frames are read straight into as many buffers as the last frame needed;
 * those a smaller frame leaves go back to the ring and are used next. A bad
 * buffer in the middle of a run ends it, comes back empty once, and the
 * frame goes on in the buffers after it. */
static void test_rx_direct(void **state)
{
	struct fx *f = *state;
	struct virtio_net_stats st;
	uint32_t id, len;
	uint16_t bad;

	rx_offer(f, 8, RXBUF_SIZE);
	worker_send(f, 3000, 1); /* nothing known yet: one buffer, the rest copied */
	worker_send(f, 3000, 2); /* two buffers, both read into */
	worker_send(f, 100, 3);	 /* two taken, one given back */
	worker_send(f, 2900, 4);
	pump(f);
	assert_int_equal(guest_expect(f, 3000, 1), 2);
	assert_int_equal(guest_expect(f, 3000, 2), 2);
	assert_int_equal(guest_expect(f, 100, 3), 1);
	assert_int_equal(guest_expect(f, 2900, 4), 2);
	assert_int_equal(vdrv_used_idx(&f->drv, RXQ), 7);

	/* The eighth buffer, then a bad one, then good ones. */
	bad = f->next_desc[RXQ]++ % QN;
	vdrv_set_desc(&f->drv, RXQ, bad, RXBUF_GPA(bad), 0, VRING_DESC_F_WRITE, 0);
	vdrv_offer(&f->drv, RXQ, bad);
	rx_offer(f, 4, RXBUF_SIZE);
	worker_send(f, 3000, 5);
	worker_send(f, 1000, 6);
	pump(f);
	used_next(f, RXQ, &id, &len);
	assert_int_equal(id, bad);
	assert_int_equal(len, 0);
	assert_int_equal(guest_expect(f, 3000, 5), 2);
	assert_int_equal(guest_expect(f, 1000, 6), 1);
	assert_int_equal(vdrv_used_idx(&f->drv, RXQ), 11);
	st = virtio_net_stats(f->d);
	assert_int_equal(st.rx_bad_buf, 1);
	assert_int_equal(st.rx_frames, 6);
	assert_int_equal(st.rx_dropped, 0);
}

static void test_rx_dry(void **state)
{
	struct fx *f = *state;
	unsigned int need = (HDR + NET_FRAME_MAX + RXBUF_SIZE - 1) / RXBUF_SIZE;
	uint8_t peek[128];

	rx_offer(f, 10, RXBUF_SIZE);
	worker_send(f, NET_FRAME_MAX, 7);
	worker_send(f, 100, 8);
	pump(f);
	assert_int_equal(vdrv_used_idx(&f->drv, RXQ), 0);
	/* Backpressure: the second frame is still in the socket. */
	assert_int_equal(recv(f->dev_fd, peek, sizeof(peek), MSG_PEEK | MSG_DONTWAIT), 100);
	/* No spinning on the readable socket meanwhile. */
	assert_int_equal(ioloop_run_once(&f->loop, 0), 0);
	assert_int_equal(vdrv_used_idx(&f->drv, RXQ), 0);

	rx_offer(f, 20, RXBUF_SIZE); /* still not enough */
	pump(f);
	assert_int_equal(vdrv_used_idx(&f->drv, RXQ), 0);
	rx_offer(f, need - 30 + 1, RXBUF_SIZE);
	pump(f);
	assert_int_equal(guest_expect(f, NET_FRAME_MAX, 7), need);
	assert_int_equal(guest_expect(f, 100, 8), 1);
	assert_int_equal(virtio_net_stats(f->d).rx_dropped, 0);

	/* An empty ring from the start holds the first frame the same way. */
	worker_send(f, 2000, 9);
	pump(f);
	assert_int_equal(f->drv.q[RXQ].used_seen, vdrv_used_idx(&f->drv, RXQ));
	rx_offer(f, 2, RXBUF_SIZE);
	pump(f);
	assert_int_equal(guest_expect(f, 2000, 9), 2);
}

/* Frames the guest cannot take, and buffers no frame fits, are counted. */
static void test_rx_drops(void **state)
{
	struct fx *f = *state;
	struct virtio_net_stats s;
	uint32_t id, len;

	worker_send(f, NET_FRAME_MAX + 1, 1);
	worker_send(f, NET_ETH_HLEN - 1, 1);
	rx_offer(f, 1, HDR + NET_ETH_HLEN - 1); /* too small to start a frame */
	rx_offer(f, 4, RXBUF_SIZE);
	worker_send(f, 64, 2);
	pump(f);
	used_next(f, RXQ, &id, &len);
	assert_int_equal(len, 0);
	assert_int_equal(guest_expect(f, 64, 2), 1);
	s = virtio_net_stats(f->d);
	assert_int_equal(s.rx_trunc, 1);
	assert_int_equal(s.rx_runt, 1);
	assert_int_equal(s.rx_bad_buf, 1);
	assert_int_equal(s.rx_frames, 1);

	/* Buffers that all together cannot hold a frame: every one comes back
	 * empty, since the guest has no more to give while we hold them. */
	rx_offer(f, QN - 3, 64);
	worker_send(f, NET_FRAME_MAX, 3);
	pump(f);
	while (f->drv.q[RXQ].used_seen != vdrv_used_idx(&f->drv, RXQ)) {
		used_next(f, RXQ, &id, &len);
		assert_int_equal(len, 0);
	}
	assert_int_equal(virtio_net_stats(f->d).rx_dropped, 1);
	assert_true(virtio_net_link_up(f->d));
}

/* Without MRG_RXBUF one buffer holds one frame, num_buffers 1. */
/* ---- a driver beside the device, as Linux's runs -------------------- */

/* RX buffers carved from a pool the way Linux's mergeable receive path
 * carves them from page fragments: sizes that vary, at addresses that move,
 * so a descriptor id names a different buffer each time it is posted. A
 * buffer the guest took back is poisoned, and must still be poisoned when
 * posted again: the device writing into memory it was not lent would show. */
#define POOL_GPA    0x300000ULL
#define POOL_SIZE   (1 * MiB)
#define POOL_FRAG   (32 * 1024)
#define POISON	    0xa5
#define GRANULE	    64
#define LIVE_FRAMES 3000

struct live {
	struct fx *f;
	pthread_t worker;
	uint64_t pool_at; /* next free byte of the pool, as an offset */
	uint8_t posted[POOL_SIZE / GRANULE];
	uint64_t buf_gpa[QN];
	uint32_t buf_len[QN];
	uint16_t free_ids[QN];
	unsigned int nr_free;
	uint32_t rng;
};

static uint32_t live_rand(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

static uint32_t live_frame_len(uint32_t i)
{
	uint32_t s = i * 2654435761u + 1;

	/* Mostly full-size frames, as a bulk TCP stream under a 64 KiB MTU
	 * sends, and small ones (ACKs) between them. */
	switch (live_rand(&s) % 4) {
	case 0:
		return NET_ETH_HLEN + live_rand(&s) % 100;
	case 1:
		return NET_ETH_HLEN + live_rand(&s) % NET_MTU;
	default:
		return NET_FRAME_MAX - live_rand(&s) % 16;
	}
}

static void *live_worker(void *arg)
{
	struct live *l = arg;
	uint8_t *buf = xmalloc(NET_FRAME_MAX);

	for (uint32_t i = 0; i < LIVE_FRAMES; i++) {
		uint32_t len = live_frame_len(i);

		fill(buf, len, (uint8_t)i);
		memcpy(buf, &i, sizeof(i));
		if (send(l->f->worker_fd, buf, len, 0) != (ssize_t)len)
			break;
	}
	free(buf);
	return NULL;
}

static bool live_region_free(struct live *l, uint64_t off, uint32_t len)
{
	for (uint64_t g = off / GRANULE; g < (off + len + GRANULE - 1) / GRANULE; g++) {
		if (l->posted[g])
			return false;
	}
	return true;
}

static void live_mark(struct live *l, uint64_t off, uint32_t len, uint8_t v)
{
	for (uint64_t g = off / GRANULE; g < (off + len + GRANULE - 1) / GRANULE; g++)
		l->posted[g] = v;
}

static void live_check_poison(struct live *l, uint64_t off, uint32_t len)
{
	const uint8_t *p = l->f->ram + POOL_GPA + off;

	for (uint32_t i = 0; i < len; i++) {
		if (p[i] != POISON)
			fail_msg("pool byte %#llx changed to %#x while the guest owned it",
				 (unsigned long long)(off + i), p[i]);
	}
}

/* Post every buffer there is room for; returns how many. */
static unsigned int live_refill(struct live *l)
{
	struct fx *f = l->f;
	unsigned int n = 0;

	while (l->nr_free > 0) {
		uint32_t len = ALIGN_UP(HDR + 1536 + live_rand(&l->rng) % 2560, GRANULE);
		uint64_t frag_left = POOL_FRAG - l->pool_at % POOL_FRAG;
		uint16_t id;

		/* Like Linux: a buffer takes the rest of a fragment too small
		 * for the next one. */
		if (frag_left < len)
			len = (uint32_t)frag_left;
		else if (frag_left - len < HDR + 1536)
			len = (uint32_t)frag_left;
		if (!live_region_free(l, l->pool_at, len))
			break; /* the pool wrapped onto buffers still lent out */
		live_check_poison(l, l->pool_at, len);
		id = l->free_ids[--l->nr_free];
		l->buf_gpa[id] = POOL_GPA + l->pool_at;
		l->buf_len[id] = len;
		live_mark(l, l->pool_at, len, 1);
		vdrv_set_desc(&f->drv, RXQ, id, l->buf_gpa[id], len, VRING_DESC_F_WRITE, 0);
		vdrv_offer(&f->drv, RXQ, id);
		l->pool_at = (l->pool_at + len) % POOL_SIZE;
		n++;
	}
	return n;
}

/* Take back one used buffer: its id and length, its bytes copied to dst. */
static uint32_t live_take(struct live *l, uint8_t *dst, uint32_t room, bool first)
{
	struct fx *f = l->f;
	uint32_t id = 0, len = 0; /* fail_msg does not say it never returns */
	uint64_t off;

	if (!vdrv_used_next(&f->drv, RXQ, &id, &len))
		fail_msg("a frame's later buffers were not published with its first");
	assert_true(id < QN);
	assert_true(l->buf_len[id] != 0);
	assert_true(len <= l->buf_len[id]);
	assert_true(len <= room);
	if (first)
		assert_true(len >= HDR + NET_ETH_HLEN);
	memcpy(dst, f->ram + l->buf_gpa[id], len);
	off = l->buf_gpa[id] - POOL_GPA;
	memset(f->ram + l->buf_gpa[id], POISON, l->buf_len[id]);
	live_mark(l, off, l->buf_len[id], 0);
	l->buf_len[id] = 0;
	l->free_ids[l->nr_free++] = (uint16_t)id;
	return len;
}

static void live_expect_frame(struct live *l, uint32_t i, uint8_t *frame)
{
	uint32_t want = live_frame_len(i), got, seq;
	struct virtio_net_hdr_mrg_rxbuf h;
	uint8_t first[8192];

	got = live_take(l, first, sizeof(first), true);
	memcpy(&h, first, HDR);
	assert_int_equal(h.hdr.flags, rx_flags(l->f));
	assert_true(h.num_buffers >= 1);
	memcpy(frame, first + HDR, got - HDR);
	got -= HDR;
	for (unsigned int b = 1; b < h.num_buffers; b++)
		got += live_take(l, frame + got, NET_FRAME_MAX - got, false);
	memcpy(&seq, frame, sizeof(seq));
	if (seq != i)
		fail_msg("frame %u arrived where frame %u was due", seq, i);
	assert_int_equal(got, want);
	for (uint32_t k = sizeof(seq); k < want; k++) {
		if (frame[k] != pattern(k, (uint8_t)i))
			fail_msg("frame %u byte %u: %#x, expected %#x", i, k, frame[k],
				 pattern(k, (uint8_t)i));
	}
}

/* The device on the I/O thread, the worker sending as fast as it can, and
 * the guest taking frames and posting fresh buffers at the same time: every
 * frame arrives whole and in order, and the device never writes outside the
 * buffers it was lent. */
static void test_rx_live(void **state)
{
	struct fx *f = *state;
	struct live *l = xzalloc(sizeof(*l));
	uint8_t *frame = xmalloc(NET_FRAME_MAX);
	gantry_error_t err = NULL;
	uint64_t deadline = now_ms() + 60000;

	l->f = f;
	l->rng = 7;
	for (unsigned int i = 0; i < QN; i++)
		l->free_ids[l->nr_free++] = (uint16_t)(QN - 1 - i);
	memset(f->ram + POOL_GPA, POISON, POOL_SIZE);
	assert_int_equal(ioloop_start(&f->loop, &err), 0);
	assert_int_equal(pthread_create(&l->worker, NULL, live_worker, l), 0);
	if (live_refill(l))
		vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NOTIFY, RXQ);
	for (uint32_t i = 0; i < LIVE_FRAMES;) {
		if (f->drv.q[RXQ].used_seen == vdrv_used_idx(&f->drv, RXQ)) {
			if (now_ms() > deadline)
				fail_msg("frame %u never came", i);
			sched_yield();
			continue;
		}
		live_expect_frame(l, i++, frame);
		if (live_refill(l))
			vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NOTIFY, RXQ);
	}
	pthread_join(l->worker, NULL);
	ioloop_stop(&f->loop);
	for (uint64_t g = 0; g < POOL_SIZE / GRANULE; g++) {
		if (!l->posted[g])
			live_check_poison(l, g * GRANULE, GRANULE);
	}
	assert_int_equal(virtio_net_stats(f->d).rx_dropped, 0);
	assert_int_equal(virtio_net_stats(f->d).rx_bad_buf, 0);
	free(frame);
	free(l);
}

static void test_rx_no_mergeable(void **state)
{
	struct fx *f = *state;
	uint32_t id, len;

	driver_up_with(f, NET_FEATS & ~(1ULL << VIRTIO_NET_F_MRG_RXBUF));
	rx_offer(f, 2, RXBUF_SIZE);
	worker_send(f, RXBUF_SIZE, 1); /* does not fit one buffer */
	worker_send(f, 1000, 2);
	pump(f);
	used_next(f, RXQ, &id, &len);
	assert_int_equal(len, 0);
	assert_int_equal(guest_expect(f, 1000, 2), 1);
	assert_int_equal(virtio_net_stats(f->d).rx_dropped, 1);
}

static uint16_t cfg_status(struct fx *f)
{
	uint16_t v;

	virtio_mmio_access(f->d, VIRTIO_MMIO_CONFIG + 6, (uint8_t *)&v, 2, false);
	return v;
}

/* The worker hangs up with frames still queued for the guest: they are
 * delivered, then the link goes down with a config interrupt, the loop
 * stops watching the socket, and every chain completes unsent. */
static void test_hangup(void **state)
{
	struct fx *f = *state;
	uint32_t gen = vdrv_rd(&f->drv, VIRTIO_MMIO_CONFIG_GENERATION);

	rx_offer(f, 4, RXBUF_SIZE);
	worker_send(f, 200, 1);
	worker_send(f, 300, 2);
	close(f->worker_fd);
	f->worker_fd = -1;
	assert_false(vdrv_rd(&f->drv, VIRTIO_MMIO_INTERRUPT_STATUS) & VIRTIO_MMIO_INT_CONFIG);
	pump(f);

	assert_int_equal(guest_expect(f, 200, 1), 1);
	assert_int_equal(guest_expect(f, 300, 2), 1);
	assert_false(virtio_net_link_up(f->d));
	assert_int_equal(cfg_status(f), 0);
	assert_int_not_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_CONFIG_GENERATION), gen);
	assert_true(vdrv_rd(&f->drv, VIRTIO_MMIO_INTERRUPT_STATUS) & VIRTIO_MMIO_INT_CONFIG);
	assert_int_equal(ioloop_run_once(&f->loop, 0), 0);

	tx_queue(f, &zero_hdr, HDR, 100, 1, NULL, 0);
	tx_kick(f);
	expect_tx_done(f, 1);
	assert_int_equal(virtio_net_stats(f->d).tx_frames, 0);
	/* Link state survives a driver reset. */
	driver_up_with(f, NET_FEATS);
	assert_int_equal(cfg_status(f), 0);
	tx_queue(f, &zero_hdr, HDR, 100, 1, NULL, 0);
	tx_kick(f);
	expect_tx_done(f, 1);
}

/* The worker dies with our frames unread while a chain is held on the full
 * socket: the held chain and the ones behind it complete unsent. */
static void test_hangup_held(void **state)
{
	struct fx *f = *state;
	int small = 4096;
	uint16_t sent;

	assert_int_equal(setsockopt(f->dev_fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	for (unsigned int i = 0; i < TX_SLOTS - 2; i++)
		tx_queue(f, &zero_hdr, HDR, 4000, 1, NULL, 0);
	tx_kick(f);
	sent = vdrv_used_idx(&f->drv, TXQ);
	assert_true(sent < TX_SLOTS - 2); /* one held */
	rx_offer(f, 4, RXBUF_SIZE);
	pump(f);
	tx_queue(f, &zero_hdr, HDR, 4000, 1, NULL, 0);
	tx_queue(f, &zero_hdr, HDR, 4000, 1, NULL, 0);
	tx_kick(f);
	assert_int_equal(vdrv_used_idx(&f->drv, TXQ), sent);
	close(f->worker_fd);
	f->worker_fd = -1;
	pump(f);
	assert_false(virtio_net_link_up(f->d));
	assert_int_equal(cfg_status(f), 0);
	assert_true(vdrv_rd(&f->drv, VIRTIO_MMIO_INTERRUPT_STATUS) & VIRTIO_MMIO_INT_CONFIG);
	expect_tx_done(f, TX_SLOTS);
	assert_int_equal(virtio_net_stats(f->d).tx_frames, sent);
	assert_int_equal(ioloop_run_once(&f->loop, 0), 0);
}

/* Worker gone while the guest has no RX buffers: TX finds out. */
static void test_hangup_tx(void **state)
{
	struct fx *f = *state;

	close(f->worker_fd);
	f->worker_fd = -1;
	tx_queue(f, &zero_hdr, HDR, 100, 1, NULL, 0);
	tx_queue(f, &zero_hdr, HDR, 100, 1, NULL, 0);
	tx_kick(f);
	expect_tx_done(f, 2);
	assert_false(virtio_net_link_up(f->d));
	assert_int_equal(virtio_net_stats(f->d).tx_frames, 0);
	assert_true(vdrv_rd(&f->drv, VIRTIO_MMIO_INTERRUPT_STATUS) & VIRTIO_MMIO_INT_CONFIG);
}

/* A reset in the middle of a held frame and a held chain forgets both and
 * the device works again afterwards. */
static void test_reset(void **state)
{
	struct fx *f = *state;
	int small = 4096;

	assert_int_equal(setsockopt(f->dev_fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	for (unsigned int i = 0; i < TX_SLOTS; i++)
		tx_queue(f, &zero_hdr, HDR, 4000, 1, NULL, 0);
	tx_kick(f);
	rx_offer(f, 4, RXBUF_SIZE);
	worker_send(f, NET_FRAME_MAX, 1);
	pump(f);
	assert_int_equal(vdrv_used_idx(&f->drv, RXQ), 0);
	driver_up_with(f, NET_FEATS);
	while (recv(f->worker_fd, f->ram + TX_GPA(7), 0x20000, MSG_DONTWAIT) > 0)
		;
	rx_offer(f, 8, RXBUF_SIZE);
	worker_send(f, 500, 2);
	tx_queue(f, &zero_hdr, HDR, 100, 3, NULL, 0);
	tx_kick(f);
	pump(f);
	assert_int_equal(guest_expect(f, 500, 2), 1);
	expect_tx_done(f, 1);
	worker_expect(f, 100, 3);
	assert_int_equal(virtio_net_stats(f->d).rx_dropped, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_config, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_create_errors, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_tx_layouts, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_tx_drops, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_tx_eagain, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rx_single, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_save_after_an_empty_read, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rx_scatter, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rx_direct, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rx_dry, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rx_drops, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rx_no_mergeable, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rx_live, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_hangup, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_hangup_held, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_hangup_tx, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_reset, fx_setup, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
