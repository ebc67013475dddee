/* The bounded outbound queue: what a peer does not take waits, in order,
 * up to the cap; a stalled peer is seen; an attached fd arrives with its
 * bytes. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/outq.h"
#include "common/util.h"

#define CAP (1024 * 1024)

static void pair(int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
}

/* Fill the socket so the next bytes must wait in the queue. */
static size_t fill(int fd)
{
	static const char junk[4096];
	size_t total = 0;
	ssize_t n;

	while ((n = send(fd, junk, sizeof(junk), MSG_DONTWAIT)) > 0)
		total += (size_t)n;
	assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
	return total;
}

static void drain(int fd, size_t n)
{
	char buf[4096];

	while (n > 0) {
		ssize_t got = read(fd, buf, MIN(n, sizeof(buf)));

		assert_true(got > 0);
		n -= (size_t)got;
	}
}

static void test_order_and_flush(void **state)
{
	struct outq q;
	int sv[2];
	size_t filled;
	char buf[16] = { 0 };

	(void)state;
	pair(sv);
	outq_init(&q, CAP);
	filled = fill(sv[0]);
	assert_int_equal(outq_send(&q, sv[0], "one ", 4, -1), 0);
	assert_int_equal(outq_send(&q, sv[0], "two", 3, -1), 0);
	assert_true(outq_pending(&q));
	assert_int_equal(q.bytes, 7);
	drain(sv[1], filled);
	assert_int_equal(outq_flush(&q, sv[0]), 0);
	assert_false(outq_pending(&q));
	assert_int_equal(read(sv[1], buf, sizeof(buf)), 7);
	assert_string_equal(buf, "one two");
	outq_free(&q);
	close(sv[0]);
	close(sv[1]);
}

static void test_cap(void **state)
{
	static char big[64 * 1024];
	struct outq q;
	int sv[2], i;

	(void)state;
	pair(sv);
	outq_init(&q, sizeof(big) * 4);
	fill(sv[0]);
	for (i = 0; i < 4; i++)
		assert_int_equal(outq_send(&q, sv[0], big, sizeof(big), -1), 0);
	/* A peer that reads nothing is never owed more than the cap. */
	assert_int_equal(outq_send(&q, sv[0], big, 1, -1), -1);
	assert_int_equal(errno, ENOBUFS);
	assert_int_equal(q.bytes, sizeof(big) * 4);
	outq_free(&q);
	assert_false(outq_pending(&q));
	close(sv[0]);
	close(sv[1]);
}

static void test_stalled(void **state)
{
	struct outq q;
	int sv[2];

	(void)state;
	pair(sv);
	outq_init(&q, CAP);
	assert_false(outq_stalled(&q, now_ms() + 100000, 10));
	fill(sv[0]);
	assert_int_equal(outq_send(&q, sv[0], "x", 1, -1), 0);
	assert_false(outq_stalled(&q, q.progress_at + 5, 10));
	assert_true(outq_stalled(&q, q.progress_at + 10, 10));
	outq_free(&q);
	close(sv[0]);
	close(sv[1]);
}

static void test_fd_passing(void **state)
{
	struct outq q;
	int sv[2], p[2], got = -1;
	size_t filled;
	char byte = 0, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;

	(void)state;
	pair(sv);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	outq_init(&q, CAP);
	filled = fill(sv[0]);
	assert_int_equal(outq_send(&q, sv[0], "S", 1, p[1]), 0);
	/* The queue holds its own copy of the fd. */
	close(p[1]);
	drain(sv[1], filled);
	assert_int_equal(outq_flush(&q, sv[0]), 0);
	assert_int_equal(recvmsg(sv[1], &msg, 0), 1);
	assert_int_equal(byte, 'S');
	cm = CMSG_FIRSTHDR(&msg);
	assert_non_null(cm);
	memcpy(&got, CMSG_DATA(cm), sizeof(got));
	assert_int_equal(write(got, "y", 1), 1);
	assert_int_equal(read(p[0], &byte, 1), 1);
	assert_int_equal(byte, 'y');
	close(got);
	close(p[0]);
	outq_free(&q);
	close(sv[0]);
	close(sv[1]);
}

static void test_broken_peer(void **state)
{
	struct outq q;
	int sv[2];

	(void)state;
	pair(sv);
	outq_init(&q, CAP);
	close(sv[1]);
	assert_int_equal(outq_send(&q, sv[0], "x", 1, -1), -1);
	assert_int_equal(errno, EPIPE);
	outq_free(&q);
	close(sv[0]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_and_flush), cmocka_unit_test(test_cap),
		cmocka_unit_test(test_stalled),		cmocka_unit_test(test_fd_passing),
		cmocka_unit_test(test_broken_peer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
