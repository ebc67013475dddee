/* Unit tests for virtio/net.c, second part: frames the network worker
 * sends, put into the guest's RX buffers. One buffer each, a frame spread
 * over mergeable buffers, frames read straight into buffers, a ring that
 * runs dry, frames and buffers that are dropped, a driver without
 * MRG_RXBUF, and the device on the I/O thread with a driver beside it
 * posting buffers as Linux's does. The rig is virtio_net_rig.h; TX,
 * hangups and resets are in test_virtio_net.c. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "virtio_net_rig.h"

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

/* The ring runs dry in the middle of a frame: the frame waits, the socket
 * is not read meanwhile, and more buffers finish it with nothing lost. */
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

/* A frame held over a dry ring keeps the buffers it took, sized by the
 * queue and the features: a driver cannot shrink the queue (QueueReady 0,
 * a smaller QueueNum) or take MRG_RXBUF back (FEATURES_OK dropped) under
 * it. Either made the device take buffers past its table of them. */
static void test_rx_held_queue_fixed(void **state)
{
	struct fx *f = *state;
	const uint32_t len = 4000;

	rx_offer(f, 40, 64);
	worker_send(f, len, 5);
	pump(f);
	assert_int_equal(vdrv_used_idx(&f->drv, RXQ), 0);
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_SEL, RXQ);
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_READY, 0);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_READY), 1);
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NUM, 1);
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_READY, 1);
	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_DOK);
	assert_true(vdrv_rd(&f->drv, VIRTIO_MMIO_STATUS) & S_FOK);
	vdrv_wr(&f->drv, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	vdrv_wr(&f->drv, VIRTIO_MMIO_DRIVER_FEATURES, 0);
	assert_true(f->d->driver_features & (1ULL << VIRTIO_NET_F_MRG_RXBUF));
	/* The frame finishes in the queue it started in, whole. */
	rx_offer(f, (HDR + len + 63) / 64 - 40, 64);
	pump(f);
	assert_int_equal(guest_expect(f, len, 5), (HDR + len + 63) / 64);
	assert_int_equal(virtio_net_stats(f->d).rx_dropped, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_rx_single, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_save_after_an_empty_read, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rx_scatter, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rx_direct, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rx_dry, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rx_drops, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rx_no_mergeable, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rx_live, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rx_held_queue_fixed, fx_setup, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
