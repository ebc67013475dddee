/* Constructors of the virtio devices; each lives in its own file and hands
 * the transport a struct virtio_dev. Release with d->ops->destroy(d). */
#ifndef GANTRY_VIRTIO_DEVICES_H
#define GANTRY_VIRTIO_DEVICES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/error.h"
#include "virtio/mmio.h"

/* virtio-blk over a file or block device; read-only disks refuse writes. */
struct virtio_dev *virtio_blk_create(const struct guest_mem *mem, const char *path, int fd,
				     bool ro, gantry_error_t *err);
/* virtio-rng fed by getrandom(2). */
struct virtio_dev *virtio_rng_create(const struct guest_mem *mem);

/* virtio-balloon for free page reporting: the pages of the ranges the
 * guest reports free are given back to the host (guest_mem_discard). */
struct virtio_dev *virtio_balloon_create(const struct guest_mem *mem);
/* What it gave back so far; d must come from virtio_balloon_create. */
struct virtio_balloon_stats {
	uint64_t reported_bytes; /* freed by reports */
	uint64_t reports;	 /* report chains served */
	uint64_t inflated_bytes; /* freed by inflating (never asked for) */
};
struct virtio_balloon_stats virtio_balloon_stats(struct virtio_dev *d);

struct ioloop;

/* Where a guest's vsock streams end when not in a directory's sockets: a
 * confined VMM opens no socket itself. */
struct vmm_vsock_host {
	/* A guest connect to host port P: a connected (or connecting,
	 * non-blocking) stream socket the VMM takes, or -1 (refused). */
	int (*connect)(void *opaque, uint32_t port);
	void *opaque;
	int listen_fd; /* > 0: host clients' listening socket ("CONNECT <port>\n") */
};

/* virtio-vsock for guest_cid: a guest connect to host port P reaches the Unix
 * socket <dir>/P.sock; host clients reach guest ports through
 * <dir>/vsock.sock ("CONNECT <port>\n", answered "OK <hostport>\n"). With
 * host->connect set, that gives the socket for a guest connect instead;
 * and host->listen_fd (if > 0, with connect) is the host clients'
 * listener, dir then not used at all. Both are taken by the device. Its
 * sockets are served on loop's thread; destroy it with that thread
 * stopped. */
struct virtio_dev *virtio_vsock_create(const struct guest_mem *mem, struct ioloop *loop,
				       uint64_t guest_cid, const char *dir,
				       const struct vmm_vsock_host *host, gantry_error_t *err);

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

/* virtio-fs: FUSE requests for the guest's virtiofs driver, mounted by tag
 * (1 to 36 bytes), served by h on a pool of worker threads (4, or
 * GANTRY_FS_THREADS=1..16), several at once. */
struct virtio_fs_handler {
	/* One request, as fs_server_handle takes it (share/server.h): in is
	 * the chain's readable part, out its writable part, both in guest RAM
	 * the guest may change meanwhile. Returns the bytes written into out,
	 * 0 for no reply. Called without the device lock, from any worker;
	 * a device reset and the device's end wait for it to return. */
	size_t (*handle)(void *opaque, const struct iovec *in, size_t nr_in,
			 const struct iovec *out, size_t nr_out);
	/* The guest reset the device (no request under way now): every node
	 * and handle it was given is gone. NULL: nothing to do. */
	void (*reset)(void *opaque);
	/* Called once by virtio_fs_create with the guest RAM its iovecs
	 * point into (a remote handler translates them). NULL: none. */
	void (*attach)(void *opaque, const struct guest_mem *mem);
	/* A restored device, before any request: the guest's session was
	 * past INIT, at FUSE minor minor (0: not inited). NULL: nothing. */
	void (*restored)(void *opaque, uint32_t minor);
	/* Snapshots: the server's tables (share/server.h fs_server_save),
	 * malloc()ed into *blob, their length returned (0: none), with the
	 * device's requests all answered; and a restored device's, before
	 * restored and before any request. NULL: none. */
	size_t (*save)(void *opaque, uint8_t **blob);
	void (*load)(void *opaque, const void *blob, size_t len);
	void *opaque;
};
#define VIRTIO_FS_THREADS_ENV "GANTRY_FS_THREADS"
/* The worker threads a device will run (GANTRY_FS_THREADS, else 4). */
int virtio_fs_threads(unsigned int *n, gantry_error_t *err);
struct virtio_dev *virtio_fs_create(const struct guest_mem *mem, const char *tag,
				    const struct virtio_fs_handler *h, gantry_error_t *err);

/* What the device returned unserved or dropped, for tests and the VM's log. */
struct virtio_fs_stats {
	uint64_t requests;    /* handed to the handler */
	uint64_t malformed;   /* returned unserved, with nothing written */
	uint64_t dropped;     /* queued or under way at a reset: never answered */
	unsigned int workers; /* threads running now */
};
/* d must come from virtio_fs_create. */
struct virtio_fs_stats virtio_fs_stats(struct virtio_dev *d);
/* Wait until no request is queued or being served (tests, fuzzers). */
void virtio_fs_wait_idle(struct virtio_dev *d);

#endif
