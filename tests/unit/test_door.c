/* Doors (common/door.h): a dial reaches the server that opened the port's
 * door and no other; a port without one, a shut one or a replaced one
 * refuses; a door that fills refuses without blocking and takes dials
 * again once its server takes one. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/door.h"
#include "common/util.h"

static void round_trip(int a, int b)
{
	char buf[8];

	assert_int_equal(write(a, "ping", 4), 4);
	assert_int_equal(read(b, buf, sizeof(buf)), 4);
	assert_memory_equal(buf, "ping", 4);
	assert_int_equal(write(b, "pong", 4), 4);
	assert_int_equal(read(a, buf, sizeof(buf)), 4);
	assert_memory_equal(buf, "pong", 4);
}

static void test_dial_reaches_its_server(void **state)
{
	struct doors t = DOORS_INIT;
	int in = doors_open(&t, 1025, NULL), other = doors_open(&t, 1026, NULL);
	int c, s;

	(void)state;
	assert_true(in >= 0 && other >= 0);
	assert_int_equal(door_accept(in), -1);
	assert_int_equal(errno, EAGAIN);
	c = doors_dial(&t, 1025);
	assert_true(c >= 0);
	assert_true(fcntl(c, F_GETFL) & O_NONBLOCK);
	s = door_accept(in);
	assert_true(s >= 0);
	/* As accept4(SOCK_NONBLOCK | SOCK_CLOEXEC) would make it. */
	assert_true(fcntl(s, F_GETFL) & O_NONBLOCK);
	assert_true(fcntl(s, F_GETFD) & FD_CLOEXEC);
	/* The other port's server saw nothing. */
	assert_int_equal(door_accept(other), -1);
	assert_int_equal(errno, EAGAIN);
	assert_int_equal(fcntl(c, F_SETFL, 0), 0);
	assert_int_equal(fcntl(s, F_SETFL, 0), 0);
	round_trip(c, s);
	close(c);
	close(s);
	doors_free(&t);
	close(in);
	close(other);
}

static void test_refused(void **state)
{
	struct doors t = DOORS_INIT;
	int in, old, c, s;

	(void)state;
	/* No door. */
	assert_int_equal(doors_dial(&t, 1027), -1);
	assert_int_equal(errno, ECONNREFUSED);
	/* Shut: a dial made before is still taken, then the door says so. */
	in = doors_open(&t, 1027, NULL);
	c = doors_dial(&t, 1027);
	assert_true(in >= 0 && c >= 0);
	doors_shut(&t, 1027);
	assert_int_equal(doors_dial(&t, 1027), -1);
	assert_int_equal(errno, ECONNREFUSED);
	s = door_accept(in);
	assert_true(s >= 0);
	close(s);
	close(c);
	assert_int_equal(door_accept(in), -1);
	assert_int_equal(errno, EPIPE);
	close(in);
	/* A server gone: refused, not queued for nobody. */
	in = doors_open(&t, 1027, NULL);
	close(in);
	assert_int_equal(doors_dial(&t, 1027), -1);
	assert_int_equal(errno, ECONNREFUSED);
	/* Opened again: the earlier door is shut, the new one takes dials. */
	old = doors_open(&t, 1033, NULL);
	in = doors_open(&t, 1033, NULL);
	c = doors_dial(&t, 1033);
	assert_true(c >= 0);
	assert_int_equal(door_accept(old), -1);
	assert_int_equal(errno, EPIPE);
	s = door_accept(in);
	assert_true(s >= 0);
	close(s);
	close(c);
	close(old);
	close(in);
	doors_free(&t);
}

/* A guest that dials without end fills the door, as it would a listener's
 * backlog: refused at once, never blocking, with a few dozen waiting at
 * most (each a descriptor in flight, counted against the user's open-file
 * limit); taking one makes room. */
static void test_full_door(void **state)
{
	struct doors t = DOORS_INIT;
	int in = doors_open(&t, 1026, NULL), fds[256], n = 0, c, s;

	(void)state;
	assert_true(in >= 0);
	while (n < (int)ARRAY_SIZE(fds) && (fds[n] = doors_dial(&t, 1026)) >= 0)
		n++;
	assert_true(n >= 8);
	assert_true(n <= 64);
	assert_int_equal(errno, EAGAIN);
	s = door_accept(in);
	assert_true(s >= 0);
	close(s);
	c = doors_dial(&t, 1026);
	assert_true(c >= 0);
	close(c);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	doors_free(&t);
	close(in);
}

static void test_table_bound(void **state)
{
	struct doors t = DOORS_INIT;
	gantry_error_t err = NULL;
	int in[DOORS_MAX];

	(void)state;
	for (int i = 0; i < DOORS_MAX; i++) {
		in[i] = doors_open(&t, 2000 + (uint32_t)i, NULL);
		assert_true(in[i] >= 0);
	}
	assert_int_equal(doors_open(&t, 3000, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "host port 3000"));
	gantry_error_free(&err);
	doors_free(&t);
	for (int i = 0; i < DOORS_MAX; i++)
		close(in[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dial_reaches_its_server),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_full_door),
		cmocka_unit_test(test_table_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
