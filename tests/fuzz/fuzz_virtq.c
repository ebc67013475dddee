/* libFuzzer target for virtio/queue.c. The input is a small header and then
 * the image of a tiny guest RAM holding the avail ring, the descriptor table
 * and the used ring at fixed offsets (see mkcorpus.py). The queue is enabled
 * over it and drained the way a device would; besides ASan, the element
 * invariants a device relies on are checked and abort when broken. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "virtio/queue.h"

#define RAM_SIZE  0x2000
#define AVAIL_GPA 0x0000 /* 6 + 2 * 256 bytes at most */
#define DESC_GPA  0x0400 /* 16 * 256 */
#define USED_GPA  0x1400 /* 6 + 8 * 256 */
#define MAX_ITERS 1024

/* Header: what a driver controls besides RAM contents. */
#define H_QSIZE	   0 /* bit 7: raw size 4 * (v & 0x7f); else 1 << (v % 9) */
#define H_START	   1 /* u16: where both ring indices start (wrap-around) */
#define H_FLAGS	   3
#define H_MISALIGN 4 /* added to the ring addresses when F_MISALIGN */
#define H_ROFF	   5 /* u16: offset for the partial read */
#define H_WLEN	   7 /* bytes written back per request */
#define HDR_SIZE   8

#define F_FEED	   0x01 /* offer one more entry after each pop, like a busy driver */
#define F_MISALIGN 0x02
#define F_REUSE	   0x04 /* push heads in reverse order at the end */
#define F_EVENT_IDX 0x08 /* the driver took VIRTIO_RING_F_EVENT_IDX */

static uint8_t scratch[VIRTQ_MAX_CHAIN * RAM_SIZE];

static void check(bool ok)
{
	if (!ok)
		abort();
}

static void check_elem(const struct virtq_elem *e, const struct virtq *vq, const uint8_t *ram)
{
	uint64_t out = 0, in = 0;

	check(e->head < vq->num);
	check(e->nr_out + e->nr_in >= 1 && e->nr_out + e->nr_in <= VIRTQ_MAX_CHAIN);
	for (unsigned int i = 0; i < e->nr_out + e->nr_in; i++) {
		const uint8_t *p = e->iov[i].iov_base;

		check(e->iov[i].iov_len > 0);
		check(p >= ram && p <= ram + RAM_SIZE && e->iov[i].iov_len <= RAM_SIZE &&
		      (size_t)(ram + RAM_SIZE - p) >= e->iov[i].iov_len);
		*(i < e->nr_out ? &out : &in) += e->iov[i].iov_len;
	}
	check(out == e->out_len && in == e->in_len);
}

static void serve(struct virtq *vq, struct virtq_elem *e, const uint8_t *hdr)
{
	uint64_t roff = (uint64_t)hdr[H_ROFF] | (uint64_t)hdr[H_ROFF + 1] << 8;
	size_t wlen = hdr[H_WLEN], n;

	n = virtq_elem_read(e, 0, scratch, sizeof(scratch));
	check(n == MIN(e->out_len, sizeof(scratch)));
	n = virtq_elem_read(e, roff, scratch, 64);
	check(n == (roff >= e->out_len ? 0 : MIN(64, e->out_len - roff)));
	memset(scratch, 0xa5, wlen);
	n = virtq_elem_write(e, e->in_len > 0 ? e->in_len - 1 : 0, scratch, wlen);
	check(n <= 1 && (wlen == 0 || e->in_len == 0 || n == 1));
	n = virtq_elem_write(e, 0, scratch, wlen);
	check(n == MIN(wlen, e->in_len));
	virtq_push(vq, e->head, (uint32_t)n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct virtq_elem e;
	uint16_t heads[MAX_ITERS];
	unsigned int nheads = 0;
	struct guest_mem mem;
	struct virtq vq;
	uint8_t hdr[HDR_SIZE] = { 0 };
	uint8_t *ram;
	uint16_t start;
	int r;

	memcpy(hdr, data, MIN(size, sizeof(hdr)));
	data += MIN(size, sizeof(hdr));
	size -= MIN(size, sizeof(hdr));
	/* Exactly RAM_SIZE bytes on the heap, so ASan sees any access outside. */
	ram = calloc(1, RAM_SIZE);
	if (ram == NULL)
		abort();
	memcpy(ram, data, MIN(size, RAM_SIZE));
	guest_mem_init_buffer(&mem, ram, RAM_SIZE);

	virtq_reset(&vq);
	vq.num = (hdr[H_QSIZE] & 0x80) ? (uint16_t)((hdr[H_QSIZE] & 0x7f) << 2)
				       : (uint16_t)(1u << (hdr[H_QSIZE] % 9));
	vq.desc_gpa = DESC_GPA;
	vq.avail_gpa = AVAIL_GPA;
	vq.used_gpa = USED_GPA;
	if (hdr[H_FLAGS] & F_MISALIGN) {
		vq.desc_gpa += hdr[H_MISALIGN] & 0x0f;
		vq.avail_gpa += (hdr[H_MISALIGN] >> 4) & 0x03;
		vq.used_gpa += (hdr[H_MISALIGN] >> 6) & 0x03;
	}
	if (virtq_enable(&vq, &mem, hdr[H_FLAGS] & F_EVENT_IDX) < 0) {
		/* A refused queue must stay inert. */
		check(!vq.ready);
		check(virtq_pop(&vq, &e) == VIRTQ_EMPTY);
		virtq_push(&vq, 0, 0);
		free(ram);
		return 0;
	}
	check(vq.num && !(vq.num & (vq.num - 1)) && vq.num <= VIRTQ_RING_MAX);
	/* Any index is reachable by a driver that has run long enough. */
	start = (uint16_t)(hdr[H_START] | hdr[H_START + 1] << 8);
	vq.last_avail = vq.used_idx = start;

	for (unsigned int i = 0; i < MAX_ITERS; i++) {
		uint16_t before = vq.last_avail, used;
		bool pushed = true;

		r = virtq_pop(&vq, &e);
		if (r == VIRTQ_EMPTY || r == VIRTQ_BROKEN) {
			check(vq.last_avail == before);
			/* A dry ring with event indices asks for a kick at the
			 * next buffer (avail_event, after the used ring). */
			if (r == VIRTQ_EMPTY && (hdr[H_FLAGS] & F_EVENT_IDX)) {
				const uint8_t *ev = ram + vq.used_gpa + 4 + 8 * (size_t)vq.num;

				check((uint16_t)(ev[0] | ev[1] << 8) == vq.last_avail);
			}
			break;
		}
		check(vq.last_avail == (uint16_t)(before + 1));
		check(e.head < vq.num);
		if (r == VIRTQ_BAD_CHAIN) {
			virtq_push(&vq, e.head, 0);
		} else {
			check(r == VIRTQ_ELEM);
			check_elem(&e, &vq, ram);
			if (hdr[H_FLAGS] & F_REUSE) {
				heads[nheads++] = e.head;
				pushed = false;
			} else {
				serve(&vq, &e, hdr);
			}
		}
		used = (uint16_t)(ram[vq.used_gpa + 2] | ram[vq.used_gpa + 3] << 8);
		check(!pushed || used == vq.used_idx);
		if (hdr[H_FLAGS] & F_FEED) {
			/* The driver offers the same entries again. */
			uint8_t *idx = ram + vq.avail_gpa + 2;
			uint16_t v = (uint16_t)(idx[0] | idx[1] << 8) + 1;

			idx[0] = (uint8_t)v;
			idx[1] = (uint8_t)(v >> 8);
		}
	}
	while (nheads) {
		virtq_push(&vq, heads[--nheads], 0);
		/* Judged after each push: nothing new, no interrupt. */
		(void)virtq_wants_interrupt(&vq);
		check(!(hdr[H_FLAGS] & F_EVENT_IDX) || !virtq_wants_interrupt(&vq));
	}
	(void)virtq_wants_interrupt(&vq);
	free(ram);
	return 0;
}
