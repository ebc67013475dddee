/* Constructors of the virtio devices; each lives in its own file and hands
 * the transport a struct virtio_dev. Release with d->ops->destroy(d). */
#ifndef GANTRY_VIRTIO_DEVICES_H
#define GANTRY_VIRTIO_DEVICES_H

#include <stdbool.h>
#include <stdint.h>

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

/* virtio-net: Ethernet frames, one per message, over frame_fd (a
 * SOCK_SEQPACKET socket to the network worker, not closed by the device),
 * served on loop's thread. The guest's address is mac. When the worker hangs
 * up the link goes down and the guest's frames are completed unsent. */
struct virtio_dev *virtio_net_create(const struct guest_mem *mem, struct ioloop *loop, int frame_fd,
				     const uint8_t mac[6], gantry_error_t *err);

/* What the device dropped and passed, for tests and the VM's log. */
struct virtio_net_stats {
	uint64_t tx_frames, tx_bytes;
	uint64_t tx_bad_hdr, tx_runt, tx_oversize, tx_error;
	uint64_t rx_frames, rx_bytes;
	uint64_t rx_trunc, rx_runt, rx_dropped, rx_bad_buf;
};
/* d must come from virtio_net_create. */
struct virtio_net_stats virtio_net_stats(struct virtio_dev *d);
bool virtio_net_link_up(struct virtio_dev *d);

#endif
