/* The share server's requests across processes (see rpc.h). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "share/routes.h"
#include "share/rpc.h"
#include "share/server.h"
#include "virtio/devices.h"
#include "vmm/memory.h"

#define POPULATE_MIN (64u * 1024) /* smaller ones: the faults cost less than the call */

_Static_assert(SHARE_RPC_SOCKS_MAX >= 16, "one socket for each virtio-fs worker");

/* ---- the VMM's side ---------------------------------------------------------------------- */

/* base's memfd offset when [base, base + len) lies in one region. */
static bool seg_of(const struct guest_mem *mem, const struct iovec *v, struct share_rpc_seg *s)
{
	uintptr_t b = (uintptr_t)v->iov_base;

	for (unsigned int i = 0; i < mem->nr_regions; i++) {
		const struct guest_region *r = &mem->regions[i];
		uintptr_t start = (uintptr_t)r->hva;

		if (b < start || b - start > r->size || v->iov_len > r->size - (b - start))
			continue;
		*s = (struct share_rpc_seg){ r->fd_off + (b - start), v->iov_len };
		return true;
	}
	return false;
}

size_t share_rpc_encode(const struct guest_mem *mem, const struct iovec *in, size_t nr_in,
			const struct iovec *out, size_t nr_out, void *msg, size_t cap)
{
	struct share_rpc_hdr *h = msg;
	struct share_rpc_seg *s = (struct share_rpc_seg *)(h + 1);
	size_t n = sizeof(*h) + (nr_in + nr_out) * sizeof(*s);

	if (nr_in > SHARE_RPC_SEGS_MAX || nr_out > SHARE_RPC_SEGS_MAX ||
	    nr_in + nr_out > SHARE_RPC_SEGS_MAX || n > cap)
		return 0;
	*h = (struct share_rpc_hdr){ .op = SHARE_RPC_REQ,
				     .nr_in = (uint32_t)nr_in,
				     .nr_out = (uint32_t)nr_out };
	for (size_t i = 0; i < nr_in; i++)
		if (!seg_of(mem, &in[i], &s[i]))
			return 0;
	for (size_t i = 0; i < nr_out; i++)
		if (!seg_of(mem, &out[i], &s[nr_in + i]))
			return 0;
	return n;
}

static int take_sock(struct share_rpc_client *c)
{
	int i = -1;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		for (size_t k = 0; k < c->n && i < 0; k++)
			if (!c->busy[k])
				i = (int)k;
		if (i >= 0)
			break;
		pthread_cond_wait(&c->freed, &c->lock);
	}
	c->busy[i] = true;
	pthread_mutex_unlock(&c->lock);
	return i;
}

static void put_sock(struct share_rpc_client *c, int i)
{
	pthread_mutex_lock(&c->lock);
	c->busy[i] = false;
	pthread_cond_signal(&c->freed);
	pthread_mutex_unlock(&c->lock);
}

/* One message and its answer on socket i: the answer's length into
 * *len. false when the worker took or answered none (it is gone). */
static bool call_on(struct share_rpc_client *c, int i, const void *msg, size_t n, uint64_t *len)
{
	struct share_rpc_reply rep = { 0 };
	ssize_t r;

	while ((r = send(c->socks[i], msg, n, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	if (r == (ssize_t)n)
		while ((r = recv(c->socks[i], &rep, sizeof(rep), 0)) < 0 && errno == EINTR)
			;
	*len = rep.len;
	return r == (ssize_t)sizeof(rep);
}

/* Whether every iovec lies in guest RAM: the device's chains always do;
 * anything else never leaves the VMM. */
static bool in_ram(const struct guest_mem *mem, const struct iovec *v, size_t n, uint64_t *total)
{
	struct share_rpc_seg seg;

	*total = 0;
	for (size_t i = 0; i < n; i++) {
		if (!seg_of(mem, &v[i], &seg))
			return false;
		*total += v[i].iov_len;
	}
	return true;
}

static size_t client_handle(void *opaque, const struct iovec *in, size_t nr_in,
			    const struct iovec *out, size_t nr_out)
{
	struct share_rpc_client *c = opaque;
	uint8_t msg[SHARE_RPC_MSG_MAX], *slot;
	struct iovec bin, bout;
	uint64_t in_len, room, len;
	size_t n, copied = 0;
	bool ok;
	int i;

	if (c->mem == NULL || c->bounce == NULL || nr_in > SHARE_RPC_SEGS_MAX ||
	    nr_out > SHARE_RPC_SEGS_MAX || nr_in + nr_out > SHARE_RPC_SEGS_MAX ||
	    !in_ram(c->mem, in, nr_in, &in_len) || !in_ram(c->mem, out, nr_out, &room))
		return 0;
	if (in_len > SHARE_RPC_IN_MAX)
		return fs_error_reply(in, nr_in, out, nr_out, EIO);
	i = take_sock(c);
	slot = c->bounce->regions[0].hva + (size_t)i * SHARE_RPC_SLOT;
	for (size_t k = 0; k < nr_in; k++) {
		memcpy(slot + copied, in[k].iov_base, in[k].iov_len);
		copied += in[k].iov_len;
	}
	bin = (struct iovec){ slot, in_len };
	bout = (struct iovec){ slot + SHARE_RPC_IN_MAX, MIN(room, (uint64_t)SHARE_RPC_OUT_MAX) };
	n = share_rpc_encode(c->bounce, &bin, nr_in ? 1 : 0, &bout, nr_out ? 1 : 0, msg,
			     sizeof(msg));
	/* The worker gone, the guest's request fails with EIO rather than
	 * waiting on an answer that never comes. */
	ok = n && call_on(c, i, msg, n, &len);
	/* More than the room is a worker gone wrong: no reply. */
	if (ok && len <= bout.iov_len) {
		copied = 0;
		for (size_t k = 0; k < nr_out && copied < len; k++) {
			size_t part = MIN(out[k].iov_len, (size_t)len - copied);

			memcpy(out[k].iov_base, (uint8_t *)bout.iov_base + copied, part);
			copied += part;
		}
	}
	put_sock(c, i);
	if (!ok)
		return fs_error_reply(in, nr_in, out, nr_out, EIO);
	return len <= bout.iov_len ? (size_t)len : 0;
}

static void client_reset(void *opaque)
{
	struct share_rpc_client *c = opaque;
	struct share_rpc_hdr h = { .op = SHARE_RPC_RESET };
	uint64_t len;
	int i = take_sock(c);

	call_on(c, i, &h, sizeof(h), &len);
	put_sock(c, i);
}

static void client_attach(void *opaque, const struct guest_mem *mem)
{
	struct share_rpc_client *c = opaque;

	c->mem = mem;
}

static void client_restored(void *opaque, uint32_t minor)
{
	struct share_rpc_client *c = opaque;

	c->minor = minor;
}

/* SAVE or LOAD of len bytes, through the whole memfd of the slots (no
 * request is under way): the answer's length, or false. */
static bool call_tables(struct share_rpc_client *c, uint32_t op, uint64_t len, uint64_t *answer)
{
	struct {
		struct share_rpc_hdr h;
		struct share_rpc_seg seg;
	} msg = { .h = { .op = op, .nr_in = op == SHARE_RPC_LOAD, .nr_out = op == SHARE_RPC_SAVE },
		  .seg = { 0, len } };
	int i = take_sock(c);
	bool ok = call_on(c, i, &msg, sizeof(msg), answer);

	put_sock(c, i);
	return ok;
}

static size_t client_save(void *opaque, uint8_t **blob)
{
	struct share_rpc_client *c = opaque;
	uint64_t len;

	*blob = NULL;
	if (c->bounce == NULL ||
	    !call_tables(c, SHARE_RPC_SAVE, MIN(c->bounce->ram_size, FS_CARRY_MAX), &len) ||
	    len == 0 || len > MIN(c->bounce->ram_size, FS_CARRY_MAX))
		return 0;
	*blob = xmalloc(len);
	memcpy(*blob, c->bounce->regions[0].hva, len);
	return len;
}

static void client_load(void *opaque, const void *blob, size_t len)
{
	struct share_rpc_client *c = opaque;

	free(c->carry);
	c->carry = xmalloc(len ? len : 1);
	memcpy(c->carry, blob, len);
	c->carry_len = len;
}

/* After MEM: a restored VM's tables to the new worker, once. */
static void send_carry(struct share_rpc_client *c)
{
	uint64_t taken = UINT64_MAX;

	if (c->carry_len && c->carry_len <= c->bounce->ram_size) {
		memcpy(c->bounce->regions[0].hva, c->carry, c->carry_len);
		if (!call_tables(c, SHARE_RPC_LOAD, c->carry_len, &taken))
			taken = UINT64_MAX;
		memset(c->bounce->regions[0].hva, 0, c->carry_len);
	}
	if (c->carry_len > c->bounce->ram_size)
		log_warn("share nodes of the save not taken: %zu bytes, more than this VM's share "
			 "slots hold (%s)",
			 c->carry_len, VIRTIO_FS_THREADS_ENV);
	else if (taken == UINT64_MAX)
		log_info("share nodes of the save not taken: the guest looks its paths up again");
	else
		log_debug("share nodes of the save taken: %llu", (unsigned long long)taken);
	free(c->carry);
	c->carry = NULL;
	c->carry_len = 0;
}

void share_rpc_client_init(struct share_rpc_client *c, const int *socks, size_t n,
			   struct virtio_fs_handler *h)
{
	*c = (struct share_rpc_client){ .n = MIN(n, (size_t)SHARE_RPC_SOCKS_MAX) };
	memcpy(c->socks, socks, c->n * sizeof(*socks));
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->freed, NULL);
	*h = (struct virtio_fs_handler){ .handle = client_handle,
					 .reset = client_reset,
					 .attach = client_attach,
					 .restored = client_restored,
					 .save = client_save,
					 .load = client_load,
					 .opaque = c };
}

int share_rpc_client_send_mem(struct share_rpc_client *c)
{
	struct share_rpc_hdr h = { .op = SHARE_RPC_MEM, .minor = c->minor };
	gantry_error_t err = NULL;

	if (c->mem == NULL || c->n == 0 || c->bounce)
		return -EINVAL;
	c->bounce = xzalloc(sizeof(*c->bounce));
	/* One slot a socket, each page made only as a request first uses it. */
	if (guest_mem_init_shared(c->bounce, c->n * SHARE_RPC_SLOT, &err) < 0) {
		gantry_error_free(&err);
		free(c->bounce);
		c->bounce = NULL;
		return -ENOMEM;
	}
	h.len = c->bounce->ram_size;
	if (unix_send_fds(c->socks[0], &h, sizeof(h), &c->bounce->fd, 1, MSG_NOSIGNAL) < 0)
		return -errno;
	if (c->carry)
		send_carry(c);
	return 0;
}

void share_rpc_client_free(struct share_rpc_client *c)
{
	free(c->carry);
	c->carry = NULL;
	if (c->bounce) {
		guest_mem_destroy(c->bounce);
		free(c->bounce);
		c->bounce = NULL;
	}
}

/* ---- the share worker's side --------------------------------------------------------------- */

static bool seg_ok(const struct share_rpc_seg *s, uint64_t size)
{
	return s->off <= size && s->len <= size - s->off && s->len <= SSIZE_MAX;
}

int share_rpc_parse(const void *msg, size_t n, uint8_t *base, uint64_t size, uint32_t *op,
		    struct iovec *in, size_t *nr_in, struct iovec *out, size_t *nr_out)
{
	struct share_rpc_hdr h;
	struct share_rpc_seg s;
	const uint8_t *p = msg;
	uint64_t segs;

	*nr_in = *nr_out = 0;
	if (n < sizeof(h))
		return -1;
	memcpy(&h, p, sizeof(h));
	*op = h.op;
	if (h.op == SHARE_RPC_RESET)
		return n == sizeof(h) ? 0 : -1;
	if (h.op == SHARE_RPC_SAVE && (h.nr_in != 0 || h.nr_out != 1))
		return -1;
	if (h.op == SHARE_RPC_LOAD && (h.nr_in != 1 || h.nr_out != 0))
		return -1;
	if ((h.op != SHARE_RPC_REQ && h.op != SHARE_RPC_SAVE && h.op != SHARE_RPC_LOAD) ||
	    h.nr_in > SHARE_RPC_SEGS_MAX || h.nr_out > SHARE_RPC_SEGS_MAX)
		return -1;
	segs = (uint64_t)h.nr_in + h.nr_out;
	if (segs > SHARE_RPC_SEGS_MAX || n != sizeof(h) + segs * sizeof(s))
		return -1;
	for (uint64_t i = 0; i < segs; i++) {
		struct iovec *v = i < h.nr_in ? &in[i] : &out[i - h.nr_in];

		memcpy(&s, p + sizeof(h) + i * sizeof(s), sizeof(s));
		if (!seg_ok(&s, size))
			return -1;
		*v = (struct iovec){ base + s.off, s.len };
	}
	*nr_in = h.nr_in;
	*nr_out = h.nr_out;
	return 0;
}

/* A large buffer's pages mapped here in one call rather than a fault per
 * page as the server copies (the slots are shmem: no huge pages). Only a
 * hint: a kernel without MADV_POPULATE_* (5.14) just faults. */
static void populate(uint8_t *base, uint64_t size, const struct iovec *v, size_t n, bool write)
{
#if defined(MADV_POPULATE_READ) && defined(MADV_POPULATE_WRITE)
	const uintptr_t page = 4096;

	for (size_t i = 0; i < n; i++) {
		uintptr_t start = (uintptr_t)v[i].iov_base & ~(page - 1);
		uintptr_t end = ((uintptr_t)v[i].iov_base + v[i].iov_len + page - 1) & ~(page - 1);

		if (v[i].iov_len < POPULATE_MIN || start < (uintptr_t)base ||
		    end > (uintptr_t)base + size)
			continue;
		madvise((void *)start, end - start, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
	}
#else
	(void)base, (void)size, (void)v, (void)n, (void)write;
#endif
}

int share_rpc_serve(int sock, size_t thread, uint8_t *base, uint64_t size, struct fs_server *srv,
		    struct share_routes *routes)
{
	uint8_t msg[SHARE_RPC_MSG_MAX + 1];
	struct iovec in[SHARE_RPC_SEGS_MAX], out[SHARE_RPC_SEGS_MAX];

	for (;;) {
		struct share_rpc_reply rep = { 0 };
		size_t nr_in, nr_out;
		uint32_t op = 0;
		/* One byte more than the largest: a longer one is cut short
		 * (MSG_TRUNC says so) and refused. */
		ssize_t n = recv(sock, msg, sizeof(msg), MSG_TRUNC);

		if (n == 0)
			return 0;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if ((size_t)n <= SHARE_RPC_MSG_MAX &&
		    share_rpc_parse(msg, (size_t)n, base, size, &op, in, &nr_in, out, &nr_out) == 0) {
			if (op == SHARE_RPC_REQ) {
				populate(base, size, in, nr_in, false);
				populate(base, size, out, nr_out, true);
			}
			/* A snapshot's tables are this server's own: a share
			 * served behind it starts afresh. */
			if (op == SHARE_RPC_SAVE)
				rep.len = fs_server_save(srv, out[0].iov_base, out[0].iov_len);
			else if (op == SHARE_RPC_LOAD)
				rep.len = (uint64_t)fs_server_load(srv, in[0].iov_base, in[0].iov_len);
			else
				rep.len = share_routes_handle(routes, srv, thread, op, msg, (size_t)n,
							      in, nr_in, out, nr_out);
		}
		if (send(sock, &rep, sizeof(rep), MSG_NOSIGNAL) != sizeof(rep))
			return errno == EPIPE || errno == ECONNRESET ? 0 : -1;
	}
}
