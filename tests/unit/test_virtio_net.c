/* Unit tests for virtio/net.c, first part: the device's config,
 * features and creation errors, frames the guest sends on the TX queue
 * (descriptor layouts, drops, a full socket holding a chain), the network
 * worker hanging up, and a reset. The fake guest driver, the worker's end
 * of the socketpair and the fixture are in virtio_net_rig.h; what the
 * device puts into the guest's RX buffers is in test_virtio_net_rx.c. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <linux/virtio_ids.h>

#include "virtio_net_rig.h"

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
		cmocka_unit_test_setup_teardown(test_hangup, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_hangup_held, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_hangup_tx, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_reset, fx_setup, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
