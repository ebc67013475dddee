/* Constructors of the virtio devices; each lives in its own file and hands
 * the transport a struct virtio_dev. Release with d->ops->destroy(d). */
#ifndef GANTRY_VIRTIO_DEVICES_H
#define GANTRY_VIRTIO_DEVICES_H

#include <stdbool.h>

#include "common/error.h"
#include "virtio/mmio.h"

/* virtio-blk over a file or block device; read-only disks refuse writes. */
struct virtio_dev *virtio_blk_create(const struct guest_mem *mem, const char *path, bool ro,
				     gantry_error_t *err);
/* virtio-rng fed by getrandom(2). */
struct virtio_dev *virtio_rng_create(const struct guest_mem *mem);

#endif
