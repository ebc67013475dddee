/* virtio-mmio transport, version 2 (virtio 1.x, section 4.2). The transport
 * knows nothing about any device: a device is a struct virtio_dev holding a
 * table of operations, its config space and its queues. Queue notifications
 * reach ops->queue_notify either from an ioeventfd on the I/O thread or from
 * an MMIO exit on a vCPU; both hold the device lock. */
#ifndef GANTRY_VIRTIO_MMIO_H
#define GANTRY_VIRTIO_MMIO_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "virtio/queue.h"
#include "vmm/memory.h"

#define VIRTIO_MMIO_SIZE       0x1000
#define VIRTIO_MMIO_CONFIG     0x100
#define VIRTIO_MAX_QUEUES      8
#define GANTRY_VIRTIO_VENDOR   0x52544e47 /* "GNTR" */
#define VIRTIO_F_VERSION_1_BIT 32

struct virtio_dev;

struct virtio_dev_ops {
	const char *name;
	uint32_t device_id;
	unsigned int num_queues;
	/* Device-specific config write (config is read straight from d->config). */
	void (*config_write)(struct virtio_dev *d, uint32_t off, const uint8_t *data, uint32_t len);
	/* The driver made buffers available on queue q. */
	void (*queue_notify)(struct virtio_dev *d, unsigned int q);
	/* The driver reset the device. */
	void (*reset)(struct virtio_dev *d);
	/* Release the device and its backend (the struct embedding d). */
	void (*destroy)(struct virtio_dev *d);
};

struct virtio_dev {
	const struct virtio_dev_ops *ops;
	void *priv;
	const struct guest_mem *mem;
	pthread_mutex_t lock;

	uint64_t features; /* offered, VERSION_1 included */
	uint8_t *config;
	uint32_t config_len;

	uint32_t status;
	uint32_t dev_features_sel;
	uint32_t drv_features_sel;
	uint64_t driver_features;
	uint32_t queue_sel;
	uint32_t config_generation;
	atomic_uint isr;
	struct virtq vqs[VIRTIO_MAX_QUEUES];

	/* Placement and signalling, filled by whoever attaches the device. */
	uint64_t base;
	unsigned int irq;
	int irqfd; /* written to raise the interrupt; -1 = none (tests) */
	unsigned long irqs_raised;
};

void virtio_dev_init(struct virtio_dev *d, const struct virtio_dev_ops *ops, void *priv,
		     const struct guest_mem *mem, uint64_t features, void *config,
		     uint32_t config_len);
void virtio_dev_destroy(struct virtio_dev *d);

/* Bus handler for the device's 4 KiB register window. */
void virtio_mmio_access(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write);
/* Run queue q's notify handler under the device lock (ioeventfd path). */
void virtio_dev_notify(struct virtio_dev *d, unsigned int q);
/* Serve every request available on queue q: serve() handles one well-formed
 * request and returns the bytes it wrote into the driver's buffers. Malformed
 * chains go back to the driver unserved, a broken ring flags the device as
 * needing reset, and the driver is interrupted once at the end. */
typedef uint32_t (*virtio_serve_fn)(struct virtio_dev *d, const struct virtq_elem *e);
void virtio_dev_serve_queue(struct virtio_dev *d, unsigned int q, virtio_serve_fn serve);
/* After pushing used buffers on vq: interrupt the driver if it wants one. */
void virtio_dev_signal(struct virtio_dev *d, struct virtq *vq);
/* The device is in a state it cannot continue from. */
void virtio_dev_needs_reset(struct virtio_dev *d);
bool virtio_dev_driver_ok(const struct virtio_dev *d);

#endif
