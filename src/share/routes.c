/* The share worker's routes to the workers behind it (see routes.h). */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/unixsock.h"
#include "common/util.h"
#include "share/routes.h"
#include "share/server.h"

struct route {
	char tag[FS_TAG_MAX + 1];
	unsigned int route; /* 0: a free slot */
	int socks[SHARE_RPC_SOCKS_MAX];
	unsigned int busy; /* requests passed on and not back */
	bool closing;
};

struct share_routes {
	pthread_mutex_t lock;
	pthread_cond_t idle; /* a closing route's last request came back */
	size_t nr_threads;
	int mem_fd;
	uint64_t mem_size;
	struct route r[FS_MAX_EXPORTS];
};

struct share_routes *share_routes_new(size_t nr_threads, int mem_fd)
{
	struct share_routes *t;
	struct stat st;

	if (nr_threads == 0 || nr_threads > SHARE_RPC_SOCKS_MAX || fstat(mem_fd, &st) < 0)
		return NULL;
	t = xzalloc(sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->idle, NULL);
	t->nr_threads = nr_threads;
	t->mem_fd = mem_fd;
	t->mem_size = (uint64_t)st.st_size;
	return t;
}

static void close_socks(struct route *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (r->socks[i] >= 0)
			close(r->socks[i]);
}

void share_routes_free(struct share_routes *t)
{
	if (t == NULL)
		return;
	for (size_t i = 0; i < FS_MAX_EXPORTS; i++)
		if (t->r[i].route)
			close_socks(&t->r[i], t->nr_threads);
	close(t->mem_fd);
	pthread_cond_destroy(&t->idle);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

int share_routes_attach(struct share_routes *t, struct fs_server *srv, const char *tag,
			unsigned int route, int *socks, size_t n, gantry_error_t *err)
{
	struct share_rpc_hdr h = { .op = SHARE_RPC_MEM, .len = t->mem_size };
	struct route *slot = NULL;
	int ret = 0;

	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < FS_MAX_EXPORTS; i++) {
		if (t->r[i].route == route)
			ret = gantry_error(err, EEXIST, "share `%s`: route %u is taken", tag, route);
		else if (t->r[i].route == 0 && slot == NULL)
			slot = &t->r[i];
	}
	if (ret == 0 && n != t->nr_threads)
		ret = gantry_error(err, EINVAL, "share `%s`: %zu sockets for %zu threads", tag, n,
				   t->nr_threads);
	/* In the hub (a tag that is free, a route in range), then guest RAM
	 * to the worker behind, then its slot: a request taking the route
	 * waits for our lock, so none reaches it before its guest RAM. */
	if (ret == 0 && slot == NULL)
		ret = gantry_error(err, ENOSPC, "share `%s`: no room for it", tag);
	if (ret == 0)
		ret = fs_server_add_remote(srv, tag, route, err);
	h.minor = fs_server_minor(srv);
	if (ret == 0 && unix_send_fds(socks[0], &h, sizeof(h), &t->mem_fd, 1, MSG_NOSIGNAL) < 0) {
		ret = gantry_error_errno(err, "share `%s`: hand it guest RAM", tag);
		fs_server_remove_export(srv, tag, true, NULL);
	}
	if (ret == 0) {
		*slot = (struct route){ .route = route };
		strcpy(slot->tag, tag);
		memcpy(slot->socks, socks, n * sizeof(*socks));
	}
	pthread_mutex_unlock(&t->lock);
	if (ret < 0)
		for (size_t i = 0; i < n; i++)
			close(socks[i]);
	return ret;
}

bool share_routes_detach(struct share_routes *t, struct fs_server *srv, const char *tag)
{
	struct route *r = NULL;

	if (t == NULL)
		return false;
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < FS_MAX_EXPORTS && !r; i++)
		if (t->r[i].route && !t->r[i].closing && strcmp(t->r[i].tag, tag) == 0)
			r = &t->r[i];
	if (r) {
		r->closing = true;
		while (r->busy)
			pthread_cond_wait(&t->idle, &t->lock);
		close_socks(r, t->nr_threads);
		*r = (struct route){ .route = 0 };
	}
	pthread_mutex_unlock(&t->lock);
	if (r)
		fs_server_remove_export(srv, tag, true, NULL);
	return r != NULL;
}

/* The route's slot, held for one request; NULL when there is none. */
static struct route *take(struct share_routes *t, unsigned int route)
{
	struct route *r = NULL;

	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < FS_MAX_EXPORTS && !r; i++)
		if (t->r[i].route == route && !t->r[i].closing)
			r = &t->r[i];
	if (r)
		r->busy++;
	pthread_mutex_unlock(&t->lock);
	return r;
}

static void put(struct share_routes *t, struct route *r)
{
	pthread_mutex_lock(&t->lock);
	if (--r->busy == 0 && r->closing)
		pthread_cond_broadcast(&t->idle);
	pthread_mutex_unlock(&t->lock);
}

/* The message to the worker behind r on our thread's socket, and its
 * answer: false when it took or answered none (it is gone). */
static bool call(const struct route *r, size_t thread, const void *msg, size_t n, uint64_t *len)
{
	struct share_rpc_reply rep = { 0 };
	int sock = r->socks[thread];
	ssize_t k;

	while ((k = send(sock, msg, n, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	if (k == (ssize_t)n)
		while ((k = recv(sock, &rep, sizeof(rep), 0)) < 0 && errno == EINTR)
			;
	*len = rep.len;
	return k == (ssize_t)sizeof(rep);
}

/* To every worker behind, answers aside: they write the same reply. */
static void pass_all(struct share_routes *t, size_t thread, const void *msg, size_t n)
{
	unsigned int routes[FS_MAX_EXPORTS];
	size_t nr = 0;
	uint64_t len;

	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < FS_MAX_EXPORTS; i++)
		if (t->r[i].route && !t->r[i].closing)
			routes[nr++] = t->r[i].route;
	pthread_mutex_unlock(&t->lock);
	for (size_t i = 0; i < nr; i++) {
		struct route *r = take(t, routes[i]);

		if (r) {
			call(r, thread, msg, n, &len);
			put(t, r);
		}
	}
}

static uint64_t pass_on(struct share_routes *t, unsigned int route, size_t thread,
			const void *msg, size_t n, const struct iovec *in, size_t nr_in,
			const struct iovec *out, size_t nr_out)
{
	struct route *r = take(t, route);
	uint64_t room = 0, len;
	bool ok;

	/* A node of a share gone, or one never given. */
	if (r == NULL)
		return fs_error_reply(in, nr_in, out, nr_out, ESTALE);
	ok = call(r, thread, msg, n, &len);
	put(t, r);
	if (!ok)
		return fs_error_reply(in, nr_in, out, nr_out, EIO);
	for (size_t i = 0; i < nr_out; i++)
		room += out[i].iov_len;
	/* More than the chain holds is a worker gone wrong: no reply. */
	return len <= room ? len : 0;
}

uint64_t share_routes_handle(struct share_routes *t, struct fs_server *srv, size_t thread,
			     uint32_t op, const void *msg, size_t n, const struct iovec *in,
			     size_t nr_in, const struct iovec *out, size_t nr_out)
{
	unsigned int route;

	if (t && thread >= t->nr_threads)
		t = NULL; /* not one of ours: served here alone */
	if (op == SHARE_RPC_RESET) {
		if (t)
			pass_all(t, thread, msg, n);
		fs_server_reset(srv);
		return 0;
	}
	route = t ? fs_server_route(srv, in, nr_in) : 0;
	if (route == FS_ROUTE_ALL)
		pass_all(t, thread, msg, n);
	if (route == 0 || route == FS_ROUTE_ALL)
		return fs_server_handle(srv, in, nr_in, out, nr_out);
	return pass_on(t, route, thread, msg, n, in, nr_in, out, nr_out);
}
