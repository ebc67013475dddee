/* Unit tests for virtio/queue.c: rings are laid out by hand in a plain
 * buffer posing as guest RAM, by the byte offsets of the virtio 1.x split
 * ring (uapi <linux/virtio_ring.h>), and then made as hostile as a guest can. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <linux/virtio_ring.h>

#include "common/util.h"
#include "virtio/queue.h"
#include "guest.h"

#define RAM_SIZE  (1 * MiB)
#define DESC_GPA  0x1000ULL
#define AVAIL_GPA 0x3000ULL
#define USED_GPA  0x4000ULL
#define DATA_GPA  0x10000ULL
#define QSIZE	  16

struct ring {
	uint8_t *ram;
	struct guest_mem mem;
	struct virtq vq;
	uint16_t avail_idx; /* driver's shadow of avail->idx */
	struct virtq_elem e;
};

static void set_desc(struct ring *r, unsigned int i, uint64_t addr, uint32_t len, uint16_t flags,
		     uint16_t next)
{
	uint8_t *d = r->ram + DESC_GPA + 16 * i;

	memcpy(d, &addr, 8);
	memcpy(d + 8, &len, 4);
	wr16(d + 12, flags);
	wr16(d + 14, next);
}

/* Offer head to the device: ring slot first, then the index. */
static void offer(struct ring *r, uint16_t head)
{
	wr16(r->ram + AVAIL_GPA + 4 + 2 * (r->avail_idx % r->vq.num), head);
	r->avail_idx++;
	wr16(r->ram + AVAIL_GPA + 2, r->avail_idx);
}

static uint16_t used_idx(const struct ring *r)
{
	return rd16(r->ram + USED_GPA + 2);
}

static uint32_t used_id(const struct ring *r, unsigned int slot)
{
	return rd32(r->ram + USED_GPA + 4 + 8 * (slot % r->vq.num));
}

static uint32_t used_len(const struct ring *r, unsigned int slot)
{
	return rd32(r->ram + USED_GPA + 4 + 8 * (slot % r->vq.num) + 4);
}

static void ring_enable(struct ring *r, uint16_t num)
{
	virtq_reset(&r->vq);
	r->vq.num = num;
	r->vq.desc_gpa = DESC_GPA;
	r->vq.avail_gpa = AVAIL_GPA;
	r->vq.used_gpa = USED_GPA;
	assert_int_equal(virtq_enable(&r->vq, &r->mem, false), 0);
	assert_true(r->vq.ready);
}

static int ring_setup(void **state)
{
	struct ring *r = xzalloc(sizeof(*r));

	r->ram = xzalloc(RAM_SIZE);
	guest_mem_init_buffer(&r->mem, r->ram, RAM_SIZE);
	ring_enable(r, QSIZE);
	*state = r;
	return 0;
}

static int ring_teardown(void **state)
{
	struct ring *r = *state;

	free(r->ram);
	free(r);
	return 0;
}

/* A one-descriptor readable request at head that must pop cleanly. */
static void pop_simple(struct ring *r, uint16_t head)
{
	set_desc(r, head, DATA_GPA, 64, 0, 0);
	offer(r, head);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
	assert_int_equal(r->e.head, head);
	assert_int_equal(r->e.nr_out, 1);
	assert_int_equal(r->e.nr_in, 0);
	assert_int_equal(r->e.out_len, 64);
}

static void test_empty(void **state)
{
	struct ring *r = *state;

	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_EMPTY);
}

static void test_single(void **state)
{
	struct ring *r = *state;

	memset(r->ram + DATA_GPA, 0xab, 64);
	pop_simple(r, 3);
	assert_ptr_equal(r->e.iov[0].iov_base, r->ram + DATA_GPA);
	assert_int_equal(r->e.iov[0].iov_len, 64);
	assert_int_equal(r->e.in_len, 0);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_EMPTY);
}

static void test_multi(void **state)
{
	struct ring *r = *state;

	/* 2 -> 7 -> 0 -> 5: two readable, then two writable. */
	set_desc(r, 2, DATA_GPA, 16, VRING_DESC_F_NEXT, 7);
	set_desc(r, 7, DATA_GPA + 0x100, 100, VRING_DESC_F_NEXT, 0);
	set_desc(r, 0, DATA_GPA + 0x200, 512, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 5);
	set_desc(r, 5, DATA_GPA + 0x400, 1, VRING_DESC_F_WRITE, 0);
	offer(r, 2);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
	assert_int_equal(r->e.head, 2);
	assert_int_equal(r->e.nr_out, 2);
	assert_int_equal(r->e.nr_in, 2);
	assert_int_equal(r->e.out_len, 116);
	assert_int_equal(r->e.in_len, 513);
	assert_ptr_equal(r->e.iov[0].iov_base, r->ram + DATA_GPA);
	assert_int_equal(r->e.iov[0].iov_len, 16);
	assert_ptr_equal(r->e.iov[1].iov_base, r->ram + DATA_GPA + 0x100);
	assert_int_equal(r->e.iov[1].iov_len, 100);
	assert_ptr_equal(r->e.iov[2].iov_base, r->ram + DATA_GPA + 0x200);
	assert_int_equal(r->e.iov[2].iov_len, 512);
	assert_ptr_equal(r->e.iov[3].iov_base, r->ram + DATA_GPA + 0x400);
	assert_int_equal(r->e.iov[3].iov_len, 1);
}

/* Lengths belong to one element: a reused struct must not carry them over. */
static void test_lengths_reset(void **state)
{
	struct ring *r = *state;

	memset(&r->e, 0x5a, sizeof(r->e));
	set_desc(r, 0, DATA_GPA, 32, VRING_DESC_F_NEXT, 1);
	set_desc(r, 1, DATA_GPA + 0x100, 8, VRING_DESC_F_WRITE, 0);
	offer(r, 0);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
	assert_int_equal(r->e.out_len, 32);
	assert_int_equal(r->e.in_len, 8);
	offer(r, 0);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
	assert_int_equal(r->e.out_len, 32);
	assert_int_equal(r->e.in_len, 8);
}

static void test_elem_copy(void **state)
{
	struct ring *r = *state;
	uint8_t buf[64], *in0 = r->ram + DATA_GPA + 0x800, *in1 = r->ram + DATA_GPA + 0x900;

	for (unsigned int i = 0; i < 30; i++)
		r->ram[DATA_GPA + i] = (uint8_t)i;
	for (unsigned int i = 0; i < 10; i++)
		r->ram[DATA_GPA + 0x100 + i] = (uint8_t)(30 + i);
	/* out: 30 + 10 bytes; in: 5 + 20 bytes. */
	set_desc(r, 0, DATA_GPA, 30, VRING_DESC_F_NEXT, 1);
	set_desc(r, 1, DATA_GPA + 0x100, 10, VRING_DESC_F_NEXT, 2);
	set_desc(r, 2, DATA_GPA + 0x800, 5, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 3);
	set_desc(r, 3, DATA_GPA + 0x900, 20, VRING_DESC_F_WRITE, 0);
	offer(r, 0);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);

	/* A read that starts in the first buffer and ends in the second. */
	memset(buf, 0xee, sizeof(buf));
	assert_int_equal(virtq_elem_read(&r->e, 25, buf, 10), 10);
	for (unsigned int i = 0; i < 10; i++)
		assert_int_equal(buf[i], 25 + i);
	/* Starting past the first buffer; clipped at the end of the readable part. */
	assert_int_equal(virtq_elem_read(&r->e, 32, buf, 64), 8);
	for (unsigned int i = 0; i < 8; i++)
		assert_int_equal(buf[i], 32 + i);
	assert_int_equal(virtq_elem_read(&r->e, 40, buf, 1), 0);
	assert_int_equal(virtq_elem_read(&r->e, 1000, buf, 1), 0);
	/* Reads never reach the writable buffers. */
	assert_int_equal(virtq_elem_read(&r->e, 0, buf, sizeof(buf)), 40);

	for (unsigned int i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(0x80 + i);
	assert_int_equal(virtq_elem_write(&r->e, 3, buf, 6), 6);
	assert_memory_equal(in0 + 3, buf, 2);
	assert_memory_equal(in1, buf + 2, 4);
	assert_int_equal(in0[2], 0);
	assert_int_equal(in1[4], 0);
	/* Clipped at the end of the writable part; nothing after it is touched. */
	assert_int_equal(virtq_elem_write(&r->e, 20, buf, 64), 5);
	assert_memory_equal(in1 + 15, buf, 5);
	assert_int_equal(in1[20], 0);
	assert_int_equal(virtq_elem_write(&r->e, 25, buf, 1), 0);
	/* Writes never reach the readable buffers. */
	assert_int_equal(r->ram[DATA_GPA], 0);
	assert_int_equal(r->ram[DATA_GPA + 29], 29);
}

/* Expect head to fail as one bad request, then a good one to pop after it. */
static void expect_bad(struct ring *r, uint16_t head)
{
	uint16_t before = r->vq.last_avail;
	uint16_t good = head == 15 ? 14 : 15;

	offer(r, head);
	memset(&r->e, 0x5a, sizeof(r->e));
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_BAD_CHAIN);
	assert_int_equal(r->e.head, head);
	assert_int_equal((uint16_t)(r->vq.last_avail - before), 1);
	assert_false(r->vq.broken);
	virtq_push(&r->vq, r->e.head, 0);
	assert_int_equal(used_id(r, (uint16_t)(used_idx(r) - 1)), head);
	assert_int_equal(used_len(r, (uint16_t)(used_idx(r) - 1)), 0);

	pop_simple(r, good);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_EMPTY);
}

static void test_loop(void **state)
{
	struct ring *r = *state;

	set_desc(r, 0, DATA_GPA, 8, VRING_DESC_F_NEXT, 1);
	set_desc(r, 1, DATA_GPA, 8, VRING_DESC_F_NEXT, 2);
	set_desc(r, 2, DATA_GPA, 8, VRING_DESC_F_NEXT, 0);
	expect_bad(r, 0);
	expect_bad(r, 1);
}

static void test_self_loop(void **state)
{
	struct ring *r = *state;

	set_desc(r, 4, DATA_GPA, 8, VRING_DESC_F_NEXT, 4);
	expect_bad(r, 4);
	set_desc(r, 4, DATA_GPA, 8, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 4);
	expect_bad(r, 4);
}

static void test_chain_max(void **state)
{
	struct ring *r = *state;
	unsigned int i;

	ring_enable(r, 512); /* a table longer than the longest chain */
	r->avail_idx = 0;
	/* Exactly VIRTQ_MAX_CHAIN descriptors: accepted. */
	for (i = 0; i < VIRTQ_MAX_CHAIN; i++)
		set_desc(r, i, DATA_GPA + i, 1, VRING_DESC_F_NEXT, (uint16_t)(i + 1));
	set_desc(r, VIRTQ_MAX_CHAIN - 1, DATA_GPA, 1, 0, 0);
	offer(r, 0);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
	assert_int_equal(r->e.nr_out, VIRTQ_MAX_CHAIN);
	assert_int_equal(r->e.out_len, VIRTQ_MAX_CHAIN);

	/* One more, all distinct (no loop): refused. */
	set_desc(r, VIRTQ_MAX_CHAIN - 1, DATA_GPA, 1, VRING_DESC_F_NEXT, VIRTQ_MAX_CHAIN);
	set_desc(r, VIRTQ_MAX_CHAIN, DATA_GPA, 1, 0, 0);
	offer(r, 0);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_BAD_CHAIN);
	assert_int_equal(r->e.head, 0);

	/* A chain over every descriptor of the table is far too long. */
	for (i = 0; i < VIRTQ_MAX_SIZE; i++)
		set_desc(r, i, DATA_GPA, 1, VRING_DESC_F_NEXT,
			 (uint16_t)((i + 1) % VIRTQ_MAX_SIZE));
	offer(r, 200);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_BAD_CHAIN);
	assert_int_equal(r->e.head, 200);

	set_desc(r, 9, DATA_GPA, 4, 0, 0);
	offer(r, 9);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
	assert_int_equal(r->e.head, 9);
}

static void test_next_out_of_range(void **state)
{
	struct ring *r = *state;

	set_desc(r, 1, DATA_GPA, 8, VRING_DESC_F_NEXT, QSIZE);
	expect_bad(r, 1);
	set_desc(r, 1, DATA_GPA, 8, VRING_DESC_F_NEXT, 0xffff);
	expect_bad(r, 1);
	/* Without F_NEXT the next field means nothing. */
	set_desc(r, 1, DATA_GPA, 8, 0, 0xffff);
	offer(r, 1);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
}

static void test_head_out_of_range(void **state)
{
	struct ring *r = *state;
	uint16_t used_before;

	pop_simple(r, 0);
	virtq_push(&r->vq, 0, 0);
	used_before = used_idx(r);

	offer(r, QSIZE);
	set_desc(r, 1, DATA_GPA, 8, 0, 0);
	offer(r, 1);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_BROKEN);
	assert_true(r->vq.broken);
	/* A broken queue stays quiet: no more requests, no used entries. */
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_EMPTY);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_EMPTY);
	virtq_push(&r->vq, 1, 8);
	assert_int_equal(used_idx(r), used_before);

	/* Re-enabling (after a device reset) starts afresh. */
	memset(r->ram + AVAIL_GPA, 0, 0x2000);
	r->avail_idx = 0;
	ring_enable(r, QSIZE);
	pop_simple(r, 2);
}

static void test_avail_idx_jump(void **state)
{
	struct ring *r = *state;

	set_desc(r, 0, DATA_GPA, 8, 0, 0);
	/* Exactly num ahead is a full ring: fine. */
	wr16(r->ram + AVAIL_GPA + 2, QSIZE);
	for (unsigned int i = 0; i < QSIZE; i++)
		assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_EMPTY);

	/* num + 1 ahead: impossible. */
	wr16(r->ram + AVAIL_GPA + 2, 2 * QSIZE + 1);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_BROKEN);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_EMPTY);
}

static void test_avail_idx_backwards(void **state)
{
	struct ring *r = *state;

	pop_simple(r, 0);
	/* Going back one looks like 65535 new entries. */
	wr16(r->ram + AVAIL_GPA + 2, 0);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_BROKEN);
}

static void test_wrap(void **state)
{
	struct ring *r = *state;
	unsigned int i;

	set_desc(r, 0, DATA_GPA, 8, 0, 0);
	/* Drive both indices to 65534 the way a driver would. */
	for (i = 0; i < 65534; i++) {
		offer(r, 0);
		assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
		virtq_push(&r->vq, 0, 1);
	}
	assert_int_equal(r->vq.last_avail, 65534);
	assert_int_equal(used_idx(r), 65534);

	/* Three more: the third takes both indices through 65535 -> 0. */
	for (i = 0; i < 3; i++) {
		set_desc(r, i + 1, DATA_GPA + 16 * i, 8 + i, 0, 0);
		offer(r, (uint16_t)(i + 1));
	}
	assert_int_equal(rd16(r->ram + AVAIL_GPA + 2), 1);
	for (i = 0; i < 3; i++) {
		assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
		assert_int_equal(r->e.head, i + 1);
		assert_int_equal(r->e.out_len, 8 + i);
		virtq_push(&r->vq, r->e.head, 100 + i);
	}
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_EMPTY);
	assert_int_equal(used_idx(r), 1);
	assert_int_equal(used_id(r, 65534), 1);
	assert_int_equal(used_len(r, 65534), 100);
	assert_int_equal(used_id(r, 65535), 2);
	assert_int_equal(used_id(r, 0), 3);
	assert_int_equal(used_len(r, 0), 102);
}

static void test_addr_outside_ram(void **state)
{
	struct ring *r = *state;

	set_desc(r, 0, RAM_SIZE, 1, 0, 0);
	expect_bad(r, 0);
	set_desc(r, 0, 0x100000000ULL, 16, 0, 0);
	expect_bad(r, 0);
	/* The bad descriptor in the middle of a chain. */
	set_desc(r, 0, DATA_GPA, 16, VRING_DESC_F_NEXT, 1);
	set_desc(r, 1, RAM_SIZE + 0x1000, 16, VRING_DESC_F_WRITE, 0);
	expect_bad(r, 0);
}

static void test_addr_overflow(void **state)
{
	struct ring *r = *state;

	set_desc(r, 0, UINT64_MAX - 10, 100, 0, 0);
	expect_bad(r, 0);
	set_desc(r, 0, UINT64_MAX, UINT32_MAX, VRING_DESC_F_WRITE, 0);
	expect_bad(r, 0);
	/* Wrapping back to a small address must not look like RAM. */
	set_desc(r, 0, 0xfffffffffffff010ULL, 0x2000, 0, 0);
	expect_bad(r, 0);
}

static void test_addr_end_of_ram(void **state)
{
	struct ring *r = *state;

	set_desc(r, 0, RAM_SIZE - 16, 17, 0, 0);
	expect_bad(r, 0);
	set_desc(r, 0, RAM_SIZE - 1, UINT32_MAX, 0, 0);
	expect_bad(r, 0);
	/* Ending exactly at the top of RAM is fine. */
	set_desc(r, 0, RAM_SIZE - 16, 16, VRING_DESC_F_WRITE, 0);
	offer(r, 0);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
	assert_ptr_equal(r->e.iov[0].iov_base, r->ram + RAM_SIZE - 16);
	assert_int_equal(r->e.in_len, 16);
}

static void test_zero_len(void **state)
{
	struct ring *r = *state;

	set_desc(r, 0, DATA_GPA, 0, 0, 0);
	expect_bad(r, 0);
	set_desc(r, 0, DATA_GPA, 8, VRING_DESC_F_NEXT, 1);
	set_desc(r, 1, DATA_GPA, 0, VRING_DESC_F_WRITE, 0);
	expect_bad(r, 0);
}

static void test_indirect(void **state)
{
	struct ring *r = *state;

	/* A well-formed indirect table at DATA_GPA; we did not offer the feature. */
	set_desc(r, 0, DATA_GPA, 32, VRING_DESC_F_INDIRECT, 0);
	expect_bad(r, 0);
	set_desc(r, 0, DATA_GPA, 8, VRING_DESC_F_NEXT, 1);
	set_desc(r, 1, DATA_GPA, 32, VRING_DESC_F_INDIRECT | VRING_DESC_F_WRITE, 0);
	expect_bad(r, 0);
}

static void test_read_after_write(void **state)
{
	struct ring *r = *state;

	set_desc(r, 0, DATA_GPA, 8, VRING_DESC_F_NEXT, 1);
	set_desc(r, 1, DATA_GPA + 8, 8, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 2);
	set_desc(r, 2, DATA_GPA + 16, 8, 0, 0);
	expect_bad(r, 0);
	/* Writable only is fine (virtio-rng does that). */
	offer(r, 1);
	set_desc(r, 1, DATA_GPA + 8, 8, VRING_DESC_F_WRITE, 0);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
	assert_int_equal(r->e.nr_out, 0);
	assert_int_equal(r->e.nr_in, 1);
}

static void test_push(void **state)
{
	struct ring *r = *state;

	set_desc(r, 6, DATA_GPA, 8, 0, 0);
	set_desc(r, 9, DATA_GPA, 8, 0, 0);
	offer(r, 6);
	offer(r, 9);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
	/* Completion order is the device's choice. */
	virtq_push(&r->vq, 9, 1234);
	assert_int_equal(used_idx(r), 1);
	assert_int_equal(used_id(r, 0), 9);
	assert_int_equal(used_len(r, 0), 1234);
	virtq_push(&r->vq, 6, 0);
	assert_int_equal(used_idx(r), 2);
	assert_int_equal(used_id(r, 1), 6);
	assert_int_equal(used_len(r, 1), 0);

	/* The used ring slot wraps at num while the index runs on. */
	for (unsigned int i = 0; i < QSIZE; i++)
		virtq_push(&r->vq, (uint16_t)i, i);
	assert_int_equal(used_idx(r), QSIZE + 2);
	assert_int_equal(used_id(r, QSIZE), QSIZE - 2);
	assert_int_equal(used_id(r, QSIZE + 1), QSIZE - 1);
	assert_int_equal(used_len(r, QSIZE + 1), QSIZE - 1);
	/* Nothing written past the used ring. */
	assert_int_equal(rd16(r->ram + USED_GPA + 4 + 8 * QSIZE), 0);
}

static void test_push_not_ready(void **state)
{
	struct ring *r = *state;

	virtq_reset(&r->vq);
	virtq_push(&r->vq, 0, 1);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_EMPTY);
	assert_int_equal(used_idx(r), 0);
}

static int try_enable(struct ring *r, uint16_t num, uint64_t desc, uint64_t avail, uint64_t used)
{
	virtq_reset(&r->vq);
	r->vq.num = num;
	r->vq.desc_gpa = desc;
	r->vq.avail_gpa = avail;
	r->vq.used_gpa = used;
	return virtq_enable(&r->vq, &r->mem, false);
}

static void test_enable(void **state)
{
	struct ring *r = *state;

	assert_int_equal(try_enable(r, 1, DESC_GPA, AVAIL_GPA, USED_GPA), 0);
	assert_int_equal(try_enable(r, VIRTQ_MAX_SIZE, DESC_GPA, AVAIL_GPA, USED_GPA), 0);
	/* Bad sizes. */
	assert_int_equal(try_enable(r, 0, DESC_GPA, AVAIL_GPA, USED_GPA), -1);
	assert_int_equal(try_enable(r, 3, DESC_GPA, AVAIL_GPA, USED_GPA), -1);
	assert_int_equal(try_enable(r, 24, DESC_GPA, AVAIL_GPA, USED_GPA), -1);
	assert_int_equal(try_enable(r, 2 * VIRTQ_RING_MAX, DESC_GPA, AVAIL_GPA, USED_GPA), -1);
	assert_false(r->vq.ready);
	/* Misaligned rings: desc 16, avail 2, used 4. */
	assert_int_equal(try_enable(r, 8, DESC_GPA + 8, AVAIL_GPA, USED_GPA), -1);
	assert_int_equal(try_enable(r, 8, DESC_GPA, AVAIL_GPA + 1, USED_GPA), -1);
	assert_int_equal(try_enable(r, 8, DESC_GPA, AVAIL_GPA, USED_GPA + 2), -1);
	assert_int_equal(try_enable(r, 8, DESC_GPA + 16, AVAIL_GPA + 2, USED_GPA + 4), 0);
	/* Rings outside RAM, or running off its end. */
	assert_int_equal(try_enable(r, 8, RAM_SIZE, AVAIL_GPA, USED_GPA), -1);
	assert_int_equal(try_enable(r, 8, RAM_SIZE - 16 * 8 + 16, AVAIL_GPA, USED_GPA), -1);
	assert_int_equal(try_enable(r, 8, RAM_SIZE - 16 * 8, AVAIL_GPA, USED_GPA), 0);
	assert_int_equal(try_enable(r, 8, DESC_GPA, RAM_SIZE - 6 - 2 * 8 + 2, USED_GPA), -1);
	assert_int_equal(try_enable(r, 8, DESC_GPA, RAM_SIZE - 6 - 2 * 8, USED_GPA), 0);
	assert_int_equal(try_enable(r, 8, DESC_GPA, AVAIL_GPA, RAM_SIZE - 4 - 8 * 8), -1);
	assert_int_equal(try_enable(r, 8, DESC_GPA, AVAIL_GPA, RAM_SIZE - 8 - 8 * 8), 0);
	assert_int_equal(try_enable(r, 8, 0xfffffffffffffff0ULL, AVAIL_GPA, USED_GPA), -1);
	assert_int_equal(try_enable(r, 8, DESC_GPA, 0xfffffffffffffffeULL, USED_GPA), -1);
	assert_int_equal(try_enable(r, 8, DESC_GPA, AVAIL_GPA, 0xfffffffffffffffcULL), -1);
	assert_false(r->vq.ready);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_EMPTY);
}

static void test_wants_interrupt(void **state)
{
	struct ring *r = *state;

	assert_true(virtq_wants_interrupt(&r->vq));
	wr16(r->ram + AVAIL_GPA, VRING_AVAIL_F_NO_INTERRUPT);
	assert_false(virtq_wants_interrupt(&r->vq));
	wr16(r->ram + AVAIL_GPA, 0xfffe);
	assert_true(virtq_wants_interrupt(&r->vq));
}

/* VIRTIO_RING_F_EVENT_IDX: the kick request sits after the used ring, the
 * interrupt request after the avail ring. */
static uint16_t avail_event(const struct ring *r)
{
	return rd16(r->ram + USED_GPA + 4 + 8 * r->vq.num);
}

static void set_used_event(struct ring *r, uint16_t v)
{
	wr16(r->ram + AVAIL_GPA + 4 + 2 * r->vq.num, v);
}

static void event_idx_enable(struct ring *r)
{
	ring_enable(r, QSIZE);
	r->vq.event_idx = true;
	for (unsigned int i = 0; i < 4; i++)
		set_desc(r, i, DATA_GPA + 0x100 * i, 16, VRING_DESC_F_WRITE, 0);
}

static void test_event_idx_kick_request(void **state)
{
	struct ring *r = *state;

	event_idx_enable(r);
	wr16(r->ram + USED_GPA + 4 + 8 * QSIZE, 0xbeef);
	offer(r, 0);
	offer(r, 1);
	/* While the ring has buffers the old request stands: the driver adds
	 * more without kicking a device that is draining anyway. */
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
	assert_int_equal(avail_event(r), 0xbeef);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
	assert_int_equal(avail_event(r), 0xbeef);
	/* Dry: a kick at the next buffer. */
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_EMPTY);
	assert_int_equal(avail_event(r), 2);
	offer(r, 2);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
	assert_int_equal(r->e.head, 2);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_EMPTY);
	assert_int_equal(avail_event(r), 3);
}

static void test_event_idx_interrupts(void **state)
{
	struct ring *r = *state;

	event_idx_enable(r);
	for (unsigned int i = 0; i < 4; i++)
		offer(r, (uint16_t)i);
	/* The first judgement always interrupts: nothing to compare with. */
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
	virtq_push(&r->vq, r->e.head, 1);
	assert_true(virtq_wants_interrupt(&r->vq));
	/* Nothing used since: nothing to say. */
	assert_false(virtq_wants_interrupt(&r->vq));
	/* The driver wants to hear only once used_idx passes 2 (it polls). */
	set_used_event(r, 2);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
	virtq_push(&r->vq, r->e.head, 1); /* used_idx 2: not past 2 */
	assert_false(virtq_wants_interrupt(&r->vq));
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
	virtq_push(&r->vq, r->e.head, 1); /* used_idx 3 */
	assert_true(virtq_wants_interrupt(&r->vq));
	/* A request already passed is not heard again; the flag is ignored. */
	wr16(r->ram + AVAIL_GPA, VRING_AVAIL_F_NO_INTERRUPT);
	set_used_event(r, 0);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
	virtq_push(&r->vq, r->e.head, 1);
	assert_false(virtq_wants_interrupt(&r->vq));
	/* Several used at once, the request among them: one interrupt. */
	set_used_event(r, 4);
	for (unsigned int i = 0; i < 3; i++)
		offer(r, (uint16_t)i);
	for (unsigned int i = 0; i < 3; i++) {
		assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
		virtq_push(&r->vq, r->e.head, 1);
	}
	assert_true(virtq_wants_interrupt(&r->vq));
	/* Across the 16-bit wrap. */
	r->vq.used_idx = r->vq.signalled_used = 0xfffe;
	set_used_event(r, 0xffff);
	offer(r, 3);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
	virtq_push(&r->vq, r->e.head, 1); /* 0xffff: not past */
	assert_false(virtq_wants_interrupt(&r->vq));
	offer(r, 0);
	assert_int_equal(virtq_pop(&r->vq, &r->e), VIRTQ_ELEM);
	virtq_push(&r->vq, r->e.head, 1); /* 0x0000: past */
	assert_true(virtq_wants_interrupt(&r->vq));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, ring_setup, ring_teardown)
		T(test_empty),
		T(test_single),
		T(test_multi),
		T(test_lengths_reset),
		T(test_elem_copy),
		T(test_loop),
		T(test_self_loop),
		T(test_chain_max),
		T(test_next_out_of_range),
		T(test_head_out_of_range),
		T(test_avail_idx_jump),
		T(test_avail_idx_backwards),
		T(test_wrap),
		T(test_addr_outside_ram),
		T(test_addr_overflow),
		T(test_addr_end_of_ram),
		T(test_zero_len),
		T(test_indirect),
		T(test_read_after_write),
		T(test_push),
		T(test_push_not_ready),
		T(test_enable),
		T(test_wants_interrupt),
		T(test_event_idx_kick_request),
		T(test_event_idx_interrupts),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
