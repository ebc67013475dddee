/* The share server in another process than the VM's: each FUSE request the
 * virtio-fs device pops, carried to the share worker over one of a few
 * SOCK_SEQPACKET sockets as where its buffers lie in a memfd both
 * processes map; the worker builds the iovecs into its own mapping, serves
 * the request and answers with the bytes it wrote.
 *
 * The memfd is not guest RAM: the VMM keeps one slot of it for each
 * socket (SHARE_RPC_SLOT: the request's bytes, then room for the reply),
 * copies the chain's readable part in and the reply's bytes out. The
 * share worker never maps the guest's memory, and guest RAM stays private
 * anonymous memory: a one-shot VM's gets transparent huge pages, which
 * shared memory by default does not (each 4 KiB fault of guest RAM costs
 * most under nested paging), and a restore maps its memory file
 * copy-on-write, clones sharing its page cache.
 *
 * One message each way per request:
 *   VMM -> worker  struct share_rpc_hdr (op REQ), then nr_in + nr_out
 *                  struct share_rpc_seg: the chain's readable part, then
 *                  its writable part, as (memfd offset, length)
 *   worker -> VMM  struct share_rpc_reply: the bytes written into out
 * RESET (the guest reset the device) is answered the same way, len 0.
 * For a snapshot, SAVE (no in segment, one out) has the worker write its
 * server's tables there (fs_server_save) and answer their length; after
 * a restore, LOAD (one in segment, no out) hands them to the new worker
 * before any request (fs_server_load), answered with the nodes it took
 * (UINT64_MAX: none). Both only ever cover the memfd's slots whole, with
 * no request under way.
 * Before any request the VMM sends MEM on the first socket, with the memfd
 * (SCM_RIGHTS) and its size in len. The share worker passes some requests
 * on to workers behind it the same way (routes.h).
 *
 * The VMM worker is guest-facing, so the share worker trusts nothing of a
 * message: its size, counts, offsets and lengths are all checked against
 * the memfd's size (share_rpc_parse) before any byte is touched. */
#ifndef GANTRY_SHARE_RPC_H
#define GANTRY_SHARE_RPC_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "share/server.h"

struct guest_mem;
struct fs_server;

/* A FUSE request's chain at most (virtio/fs.c's FS_CHAIN_MAX). */
#define SHARE_RPC_SEGS_MAX (FS_MAX_PAGES + 4)
#define SHARE_RPC_SOCKS_MAX 16 /* virtio-fs's FS_THREADS_MAX */

enum share_rpc_op {
	SHARE_RPC_REQ = 1,
	SHARE_RPC_RESET = 2,
	SHARE_RPC_MEM = 3,
	SHARE_RPC_SAVE = 4, /* the server's tables into the one out segment */
	SHARE_RPC_LOAD = 5, /* a restored VM's tables from the one in segment */
};

/* A socket's slot of the memfd: a request's readable bytes (a WRITE's
 * data and its headers, an xattr's value), then the reply's room (a
 * READ's data, a READDIR's buffer). A chain with more to read is refused
 * (EIO); more room than this is not offered to the server. */
#define SHARE_RPC_IN_MAX  (FS_MAX_WRITE + 128 * 1024)
#define SHARE_RPC_OUT_MAX (FS_MAX_WRITE + 128 * 1024)
#define SHARE_RPC_SLOT	  (SHARE_RPC_IN_MAX + SHARE_RPC_OUT_MAX)

struct share_rpc_hdr {
	uint32_t op;
	uint32_t nr_in, nr_out;
	uint32_t minor; /* MEM: the FUSE minor the guest settled on, 0 for none
			 * yet (a worker behind another, routes.h, or the
			 * first worker of a restored VM) */
	uint64_t len;	/* MEM: the memfd's size */
};

struct share_rpc_seg {
	uint64_t off, len;
};

struct share_rpc_reply {
	uint64_t len;
};

#define SHARE_RPC_MSG_MAX (sizeof(struct share_rpc_hdr) + SHARE_RPC_SEGS_MAX * sizeof(struct share_rpc_seg))

/* ---- the VMM's side: a virtio_fs_handler ------------------------------------------------ */

struct share_rpc_client {
	const struct guest_mem *mem; /* attach's: guest RAM */
	struct guest_mem *bounce;    /* the memfd of the slots, made by send_mem */
	uint32_t minor;		     /* restored's: MEM says it */
	uint8_t *carry;		     /* load's: the tables LOAD hands on after MEM */
	size_t carry_len;
	int socks[SHARE_RPC_SOCKS_MAX];
	bool busy[SHARE_RPC_SOCKS_MAX];
	size_t n;
	pthread_mutex_t lock; /* a free socket for each calling worker */
	pthread_cond_t freed;
};

/* The client over socks (taken); the handler that calls it into h. */
struct virtio_fs_handler;
void share_rpc_client_init(struct share_rpc_client *c, const int *socks, size_t n,
			   struct virtio_fs_handler *h);
/* MEM on the first socket: the slots' memfd, made now, to the worker,
 * once, after attach and before any request. 0 or -errno. */
int share_rpc_client_send_mem(struct share_rpc_client *c);
/* Unmap and close the slots. */
void share_rpc_client_free(struct share_rpc_client *c);
/* Encode one request: each iovec, inside one region of mem, as its memfd
 * offset. The message's bytes, or 0 when an iovec lies outside guest RAM
 * or there are too many. */
size_t share_rpc_encode(const struct guest_mem *mem, const struct iovec *in, size_t nr_in,
			const struct iovec *out, size_t nr_out, void *msg, size_t cap);

/* ---- the share worker's side ------------------------------------------------------------- */

/* Check a message of n bytes against guest RAM [base, base + size): a REQ,
 * RESET, SAVE or LOAD whose counts, offsets and lengths are all within bounds, its
 * iovecs into in and out (SHARE_RPC_SEGS_MAX each will do). 0, or -1
 * (nothing of it is to be served). */
int share_rpc_parse(const void *msg, size_t n, uint8_t *base, uint64_t size, uint32_t *op,
		    struct iovec *in, size_t *nr_in, struct iovec *out, size_t *nr_out);
/* Serve sock, request thread thread, until it hangs up: each request
 * checked, served by srv or passed on by routes (NULL: none) and answered
 * (a bad one with 0 bytes). Returns 0 at a hang-up, -1 on an error of the
 * socket. */
struct share_routes;
int share_rpc_serve(int sock, size_t thread, uint8_t *base, uint64_t size, struct fs_server *srv,
		    struct share_routes *routes);

#endif
