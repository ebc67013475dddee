/* virtio-mmio transport, version 2 (virtio 1.x, section 4.2). The transport
 * knows nothing about any device: a device is a struct virtio_dev (dev.h)
 * holding a table of operations, its config space and its queues. Queue
 * notifications reach ops->queue_notify either from an ioeventfd on the I/O
 * thread or from an MMIO exit on a vCPU; both hold the device lock. */
#ifndef GANTRY_VIRTIO_MMIO_H
#define GANTRY_VIRTIO_MMIO_H

#include <stdbool.h>
#include <stdint.h>

#include "virtio/dev.h"

#define VIRTIO_MMIO_SIZE     0x1000
#define VIRTIO_MMIO_CONFIG   0x100
#define GANTRY_VIRTIO_VENDOR 0x52544e47 /* "GNTR" */

/* Bus handler for the device's 4 KiB register window. */
void virtio_mmio_access(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write);

#endif
