/* Unit tests for virtio/fs.c, second part: the worker pool. Requests in
 * flight at once, answered out of order; one worker, answering in order;
 * more FORGETs than the job list holds; and a reset and the VMM's teardown
 * with requests under way. The rig is virtio_fs_rig.h; the features, the
 * config, single requests and malformed chains are in test_virtio_fs.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "virtio_fs_rig.h"

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

static int fx_setup_fd_sleep(void **state)
{
	unsetenv(VIRTIO_FS_THREADS_ENV);
	gantry_settings_load();
	return fx_setup_kicks(state, SLEEP, true);
}

/* The SLEEP handlers let go once the device dropped what was queued (the
 * reset or the teardown under way, the device's lock let go while it
 * joins its pool), within 15 s: d is not touched after. */
static void *release_after_drop(void *opaque)
{
	struct virtio_dev *d = opaque;

	for (int i = 0; i < 15000 && virtio_fs_stats(d).dropped == 0; i++)
		nap_ms(1);
	atomic_store(&h.release, true);
	return NULL;
}

/* Queue 16 requests on handlers held till the device dropped the rest,
 * reset once four are being served: the reset returns with all four back,
 * nothing is pushed, the rest never reach the handler, the pool is gone;
 * the next driver gets a new one. */
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
	pthread_t t;

	queue_slow(f, 16);
	assert_int_equal(pthread_create(&t, NULL, release_after_drop, f->d), 0);
	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, 0);
	pthread_join(t, NULL);
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

	pthread_t t;

	queue_slow(f, 16);
	assert_int_equal(pthread_create(&t, NULL, release_after_drop, f->d), 0);
	f->d->ops->destroy(f->d);
	pthread_join(t, NULL);
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
		cmocka_unit_test_setup_teardown(test_concurrent, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_one_thread, fx_setup_one_thread, fx_teardown),
		cmocka_unit_test_setup_teardown(test_list_full, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_reset_in_flight, fx_setup_sleep, fx_teardown),
		cmocka_unit_test_setup_teardown(test_destroy_in_flight, fx_setup_sleep,
						fx_teardown_maybe),
		cmocka_unit_test_setup_teardown(test_concurrent, fx_setup_fd, fx_teardown),
		cmocka_unit_test_setup_teardown(test_reset_in_flight, fx_setup_fd_sleep,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_destroy_in_flight, fx_setup_fd_sleep,
						fx_teardown_maybe),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
