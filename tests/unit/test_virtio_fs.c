/* Unit tests for virtio/fs.c, first part: the device's features, config
 * and tags, its thread count setting, a request's round trip, a length
 * capped at what the guest offered, FORGETs on the high-priority queue,
 * and malformed chains. The fake handler, the fake guest driver and the
 * fixture are in virtio_fs_rig.h; the worker pool (requests in flight at
 * once, one worker, a full job list, a reset and a teardown mid-request)
 * is in test_virtio_fs_pool.c. */
#include <linux/virtio_fs.h>
#include <linux/virtio_ids.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "virtio_fs_rig.h"

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
		cmocka_unit_test_setup_teardown(test_round_trip, fx_setup_fd, fx_teardown),
		cmocka_unit_test_setup_teardown(test_malformed, fx_setup_fd, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
