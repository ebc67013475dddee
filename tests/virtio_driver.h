/* The guest driver the virtio tests and fuzz targets drive devices with: a
 * Linux-like split-ring driver over virtio-mmio, in a guest RAM buffer the
 * caller owns. It knows the register sequence (reset, feature negotiation,
 * queue setup, DRIVER_OK) and the ring layout (descriptors, avail, used);
 * what goes into the buffers, and which checks follow, stays in each test.
 * Plain C without cmocka, so the libFuzzer targets use it as well. */
#ifndef GANTRY_TESTS_VIRTIO_DRIVER_H
#define GANTRY_TESTS_VIRTIO_DRIVER_H

#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "virtio/mmio.h"

#define VDRV_MAX_QUEUES 3
/* Where a queue's avail and used rings lie past its descriptor table. */
#define VDRV_AVAIL_OFF 0x1000 /* for up to 256 entries; a page more per 256 above */
#define VDRV_USED_OFF  0x2000

#define VDRV_S_NEGOTIATING (VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER)
#define VDRV_S_FEATURES_OK (VDRV_S_NEGOTIATING | VIRTIO_CONFIG_S_FEATURES_OK)

/* One queue's rings in guest RAM and how far the driver has gone in them. */
struct vdrv_queue {
	uint64_t desc, avail, used;
	uint16_t avail_idx; /* the avail idx last published */
	uint16_t used_seen; /* used entries taken with vdrv_used_next */
};

/* The driver of one device: its RAM, its registers and its queues. */
struct vdrv {
	uint8_t *ram;
	struct virtio_dev *dev;
	uint16_t qsize;
	unsigned int nr_queues;
	uint64_t ring_base, ring_stride; /* queue q's rings at base + q * stride */
	struct vdrv_queue q[VDRV_MAX_QUEUES];
};

/* Lay out nr_queues queues of qsize entries from base, stride bytes apart:
 * each its descriptor table, then its avail ring and its used ring a page
 * after (for more than 256 entries, both move up with the table). */
static inline void vdrv_init(struct vdrv *drv, uint8_t *ram, struct virtio_dev *dev, uint16_t qsize,
			     unsigned int nr_queues, uint64_t base, uint64_t stride)
{
	memset(drv, 0, sizeof(*drv));
	drv->ram = ram;
	drv->dev = dev;
	drv->qsize = qsize;
	drv->nr_queues = nr_queues;
	drv->ring_base = base;
	drv->ring_stride = stride;
	uint64_t table = qsize > 256 ? (uint64_t)qsize * 16 : VDRV_AVAIL_OFF;

	for (unsigned int q = 0; q < nr_queues && q < VDRV_MAX_QUEUES; q++) {
		drv->q[q].desc = base + q * stride;
		drv->q[q].avail = drv->q[q].desc + table;
		drv->q[q].used = drv->q[q].desc + table + VDRV_USED_OFF - VDRV_AVAIL_OFF;
	}
}

/* A 32-bit read of the register at off. */
static inline uint32_t vdrv_rd(struct vdrv *drv, uint64_t off)
{
	uint32_t v;

	virtio_mmio_access(drv->dev, off, (uint8_t *)&v, 4, false);
	return v;
}

/* A 32-bit write of v to the register at off. */
static inline void vdrv_wr(struct vdrv *drv, uint64_t off, uint32_t v)
{
	virtio_mmio_access(drv->dev, off, (uint8_t *)&v, 4, true);
}

/* Write descriptor i (modulo the queue size) of queue q. */
static inline void vdrv_set_desc(struct vdrv *drv, unsigned int q, unsigned int i, uint64_t gpa,
				 uint32_t len, uint16_t flags, uint16_t next)
{
	uint8_t *d = drv->ram + drv->q[q].desc + 16 * (i % drv->qsize);

	memcpy(d, &gpa, 8);
	memcpy(d + 8, &len, 4);
	memcpy(d + 12, &flags, 2);
	memcpy(d + 14, &next, 2);
}

/* Offer head on q, the idx published last (release: the device may poll). */
static inline void vdrv_offer(struct vdrv *drv, unsigned int q, uint16_t head)
{
	struct vdrv_queue *vq = &drv->q[q];
	uint8_t *avail = drv->ram + vq->avail;

	__atomic_store_n((uint16_t *)(avail + 4 + 2 * (vq->avail_idx % drv->qsize)), head,
			 __ATOMIC_RELAXED);
	vq->avail_idx++;
	__atomic_store_n((uint16_t *)(avail + 2), vq->avail_idx, __ATOMIC_RELEASE);
}

/* q's used idx (acquire: the entries it counts are written before it). */
static inline uint16_t vdrv_used_idx(struct vdrv *drv, unsigned int q)
{
	return __atomic_load_n((uint16_t *)(drv->ram + drv->q[q].used + 2), __ATOMIC_ACQUIRE);
}

/* VIRTIO_RING_F_EVENT_IDX: interrupt the driver once q's used idx passes v
 * (used_event, after the avail ring). */
static inline void vdrv_set_used_event(struct vdrv *drv, unsigned int q, uint16_t v)
{
	__atomic_store_n((uint16_t *)(drv->ram + drv->q[q].avail + 4 + 2 * drv->qsize), v,
			 __ATOMIC_RELEASE);
}

/* The avail idx past which the device wants its next kick (avail_event). */
static inline uint16_t vdrv_avail_event(struct vdrv *drv, unsigned int q)
{
	return __atomic_load_n((uint16_t *)(drv->ram + drv->q[q].used + 4 + 8 * drv->qsize),
			       __ATOMIC_ACQUIRE);
}

/* The id and len of used entry number slot (modulo the queue size) of q. */
static inline void vdrv_used_entry(struct vdrv *drv, unsigned int q, uint16_t slot, uint32_t *id,
				   uint32_t *len)
{
	const uint8_t *e = drv->ram + drv->q[q].used + 4 + 8 * (slot % drv->qsize);

	memcpy(id, e, 4);
	memcpy(len, e + 4, 4);
}

/* Take q's next used entry not taken yet; false when there is none. */
static inline bool vdrv_used_next(struct vdrv *drv, unsigned int q, uint32_t *id, uint32_t *len)
{
	struct vdrv_queue *vq = &drv->q[q];

	if (vq->used_seen == vdrv_used_idx(drv, q))
		return false;
	vdrv_used_entry(drv, q, vq->used_seen, id, len);
	vq->used_seen++;
	return true;
}

/* The 64 feature bits the device offers. */
static inline uint64_t vdrv_dev_features(struct vdrv *drv)
{
	uint64_t feat;

	vdrv_wr(drv, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	feat = vdrv_rd(drv, VIRTIO_MMIO_DEVICE_FEATURES);
	vdrv_wr(drv, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	return feat | (uint64_t)vdrv_rd(drv, VIRTIO_MMIO_DEVICE_FEATURES) << 32;
}

/* Write the 64 feature bits the driver takes. */
static inline void vdrv_drv_features(struct vdrv *drv, uint64_t feat)
{
	vdrv_wr(drv, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	vdrv_wr(drv, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)feat);
	vdrv_wr(drv, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	vdrv_wr(drv, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)(feat >> 32));
}

/* Reset the device, then ACKNOWLEDGE and DRIVER, as Linux's probe does. */
static inline void vdrv_begin(struct vdrv *drv)
{
	vdrv_wr(drv, VIRTIO_MMIO_STATUS, 0);
	vdrv_wr(drv, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	vdrv_wr(drv, VIRTIO_MMIO_STATUS, VDRV_S_NEGOTIATING);
}

/* Take feat, set FEATURES_OK; returns the status (no FEATURES_OK: refused). */
static inline uint32_t vdrv_features_ok(struct vdrv *drv, uint64_t feat)
{
	vdrv_drv_features(drv, feat);
	vdrv_wr(drv, VIRTIO_MMIO_STATUS, VDRV_S_FEATURES_OK);
	return vdrv_rd(drv, VIRTIO_MMIO_STATUS);
}

/* Reset and negotiate feat: vdrv_begin, then vdrv_features_ok. */
static inline uint32_t vdrv_negotiate(struct vdrv *drv, uint64_t feat)
{
	vdrv_begin(drv);
	return vdrv_features_ok(drv, feat);
}

/* Program queue sel and set it ready; returns QueueReady (0: refused). */
static inline uint32_t vdrv_queue_set(struct vdrv *drv, uint32_t sel, uint32_t num, uint64_t desc,
				      uint64_t avail, uint64_t used)
{
	vdrv_wr(drv, VIRTIO_MMIO_QUEUE_SEL, sel);
	vdrv_wr(drv, VIRTIO_MMIO_QUEUE_NUM, num);
	vdrv_wr(drv, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)desc);
	vdrv_wr(drv, VIRTIO_MMIO_QUEUE_DESC_HIGH, (uint32_t)(desc >> 32));
	vdrv_wr(drv, VIRTIO_MMIO_QUEUE_AVAIL_LOW, (uint32_t)avail);
	vdrv_wr(drv, VIRTIO_MMIO_QUEUE_AVAIL_HIGH, (uint32_t)(avail >> 32));
	vdrv_wr(drv, VIRTIO_MMIO_QUEUE_USED_LOW, (uint32_t)used);
	vdrv_wr(drv, VIRTIO_MMIO_QUEUE_USED_HIGH, (uint32_t)(used >> 32));
	vdrv_wr(drv, VIRTIO_MMIO_QUEUE_READY, 1);
	return vdrv_rd(drv, VIRTIO_MMIO_QUEUE_READY);
}

/* Zero all rings and counters, set each queue up; false if one is not ready. */
static inline bool vdrv_queues_up(struct vdrv *drv)
{
	bool ready = true;

	memset(drv->ram + drv->ring_base, 0, drv->nr_queues * drv->ring_stride);
	for (unsigned int q = 0; q < drv->nr_queues; q++) {
		struct vdrv_queue *vq = &drv->q[q];

		vq->avail_idx = vq->used_seen = 0;
		if (vdrv_queue_set(drv, q, drv->qsize, vq->desc, vq->avail, vq->used) != 1)
			ready = false;
	}
	return ready;
}

/* Set DRIVER_OK: the device may serve its queues from now on. */
static inline void vdrv_driver_ok(struct vdrv *drv)
{
	vdrv_wr(drv, VIRTIO_MMIO_STATUS, VDRV_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK);
}

#endif
