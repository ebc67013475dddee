/* Split virtqueue parsing (see queue.h). Field layouts follow the virtio 1.x
 * specification, section 2.7 (uapi <linux/virtio_ring.h>). */
#include <linux/virtio_ring.h>
#include <string.h>

#include "common/util.h"
#include "virtio/queue.h"

#define DESC_SIZE 16

static uint16_t ld16(volatile const uint8_t *p)
{
	return __atomic_load_n((const uint16_t *)p, __ATOMIC_RELAXED);
}

static uint32_t ld32(volatile const uint8_t *p)
{
	return __atomic_load_n((const uint32_t *)p, __ATOMIC_RELAXED);
}

static uint64_t ld64(volatile const uint8_t *p)
{
	return __atomic_load_n((const uint64_t *)p, __ATOMIC_RELAXED);
}

void virtq_reset(struct virtq *vq)
{
	memset(vq, 0, sizeof(*vq));
}

int virtq_enable(struct virtq *vq, const struct guest_mem *mem, bool event_idx)
{
	uint64_t n = vq->num;
	void *desc, *avail, *used;

	if (n == 0 || n > VIRTQ_RING_MAX || (n & (n - 1)))
		return -1;
	if ((vq->desc_gpa & 15) || (vq->avail_gpa & 1) || (vq->used_gpa & 3))
		return -1;
	desc = guest_ptr(mem, vq->desc_gpa, n * DESC_SIZE);
	avail = guest_ptr(mem, vq->avail_gpa, 6 + 2 * n);
	used = guest_ptr(mem, vq->used_gpa, 6 + 8 * n);
	if (!desc || !avail || !used)
		return -1;
	vq->mem = mem;
	vq->desc = desc;
	vq->avail = avail;
	vq->used = used;
	vq->last_avail = 0;
	vq->used_idx = 0;
	vq->event_idx = event_idx;
	vq->signalled_valid = false;
	vq->broken = false;
	vq->ready = true;
	return 0;
}

static uint16_t avail_idx(const struct virtq *vq)
{
	return __atomic_load_n((const uint16_t *)(vq->avail + 2), __ATOMIC_ACQUIRE);
}

/* The ring ran dry: ask for a kick at the next buffer, then look again (the
 * avail index, returned), as one added before the driver saw the request
 * would get no kick. While a device drains the ring the request stays
 * behind, and the driver adds without kicking. */
static uint16_t virtq_ask_kick(struct virtq *vq)
{
	volatile uint8_t *avail_event = vq->used + 4 + 8 * (size_t)vq->num;

	__atomic_store_n((uint16_t *)avail_event, vq->last_avail, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return avail_idx(vq);
}

int virtq_pop(struct virtq *vq, struct virtq_elem *e)
{
	uint16_t avail, head, idx;
	unsigned int count = 0;
	bool seen_in = false;

	if (!vq->ready || vq->broken)
		return VIRTQ_EMPTY;
	avail = avail_idx(vq);
	if (avail == vq->last_avail && vq->event_idx)
		avail = virtq_ask_kick(vq);
	if (avail == vq->last_avail)
		return VIRTQ_EMPTY;
	if ((uint16_t)(avail - vq->last_avail) > vq->num) {
		vq->broken = true; /* more buffers offered than the ring holds */
		return VIRTQ_BROKEN;
	}
	/* Read the ring entry only after seeing the index (acquire above). */
	head = ld16(vq->avail + 4 + 2 * (vq->last_avail % vq->num));
	if (head >= vq->num) {
		vq->broken = true; /* no valid id to hand back */
		return VIRTQ_BROKEN;
	}
	vq->last_avail++;

	/* The lengths sit after iov[]: clear them too, not just the counts. */
	memset(e, 0, offsetof(struct virtq_elem, iov));
	e->out_len = e->in_len = 0;
	e->head = head;
	idx = head;
	for (;;) {
		volatile const uint8_t *d = vq->desc + (size_t)idx * DESC_SIZE;
		/* Read each field once: the guest may change them under us. */
		uint64_t addr = ld64(d);
		uint32_t len = ld32(d + 8);
		uint16_t flags = ld16(d + 12);
		uint16_t next = ld16(d + 14);
		void *hva;

		if (count == VIRTQ_MAX_CHAIN || count == vq->num)
			return VIRTQ_BAD_CHAIN; /* too long, or a loop */
		if (flags & VRING_DESC_F_INDIRECT)
			return VIRTQ_BAD_CHAIN; /* not negotiated */
		if (len == 0)
			return VIRTQ_BAD_CHAIN;
		hva = guest_ptr(vq->mem, addr, len);
		if (hva == NULL)
			return VIRTQ_BAD_CHAIN;
		if (flags & VRING_DESC_F_WRITE) {
			seen_in = true;
			e->nr_in++;
			e->in_len += len;
		} else {
			if (seen_in)
				return VIRTQ_BAD_CHAIN; /* readable after writable */
			e->nr_out++;
			e->out_len += len;
		}
		e->iov[count].iov_base = hva;
		e->iov[count].iov_len = len;
		count++;
		if (!(flags & VRING_DESC_F_NEXT))
			break;
		if (next >= vq->num)
			return VIRTQ_BAD_CHAIN;
		idx = next;
	}
	return VIRTQ_ELEM;
}

void virtq_unpop(struct virtq *vq, unsigned int n)
{
	vq->last_avail = (uint16_t)(vq->last_avail - n);
}

void virtq_push_many(struct virtq *vq, const uint16_t *heads, const uint32_t *lens, unsigned int n)
{
	if (!vq->ready || vq->broken || n == 0)
		return;
	for (unsigned int i = 0; i < n; i++) {
		volatile uint8_t *slot = vq->used + 4 + 8 * (size_t)(vq->used_idx % vq->num);

		__atomic_store_n((uint32_t *)slot, (uint32_t)heads[i], __ATOMIC_RELAXED);
		__atomic_store_n((uint32_t *)(slot + 4), lens[i], __ATOMIC_RELAXED);
		vq->used_idx++;
	}
	/* Publish the entries before the index the driver polls, all at once:
	 * a driver running beside us never sees part of them. */
	__atomic_store_n((uint16_t *)(vq->used + 2), vq->used_idx, __ATOMIC_RELEASE);
}

void virtq_push(struct virtq *vq, uint16_t head, uint32_t len)
{
	virtq_push_many(vq, &head, &len, 1);
}

bool virtq_wants_interrupt(struct virtq *vq)
{
	uint16_t old = vq->signalled_used, used_event;
	bool valid = vq->signalled_valid;

	/* Our used index is out before we read what the driver asked. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!vq->event_idx)
		return !(ld16(vq->avail) & VRING_AVAIL_F_NO_INTERRUPT);
	vq->signalled_used = vq->used_idx;
	vq->signalled_valid = true;
	if (!valid)
		return true;
	/* virtio 1.x 2.7.10: interrupt once used_idx has passed used_event. */
	used_event = ld16(vq->avail + 4 + 2 * (size_t)vq->num);
	return (uint16_t)(vq->used_idx - used_event - 1) < (uint16_t)(vq->used_idx - old);
}

static size_t iov_copy(const struct iovec *iov, unsigned int n, uint64_t off, void *buf, size_t len,
		       bool to_iov)
{
	size_t done = 0;

	for (unsigned int i = 0; i < n && done < len; i++) {
		size_t chunk;

		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		chunk = MIN(iov[i].iov_len - off, len - done);
		if (to_iov)
			memcpy((uint8_t *)iov[i].iov_base + off, (uint8_t *)buf + done, chunk);
		else
			memcpy((uint8_t *)buf + done, (uint8_t *)iov[i].iov_base + off, chunk);
		done += chunk;
		off = 0;
	}
	return done;
}

size_t virtq_elem_read(const struct virtq_elem *e, uint64_t off, void *buf, size_t len)
{
	return iov_copy(e->iov, e->nr_out, off, buf, len, false);
}

size_t virtq_elem_write(const struct virtq_elem *e, uint64_t off, const void *buf, size_t len)
{
	return iov_copy(e->iov + e->nr_out, e->nr_in, off, (void *)buf, len, true);
}
