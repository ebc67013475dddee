/* virtio-vsock in the "hybrid" model: guest streams reach Unix sockets in a
 * directory of the host (see vsock.c). The limits a guest or a host client
 * can see, shared with the tests. */
#ifndef GANTRY_VIRTIO_VSOCK_H
#define GANTRY_VIRTIO_VSOCK_H

#include "common/util.h"

#define VSOCK_DEVICE_ID		 19	     /* VIRTIO_ID_VSOCK */
#define VSOCK_HOST_CID		 2	     /* VMADDR_CID_HOST */
#define VSOCK_BUF_ALLOC		 (256 * KiB) /* our receive window per connection */
#define VSOCK_MAX_PKT		 (64 * KiB)  /* largest payload in one packet */
#define VSOCK_MAX_CONNS		 1024	     /* connections and pending host clients */
#define VSOCK_LINE_MAX		 32	     /* "CONNECT <port>\n" from a host client */
#define VSOCK_CONNECT_TIMEOUT_MS 2000	     /* for the guest's answer, or the CONNECT line */
#define VSOCK_EPHEMERAL_BASE	 (1u << 30)  /* first host port of host-initiated streams */
#define VSOCK_LISTEN_NAME	 "vsock.sock"

#endif
