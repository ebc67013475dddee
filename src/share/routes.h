/* The share worker's routes (server.h has why): the share workers of
 * shares added while the guest runs, each behind one socket per request
 * thread of ours. A request for one is passed on as it came, the same
 * message of memfd offsets (the worker behind maps the same guest RAM),
 * and its answer is ours; INIT, DESTROY, BATCH_FORGET, SYNCFS and RESET
 * go to every worker behind before this server serves them.
 *
 * Request threads call share_routes_handle at once; the channel's thread
 * attaches and detaches. A detach waits for the requests passed on to
 * that worker to come back, so its caller ends the worker first. */
#ifndef GANTRY_SHARE_ROUTES_H
#define GANTRY_SHARE_ROUTES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/error.h"
#include "share/rpc.h"

struct fs_server;
struct share_routes;

/* Routes for a server of nr_threads request threads, guest RAM the
 * memfd mem_fd (kept: each worker behind is sent it). */
struct share_routes *share_routes_new(size_t nr_threads, int mem_fd);
void share_routes_free(struct share_routes *t);

/* The worker of route behind socks (nr_threads of them, taken, closed
 * on error too): sent guest RAM and the FUSE minor srv's guest settled
 * on, then tag listed in srv's hub and its requests passed on. */
int share_routes_attach(struct share_routes *t, struct fs_server *srv, const char *tag,
			unsigned int route, int *socks, size_t n, gantry_error_t *err);
/* tag out of srv's hub and its route closed (its requests answer ESTALE
 * from now on); false when tag is not a route's. */
bool share_routes_detach(struct share_routes *t, struct fs_server *srv, const char *tag);

/* One REQ or RESET message (share_rpc_parse's op, in and out) on request
 * thread thread: served here, passed on, or both. The bytes written into
 * out. */
uint64_t share_routes_handle(struct share_routes *t, struct fs_server *srv, size_t thread,
			     uint32_t op, const void *msg, size_t n, const struct iovec *in,
			     size_t nr_in, const struct iovec *out, size_t nr_out);

#endif
