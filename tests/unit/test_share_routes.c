/* A share added live, served behind the first server (share/routes.h):
 * a front server with one export of its own and a server behind it with
 * another, each on a thread serving its socket as the share workers do,
 * guest RAM one memfd both map. The hub lists both; a lookup of the
 * share behind goes to its server and its node ids carry its route; the
 * front never serves them; once detached they are stale. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/unixsock.h"
#include "common/util.h"
#include "share/routes.h"
#include "share/rpc.h"
#include "share/server.h"

#define MEM   (1u << 20)
#define REPLY 65536u /* where replies go in guest RAM */
#define ROUTE 5u

static uint8_t *mem;
static uint64_t unique = 1;

struct served {
	int sock;
	struct fs_server *srv;
	struct share_routes *routes;
	bool behind; /* takes guest RAM first, as a worker behind does */
	uint32_t minor;
};

static void *serve(void *arg)
{
	struct served *s = arg;

	if (s->behind) {
		struct share_rpc_hdr h;
		size_t n = 0;
		int fd = -1;

		assert_int_equal(unix_recv_fds(s->sock, &h, sizeof(h), &fd, 1, &n, 0), sizeof(h));
		assert_int_equal(n, 1);
		assert_int_equal(h.op, SHARE_RPC_MEM);
		assert_int_equal(h.len, MEM);
		close(fd);
		s->minor = h.minor;
		fs_server_assume_init(s->srv, h.minor);
	}
	share_rpc_serve(s->sock, 0, mem, MEM, s->srv, s->routes);
	return NULL;
}

/* One request through the front: header and args at 0, reply at REPLY.
 * Its error (0 or a negative errno); the reply's payload into out. */
static int call(int sock, uint32_t opcode, uint64_t nodeid, const void *args, size_t len,
		void *out, size_t out_len)
{
	struct fuse_in_header ih = { .len = (uint32_t)(sizeof(ih) + len),
				     .opcode = opcode,
				     .unique = ++unique,
				     .nodeid = nodeid };
	struct {
		struct share_rpc_hdr h;
		struct share_rpc_seg s[2];
	} m = { .h = { .op = SHARE_RPC_REQ, .nr_in = 1, .nr_out = 1 },
		.s = { { 0, ih.len }, { REPLY, 8192 } } };
	struct share_rpc_reply rep = { 0 };
	struct fuse_out_header oh;

	memcpy(mem, &ih, sizeof(ih));
	memcpy(mem + sizeof(ih), args, len);
	memset(mem + REPLY, 0, 8192);
	assert_int_equal(send(sock, &m, sizeof(m), 0), sizeof(m));
	assert_int_equal(recv(sock, &rep, sizeof(rep), 0), sizeof(rep));
	if (rep.len == 0)
		return 1; /* no reply */
	memcpy(&oh, mem + REPLY, sizeof(oh));
	assert_int_equal(oh.unique, unique);
	assert_int_equal(oh.len, rep.len);
	if (out)
		memcpy(out, mem + REPLY + sizeof(oh), MIN(out_len, rep.len - sizeof(oh)));
	return oh.error;
}

/* A lookup's node; a negative entry (node 0) is -ENOENT. */
static int lookup(int sock, uint64_t dir, const char *name, uint64_t *id)
{
	struct fuse_entry_out e = { 0 };
	int r = call(sock, FUSE_LOOKUP, dir, name, strlen(name) + 1, &e, sizeof(e));

	*id = e.nodeid;
	return r == 0 && e.nodeid == 0 ? -ENOENT : r;
}

static char *dir_with(const char *file)
{
	char *d = xstrdup("/tmp/gantry-routes.XXXXXX");
	cleanup_free char *p = NULL;
	FILE *f;

	assert_non_null(mkdtemp(d));
	xasprintf(&p, "%s/%s", d, file);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(file, f);
	fclose(f);
	return d;
}

static void rm_dir(char *d, const char *file)
{
	cleanup_free char *p = NULL;

	xasprintf(&p, "%s/%s", d, file);
	unlink(p);
	rmdir(d);
	free(d);
}

static void export(struct fs_server *srv, const char *tag, const char *dir)
{
	struct fs_export_opts o = { .ro = false };
	gantry_error_t err = NULL;
	int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(fs_server_add_export(srv, tag, fd, &o, &err), 0);
	close(fd);
}

static void test_served_behind(void **state)
{
	struct served front = { 0 }, behind = { .behind = true };
	struct fuse_init_in ii = { .major = FUSE_KERNEL_VERSION, .minor = 31 };
	struct fuse_getattr_in ga = { 0 };
	struct fuse_attr_out ao;
	gantry_error_t err = NULL;
	char *a = dir_with("fa"), *b = dir_with("fb");
	uint64_t id, root_b, file_b;
	int fsock[2], bsock[2], memfd;
	pthread_t ft, bt;

	(void)state;
	memfd = memfd_create("guest-ram", MFD_CLOEXEC);
	assert_true(memfd >= 0);
	assert_int_equal(ftruncate(memfd, MEM), 0);
	mem = mmap(NULL, MEM, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	assert_true(mem != MAP_FAILED);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, fsock), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, bsock), 0);
	assert_int_equal(fs_server_new(&front.srv, 64, 0, &err), 0);
	assert_int_equal(fs_server_new(&behind.srv, 64, ROUTE, &err), 0);
	export(front.srv, "a", a);
	export(behind.srv, "b", b);
	front.sock = fsock[1];
	front.routes = share_routes_new(1, memfd);
	assert_non_null(front.routes);
	behind.sock = bsock[1];
	assert_int_equal(pthread_create(&ft, NULL, serve, &front), 0);
	assert_int_equal(pthread_create(&bt, NULL, serve, &behind), 0);

	/* The guest's INIT reaches the front; the one behind starts as if
	 * it had seen it. */
	assert_int_equal(call(fsock[0], FUSE_INIT, 0, &ii, sizeof(ii), NULL, 0), 0);
	assert_int_equal(fs_server_minor(front.srv), 31);
	assert_int_equal(lookup(fsock[0], FUSE_ROOT_ID, "b", &id), -ENOENT);
	/* A tag the front has is refused, the sockets closed with it. */
	{
		int sv[2];

		assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
		assert_int_equal(share_routes_attach(front.routes, front.srv, "a", ROUTE + 1, &sv[0],
						     1, &err),
				 -1);
		gantry_error_free(&err);
		close(sv[1]);
	}
	assert_int_equal(share_routes_attach(front.routes, front.srv, "b", ROUTE, &bsock[0], 1, &err),
			 0);

	/* Each share from its own server, named by its node ids. */
	assert_int_equal(lookup(fsock[0], FUSE_ROOT_ID, "a", &id), 0);
	assert_int_equal(id >> FS_ROUTE_SHIFT, 0);
	assert_int_equal(lookup(fsock[0], FUSE_ROOT_ID, "b", &root_b), 0);
	assert_int_equal(root_b >> FS_ROUTE_SHIFT, ROUTE);
	assert_int_equal(behind.minor, 31);
	assert_int_equal(lookup(fsock[0], root_b, "fb", &file_b), 0);
	assert_int_equal(file_b >> FS_ROUTE_SHIFT, ROUTE);
	assert_int_equal(call(fsock[0], FUSE_GETATTR, file_b, &ga, sizeof(ga), &ao, sizeof(ao)), 0);
	assert_int_equal(ao.attr.size, 2);
	/* What one server has, the other does not: fa is a's, not b's. */
	assert_int_equal(lookup(fsock[0], root_b, "fa", &id), -ENOENT);
	/* A route nobody has: stale. */
	assert_int_equal(call(fsock[0], FUSE_GETATTR, (uint64_t)(ROUTE + 1) << FS_ROUTE_SHIFT | 2,
			      &ga, sizeof(ga), NULL, 0),
			 -ESTALE);
	/* The one behind's, asked of the front alone: it knows no such node. */
	{
		struct fuse_in_header ih = { .len = sizeof(ih) + sizeof(ga),
					     .opcode = FUSE_GETATTR,
					     .nodeid = file_b };
		struct iovec in = { &ih, sizeof(ih) }, out = { mem + REPLY, 4096 };
		struct fuse_out_header oh;

		assert_int_equal(fs_server_route(front.srv, &in, 1), ROUTE);
		in.iov_len = ih.len;
		memcpy(mem, &ih, sizeof(ih));
		memcpy(mem + sizeof(ih), &ga, sizeof(ga));
		in.iov_base = mem;
		assert_true(fs_server_handle(front.srv, &in, 1, &out, 1) > 0);
		memcpy(&oh, mem + REPLY, sizeof(oh));
		assert_int_equal(oh.error, -ESTALE);
	}

	/* Detached: its tag and its nodes are gone from the guest's view. */
	assert_true(share_routes_detach(front.routes, front.srv, "b"));
	assert_false(share_routes_detach(front.routes, front.srv, "b"));
	assert_int_equal(call(fsock[0], FUSE_GETATTR, file_b, &ga, sizeof(ga), NULL, 0), -ESTALE);
	assert_int_equal(lookup(fsock[0], FUSE_ROOT_ID, "b", &id), -ENOENT);
	assert_int_equal(lookup(fsock[0], FUSE_ROOT_ID, "a", &id), 0);
	/* The one behind saw its socket close: it ends. */
	pthread_join(bt, NULL);

	close(fsock[0]);
	pthread_join(ft, NULL);
	close(fsock[1]);
	close(bsock[1]);
	share_routes_free(front.routes);
	fs_server_free(front.srv);
	fs_server_free(behind.srv);
	munmap(mem, MEM);
	rm_dir(a, "fa");
	rm_dir(b, "fb");
}

/* The hub lists a share behind with the front's own; the lookup of its
 * tag, and only that, is routed. */
static void test_route_of_requests(void **state)
{
	struct fs_server *srv;
	gantry_error_t err = NULL;
	struct {
		struct fuse_in_header h;
		char name[64];
	} q = { .h = { .opcode = FUSE_LOOKUP, .nodeid = FUSE_ROOT_ID } };
	struct iovec in = { &q, 0 };

	(void)state;
	assert_int_equal(fs_server_new(&srv, 64, 0, &err), 0);
	assert_int_equal(fs_server_add_remote(srv, "live", 9, &err), 0);
	assert_int_equal(fs_server_add_remote(srv, "live", 10, &err), -1);
	gantry_error_free(&err);
	assert_int_equal(fs_server_add_remote(srv, "zero", 0, &err), -1);
	gantry_error_free(&err);
	strcpy(q.name, "live");
	q.h.len = (uint32_t)(sizeof(q.h) + 5);
	in.iov_len = q.h.len;
	assert_int_equal(fs_server_route(srv, &in, 1), 9);
	/* Not terminated inside the request: not a tag. */
	q.h.len = (uint32_t)(sizeof(q.h) + 4);
	in.iov_len = q.h.len;
	assert_int_equal(fs_server_route(srv, &in, 1), 0);
	q.h.len = (uint32_t)(sizeof(q.h) + 5);
	in.iov_len = q.h.len;
	q.h.nodeid = 3;
	assert_int_equal(fs_server_route(srv, &in, 1), 0);
	q.h.opcode = FUSE_BATCH_FORGET;
	assert_int_equal(fs_server_route(srv, &in, 1), FS_ROUTE_ALL);
	q.h.opcode = FUSE_INIT;
	assert_int_equal(fs_server_route(srv, &in, 1), FS_ROUTE_ALL);
	q.h.opcode = FUSE_READ;
	q.h.nodeid = UINT64_MAX;
	assert_int_equal(fs_server_route(srv, &in, 1), FS_ROUTE_MAX);
	/* Too short for a header: ours to refuse. */
	in.iov_len = 8;
	assert_int_equal(fs_server_route(srv, &in, 1), 0);
	assert_int_equal(fs_server_remove_export(srv, "live", false, &err), 0);
	in.iov_len = q.h.len;
	q.h.opcode = FUSE_LOOKUP;
	q.h.nodeid = FUSE_ROOT_ID;
	assert_int_equal(fs_server_route(srv, &in, 1), 0);
	fs_server_free(srv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_served_behind),
		cmocka_unit_test(test_route_of_requests),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
