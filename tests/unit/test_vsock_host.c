/* Unit tests for virtio/vsock.c and vsock_conn.c, second part: streams
 * the host opens through the device's listen socket (a CONNECT line, a
 * guest that refuses or never answers, malformed lines), a driver reset
 * with streams open, the cap on streams, and the loop on its own thread as
 * in the VMM; and the I/O loop behaviour the device relies on. The rig is
 * vsock_rig.h; streams the guest opens are in test_vsock.c. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "skip.h"
/* The device's test rig; not every helper of it is used here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "vsock_rig.h"
#pragma GCC diagnostic pop

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
		cmocka_unit_test_setup_teardown(test_host_connect, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_host_connect_refused, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_host_connect_malformed, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_host_connect_timeout, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_reset, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_conn_cap, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_threaded, fx_setup, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
