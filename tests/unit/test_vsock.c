/* Unit tests for virtio/vsock.c and vsock_conn.c, first part: the
 * device's config and creation errors, and streams the guest opens. Data
 * and credit both ways, 1 MiB each way at once with the host reading only
 * now and then, a guest that overruns its credit, malformed and stray
 * packets, shutdown in each direction and the flush before a close, and
 * packets that wait for RX buffers. The fake guest driver, the host's Unix
 * sockets and the fixture are in vsock_rig.h; streams the host opens are
 * in test_vsock_host.c. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

/* The device's test rig; not every helper of it is used here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "vsock_rig.h"
#pragma GCC diagnostic pop

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_config, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_create_errors, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_guest_connect, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_no_listener, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_transfer, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_credit_overrun, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_hostile_packets, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_shutdown, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_shutdown_flushes, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rx_starved, fx_setup, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
