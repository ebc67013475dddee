/* Split virtqueues (virtio 1.x, section 2.7) read from guest memory. Every
 * guest-written index, address, length and flag is checked before use: a
 * chain that loops, leaves guest RAM, is too long or orders its buffers
 * wrongly fails that one request; a ring whose indices are impossible marks
 * the queue broken. Neither can take the VMM down. */
#ifndef GANTRY_VIRTIO_QUEUE_H
#define GANTRY_VIRTIO_QUEUE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "vmm/memory.h"

#define VIRTQ_MAX_SIZE	256  /* QueueNumMax a device offers unless it says */
#define VIRTQ_RING_MAX	1024 /* the largest ring any device offers */
/* Descriptors per request, any device: a 256-page FUSE WRITE and its four
 * headers (fs.c). Devices that want fewer say so to the driver. */
#define VIRTQ_MAX_CHAIN 260

enum virtq_pop_result {
	VIRTQ_BROKEN = -2,    /* ring state impossible: stop using the queue */
	VIRTQ_BAD_CHAIN = -1, /* this request is malformed; return it with len 0 */
	VIRTQ_EMPTY = 0,
	VIRTQ_ELEM = 1,
};

struct virtq {
	uint16_t num;
	bool ready;
	bool broken;
	uint64_t desc_gpa, avail_gpa, used_gpa;
	uint16_t last_avail; /* next avail ring slot we consume */
	uint16_t used_idx;   /* next used ring slot we fill */
	/* VIRTIO_RING_F_EVENT_IDX: the driver says at which used index it
	 * wants its next interrupt, we say at which avail index our next kick. */
	bool event_idx;
	bool signalled_valid;
	uint16_t signalled_used; /* used_idx when we last judged an interrupt */
	const struct guest_mem *mem;
	/* Host views of the rings, checked to lie in RAM when enabled. */
	volatile uint8_t *desc, *avail, *used;
};

/* One request: the device-readable buffers, then the device-writable ones. */
struct virtq_elem {
	uint16_t head;
	unsigned int nr_out, nr_in;
	struct iovec iov[VIRTQ_MAX_CHAIN];
	uint64_t out_len, in_len;
};

void virtq_reset(struct virtq *vq);
/* Validate num (a power of two up to VIRTQ_RING_MAX), ring alignment and that
 * all three rings lie in guest RAM; then mark the queue ready. event_idx:
 * whether the driver took VIRTIO_RING_F_EVENT_IDX. */
int virtq_enable(struct virtq *vq, const struct guest_mem *mem, bool event_idx);
/* Take the next request. On VIRTQ_BAD_CHAIN e->head is valid and the caller
 * must still virtq_push() it (with len 0) so the driver gets it back. With
 * event indices the driver kicks only once the ring has run dry: a device
 * pops until VIRTQ_EMPTY, or comes back by other means (a budget's own
 * wake-up, a socket turning writable). */
int virtq_pop(struct virtq *vq, struct virtq_elem *e);
/* Give back the last n requests popped and not pushed: the next pops take
 * them again (re-read, re-checked), as if never taken. A device that took
 * more buffers than a frame needed returns the rest this way. */
void virtq_unpop(struct virtq *vq, unsigned int n);
/* Return a request to the driver, len bytes written into its buffers. */
void virtq_push(struct virtq *vq, uint16_t head, uint32_t len);
/* Return n requests at once: the driver sees all of them or none (a
 * virtio-net frame over mergeable buffers must not be seen in part). */
void virtq_push_many(struct virtq *vq, const uint16_t *heads, const uint32_t *lens, unsigned int n);
/* Whether the driver asked to be interrupted for the buffers used since the
 * last call (it may have asked to hear of none yet). */
bool virtq_wants_interrupt(struct virtq *vq);

/* Copy between an element's readable buffers (from byte off) and buf. */
size_t virtq_elem_read(const struct virtq_elem *e, uint64_t off, void *buf, size_t len);
/* Copy into an element's writable buffers at byte off. */
size_t virtq_elem_write(const struct virtq_elem *e, uint64_t off, const void *buf, size_t len);

#endif
