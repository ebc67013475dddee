/* What the virtio-net tests share (test_virtio_net.c, test_virtio_net_rx.c):
 * a fake guest driver that brings the device up through the virtio-mmio
 * registers over a calloc'd guest RAM, offers RX buffers and takes the
 * frames the device puts into them; the network worker's end, the other
 * half of a real SOCK_SEQPACKET socketpair; and the fixture. The I/O loop
 * is driven on the test thread with ioloop_run_once, so every step is
 * deterministic. Include after <cmocka.h>. */
#ifndef GANTRY_TESTS_UNIT_VIRTIO_NET_RIG_H
#define GANTRY_TESTS_UNIT_VIRTIO_NET_RIG_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/virtio_config.h>
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

#endif
