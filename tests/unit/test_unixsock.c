/* Unit tests for common/unixsock.c's connecting side: unix_connect() to a
 * listener, as asked (blocking or not, close-on-exec), its errors kept,
 * and unix_connect_at() for a directory whose path is longer than a
 * socket address holds. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/unixsock.h"
#include "common/util.h"

static char dir[512];

static int setup(void **state)
{
	const char *tmp = getenv("TMPDIR");

	(void)state;
	snprintf(dir, sizeof(dir), "%s/gantry-unixsock-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[600];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_connect(void **state)
{
	char path[600];
	gantry_error_t err = NULL;
	int l, c, a;

	(void)state;
	snprintf(path, sizeof(path), "%s/s.sock", dir);
	l = unix_listen(path, 4, &err);
	assert_true(l >= 0);
	c = unix_connect(path, 0);
	assert_true(c >= 0);
	assert_true(fcntl(c, F_GETFD) & FD_CLOEXEC);
	assert_false(fcntl(c, F_GETFL) & O_NONBLOCK);
	a = accept(l, NULL, NULL);
	assert_true(a >= 0);
	assert_int_equal(write(c, "x", 1), 1);
	close(c);
	close(a);
	c = unix_connect(path, SOCK_NONBLOCK);
	assert_true(c >= 0);
	assert_true(fcntl(c, F_GETFL) & O_NONBLOCK);
	close(c);
	close(l);
	/* Nobody there: the connect's own errno. */
	assert_int_equal(unix_connect(path, 0), -1);
	assert_true(errno == ECONNREFUSED || errno == ENOENT);
	unlink(path);
	assert_int_equal(unix_connect(path, 0), -1);
	assert_int_equal(errno, ENOENT);
}

static void test_long_paths(void **state)
{
	char deep[700], path[800];
	gantry_error_t err = NULL;
	int d, l, c;

	(void)state;
	/* A directory past sun_path's 108 bytes. */
	snprintf(deep, sizeof(deep), "%s/%0120d", dir, 0);
	assert_int_equal(mkdir(deep, 0700), 0);
	snprintf(path, sizeof(path), "%s/s.sock", deep);
	assert_false(unix_path_fits(path));
	assert_int_equal(unix_connect(path, 0), -1);
	assert_int_equal(errno, ENAMETOOLONG);
	d = open(deep, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(d >= 0);
	{
		/* Listened on through the directory's fd, too. */
		char via[64];

		snprintf(via, sizeof(via), "/proc/self/fd/%d/s.sock", d);
		assert_true(unix_path_fits(via));
		l = unix_listen(via, 4, &err);
		assert_true(l >= 0);
	}
	c = unix_connect_at(d, "s.sock", 0);
	assert_true(c >= 0);
	close(c);
	close(l);
	close(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_connect, setup, teardown),
		cmocka_unit_test_setup_teardown(test_long_paths, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
