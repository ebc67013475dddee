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

struct ioloop;
/* virtio-vsock for guest_cid: a guest connect to host port P reaches the Unix
 * socket <dir>/P.sock; host clients reach guest ports through
 * <dir>/vsock.sock ("CONNECT <port>\n", answered "OK <hostport>\n"). Its
 * sockets are served on loop's thread; destroy it with that thread stopped. */
struct virtio_dev *virtio_vsock_create(const struct guest_mem *mem, struct ioloop *loop,
				       uint64_t guest_cid, const char *dir, gantry_error_t *err);

#endif
