/* What the virtio-fs tests share (test_virtio_fs.c, test_virtio_fs_pool.c):
 * a fake request handler that stands in for the share server. It runs on
 * the device's worker threads, so it records what it saw and the test
 * thread checks it (cmocka's asserts are not thread-safe). The shared fake
 * guest driver brings the device up through the virtio-mmio registers over
 * a calloc'd guest RAM and offers FUSE-shaped chains, kicked as an MMIO
 * exit or through the request queue's eventfd; and the fixture. Include
 * after <cmocka.h>. */
#ifndef GANTRY_TESTS_UNIT_VIRTIO_FS_RIG_H
#define GANTRY_TESTS_UNIT_VIRTIO_FS_RIG_H

#include <linux/fuse.h>
#include <linux/virtio_ring.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
	atomic_bool release; /* SLEEP: the device dropped the rest, go on */
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
	/* Held till the test's reset has dropped the queued rest (a request
	 * ending first would let a fifth in, however loaded the machine), and
	 * only once all four are in: a worker thread that started late (under
	 * ASan, beside a busy CI) found the first one's request done and the
	 * next taken, and the reset dropped fewer than the test queued. */
	if (h.mode == SLEEP) {
		for (int i = 0; i < 5000 && atomic_load(&h.entered) < 4; i++)
			nap_ms(1);
		for (int i = 0; i < 20000 && !atomic_load(&h.release); i++)
			nap_ms(1);
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
	atomic_store(&h.release, false);
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

#endif
