/* virtio-mmio version 2 register interface (see mmio.h). */
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_ring.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "virtio/mmio.h"

/* Queue work belongs to the I/O loop: where the queue has its notification
 * fd the kick goes there, so a vCPU's exit path never runs a device's
 * queue (nor needs the calls one makes, under its seccomp filter); without
 * one (tests, fuzzers) it runs here. */
static void virtio_kick(struct virtio_dev *d, unsigned int q)
{
	uint64_t one = 1;

	if (d->queue_fds[q] >= 0)
		(void)!write(d->queue_fds[q], &one, sizeof(one));
	else
		d->ops->queue_notify(d, q);
}

static void virtio_reset(struct virtio_dev *d)
{
	d->status = 0;
	d->dev_features_sel = d->drv_features_sel = 0;
	d->driver_features = 0;
	d->queue_sel = 0;
	atomic_store(&d->isr, 0);
	for (unsigned int i = 0; i < VIRTIO_MAX_QUEUES; i++)
		virtq_reset(&d->vqs[i]);
	if (d->ops->reset)
		d->ops->reset(d);
}

static struct virtq *virtio_cur_vq(struct virtio_dev *d)
{
	if (d->queue_sel >= d->ops->num_queues)
		return NULL;
	return &d->vqs[d->queue_sel];
}

static void set_half(uint64_t *v, bool high, uint32_t val)
{
	if (high)
		*v = (*v & 0xffffffffULL) | ((uint64_t)val << 32);
	else
		*v = (*v & ~0xffffffffULL) | val;
}

static void virtio_set_status(struct virtio_dev *d, uint32_t v)
{
	if (v == 0) {
		virtio_reset(d);
		return;
	}
	if ((v & VIRTIO_CONFIG_S_FEATURES_OK) && !(d->status & VIRTIO_CONFIG_S_FEATURES_OK)) {
		/* Accept only a subset of our offer that includes VERSION_1. */
		if ((d->driver_features & ~d->features) ||
		    !(d->driver_features & (1ULL << VIRTIO_F_VERSION_1_BIT)))
			v &= ~(uint32_t)VIRTIO_CONFIG_S_FEATURES_OK;
	}
	/* No DRIVER_OK without FEATURES_OK: the features, and with them
	 * what a device sizes its state by, are fixed before it runs. */
	if (!((v | d->status) & VIRTIO_CONFIG_S_FEATURES_OK))
		v &= ~(uint32_t)VIRTIO_CONFIG_S_DRIVER_OK;
	bool was_ok = virtio_dev_driver_ok(d);

	/* Bits are cleared only by a reset (Linux only ever adds them): a
	 * driver that dropped FEATURES_OK or DRIVER_OK could change the
	 * features or the queues under a running device. NEEDS_RESET is ours. */
	d->status |= v & 0xff & ~(uint32_t)VIRTIO_CONFIG_S_NEEDS_RESET;
	/* Buffers a driver queued before DRIVER_OK were not served when it
	 * kicked; serve them now rather than leave the driver waiting. */
	if (!was_ok && virtio_dev_driver_ok(d)) {
		for (unsigned int q = 0; q < d->ops->num_queues; q++) {
			if (d->vqs[q].ready)
				virtio_kick(d, q);
		}
	}
}

static uint32_t virtio_reg_read(struct virtio_dev *d, uint64_t off)
{
	struct virtq *vq = virtio_cur_vq(d);

	switch (off) {
	case VIRTIO_MMIO_MAGIC_VALUE:
		return 0x74726976; /* "virt" */
	case VIRTIO_MMIO_VERSION:
		return 2;
	case VIRTIO_MMIO_DEVICE_ID:
		return d->ops->device_id;
	case VIRTIO_MMIO_VENDOR_ID:
		return GANTRY_VIRTIO_VENDOR;
	case VIRTIO_MMIO_DEVICE_FEATURES:
		if (d->dev_features_sel > 1)
			return 0;
		return (uint32_t)(d->features >> (32 * d->dev_features_sel));
	case VIRTIO_MMIO_QUEUE_NUM_MAX:
		return vq ? virtio_dev_queue_max(d) : 0;
	case VIRTIO_MMIO_QUEUE_READY:
		return vq ? vq->ready : 0;
	case VIRTIO_MMIO_INTERRUPT_STATUS:
		return atomic_load(&d->isr);
	case VIRTIO_MMIO_STATUS:
		return d->status;
	case VIRTIO_MMIO_CONFIG_GENERATION:
		return d->config_generation;
	case VIRTIO_MMIO_QUEUE_DESC_LOW:
		return vq ? (uint32_t)vq->desc_gpa : 0;
	case VIRTIO_MMIO_QUEUE_DESC_HIGH:
		return vq ? (uint32_t)(vq->desc_gpa >> 32) : 0;
	case VIRTIO_MMIO_QUEUE_AVAIL_LOW:
		return vq ? (uint32_t)vq->avail_gpa : 0;
	case VIRTIO_MMIO_QUEUE_AVAIL_HIGH:
		return vq ? (uint32_t)(vq->avail_gpa >> 32) : 0;
	case VIRTIO_MMIO_QUEUE_USED_LOW:
		return vq ? (uint32_t)vq->used_gpa : 0;
	case VIRTIO_MMIO_QUEUE_USED_HIGH:
		return vq ? (uint32_t)(vq->used_gpa >> 32) : 0;
	default:
		return 0;
	}
}

static void virtio_reg_write(struct virtio_dev *d, uint64_t off, uint32_t v)
{
	struct virtq *vq = virtio_cur_vq(d);
	bool vq_writable = vq && !vq->ready;

	switch (off) {
	case VIRTIO_MMIO_DEVICE_FEATURES_SEL:
		d->dev_features_sel = v;
		break;
	case VIRTIO_MMIO_DRIVER_FEATURES:
		if (d->drv_features_sel <= 1 && !(d->status & VIRTIO_CONFIG_S_FEATURES_OK))
			set_half(&d->driver_features, d->drv_features_sel == 1, v);
		break;
	case VIRTIO_MMIO_DRIVER_FEATURES_SEL:
		d->drv_features_sel = v;
		break;
	case VIRTIO_MMIO_QUEUE_SEL:
		d->queue_sel = v;
		break;
	case VIRTIO_MMIO_QUEUE_NUM:
		if (vq_writable)
			vq->num = v <= virtio_dev_queue_max(d) ? (uint16_t)v : 0;
		break;
	case VIRTIO_MMIO_QUEUE_READY:
		if (vq == NULL)
			break;
		if (v == 0) {
			/* A running device's queues stay until a reset: it may
			 * hold their buffers, sized by QueueNum. */
			if (!(d->status & VIRTIO_CONFIG_S_DRIVER_OK))
				vq->ready = false;
		} else if (!vq->ready &&
			   virtq_enable(vq, d->mem,
					d->driver_features & (1ULL << VIRTIO_RING_F_EVENT_IDX)) < 0) {
			/* Rings outside RAM or a bad size: QueueReady reads back 0. */
			vq->ready = false;
		}
		break;
	case VIRTIO_MMIO_QUEUE_NOTIFY:
		if (v < d->ops->num_queues && d->vqs[v].ready && virtio_dev_driver_ok(d))
			virtio_kick(d, v);
		break;
	case VIRTIO_MMIO_INTERRUPT_ACK:
		atomic_fetch_and(&d->isr, ~v);
		break;
	case VIRTIO_MMIO_STATUS:
		virtio_set_status(d, v);
		break;
	case VIRTIO_MMIO_QUEUE_DESC_LOW:
	case VIRTIO_MMIO_QUEUE_DESC_HIGH:
		if (vq_writable)
			set_half(&vq->desc_gpa, off == VIRTIO_MMIO_QUEUE_DESC_HIGH, v);
		break;
	case VIRTIO_MMIO_QUEUE_AVAIL_LOW:
	case VIRTIO_MMIO_QUEUE_AVAIL_HIGH:
		if (vq_writable)
			set_half(&vq->avail_gpa, off == VIRTIO_MMIO_QUEUE_AVAIL_HIGH, v);
		break;
	case VIRTIO_MMIO_QUEUE_USED_LOW:
	case VIRTIO_MMIO_QUEUE_USED_HIGH:
		if (vq_writable)
			set_half(&vq->used_gpa, off == VIRTIO_MMIO_QUEUE_USED_HIGH, v);
		break;
	default:
		break; /* read-only or unknown registers */
	}
}

static void virtio_config_access(struct virtio_dev *d, uint32_t off, uint8_t *data, uint32_t len,
				 bool is_write)
{
	if (off > d->config_len || len > d->config_len - off) {
		if (!is_write)
			memset(data, 0, len);
		return;
	}
	if (!is_write)
		memcpy(data, d->config + off, len);
	else if (d->ops->config_write)
		d->ops->config_write(d, off, data, len);
}

void virtio_mmio_access(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write)
{
	struct virtio_dev *d = opaque;
	uint32_t v;

	pthread_mutex_lock(&d->lock);
	if (off >= VIRTIO_MMIO_CONFIG) {
		if (len == 1 || len == 2 || len == 4 || len == 8)
			virtio_config_access(d, (uint32_t)(off - VIRTIO_MMIO_CONFIG), data, len,
					     is_write);
		else if (!is_write)
			memset(data, 0, len);
	} else if (len != 4 || (off & 3)) {
		/* Registers are 32 bits wide and aligned; anything else is ignored. */
		if (!is_write)
			memset(data, 0, len);
	} else if (is_write) {
		memcpy(&v, data, 4);
		virtio_reg_write(d, off, v);
	} else {
		v = virtio_reg_read(d, off);
		memcpy(data, &v, 4);
	}
	pthread_mutex_unlock(&d->lock);
}
