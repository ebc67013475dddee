/* Unit tests for virtio/balloon.c: the ranges a free page report names are
 * given back to the host (they read as zeros after), whole pages only, in
 * guest RAM only, and the chain goes back to the driver in every case.
 * Guest RAM is mapped the way the VMM maps it, anonymous and as a memfd,
 * and the queues are set up the way a driver leaves them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <linux/virtio_balloon.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "common/util.h"
#include "virtio/devices.h"

#include "guest.h"

#define RAM	  (16 * MiB)
#define QSIZE	  64
#define RING_GPA  0x1000ULL /* each queue's rings: 0x1000 apart */
#define DATA_GPA  (4 * MiB) /* the pages reports name */
#define Q_INFLATE 0
#define Q_REPORT  2

struct fx {
	struct guest_mem mem;
	struct virtio_dev *d;
};

static uint8_t *gpa(struct fx *f, uint64_t a)
{
	return guest_ptr(&f->mem, a, 1);
}

static uint64_t desc_gpa(unsigned int q)
{
	return RING_GPA + (uint64_t)q * 0x3000;
}

static int fx_setup_with(void **state, bool shared)
{
	struct fx *f = xzalloc(sizeof(*f));
	gantry_error_t err = NULL;

	assert_int_equal(shared ? guest_mem_init_shared(&f->mem, RAM, &err) :
				  guest_mem_init(&f->mem, RAM, &err),
			 0);
	f->d = virtio_balloon_create(&f->mem);
	assert_true(f->d->features & (1ULL << VIRTIO_BALLOON_F_REPORTING));
	assert_int_equal(f->d->ops->num_queues, 3);
	for (unsigned int q = 0; q < 3; q++) {
		struct virtq *vq = &f->d->vqs[q];

		vq->num = QSIZE;
		vq->desc_gpa = desc_gpa(q);
		vq->avail_gpa = desc_gpa(q) + 0x1000;
		vq->used_gpa = desc_gpa(q) + 0x2000;
		assert_int_equal(virtq_enable(vq, &f->mem, false), 0);
	}
	f->d->status = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
		       VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK;
	*state = f;
	return 0;
}

static int fx_setup(void **state)
{
	return fx_setup_with(state, false);
}

static int fx_setup_shared(void **state)
{
	return fx_setup_with(state, true);
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	f->d->ops->destroy(f->d);
	guest_mem_destroy(&f->mem);
	free(f);
	return 0;
}

/* One chain of n buffers on queue q, made available; flags for each. */
static void offer(struct fx *f, unsigned int q, const uint64_t *addr, const uint32_t *len,
		  unsigned int n, uint16_t flags)
{
	uint8_t *avail = gpa(f, desc_gpa(q) + 0x1000);
	uint16_t idx = rd16(avail + 2);

	for (unsigned int i = 0; i < n; i++) {
		uint8_t *d = gpa(f, desc_gpa(q) + 16 * i);

		memcpy(d, &addr[i], 8);
		memcpy(d + 8, &len[i], 4);
		wr16(d + 12, (uint16_t)(flags | (i + 1 < n ? VRING_DESC_F_NEXT : 0)));
		wr16(d + 14, (uint16_t)(i + 1));
	}
	wr16(avail + 4 + 2 * (idx % QSIZE), 0);
	wr16(avail + 2, (uint16_t)(idx + 1));
	virtio_dev_notify(f->d, q);
}

static uint16_t used_idx(struct fx *f, unsigned int q)
{
	return rd16(gpa(f, desc_gpa(q) + 0x2000 + 2));
}

static uint32_t used_len(struct fx *f, unsigned int q)
{
	return rd32(gpa(f, desc_gpa(q) + 0x2000 + 4 + 4));
}

static bool all(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

/* Two free ranges in one report: both read as zeros after, the chain is
 * back with nothing written, and the bytes are counted. */
static void test_report_frees(void **state)
{
	struct fx *f = *state;
	uint64_t addr[] = { DATA_GPA, DATA_GPA + 4 * MiB };
	uint32_t len[] = { 2 * MiB, 1 * MiB };
	uint8_t *p = gpa(f, DATA_GPA);

	memset(p, 0xab, 6 * MiB);
	offer(f, Q_REPORT, addr, len, 2, VRING_DESC_F_WRITE);
	assert_int_equal(used_idx(f, Q_REPORT), 1);
	assert_int_equal(used_len(f, Q_REPORT), 0);
	assert_true(all(p, 2 * MiB, 0));
	assert_true(all(p + 2 * MiB, 2 * MiB, 0xab)); /* not reported */
	assert_true(all(p + 4 * MiB, 1 * MiB, 0));
	assert_true(all(p + 5 * MiB, 1 * MiB, 0xab));
	assert_int_equal(virtio_balloon_stats(f->d).reported_bytes, 3 * MiB);
	assert_int_equal(virtio_balloon_stats(f->d).reports, 1);
}

/* A range that does not start or end on a page: only the whole pages
 * inside it go; the bytes around them stay. */
static void test_report_partial_pages(void **state)
{
	struct fx *f = *state;
	uint64_t addr[] = { DATA_GPA + 100 };
	uint32_t len[] = { 3 * 4096 };
	uint8_t *p = gpa(f, DATA_GPA);

	memset(p, 0xab, 4 * 4096);
	offer(f, Q_REPORT, addr, len, 1, VRING_DESC_F_WRITE);
	assert_int_equal(used_idx(f, Q_REPORT), 1);
	assert_true(all(p, 4096, 0xab));
	assert_true(all(p + 4096, 2 * 4096, 0));
	assert_true(all(p + 3 * 4096, 4096, 0xab));
	assert_int_equal(virtio_balloon_stats(f->d).reported_bytes, 2 * 4096);

	/* Under a page: nothing goes. */
	addr[0] = DATA_GPA + 4096 * 3 + 1;
	len[0] = 4000;
	offer(f, Q_REPORT, addr, len, 1, VRING_DESC_F_WRITE);
	assert_int_equal(used_idx(f, Q_REPORT), 2);
	assert_true(all(p + 3 * 4096, 4096, 0xab));
	assert_int_equal(virtio_balloon_stats(f->d).reported_bytes, 2 * 4096);
}

/* A range that leaves guest RAM, or wraps: the chain goes back unserved
 * and nothing of the host's is touched. */
static void test_report_outside_ram(void **state)
{
	struct fx *f = *state;
	uint64_t addr[] = { RAM - 4096, 0xfffffffffffff000ULL };
	uint32_t len[] = { 2 * 4096, 2 * 4096 };
	uint8_t *last = gpa(f, RAM - 4096);

	memset(last, 0xab, 4096);
	offer(f, Q_REPORT, addr, len, 1, VRING_DESC_F_WRITE);
	assert_int_equal(used_idx(f, Q_REPORT), 1);
	offer(f, Q_REPORT, addr + 1, len + 1, 1, VRING_DESC_F_WRITE);
	assert_int_equal(used_idx(f, Q_REPORT), 2);
	assert_true(all(last, 4096, 0xab));
	assert_int_equal(virtio_balloon_stats(f->d).reported_bytes, 0);
}

/* Inflate: the pages named by frame number go; one beyond RAM is skipped. */
static void test_inflate(void **state)
{
	struct fx *f = *state;
	uint32_t pfns[] = { DATA_GPA >> 12, (DATA_GPA >> 12) + 2, (RAM >> 12) + 5 };
	uint64_t addr[] = { 2 * MiB };
	uint32_t len[] = { sizeof(pfns) };
	uint8_t *p = gpa(f, DATA_GPA);

	memcpy(gpa(f, addr[0]), pfns, sizeof(pfns));
	memset(p, 0xab, 3 * 4096);
	offer(f, Q_INFLATE, addr, len, 1, 0);
	assert_int_equal(used_idx(f, Q_INFLATE), 1);
	assert_true(all(p, 4096, 0));
	assert_true(all(p + 4096, 4096, 0xab));
	assert_true(all(p + 2 * 4096, 4096, 0));
	assert_int_equal(virtio_balloon_stats(f->d).inflated_bytes, 2 * 4096);
}

/* The driver's count of pages in the balloon reads back as written; the
 * host's target is never written by it. */
static void test_config(void **state)
{
	struct fx *f = *state;
	struct virtio_balloon_config c;
	uint32_t actual = 1234, target = 99;

	f->d->ops->config_write(f->d, offsetof(struct virtio_balloon_config, actual),
				(const uint8_t *)&actual, sizeof(actual));
	f->d->ops->config_write(f->d, offsetof(struct virtio_balloon_config, num_pages),
				(const uint8_t *)&target, sizeof(target));
	/* Past `actual`: the fields after it are the device's. */
	f->d->ops->config_write(f->d, offsetof(struct virtio_balloon_config, free_page_hint_cmd_id),
				(const uint8_t *)&target, sizeof(target));
	f->d->ops->config_write(f->d, offsetof(struct virtio_balloon_config, poison_val),
				(const uint8_t *)&target, sizeof(target));
	memcpy(&c, f->d->config, sizeof(c));
	assert_int_equal(c.actual, 1234);
	assert_int_equal(c.num_pages, 0);
	assert_int_equal(c.free_page_hint_cmd_id, 0);
	assert_int_equal(c.poison_val, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_report_frees, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_report_frees, fx_setup_shared, fx_teardown),
		cmocka_unit_test_setup_teardown(test_report_partial_pages, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_report_partial_pages, fx_setup_shared,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_report_outside_ram, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_inflate, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_config, fx_setup, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
