/* Unit tests for virtio/dev.c's queue budget. The queue's notification fd
 * is an eventfd the I/O loop watches, as the VMM watches a queue's ioeventfd:
 * a ring holding more chains than VIRTQ_BUDGET is served over several rounds
 * of the loop, and the other fds' handlers run before it is done. The
 * device is virtio-rng over a buffer of guest RAM, its queue set up the way
 * a driver leaves it, without going through the transport. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cmocka.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "common/util.h"
#include "virtio/devices.h"
#include "vmm/ioloop.h"

#define GUEST_SIZE (1 * MiB)
#include "guest.h"

#define QSIZE	  256
#define DESC_GPA  0x1000ULL
#define AVAIL_GPA 0x2000ULL
#define USED_GPA  0x3000ULL
#define DATA_GPA  0x10000ULL
#define BUF_LEN	  16
#define CHAINS	  (3 * VIRTQ_BUDGET + 10) /* four rounds' worth */
#define ROUNDS	  ((CHAINS + VIRTQ_BUDGET - 1) / VIRTQ_BUDGET)

struct fx {
	struct guest g;
	struct virtio_dev *d;
	struct ioloop loop;
	int qfd;	    /* the queue's notification fd */
	int other;	    /* another device's fd, ready once */
	unsigned int kicks; /* queue handler runs */
	int other_ran_at;   /* used index when the other handler ran; -1 */
};

static uint16_t used_idx(struct fx *f)
{
	return rd16(f->g.buf + USED_GPA + 2);
}

/* What the VMM does with a queue's ioeventfd: read it, notify the queue. */
static void queue_kick(void *opaque, int fd, unsigned int events)
{
	struct fx *f = opaque;
	uint64_t n;

	(void)events;
	if (read(fd, &n, sizeof(n)) == sizeof(n)) {
		f->kicks++;
		virtio_dev_notify(f->d, 0);
	}
}

static void other_event(void *opaque, int fd, unsigned int events)
{
	struct fx *f = opaque;
	uint64_t n;

	(void)events;
	if (read(fd, &n, sizeof(n)) == sizeof(n))
		f->other_ran_at = used_idx(f);
}

static int fx_setup(void **state)
{
	struct fx *f = xzalloc(sizeof(*f));
	gantry_error_t err = NULL;
	struct virtq *vq;

	f->g.buf = xzalloc(GUEST_SIZE);
	guest_mem_init_buffer(&f->g.mem, f->g.buf, GUEST_SIZE);
	f->d = virtio_rng_create(&f->g.mem);
	vq = &f->d->vqs[0];
	vq->num = QSIZE;
	vq->desc_gpa = DESC_GPA;
	vq->avail_gpa = AVAIL_GPA;
	vq->used_gpa = USED_GPA;
	assert_int_equal(virtq_enable(vq, &f->g.mem, false), 0);
	f->d->status = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
		       VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK;
	f->other_ran_at = -1;
	f->qfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	f->other = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	assert_true(f->qfd >= 0 && f->other >= 0);
	assert_int_equal(ioloop_init(&f->loop, &err), 0);
	assert_int_equal(ioloop_add(&f->loop, f->qfd, queue_kick, f, &err), 0);
	assert_int_equal(ioloop_add(&f->loop, f->other, other_event, f, &err), 0);
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	ioloop_destroy(&f->loop);
	close(f->qfd);
	close(f->other);
	f->d->ops->destroy(f->d);
	free(f->g.buf);
	free(f);
	return 0;
}

/* n one-buffer chains for the device to fill, made available at once. */
static void offer(struct fx *f, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		uint8_t *d = f->g.buf + DESC_GPA + 16 * i;
		uint64_t addr = DATA_GPA + (uint64_t)i * BUF_LEN;
		uint32_t len = BUF_LEN;

		memcpy(d, &addr, 8);
		memcpy(d + 8, &len, 4);
		wr16(d + 12, VRING_DESC_F_WRITE);
		wr16(d + 14, 0);
		wr16(f->g.buf + AVAIL_GPA + 4 + 2 * i, (uint16_t)i);
	}
	wr16(f->g.buf + AVAIL_GPA + 2, (uint16_t)n);
}

static void signal_fd(int fd)
{
	uint64_t one = 1;

	assert_int_equal(write(fd, &one, sizeof(one)), sizeof(one));
}

static void test_budget_rounds(void **state)
{
	struct fx *f = *state;
	unsigned int rounds = 0;

	offer(f, CHAINS);
	signal_fd(f->qfd); /* the guest's QueueNotify */
	signal_fd(f->other);
	while (used_idx(f) < CHAINS && rounds < 2 * ROUNDS) {
		uint16_t before = used_idx(f);

		assert_true(ioloop_run_once(&f->loop, 0) > 0);
		rounds++;
		/* One notification serves a budget, no more. */
		assert_true(used_idx(f) - before <= VIRTQ_BUDGET);
		assert_int_equal(f->kicks, rounds);
	}
	assert_int_equal(used_idx(f), CHAINS);
	assert_int_equal(rounds, ROUNDS);
	/* The other fd was served while the ring still held chains. */
	assert_true(f->other_ran_at >= 0 && f->other_ran_at <= VIRTQ_BUDGET);
	for (unsigned int i = 0; i < CHAINS; i++) {
		const uint8_t *u = f->g.buf + USED_GPA + 4 + 8 * i;

		assert_int_equal(rd32(u), i);
		assert_int_equal(rd32(u + 4), BUF_LEN);
	}
	/* A round that did not use up its budget leaves the fd quiet. */
	assert_int_equal(ioloop_run_once(&f->loop, 0), 0);
	assert_int_equal(f->kicks, ROUNDS);
}

/* The budget holds for a notification from any thread (an MMIO exit, or
 * DRIVER_OK): the rest is left to the loop. */
static void test_budget_from_any_thread(void **state)
{
	struct fx *f = *state;

	offer(f, CHAINS);
	virtio_dev_notify(f->d, 0);
	assert_int_equal(used_idx(f), VIRTQ_BUDGET);
	while (ioloop_run_once(&f->loop, 0) > 0)
		;
	assert_int_equal(used_idx(f), CHAINS);
	assert_int_equal(f->kicks, ROUNDS - 1);
}

/* Without a notification fd no later round would come: one notification
 * serves the whole ring. */
static void test_no_fd_serves_all(void **state)
{
	struct fx *f = *state;

	assert_int_equal(f->d->queue_fds[0], -1);
	offer(f, CHAINS);
	virtio_dev_notify(f->d, 0);
	assert_int_equal(used_idx(f), CHAINS);
	assert_int_equal(ioloop_run_once(&f->loop, 0), 0);
}

static int fx_setup_watched(void **state)
{
	struct fx *f;

	fx_setup(state);
	f = *state;
	f->d->queue_fds[0] = f->qfd;
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_budget_rounds, fx_setup_watched, fx_teardown),
		cmocka_unit_test_setup_teardown(test_budget_from_any_thread, fx_setup_watched,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_no_fd_serves_all, fx_setup, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
