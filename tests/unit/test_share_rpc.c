/* The share server's requests across processes (share/rpc.h): the
 * message's bounds as the share worker checks them (a VMM worker gone
 * hostile may send anything), the VMM's encoding of iovecs in guest RAM
 * as memfd offsets, and a request served over a socketpair with a buffer
 * standing in for the memfd. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/unixsock.h"
#include "common/util.h"
#include "share/rpc.h"
#include "share/server.h"
#include "virtio/devices.h"
#include "vmm/memory.h"

#define MEM (1u << 20)

static uint8_t mem[MEM];

struct msg {
	struct share_rpc_hdr h;
	struct share_rpc_seg s[SHARE_RPC_SEGS_MAX + 2];
};

static size_t msg_len(const struct msg *m)
{
	return sizeof(m->h) + ((size_t)m->h.nr_in + m->h.nr_out) * sizeof(m->s[0]);
}

static int parse(const struct msg *m, size_t n)
{
	struct iovec in[SHARE_RPC_SEGS_MAX], out[SHARE_RPC_SEGS_MAX];
	size_t nr_in, nr_out;
	uint32_t op;

	return share_rpc_parse(m, n, mem, MEM, &op, in, &nr_in, out, &nr_out);
}

static struct msg req(uint32_t nr_in, uint32_t nr_out)
{
	struct msg m = { .h = { .op = SHARE_RPC_REQ, .nr_in = nr_in, .nr_out = nr_out } };

	for (uint32_t i = 0; i < nr_in + nr_out && i < ARRAY_SIZE(m.s); i++)
		m.s[i] = (struct share_rpc_seg){ i * 64, 64 };
	return m;
}

static void test_parse_good(void **state)
{
	struct msg m = req(2, 1);
	struct iovec in[SHARE_RPC_SEGS_MAX], out[SHARE_RPC_SEGS_MAX];
	size_t nr_in, nr_out;
	uint32_t op;

	(void)state;
	m.s[2] = (struct share_rpc_seg){ MEM - 16, 16 }; /* to the very end */
	assert_int_equal(share_rpc_parse(&m, msg_len(&m), mem, MEM, &op, in, &nr_in, out, &nr_out), 0);
	assert_int_equal(op, SHARE_RPC_REQ);
	assert_int_equal(nr_in, 2);
	assert_int_equal(nr_out, 1);
	assert_ptr_equal(in[1].iov_base, mem + 64);
	assert_ptr_equal(out[0].iov_base, mem + MEM - 16);
	assert_int_equal(out[0].iov_len, 16);
	/* The most a chain holds. */
	m = req(1, SHARE_RPC_SEGS_MAX - 1);
	assert_int_equal(parse(&m, msg_len(&m)), 0);
	/* Empty segments at the end are no bytes out of bounds. */
	m = req(1, 1);
	m.s[1] = (struct share_rpc_seg){ MEM, 0 };
	assert_int_equal(parse(&m, msg_len(&m)), 0);
	m = (struct msg){ .h = { .op = SHARE_RPC_RESET } };
	assert_int_equal(share_rpc_parse(&m, sizeof(m.h), mem, MEM, &op, in, &nr_in, out, &nr_out), 0);
	assert_int_equal(op, SHARE_RPC_RESET);
	/* A snapshot's tables: out to one segment, in from one. */
	m = req(0, 1);
	m.h.op = SHARE_RPC_SAVE;
	assert_int_equal(share_rpc_parse(&m, msg_len(&m), mem, MEM, &op, in, &nr_in, out, &nr_out), 0);
	assert_true(op == SHARE_RPC_SAVE && nr_in == 0 && nr_out == 1);
	m = req(1, 0);
	m.h.op = SHARE_RPC_LOAD;
	assert_int_equal(share_rpc_parse(&m, msg_len(&m), mem, MEM, &op, in, &nr_in, out, &nr_out), 0);
	assert_true(op == SHARE_RPC_LOAD && nr_in == 1 && nr_out == 0);
}

static void test_parse_hostile(void **state)
{
	static const struct share_rpc_seg bad[] = {
		{ MEM + 1, 0 },		/* past the end */
		{ MEM - 16, 17 },	/* runs past it */
		{ MEM, 1 },		/* starts at it */
		{ UINT64_MAX, 1 },	/* wraps */
		{ UINT64_MAX - 7, 16 }, /* off + len wraps to inside */
		{ 64, UINT64_MAX },	/* a length that wraps */
		{ 0, MEM + 1 },		/* longer than all of it */
	};
	struct msg m;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		m = req(1, 2);
		m.s[i % 3] = bad[i];
		assert_int_equal(parse(&m, msg_len(&m)), -1);
	}
	/* Counts: too many on one side, in all, none of either in all. */
	m = req(SHARE_RPC_SEGS_MAX + 1, 0);
	assert_int_equal(parse(&m, sizeof(m)), -1);
	m = req(SHARE_RPC_SEGS_MAX, 1);
	assert_int_equal(parse(&m, sizeof(m.h) + (SHARE_RPC_SEGS_MAX + 1) * sizeof(m.s[0])), -1);
	m = req(1, 1);
	m.h.nr_in = UINT32_MAX;
	m.h.nr_out = 2; /* the sum wraps to 1 in 32 bits */
	assert_int_equal(parse(&m, sizeof(m.h) + sizeof(m.s[0])), -1);
	/* A message shorter or longer than its counts say; a header cut short. */
	m = req(2, 2);
	assert_int_equal(parse(&m, msg_len(&m) - 1), -1);
	assert_int_equal(parse(&m, msg_len(&m) + sizeof(m.s[0])), -1);
	assert_int_equal(parse(&m, sizeof(m.h) - 1), -1);
	assert_int_equal(parse(&m, 0), -1);
	/* Unknown ops, MEM after the start, a RESET with more. */
	m = req(1, 1);
	m.h.op = 0;
	assert_int_equal(parse(&m, msg_len(&m)), -1);
	m.h.op = SHARE_RPC_MEM;
	assert_int_equal(parse(&m, msg_len(&m)), -1);
	m.h.op = SHARE_RPC_RESET;
	assert_int_equal(parse(&m, msg_len(&m)), -1);
	/* SAVE and LOAD of any other shape. */
	m.h.op = SHARE_RPC_SAVE;
	assert_int_equal(parse(&m, msg_len(&m)), -1);
	m = req(0, 0);
	m.h.op = SHARE_RPC_SAVE;
	assert_int_equal(parse(&m, msg_len(&m)), -1);
	m = req(0, 1);
	m.h.op = SHARE_RPC_LOAD;
	assert_int_equal(parse(&m, msg_len(&m)), -1);
	m = req(2, 0);
	m.h.op = SHARE_RPC_LOAD;
	assert_int_equal(parse(&m, msg_len(&m)), -1);
	m = req(1, 0);
	m.h.op = SHARE_RPC_LOAD;
	m.s[0] = (struct share_rpc_seg){ MEM - 16, 17 };
	assert_int_equal(parse(&m, msg_len(&m)), -1);
}

static void test_encode(void **state)
{
	static uint8_t lo[4096], hi[4096];
	struct guest_mem g = { .nr_regions = 2, .ram_size = 8192, .fd = -1 };
	struct iovec in[] = { { lo + 10, 100 }, { hi, 4096 } };
	struct iovec out[] = { { hi + 4000, 96 } };
	struct iovec outside[] = { { hi + 4000, 97 } };
	struct msg m;
	size_t n;

	(void)state;
	g.regions[0] = (struct guest_region){ .gpa = 0, .size = sizeof(lo), .hva = lo };
	g.regions[1] = (struct guest_region){ .gpa = 1ULL << 32, .size = sizeof(hi), .hva = hi,
					      .fd_off = sizeof(lo) };
	n = share_rpc_encode(&g, in, 2, out, 1, &m, sizeof(m));
	assert_int_equal(n, sizeof(m.h) + 3 * sizeof(m.s[0]));
	assert_int_equal(m.s[0].off, 10);
	assert_int_equal(m.s[1].off, 4096);
	assert_int_equal(m.s[1].len, 4096);
	assert_int_equal(m.s[2].off, 4096 + 4000);
	/* A buffer that leaves its region, or lies in none. */
	assert_int_equal(share_rpc_encode(&g, in, 2, outside, 1, &m, sizeof(m)), 0);
	outside[0] = (struct iovec){ mem, 1 };
	assert_int_equal(share_rpc_encode(&g, in, 2, outside, 1, &m, sizeof(m)), 0);
	/* Too many for one message. */
	{
		static struct iovec many[SHARE_RPC_SEGS_MAX + 1];

		for (size_t i = 0; i < ARRAY_SIZE(many); i++)
			many[i] = (struct iovec){ lo, 1 };
		assert_int_equal(share_rpc_encode(&g, many, 1, many, SHARE_RPC_SEGS_MAX, &m,
						  sizeof(m)),
				 0);
	}
}

/* ---- served over a socketpair ---------------------------------------------------------- */

struct served {
	int sock;
	struct fs_server *srv;
	int rc;
};

static void *serve(void *arg)
{
	struct served *s = arg;

	s->rc = share_rpc_serve(s->sock, 0, mem, MEM, s->srv, NULL);
	return NULL;
}

/* As the share worker does: the slots' memfd first (MEM), then serve. */
static void *serve_mem(void *arg)
{
	struct served *s = arg;
	struct share_rpc_hdr h;
	size_t n = 0;
	int fd = -1;
	uint8_t *base;

	if (unix_recv_fds(s->sock, &h, sizeof(h), &fd, 1, &n, 0) != (ssize_t)sizeof(h) || n != 1 ||
	    h.op != SHARE_RPC_MEM || (base = guest_ram_map(h.len, fd, 0)) == NULL) {
		s->rc = -3;
		return NULL;
	}
	close(fd);
	s->rc = share_rpc_serve(s->sock, 0, base, h.len, s->srv, NULL);
	munmap(base, h.len);
	return NULL;
}

static uint64_t call(int sock, const void *msg, size_t n)
{
	struct share_rpc_reply rep = { UINT64_MAX };

	assert_int_equal(send(sock, msg, n, 0), (ssize_t)n);
	assert_int_equal(recv(sock, &rep, sizeof(rep), 0), sizeof(rep));
	return rep.len;
}

/* FUSE_INIT at offset 0, its reply's room at 4096. */
static struct msg init_request(void)
{
	struct fuse_in_header ih = { .len = sizeof(ih) + sizeof(struct fuse_init_in),
				     .opcode = FUSE_INIT,
				     .unique = 7 };
	struct fuse_init_in ii = { .major = FUSE_KERNEL_VERSION, .minor = 31, .max_readahead = 65536 };
	struct msg m = req(1, 1);

	memset(mem, 0, 8192);
	memcpy(mem, &ih, sizeof(ih));
	memcpy(mem + sizeof(ih), &ii, sizeof(ii));
	m.s[0] = (struct share_rpc_seg){ 0, ih.len };
	m.s[1] = (struct share_rpc_seg){ 4096, 4096 };
	return m;
}

static void test_serve(void **state)
{
	struct served s = { .rc = -2 };
	gantry_error_t err = NULL;
	struct fuse_out_header oh;
	pthread_t t;
	int sv[2];
	struct msg m;
	uint8_t big[SHARE_RPC_MSG_MAX + 64] = { 0 };
	uint64_t len;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	assert_int_equal(fs_server_new(&s.srv, 64, 0, &err), 0);
	s.sock = sv[1];
	assert_int_equal(pthread_create(&t, NULL, serve, &s), 0);

	m = init_request();
	len = call(sv[0], &m, msg_len(&m));
	assert_true(len > sizeof(oh) && len <= 4096);
	memcpy(&oh, mem + 4096, sizeof(oh));
	assert_int_equal(oh.unique, 7);
	assert_int_equal(oh.len, len);
	assert_int_equal(oh.error, 0);

	/* Hostile: nothing served, 0 bytes, and the server goes on. */
	m = init_request();
	m.s[1] = (struct share_rpc_seg){ MEM - 8, 4096 };
	memset(mem + MEM - 8, 0xaa, 8);
	assert_int_equal(call(sv[0], &m, msg_len(&m)), 0);
	assert_int_equal(mem[MEM - 1], 0xaa);
	m.s[1] = (struct share_rpc_seg){ UINT64_MAX - 4095, 4096 };
	assert_int_equal(call(sv[0], &m, msg_len(&m)), 0);
	m = init_request();
	m.h.nr_out = SHARE_RPC_SEGS_MAX;
	assert_int_equal(call(sv[0], &m, sizeof(m.h) + 2 * sizeof(m.s[0])), 0);
	/* A message longer than any request: cut short, refused. */
	memcpy(big, &m, sizeof(m.h));
	assert_int_equal(call(sv[0], big, sizeof(big)), 0);
	assert_int_equal(call(sv[0], big, 3), 0);

	/* A reset, answered. */
	m = (struct msg){ .h = { .op = SHARE_RPC_RESET } };
	assert_int_equal(call(sv[0], &m, sizeof(m.h)), 0);

	/* Still serving. */
	m = init_request();
	assert_int_equal(call(sv[0], &m, msg_len(&m)), len);

	/* A hang-up ends it. */
	close(sv[0]);
	pthread_join(t, NULL);
	assert_int_equal(s.rc, 0);
	close(sv[1]);
	fs_server_free(s.srv);
}

/* The VMM's handler against the server thread, guest RAM the buffer:
 * the request copied into a slot of the memfd the server maps, the reply
 * copied back into the guest's buffers. */
static void test_client(void **state)
{
	struct served s = { .rc = -2 };
	struct share_rpc_client c;
	struct virtio_fs_handler h;
	struct guest_mem g;
	gantry_error_t err = NULL;
	struct iovec in[1], out[2];
	pthread_t t;
	int sv[2];
	struct msg m;
	size_t n;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	assert_int_equal(fs_server_new(&s.srv, 64, 0, &err), 0);
	s.sock = sv[1];
	assert_int_equal(pthread_create(&t, NULL, serve_mem, &s), 0);
	guest_mem_init_buffer(&g, mem, MEM);
	share_rpc_client_init(&c, &sv[0], 1, &h);
	/* No RAM yet: nothing is sent. */
	in[0] = (struct iovec){ mem, 64 };
	out[0] = (struct iovec){ mem + 4096, 4096 };
	assert_int_equal(h.handle(h.opaque, in, 1, out, 1), 0);
	assert_int_equal(share_rpc_client_send_mem(&c), -EINVAL);
	h.attach(h.opaque, &g);
	/* ... nor without the slots. */
	assert_int_equal(h.handle(h.opaque, in, 1, out, 1), 0);
	assert_int_equal(share_rpc_client_send_mem(&c), 0);
	assert_int_equal(share_rpc_client_send_mem(&c), -EINVAL); /* once */

	/* INIT, its reply split over two buffers. */
	m = init_request();
	memset(mem + 4096, 0, 4096);
	in[0] = (struct iovec){ mem, m.s[0].len };
	out[0] = (struct iovec){ mem + 4096, 16 };
	out[1] = (struct iovec){ mem + 4096 + 16, 4096 - 16 };
	n = h.handle(h.opaque, in, 1, out, 2);
	assert_true(n > 16 && n <= 4096);
	{
		struct fuse_out_header o;

		memcpy(&o, mem + 4096, sizeof(o));
		assert_int_equal(o.len, n);
		assert_int_equal(o.error, 0);
	}
	/* An iovec outside guest RAM never leaves the VMM. */
	out[1] = (struct iovec){ (uint8_t *)&m, 16 };
	assert_int_equal(h.handle(h.opaque, in, 1, out, 2), 0);
	/* More to read than a slot holds: EIO, not sent. */
	{
		struct iovec big[2] = { { mem, MEM }, { mem, MEM } };
		struct fuse_out_header o;

		out[0] = (struct iovec){ mem + 4096, 64 };
		assert_int_equal(h.handle(h.opaque, big, 2, out, 1), sizeof(o));
		memcpy(&o, mem + 4096, sizeof(o));
		assert_int_equal(o.error, -EIO);
	}
	/* The server's tables, through the slots. */
	{
		uint8_t *blob = NULL;
		size_t len = h.save(h.opaque, &blob);
		uint32_t magic;

		assert_true(len >= 28 && blob != NULL);
		memcpy(&magic, blob, 4);
		assert_int_equal(magic, 0x4e534647u);
		free(blob);
	}
	h.reset(h.opaque);

	close(sv[0]);
	pthread_join(t, NULL);
	assert_int_equal(s.rc, 0);
	close(sv[1]);
	share_rpc_client_free(&c);
	fs_server_free(s.srv);
}

/* The share worker gone: the guest's request fails with EIO, its unique
 * kept; a FORGET, which awaits no reply, gets none. */
static void test_worker_gone(void **state)
{
	struct share_rpc_client c;
	struct virtio_fs_handler h;
	struct guest_mem g;
	struct fuse_in_header in_h = { .len = sizeof(in_h), .opcode = FUSE_LOOKUP, .unique = 42 };
	struct fuse_out_header o;
	struct iovec in[1], out[1];
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	close(sv[1]);
	guest_mem_init_buffer(&g, mem, MEM);
	share_rpc_client_init(&c, &sv[0], 1, &h);
	h.attach(h.opaque, &g);
	assert_true(share_rpc_client_send_mem(&c) < 0); /* nobody to take it */
	memcpy(mem, &in_h, sizeof(in_h));
	memset(mem + 4096, 0xff, 64);
	in[0] = (struct iovec){ mem, sizeof(in_h) };
	out[0] = (struct iovec){ mem + 4096, 64 };
	assert_int_equal(h.handle(h.opaque, in, 1, out, 1), sizeof(o));
	memcpy(&o, mem + 4096, sizeof(o));
	assert_int_equal(o.len, sizeof(o));
	assert_int_equal(o.error, -EIO);
	assert_int_equal(o.unique, 42);
	in_h.opcode = FUSE_FORGET;
	memcpy(mem, &in_h, sizeof(in_h));
	assert_int_equal(h.handle(h.opaque, in, 1, out, 1), 0);
	h.reset(h.opaque); /* returns, answered or not */
	close(sv[0]);
	share_rpc_client_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_good),	cmocka_unit_test(test_parse_hostile),
		cmocka_unit_test(test_encode),		cmocka_unit_test(test_serve),
		cmocka_unit_test(test_client),		cmocka_unit_test(test_worker_gone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
