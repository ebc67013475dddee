/* Unit tests for virtio/fs.c. The shared fake guest driver brings the device
 * up through the virtio-mmio registers over a calloc'd guest RAM and offers
 * FUSE-shaped chains; a fake request handler stands in for the share
 * server. It runs on the device's worker threads, so it records what it saw
 * and the test thread checks it (cmocka's asserts are not thread-safe). */
#include <errno.h>
#include <linux/fuse.h>
#include <linux/virtio_fs.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_ring.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/settings.h"
#include "common/util.h"
#include "share/server.h"
#include "virtio/devices.h"
#include "virtio/mmio.h"
#include "../virtio_driver.h"

#define QN	      512 /* the driver's ring: room for one chain of CHAIN_MAX */
#define QN_MAX	      1024
#define HIPRIO	      0
#define REQQ	      1
#define RAM_SIZE      (4 * MiB)
#define RING_GPA      0x10000ULL
#define RING_STRIDE   0x8000ULL
#define BUF_GPA(slot) (0x100000ULL + (uint64_t)(slot)*0x1000)
#define IN_HDR	      ((uint32_t)sizeof(struct fuse_in_header))
#define OUT_HDR	      ((uint32_t)sizeof(struct fuse_out_header))
#define CHAIN_MAX     (FS_MAX_PAGES + 4)
#define TAG	      "gantry-shares"

enum handler_mode { ECHO, SLEEP, NAP };

/* What the fake handler saw: the first call in detail, every call counted. */
static struct {
	enum handler_mode mode;
	atomic_uint calls, entered, exited, now, peak, resets;
	atomic_bool bad; /* a call the device should never have made */
	atomic_uint seed;
	pthread_mutex_t lock;
	size_t nr_in, nr_out;
	size_t in_len[8], out_len[8];
	uint8_t in_copy[256];
	size_t in_total;
	mode_t umask; /* the worker's, on the first call */
	size_t ret;   /* ECHO: what to return over the echo (0: the echo's length) */
} h = { .lock = PTHREAD_MUTEX_INITIALIZER };

struct fx {
	uint8_t *ram;
	struct guest_mem mem;
	struct virtio_dev *d;
	struct vdrv drv;
	int kick_fd; /* the request queue's notify eventfd, as the VMM wires it; -1: none */
};

static void nap_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static size_t iov_total(const struct iovec *v, size_t n)
{
	size_t t = 0;

	for (size_t i = 0; i < n; i++)
		t += v[i].iov_len;
	return t;
}

static size_t iov_gather(const struct iovec *v, size_t n, uint8_t *buf, size_t max)
{
	size_t done = 0;

	for (size_t i = 0; i < n && done < max; i++) {
		size_t c = MIN(v[i].iov_len, max - done);

		memcpy(buf + done, v[i].iov_base, c);
		done += c;
	}
	return done;
}

static size_t iov_scatter(const struct iovec *v, size_t n, const uint8_t *buf, size_t len)
{
	size_t done = 0;

	for (size_t i = 0; i < n && done < len; i++) {
		size_t c = MIN(v[i].iov_len, len - done);

		memcpy(v[i].iov_base, buf + done, c);
		done += c;
	}
	return done;
}

/* Answer with a fuse_out_header for the request's unique, then the request's
 * bytes, as far as out holds them. FORGETs get nothing. */
static size_t fake_handle(void *opaque, const struct iovec *in, size_t nr_in,
			  const struct iovec *out, size_t nr_out)
{
	uint8_t buf[4096];
	struct fuse_in_header ih;
	struct fuse_out_header oh;
	size_t got, room, len;
	unsigned int now, peak, call;

	(void)opaque;
	call = atomic_fetch_add(&h.calls, 1);
	atomic_fetch_add(&h.entered, 1);
	now = atomic_fetch_add(&h.now, 1) + 1;
	peak = atomic_load(&h.peak);
	while (now > peak && !atomic_compare_exchange_weak(&h.peak, &peak, now))
		;
	if (nr_in == 0 || iov_total(in, nr_in) < IN_HDR)
		atomic_store(&h.bad, true);
	got = iov_gather(in, nr_in, buf, sizeof(buf));
	memcpy(&ih, buf, sizeof(ih));
	if (call == 0) {
		pthread_mutex_lock(&h.lock);
		h.nr_in = nr_in;
		h.nr_out = nr_out;
		for (size_t i = 0; i < nr_in && i < 8; i++)
			h.in_len[i] = in[i].iov_len;
		for (size_t i = 0; i < nr_out && i < 8; i++)
			h.out_len[i] = out[i].iov_len;
		h.umask = umask(0);
		umask(h.umask);
		h.in_total = MIN(got, sizeof(h.in_copy));
		memcpy(h.in_copy, buf, h.in_total);
		pthread_mutex_unlock(&h.lock);
	}
	/* Long enough that the test's reset comes while all four sleep, on
	 * a loaded machine too (a request ending first lets a fifth in); and
	 * only once all four are in: a worker thread that started late (under
	 * ASan, beside a busy CI) found the first one's request done and the
	 * next taken, and the reset dropped fewer than the test queued. */
	if (h.mode == SLEEP) {
		for (int i = 0; i < 5000 && atomic_load(&h.entered) < 4; i++)
			nap_ms(1);
		nap_ms(300);
	}
	else if (h.mode == NAP)
		nap_ms(1 + atomic_fetch_add(&h.seed, 7) % 5);
	atomic_fetch_sub(&h.now, 1);
	atomic_fetch_add(&h.exited, 1);
	if (ih.opcode == FUSE_FORGET && h.ret == 0)
		return 0;
	room = iov_total(out, nr_out);
	if (room < OUT_HDR) {
		atomic_store(&h.bad, true);
		return 0;
	}
	len = OUT_HDR + MIN(got, room - OUT_HDR);
	oh = (struct fuse_out_header){ .len = (uint32_t)len, .error = 0, .unique = ih.unique };
	memmove(buf + OUT_HDR, buf, len - OUT_HDR);
	memcpy(buf, &oh, OUT_HDR);
	iov_scatter(out, nr_out, buf, len);
	return h.ret ? h.ret : len;
}

static void fake_reset(void *opaque)
{
	(void)opaque;
	/* Called once no request is under way. */
	assert_int_equal(atomic_load(&h.entered), atomic_load(&h.exited));
	atomic_fetch_add(&h.resets, 1);
}

static const struct virtio_fs_handler handler = { .handle = fake_handle, .reset = fake_reset };

static void handler_reset(enum handler_mode mode)
{
	atomic_store(&h.calls, 0);
	atomic_store(&h.resets, 0);
	atomic_store(&h.entered, 0);
	atomic_store(&h.exited, 0);
	atomic_store(&h.now, 0);
	atomic_store(&h.peak, 0);
	atomic_store(&h.bad, false);
	h.mode = mode;
	h.ret = 0;
	h.nr_in = h.nr_out = h.in_total = 0;
}

/* ---- the fake guest driver ------------------------------------------- */

static void driver_up(struct fx *f)
{
	assert_true(vdrv_negotiate(&f->drv, 1ULL << VIRTIO_F_VERSION_1_BIT) &
		    VIRTIO_CONFIG_S_FEATURES_OK);
	assert_true(vdrv_queues_up(&f->drv));
	vdrv_driver_ok(&f->drv);
}

static int fx_setup_kicks(void **state, enum handler_mode mode, bool kick_fd)
{
	struct fx *f = calloc(1, sizeof(*f));
	gantry_error_t err = NULL;

	handler_reset(mode);
	f->ram = calloc(1, RAM_SIZE);
	f->kick_fd = -1;
	guest_mem_init_buffer(&f->mem, f->ram, RAM_SIZE);
	f->d = virtio_fs_create(&f->mem, TAG, &handler, &err);
	if (f->d == NULL) {
		fprintf(stderr, "%s\n", gantry_error_str(err));
		return -1;
	}
	/* Blocking, as the VMM leaves a queue the device reads itself. */
	if (kick_fd) {
		assert_true(f->d->ops->own_kicks & (1u << REQQ));
		f->kick_fd = eventfd(0, EFD_CLOEXEC);
		assert_true(f->kick_fd >= 0);
		f->d->queue_fds[REQQ] = f->kick_fd;
	}
	vdrv_init(&f->drv, f->ram, f->d, QN, 2, RING_GPA, RING_STRIDE);
	driver_up(f);
	*state = f;
	return 0;
}

static int fx_setup_mode(void **state, enum handler_mode mode)
{
	return fx_setup_kicks(state, mode, false);
}

static int fx_setup(void **state)
{
	unsetenv(VIRTIO_FS_THREADS_ENV);
	gantry_settings_load();
	return fx_setup_mode(state, ECHO);
}

/* The pool's leader reads the kicks from the eventfd. */
static int fx_setup_fd(void **state)
{
	unsetenv(VIRTIO_FS_THREADS_ENV);
	gantry_settings_load();
	return fx_setup_kicks(state, ECHO, true);
}

static int fx_setup_fd_sleep(void **state)
{
	unsetenv(VIRTIO_FS_THREADS_ENV);
	gantry_settings_load();
	return fx_setup_kicks(state, SLEEP, true);
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	f->d->ops->destroy(f->d);
	if (f->kick_fd >= 0)
		close(f->kick_fd);
	free(f->ram);
	free(f);
	return 0;
}

struct seg {
	uint64_t gpa;
	uint32_t len;
	bool write;
};

/* Descriptors first.. for segs, chained, offered on q (not kicked). */
static void chain(struct fx *f, unsigned int q, uint16_t first, const struct seg *segs,
		  unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		uint16_t flags = (segs[i].write ? VRING_DESC_F_WRITE : 0) |
				 (i + 1 < n ? VRING_DESC_F_NEXT : 0);

		vdrv_set_desc(&f->drv, q, first + i, segs[i].gpa, segs[i].len, flags,
			      (uint16_t)((first + i + 1) % QN));
	}
	vdrv_offer(&f->drv, q, first);
}

/* A kick as the guest's notify write makes it: through the ioeventfd
 * when the fixture has one for q, else as an MMIO exit. */
static void kick(struct fx *f, unsigned int q)
{
	uint64_t one = 1;

	if (q == REQQ && f->kick_fd >= 0)
		assert_int_equal(write(f->kick_fd, &one, sizeof(one)), sizeof(one));
	else
		vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NOTIFY, q);
}

/* Write a fuse_in_header at gpa. */
static void put_hdr(struct fx *f, uint64_t gpa, uint32_t opcode, uint64_t unique, uint32_t len)
{
	struct fuse_in_header ih = { .len = len, .opcode = opcode, .unique = unique, .nodeid = 1 };

	memcpy(f->ram + gpa, &ih, sizeof(ih));
}

/* Wait until q's used idx reaches n (up to 10 s). */
static bool wait_used(struct fx *f, unsigned int q, uint16_t n)
{
	for (int i = 0; i < 10000; i++) {
		if (vdrv_used_idx(&f->drv, q) == n)
			return true;
		nap_ms(1);
	}
	return false;
}

/* ---- tests ------------------------------------------------------------ */

static void test_features(void **state)
{
	struct fx *f = *state;

	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_DEVICE_ID), VIRTIO_ID_FS);
	assert_true(vdrv_dev_features(&f->drv) ==
		    ((1ULL << VIRTIO_F_VERSION_1_BIT) | (1ULL << VIRTIO_RING_F_EVENT_IDX)));
	/* Legacy, or something never offered: FEATURES_OK does not stick. */
	assert_false(vdrv_negotiate(&f->drv, 0) & VIRTIO_CONFIG_S_FEATURES_OK);
	assert_false(vdrv_negotiate(&f->drv, (1ULL << VIRTIO_F_VERSION_1_BIT) | 1) &
		     VIRTIO_CONFIG_S_FEATURES_OK);
	assert_true(vdrv_negotiate(&f->drv, 1ULL << VIRTIO_F_VERSION_1_BIT) &
		    VIRTIO_CONFIG_S_FEATURES_OK);
}

static void read_config(struct virtio_dev *d, struct virtio_fs_config *c)
{
	uint8_t *p = (uint8_t *)c;

	for (uint32_t off = 0; off < sizeof(*c); off += 4)
		virtio_mmio_access(d, VIRTIO_MMIO_CONFIG + off, p + off, 4, false);
}

static void test_config(void **state)
{
	struct fx *f = *state;
	struct virtio_fs_config c;
	uint8_t past[4] = { 1, 1, 1, 1 };

	read_config(f->d, &c);
	assert_memory_equal(c.tag, TAG, strlen(TAG));
	for (size_t i = strlen(TAG); i < sizeof(c.tag); i++)
		assert_int_equal(c.tag[i], 0);
	assert_int_equal(c.num_request_queues, 1);
	virtio_mmio_access(f->d, VIRTIO_MMIO_CONFIG + sizeof(c), past, 4, false);
	assert_int_equal(past[0] | past[1] | past[2] | past[3], 0);
	for (uint32_t q = 0; q < 3; q++) {
		vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_SEL, q);
		assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_NUM_MAX), q < 2 ? QN_MAX : 0);
	}
}

static void test_tags(void **state)
{
	static const char full[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	struct guest_mem mem;
	struct virtio_fs_config c;
	gantry_error_t err = NULL;
	struct virtio_dev *d;
	uint8_t ram[4096];

	(void)state;
	guest_mem_init_buffer(&mem, ram, sizeof(ram));
	d = virtio_fs_create(&mem, full, &handler, &err);
	assert_non_null(d);
	read_config(d, &c);
	assert_memory_equal(c.tag, full, 36); /* no room left for a NUL */
	d->ops->destroy(d);

	assert_null(virtio_fs_create(&mem, "", &handler, &err));
	gantry_error_free(&err);
	assert_null(
		virtio_fs_create(&mem, "abcdefghijklmnopqrstuvwxyz01234567890", &handler, &err));
	gantry_error_free(&err);
	assert_null(virtio_fs_create(&mem, TAG, NULL, &err));
	gantry_error_free(&err);
	assert_null(virtio_fs_create(&mem, TAG, &(struct virtio_fs_handler){ 0 }, &err));
	gantry_error_free(&err);
}

static void test_threads_env(void **state)
{
	static const char *bad[] = { "0", "17", "four", "-1", "4x" };
	struct guest_mem mem;
	gantry_error_t err = NULL;
	struct virtio_dev *d;
	uint8_t ram[4096];

	(void)state;
	guest_mem_init_buffer(&mem, ram, sizeof(ram));
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		setenv(VIRTIO_FS_THREADS_ENV, bad[i], 1);
		gantry_settings_load();
		assert_null(virtio_fs_create(&mem, TAG, &handler, &err));
		assert_non_null(strstr(gantry_error_str(err), VIRTIO_FS_THREADS_ENV));
		gantry_error_free(&err);
	}
	setenv(VIRTIO_FS_THREADS_ENV, "16", 1);
	gantry_settings_load();
	d = virtio_fs_create(&mem, TAG, &handler, &err);
	assert_non_null(d);
	d->ops->destroy(d);
	unsetenv(VIRTIO_FS_THREADS_ENV);
	gantry_settings_load();
}

static void test_round_trip(void **state)
{
	struct fx *f = *state;
	uint64_t in = BUF_GPA(0), out = BUF_GPA(1);
	const struct seg segs[] = {
		{ in, IN_HDR, false },
		{ in + IN_HDR, 10, false },
		{ out, OUT_HDR, true },
		{ out + OUT_HDR, 100, true },
	};
	struct fuse_out_header oh;
	uint32_t id, len;
	mode_t old = umask(022);

	put_hdr(f, in, FUSE_LOOKUP, 77, IN_HDR + 10);
	memcpy(f->ram + in + IN_HDR, "file.txt\0\0", 10);
	chain(f, REQQ, 5, segs, 4);
	kick(f, REQQ);
	assert_true(wait_used(f, REQQ, 1));
	assert_true(vdrv_used_next(&f->drv, REQQ, &id, &len));
	assert_int_equal(id, 5);
	assert_int_equal(len, OUT_HDR + IN_HDR + 10);

	assert_int_equal(atomic_load(&h.calls), 1);
	assert_false(atomic_load(&h.bad));
	assert_int_equal(h.nr_in, 2);
	assert_int_equal(h.in_len[0], IN_HDR);
	assert_int_equal(h.in_len[1], 10);
	assert_int_equal(h.nr_out, 2);
	assert_int_equal(h.out_len[0], OUT_HDR);
	assert_int_equal(h.out_len[1], 100);
	assert_int_equal(h.in_total, IN_HDR + 10);
	assert_memory_equal(h.in_copy, f->ram + in, IN_HDR + 10);

	memcpy(&oh, f->ram + out, sizeof(oh));
	assert_int_equal(oh.unique, 77);
	assert_int_equal(oh.len, len);
	assert_memory_equal(f->ram + out + OUT_HDR, f->ram + in, IN_HDR + 10);
	assert_int_equal(virtio_fs_stats(f->d).requests, 1);
	assert_int_equal(virtio_fs_stats(f->d).workers, 4);
	/* Its workers create files with the guest's modes; ours are as set. */
	assert_int_equal(h.umask, 0);
	assert_int_equal(umask(old), 022);
}

/* A handler claiming more than out holds still gets only out's size. */
static void test_len_capped(void **state)
{
	struct fx *f = *state;
	const struct seg segs[] = { { BUF_GPA(0), IN_HDR, false }, { BUF_GPA(1), 64, true } };
	uint32_t id, len;

	h.ret = 1 << 20;
	put_hdr(f, BUF_GPA(0), FUSE_GETATTR, 1, IN_HDR);
	chain(f, REQQ, 0, segs, 2);
	kick(f, REQQ);
	assert_true(wait_used(f, REQQ, 1));
	assert_true(vdrv_used_next(&f->drv, REQQ, &id, &len));
	assert_int_equal(len, 64);
}

static void test_forget_hiprio(void **state)
{
	struct fx *f = *state;
	const struct seg forget[] = { { BUF_GPA(0), IN_HDR + 8, false } };
	/* A writable part on hiprio is the driver's business: still len 0. */
	const struct seg odd[] = { { BUF_GPA(1), IN_HDR + 8, false }, { BUF_GPA(2), 64, true } };
	uint32_t id, len;

	put_hdr(f, BUF_GPA(0), FUSE_FORGET, 9, IN_HDR + 8);
	put_hdr(f, BUF_GPA(1), FUSE_FORGET, 10, IN_HDR + 8);
	chain(f, HIPRIO, 3, forget, 1);
	kick(f, HIPRIO);
	assert_true(wait_used(f, HIPRIO, 1));
	assert_true(vdrv_used_next(&f->drv, HIPRIO, &id, &len));
	assert_int_equal(id, 3);
	assert_int_equal(len, 0);
	assert_int_equal(h.nr_in, 1);
	assert_int_equal(h.in_len[0], IN_HDR + 8);
	assert_int_equal(h.nr_out, 0);

	h.ret = 64;
	chain(f, HIPRIO, 4, odd, 2);
	kick(f, HIPRIO);
	assert_true(wait_used(f, HIPRIO, 2));
	assert_true(vdrv_used_next(&f->drv, HIPRIO, &id, &len));
	assert_int_equal(id, 4);
	assert_int_equal(len, 0);
	assert_int_equal(atomic_load(&h.calls), 2);
	assert_int_equal(vdrv_used_idx(&f->drv, REQQ), 0);
}

static void test_malformed(void **state)
{
	struct fx *f = *state;
	uint64_t in = BUF_GPA(0), out = BUF_GPA(1);
	const struct seg only_w[] = { { out, 64, true } };
	const struct seg short_in[] = { { in, IN_HDR - 1, false }, { out, 64, true } };
	const struct seg short_in2[] = { { in, 20, false },
					 { in + 20, 19, false },
					 { out, 64, true } };
	const struct seg no_w[] = { { in, IN_HDR + 16, false } };
	const struct seg short_w[] = { { in, IN_HDR, false },
				       { out, 8, true },
				       { out + 8, 7, true } };
	const struct seg outside[] = { { in, IN_HDR, false }, { RAM_SIZE - 8, 16, true } };
	const struct seg outside_r[] = { { RAM_SIZE + 4096, IN_HDR, false }, { out, 64, true } };
	const struct seg w_first[] = { { out, 64, true }, { in, IN_HDR, false } };
	const struct seg empty[] = { { in, IN_HDR, false }, { out, 0, true } };
	const struct {
		const struct seg *s;
		unsigned int n;
	} bad[] = {
		{ only_w, 1 },	{ short_in, 2 },  { short_in2, 3 }, { no_w, 1 },  { short_w, 3 },
		{ outside, 2 }, { outside_r, 2 }, { w_first, 2 },   { empty, 2 },
	};
	struct seg longest[CHAIN_MAX + 1];
	uint16_t next = 0, n = 0;
	uint32_t id, len;

	put_hdr(f, in, FUSE_LOOKUP, 1, IN_HDR + 16);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		chain(f, REQQ, next, bad[i].s, bad[i].n);
		next += bad[i].n;
		n++;
	}
	/* One descriptor too many: an IN header, then single bytes. */
	longest[0] = (struct seg){ in, IN_HDR, false };
	for (unsigned int i = 1; i <= CHAIN_MAX; i++)
		longest[i] = (struct seg){ out + i, 1, true };
	chain(f, REQQ, next, longest, CHAIN_MAX + 1);
	next += CHAIN_MAX + 1;
	n++;
	/* A readable-only chain on hiprio shorter than a header. */
	chain(f, HIPRIO, 0, short_in, 1);
	kick(f, REQQ);
	kick(f, HIPRIO);
	assert_true(wait_used(f, REQQ, n));
	assert_true(wait_used(f, HIPRIO, 1));
	virtio_fs_wait_idle(f->d);
	while (vdrv_used_next(&f->drv, REQQ, &id, &len))
		assert_int_equal(len, 0);
	assert_true(vdrv_used_next(&f->drv, HIPRIO, &id, &len));
	assert_int_equal(len, 0);
	assert_int_equal(atomic_load(&h.calls), 0);
	assert_int_equal(virtio_fs_stats(f->d).malformed, n + 1);

	/* The longest chain Linux sends still passes, and so does a FORGET on
	 * the request queue with nothing writable. Every descriptor above is
	 * back: the table starts again at 0 (it has room for one such chain,
	 * not two). */
	next = 0;
	chain(f, REQQ, next, longest, CHAIN_MAX);
	next += CHAIN_MAX;
	put_hdr(f, BUF_GPA(2), FUSE_FORGET, 2, IN_HDR + 8);
	chain(f, REQQ, next, (const struct seg[]){ { BUF_GPA(2), IN_HDR + 8, false } }, 1);
	kick(f, REQQ);
	assert_true(wait_used(f, REQQ, n + 2));
	assert_int_equal(atomic_load(&h.calls), 2);
	assert_false(atomic_load(&h.bad));
	assert_int_equal(virtio_fs_stats(f->d).malformed, n + 1);
}

/* 200 requests through a 256-entry ring, as many in flight as it holds, on
 * four workers napping 1-5 ms each: every one answered once, with its own
 * answer, and not in the order asked. */
static void test_concurrent(void **state)
{
	enum { TOTAL = 200, SLOTS = QN / 2 };
	struct fx *f = *state;
	unsigned int answered[TOTAL] = { 0 }, slot_req[SLOTS];
	unsigned int free_slots[SLOTS], nr_free = SLOTS, sent = 0, done = 0, expect = 0;
	bool out_of_order = false;

	h.mode = NAP;
	for (unsigned int i = 0; i < SLOTS; i++)
		free_slots[i] = SLOTS - 1 - i;
	for (int spins = 0; done < TOTAL && spins < 20000; spins++) {
		uint32_t id, len;
		bool offered = false;

		while (sent < TOTAL && nr_free) {
			unsigned int s = free_slots[--nr_free];
			uint64_t gpa = BUF_GPA(s);
			const struct seg segs[] = { { gpa, IN_HDR + 8, false },
						    { gpa + 0x800, 0x200, true } };

			put_hdr(f, gpa, FUSE_GETATTR, 1000 + sent, IN_HDR + 8);
			memcpy(f->ram + gpa + IN_HDR, &sent, sizeof(sent));
			slot_req[s] = sent++;
			chain(f, REQQ, (uint16_t)(2 * s), segs, 2);
			offered = true;
		}
		if (offered)
			kick(f, REQQ);
		while (vdrv_used_next(&f->drv, REQQ, &id, &len)) {
			unsigned int s = id / 2, req = slot_req[s];
			struct fuse_out_header oh;

			assert_int_equal(id % 2, 0);
			assert_int_equal(len, OUT_HDR + IN_HDR + 8);
			memcpy(&oh, f->ram + BUF_GPA(s) + 0x800, sizeof(oh));
			assert_int_equal(oh.unique, 1000 + req);
			answered[req]++;
			if (req != expect)
				out_of_order = true;
			expect = req + 1;
			free_slots[nr_free++] = s;
			done++;
		}
		nap_ms(1);
	}
	assert_int_equal(done, TOTAL);
	for (unsigned int i = 0; i < TOTAL; i++)
		assert_int_equal(answered[i], 1);
	assert_true(out_of_order);
	assert_true(atomic_load(&h.peak) >= 2 && atomic_load(&h.peak) <= 4);
	virtio_fs_wait_idle(f->d);
	assert_int_equal(vdrv_used_idx(&f->drv, REQQ), TOTAL);
	assert_int_equal(virtio_fs_stats(f->d).requests, TOTAL);
	assert_false(atomic_load(&h.bad));
}

static int fx_setup_one_thread(void **state)
{
	setenv(VIRTIO_FS_THREADS_ENV, "1", 1);
	gantry_settings_load();
	int r = fx_setup_mode(state, NAP);

	unsetenv(VIRTIO_FS_THREADS_ENV);
	gantry_settings_load();
	return r;
}

/* One worker: requests are answered in the order asked. */
static void test_one_thread(void **state)
{
	struct fx *f = *state;
	uint32_t id, len;

	for (uint16_t i = 0; i < 20; i++) {
		const struct seg segs[] = { { BUF_GPA(i), IN_HDR, false },
					    { BUF_GPA(i) + 0x800, 64, true } };

		put_hdr(f, BUF_GPA(i), FUSE_GETATTR, i, IN_HDR);
		chain(f, REQQ, 2 * i, segs, 2);
	}
	kick(f, REQQ);
	assert_true(wait_used(f, REQQ, 20));
	for (uint16_t i = 0; i < 20; i++) {
		assert_true(vdrv_used_next(&f->drv, REQQ, &id, &len));
		assert_int_equal(id, 2 * i);
	}
	assert_int_equal(atomic_load(&h.peak), 1);
	assert_int_equal(virtio_fs_stats(f->d).workers, 1);
}

/* 512 FORGETs at once: more than the job list holds, so workers pop the
 * rest of the ring as they free its slots. */
static void test_list_full(void **state)
{
	struct fx *f = *state;
	bool seen[QN] = { false };
	uint32_t id = 0, len = 0;

	h.mode = NAP;
	for (uint16_t i = 0; i < QN; i++) {
		const struct seg segs[] = { { BUF_GPA(0) + 64 * (i % 32), IN_HDR + 8, false } };

		put_hdr(f, segs[0].gpa, FUSE_FORGET, i, IN_HDR + 8);
		chain(f, HIPRIO, i, segs, 1);
	}
	kick(f, HIPRIO);
	assert_true(wait_used(f, HIPRIO, QN));
	for (unsigned int i = 0; i < QN; i++) {
		assert_true(vdrv_used_next(&f->drv, HIPRIO, &id, &len));
		assert_true(id < QN);
		assert_false(seen[id]);
		seen[id] = true;
		assert_int_equal(len, 0);
	}
	assert_int_equal(atomic_load(&h.calls), QN);
}

static int fx_setup_sleep(void **state)
{
	unsetenv(VIRTIO_FS_THREADS_ENV);
	gantry_settings_load();
	return fx_setup_mode(state, SLEEP);
}

/* Queue 16 requests on handlers that take 50 ms, reset once four are being
 * served: the reset returns with all four back, nothing is pushed, the rest
 * never reach the handler, the pool is gone; the next driver gets a new one. */
static void queue_slow(struct fx *f, unsigned int n)
{
	struct vdrv_queue *vq = &f->drv.q[REQQ];
	uint8_t *avail = f->drv.ram + vq->avail;

	/* All n published by one store of the avail index: a leader woken
	 * early (the pool's start reads the ring too) pops none or all, never
	 * the first few, which would leave the rest unpopped behind four busy
	 * workers and the reset dropping fewer than queued. */
	for (uint16_t i = 0; i < n; i++) {
		put_hdr(f, BUF_GPA(i), FUSE_FSYNC, i, IN_HDR);
		vdrv_set_desc(&f->drv, REQQ, 2 * i, BUF_GPA(i), IN_HDR, VRING_DESC_F_NEXT,
			      (uint16_t)((2 * i + 1) % QN));
		vdrv_set_desc(&f->drv, REQQ, 2 * i + 1, BUF_GPA(i) + 0x800, 64, VRING_DESC_F_WRITE,
			      0);
		__atomic_store_n((uint16_t *)(avail + 4 + 2 * ((vq->avail_idx + i) % f->drv.qsize)),
				 (uint16_t)(2 * i), __ATOMIC_RELAXED);
	}
	vq->avail_idx = (uint16_t)(vq->avail_idx + n);
	__atomic_store_n((uint16_t *)(avail + 2), vq->avail_idx, __ATOMIC_RELEASE);
	kick(f, REQQ);
	for (int i = 0; i < 5000 && atomic_load(&h.entered) < 4; i++)
		nap_ms(1);
	assert_int_equal(atomic_load(&h.entered), 4);
}

static void test_reset_in_flight(void **state)
{
	struct fx *f = *state;
	struct virtio_fs_stats s;
	uint32_t id, len;

	queue_slow(f, 16);
	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, 0);
	assert_int_equal(atomic_load(&h.exited), 4);
	assert_true(atomic_load(&h.resets) >= 1); /* the server forgets what it gave */
	s = virtio_fs_stats(f->d);
	assert_int_equal(s.workers, 0);
	assert_int_equal(s.dropped, 16);
	nap_ms(120);
	assert_int_equal(vdrv_used_idx(&f->drv, REQQ), 0);
	assert_int_equal(atomic_load(&h.calls), 4);

	h.mode = ECHO;
	driver_up(f);
	chain(f, REQQ, 0,
	      (const struct seg[]){ { BUF_GPA(0), IN_HDR, false }, { BUF_GPA(1), 64, true } }, 2);
	kick(f, REQQ);
	assert_true(wait_used(f, REQQ, 1));
	assert_true(vdrv_used_next(&f->drv, REQQ, &id, &len));
	assert_int_equal(len, OUT_HDR + IN_HDR);
	assert_int_equal(virtio_fs_stats(f->d).workers, 4);
}

/* The VMM's teardown with requests under way: joins the workers, no crash. */
static void test_destroy_in_flight(void **state)
{
	struct fx *f = *state;

	queue_slow(f, 16);
	f->d->ops->destroy(f->d);
	assert_int_equal(atomic_load(&h.exited), 4);
	assert_int_equal(vdrv_used_idx(&f->drv, REQQ), 0);
	f->d = NULL;
}

static int fx_teardown_maybe(void **state)
{
	struct fx *f = *state;

	if (f->d)
		f->d->ops->destroy(f->d);
	if (f->kick_fd >= 0)
		close(f->kick_fd);
	free(f->ram);
	free(f);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_features, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_config, fx_setup, fx_teardown),
		cmocka_unit_test(test_tags),
		cmocka_unit_test(test_threads_env),
		cmocka_unit_test_setup_teardown(test_round_trip, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_len_capped, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_forget_hiprio, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_malformed, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_concurrent, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_one_thread, fx_setup_one_thread, fx_teardown),
		cmocka_unit_test_setup_teardown(test_list_full, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_reset_in_flight, fx_setup_sleep, fx_teardown),
		cmocka_unit_test_setup_teardown(test_destroy_in_flight, fx_setup_sleep,
						fx_teardown_maybe),
		cmocka_unit_test_setup_teardown(test_round_trip, fx_setup_fd, fx_teardown),
		cmocka_unit_test_setup_teardown(test_malformed, fx_setup_fd, fx_teardown),
		cmocka_unit_test_setup_teardown(test_concurrent, fx_setup_fd, fx_teardown),
		cmocka_unit_test_setup_teardown(test_reset_in_flight, fx_setup_fd_sleep,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_destroy_in_flight, fx_setup_fd_sleep,
						fx_teardown_maybe),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
