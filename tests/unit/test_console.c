/* Unit tests for vmm/console.c: the guest console's log and its size cap,
 * driven without a VM the way the UART flushes its lines into it. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/files.h"
#include "common/util.h"
#include "vmm/console.h"

struct dir {
	char path[64];
	char log[96], old[96];
};

static int dir_setup(void **state)
{
	struct dir *d = xzalloc(sizeof(*d));

	snprintf(d->path, sizeof(d->path), "/tmp/gantry-console-XXXXXX");
	assert_non_null(mkdtemp(d->path));
	snprintf(d->log, sizeof(d->log), "%s/console.log", d->path);
	snprintf(d->old, sizeof(d->old), "%s/console.log%s", d->path, CONSOLE_ROTATED);
	*state = d;
	return 0;
}

static int dir_teardown(void **state)
{
	struct dir *d = *state;

	rm_tree(d->path);
	free(d);
	return 0;
}

static off_t size_of(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? st.st_size : -1;
}

static void expect_content(const char *path, char c, size_t len)
{
	char *buf, *want;
	size_t n;

	assert_int_equal(read_file_max(path, 1 << 20, &buf, &n, NULL), 0);
	assert_int_equal(n, len);
	want = xmalloc(len);
	memset(want, c, len);
	assert_memory_equal(buf, want, len);
	free(want);
	free(buf);
}

static void test_rotates_at_cap(void **state)
{
	struct dir *d = *state;
	struct console c;
	char chunk[300];

	assert_int_equal(console_open(&c, d->log, 1000, NULL), 0);
	/* Chunks a..j: the file rotates before the write that would pass the
	 * cap, after c, f and i. */
	for (int i = 0; i < 10; i++) {
		memset(chunk, 'a' + i, sizeof(chunk));
		console_write(&c, chunk, sizeof(chunk));
		assert_true(size_of(d->log) <= 1000);
	}
	console_close(&c);
	expect_content(d->log, 'j', 300);
	assert_int_equal(size_of(d->old), 900);
}

static void test_bounded_on_disk(void **state)
{
	struct dir *d = *state;
	const uint64_t cap = 64 * 1024;
	struct console c;
	char line[81];

	memset(line, 'x', sizeof(line) - 1);
	line[sizeof(line) - 1] = '\n';
	assert_int_equal(console_open(&c, d->log, cap, NULL), 0);
	for (int i = 0; i < 100000; i++) /* 8 MB through a 64 KiB cap */
		console_write(&c, line, sizeof(line));
	console_close(&c);
	assert_true((uint64_t)size_of(d->log) <= cap);
	assert_true((uint64_t)size_of(d->old) <= cap);
	assert_true(size_of(d->log) > 0 && size_of(d->old) > 0);
}

static void test_open_starts_afresh(void **state)
{
	struct dir *d = *state;
	struct console c;
	int fd;

	/* What an earlier run left: its log and the older half of it. */
	fd = open(d->log, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_int_equal(write_full(fd, "old log", 7), 0);
	close(fd);
	fd = open(d->old, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	close(fd);
	assert_int_equal(console_open(&c, d->log, 1000, NULL), 0);
	assert_int_equal(size_of(d->log), 0);
	assert_int_equal(size_of(d->old), -1);
	console_write(&c, "bbb", 3);
	console_close(&c);
	expect_content(d->log, 'b', 3);
}

static void test_open_error(void **state)
{
	struct dir *d = *state;
	gantry_error_t err = NULL;
	struct console c;
	char path[128];

	snprintf(path, sizeof(path), "%s/missing/console.log", d->path);
	assert_int_equal(console_open(&c, path, 1000, &err), -1);
	assert_int_equal(err->status, ENOENT);
	gantry_error_free(&err);
	console_write(&c, "x", 1); /* dropped, not a crash */
	console_close(&c);
}

/* A FIFO given as the console is written as it is: nothing to rename. */
static void test_fifo_is_not_rotated(void **state)
{
	struct dir *d = *state;
	struct console c;
	char chunk[300], buf[4096];
	struct stat st;
	int r;

	assert_int_equal(mkfifo(d->log, 0600), 0);
	r = open(d->log, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	assert_true(r >= 0);
	assert_int_equal(console_open(&c, d->log, 1000, NULL), 0);
	memset(chunk, 'f', sizeof(chunk));
	for (int i = 0; i < 10; i++) {
		console_write(&c, chunk, sizeof(chunk));
		assert_int_equal(read(r, buf, sizeof(buf)), sizeof(chunk));
	}
	console_close(&c);
	close(r);
	assert_int_equal(lstat(d->log, &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	assert_int_equal(size_of(d->old), -1);
}

static void test_fd_passes_through(void **state)
{
	struct console c;
	char buf[16];
	int p[2];

	(void)state;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	console_init_fd(&c, p[1]);
	console_write(&c, "hello\n", 6);
	console_close(&c); /* the caller's fd stays open */
	assert_int_equal(write(p[1], "!", 1), 1);
	assert_int_equal(read(p[0], buf, sizeof(buf)), 7);
	assert_memory_equal(buf, "hello\n!", 7);
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_rotates_at_cap, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_bounded_on_disk, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_open_starts_afresh, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_open_error, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_fifo_is_not_rotated, dir_setup, dir_teardown),
		cmocka_unit_test(test_fd_passes_through),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
