/* A virtio device as every transport and device share it (virtio 1.x,
 * section 2): a table of operations, the features offered and accepted, the
 * device status, the config space and the queues, and the helpers a device
 * calls to serve a queue and interrupt its driver. The device knows nothing
 * about how its registers are reached: that is the transport (mmio.h). */
#ifndef GANTRY_VIRTIO_DEV_H
#define GANTRY_VIRTIO_DEV_H

#include <linux/virtio_ring.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "virtio/queue.h"
#include "vmm/memory.h"

#define VIRTIO_MAX_QUEUES      8
#define VIRTIO_F_VERSION_1_BIT 32
/* Chains one queue notification serves; the rest of the ring waits for the
 * next round of the I/O loop, so a guest that keeps one ring full cannot
 * starve the other devices, the console or the VM's stop. */
#define VIRTQ_BUDGET 64

struct virtio_dev;
struct state_file;
struct state_writer;

struct virtio_dev_ops {
	const char *name;
	uint32_t device_id;
	unsigned int num_queues;
	/* QueueNumMax, a power of two up to VIRTQ_RING_MAX; 0: VIRTQ_MAX_SIZE. */
	uint16_t queue_max;
	/* Bit q: the device waits on queue q's notification fd itself, in a
	 * blocking read on a thread of its own; the I/O loop leaves it alone. */
	uint32_t own_kicks;
	/* Device-specific config write (config is read straight from d->config). */
	void (*config_write)(struct virtio_dev *d, uint32_t off, const uint8_t *data, uint32_t len);
	/* The driver made buffers available on queue q. */
	void (*queue_notify)(struct virtio_dev *d, unsigned int q);
	/* The driver reset the device. */
	void (*reset)(struct virtio_dev *d);
	/* Release the device and its backend (the struct embedding d). */
	void (*destroy)(struct virtio_dev *d);
	/* Snapshots: what the device keeps beyond its transport, as data
	 * of at most VIRTIO_DEV_EXTRA_MAX bytes (*len), or -1 with why it
	 * cannot be saved now; and the check on restore that its backend is
	 * still what was saved. NULL: nothing. */
	int (*save)(struct virtio_dev *d, void *data, size_t *len, gantry_error_t *err);
	int (*restore)(struct virtio_dev *d, const void *data, size_t len, gantry_error_t *err);
	/* And what does not fit there: after save, a blob of any size
	 * (malloc()ed into *blob, *len bytes; none: NULL), the device's
	 * "VDBL" section; given back, where the file has one, before
	 * restore. NULL: nothing. */
	int (*save_blob)(struct virtio_dev *d, uint8_t **blob, size_t *len, gantry_error_t *err);
	int (*restore_blob)(struct virtio_dev *d, const void *blob, size_t len, gantry_error_t *err);
	/* Saved, before the guest runs again: in a restored VM (restored)
	 * tell the driver what did not survive (vsock: its connections);
	 * in the VM that was saved live, take up what the save gave back.
	 * NULL: nothing to do. */
	void (*resumed)(struct virtio_dev *d, bool restored);
};

#define VIRTIO_DEV_EXTRA_MAX 256

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
	/* Each queue's notification eventfd, as the I/O loop watches it (the
	 * ioeventfd for QueueNotify), owned by the attacher: written to come
	 * back for what a budget left on the ring. -1 = none. */
	int queue_fds[VIRTIO_MAX_QUEUES];
	/* Called first on each thread the device starts itself (virtio-fs's
	 * workers), by the attacher's choice: the VMM narrows them. NULL = none. */
	void (*thread_start)(void *opaque);
	void *thread_opaque;
};

/* Event indices (VIRTIO_RING_F_EVENT_IDX), for a device's features:
 * virtq_pop() and virtio_dev_signal() keep them for any device that
 * offers them. */
#define VIRTIO_DEV_EVENT_IDX (1ULL << VIRTIO_RING_F_EVENT_IDX)

void virtio_dev_init(struct virtio_dev *d, const struct virtio_dev_ops *ops, void *priv,
		     const struct guest_mem *mem, uint64_t features, void *config,
		     uint32_t config_len);
void virtio_dev_destroy(struct virtio_dev *d);

/* Run queue q's notify handler under the device lock (ioeventfd path). */
void virtio_dev_notify(struct virtio_dev *d, unsigned int q);
/* Serve the requests available on queue q: serve() handles one well-formed
 * request and returns the bytes it wrote into the driver's buffers. Malformed
 * chains go back to the driver unserved, a broken ring flags the device as
 * needing reset, and the driver is interrupted once at the end. At most
 * VIRTQ_BUDGET chains are served when the queue has a notification fd; then
 * the fd is signalled, and the loop serves the rest after the other ready
 * fds. Without one no later round would come, and the ring is served to its
 * end. */
typedef uint32_t (*virtio_serve_fn)(struct virtio_dev *d, const struct virtq_elem *e);
void virtio_dev_serve_queue(struct virtio_dev *d, unsigned int q, virtio_serve_fn serve);
/* After pushing used buffers on vq: interrupt the driver if it wants one. */
void virtio_dev_signal(struct virtio_dev *d, struct virtq *vq);
/* The device changed its config space (a link went down): a new generation,
 * and a config interrupt for a driver that is up. */
void virtio_dev_config_changed(struct virtio_dev *d);
/* The device is in a state it cannot continue from. */
void virtio_dev_needs_reset(struct virtio_dev *d);
bool virtio_dev_driver_ok(const struct virtio_dev *d);
/* On a thread the device started, before it serves anything. */
void virtio_dev_thread_start(struct virtio_dev *d);
/* The transport's state (status, features, each queue's rings and
 * indices), the config space and the device's own (ops->save and
 * ops->save_blob), as the index'th device's "VDEV", "VCFG", "VDEX" and
 * "VDBL" sections of a snapshot (a file from before VDBL has none); and
 * back into a device made as that one was, which checks every value as
 * QueueReady and FeaturesOK would. For devices whose requests are all
 * served by the time the VM stops. */
int virtio_dev_save(struct virtio_dev *d, struct state_writer *w, gantry_error_t *err);
int virtio_dev_restore(struct virtio_dev *d, const struct state_file *sf, unsigned int index,
		       gantry_error_t *err);
/* After a restore (restored), or after a live save of the running VM,
 * before the guest runs again: the device's ops->resumed, each ready
 * queue's notification fd written once, so requests the driver queued
 * before the save (or that the save gave back) are served without
 * waiting for a kick it may never send, and one used-ring interrupt, for
 * one the save lost. */
void virtio_dev_resume(struct virtio_dev *d, bool restored);
/* The QueueNumMax d offers. */
uint16_t virtio_dev_queue_max(const struct virtio_dev *d);

#endif
