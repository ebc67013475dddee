/* Unit tests for common/files.c's read_tail_lines(): the tail of a guest's
 * console log, read from a bounded window at its end whatever the file
 * holds (gigabytes, one line without end, escape sequences); and
 * read_file_max(), which reads only regular files. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/child.h"
#include "common/files.h"
#include "common/json.h"
#include "common/settings.h"
#include "common/util.h"

struct dir {
	char path[64];
	char file[96];
};

static int dir_setup(void **state)
{
	struct dir *d = xzalloc(sizeof(*d));

	snprintf(d->path, sizeof(d->path), "/tmp/gantry-files-XXXXXX");
	assert_non_null(mkdtemp(d->path));
	snprintf(d->file, sizeof(d->file), "%s/console.log", d->path);
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

static void write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write_full(fd, text, strlen(text)), 0);
	close(fd);
}

static long max_rss_kib(void)
{
	struct rusage ru;

	assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
	return ru.ru_maxrss;
}

static void test_missing_and_empty(void **state)
{
	struct dir *d = *state;
	char **lines;

	assert_int_equal(read_tail_lines(d->file, 5, &lines), 0);
	assert_null(lines);
	write_text(d->file, "");
	assert_int_equal(read_tail_lines(d->file, 5, &lines), 0);
	write_text(d->file, "one\n");
	assert_int_equal(read_tail_lines(d->file, 0, &lines), 0);
	/* A directory is not a log. */
	assert_int_equal(read_tail_lines(d->path, 5, &lines), 0);
}

static void test_last_lines(void **state)
{
	struct dir *d = *state;
	FILE *f = fopen(d->file, "we");
	char **lines, want[32];
	size_t n;

	assert_non_null(f);
	for (int i = 0; i < 100000; i++)
		fprintf(f, "line %d\r\n", i);
	fclose(f);
	n = read_tail_lines(d->file, 20, &lines);
	assert_int_equal(n, 20);
	for (size_t i = 0; i < n; i++) {
		snprintf(want, sizeof(want), "line %zu", 100000 - 20 + i);
		assert_string_equal(lines[i], want);
	}
	free_lines(lines, n);

	/* Fewer lines than asked for, the last without its newline, and an
	 * empty one in between. */
	write_text(d->file, "a\n\nc");
	n = read_tail_lines(d->file, 20, &lines);
	assert_int_equal(n, 3);
	assert_string_equal(lines[0], "a");
	assert_string_equal(lines[1], "");
	assert_string_equal(lines[2], "c");
	free_lines(lines, n);
}

static void test_control_characters(void **state)
{
	struct dir *d = *state;
	char **lines;
	size_t n;

	write_text(d->file, "boot\n\x1b]0;owned\x07 \x1b[31mred\tx\xc2\x9b"
			    "2J\r\n");
	n = read_tail_lines(d->file, 5, &lines);
	assert_int_equal(n, 2);
	assert_string_equal(lines[0], "boot");
	assert_string_equal(lines[1], "?]0;owned? ?[31mred?x?2J");
	free_lines(lines, n);
}

static void test_long_line_keeps_its_end(void **state)
{
	struct dir *d = *state;
	char *text = xmalloc(4000);
	char **lines;
	size_t n, len;

	memset(text, 'a', 3000);
	strcpy(text + 3000, "END\nnext\n");
	write_text(d->file, text);
	free(text);
	n = read_tail_lines(d->file, 5, &lines);
	assert_int_equal(n, 2);
	len = strlen(lines[0]);
	assert_int_equal(len, FILES_TAIL_LINE_MAX);
	assert_memory_equal(lines[0], "...aaa", 6);
	assert_string_equal(lines[0] + len - 3, "END");
	assert_string_equal(lines[1], "next");
	free_lines(lines, n);
}

/* A line that began before the window is not shown in part... */
static void test_window_drops_partial_line(void **state)
{
	struct dir *d = *state;
	int fd = open(d->file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	char **lines;
	size_t n;

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 2 * FILES_TAIL_WINDOW), 0);
	assert_int_equal(pwrite(fd, "\nlast one\n", 10, 2 * FILES_TAIL_WINDOW), 10);
	close(fd);
	n = read_tail_lines(d->file, 5, &lines);
	assert_int_equal(n, 1);
	assert_string_equal(lines[0], "last one");
	free_lines(lines, n);
}

/* ... unless it is all there is: 100 MiB without a newline come back as
 * the end of that one line, promptly and without reading them all. */
static void test_huge_file_without_newline(void **state)
{
	struct dir *d = *state;
	int fd = open(d->file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	off_t size = 100 * 1024 * 1024;
	long rss = max_rss_kib();
	uint64_t t0;
	char **lines;
	size_t n, len;

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, size - 4), 0); /* sparse: NULs */
	assert_int_equal(pwrite(fd, "tail", 4, size - 4), 4);
	close(fd);
	t0 = now_ms();
	n = read_tail_lines(d->file, 20, &lines);
	assert_true(now_ms() - t0 < 1000);
	assert_true(max_rss_kib() - rss < 8 * 1024);
	assert_int_equal(n, 1);
	len = strlen(lines[0]);
	assert_int_equal(len, FILES_TAIL_LINE_MAX);
	assert_memory_equal(lines[0], "...???", 6);
	assert_string_equal(lines[0] + len - 4, "tail");
	free_lines(lines, n);
}

/* read_file_max() reads a regular file, and refuses anything else without
 * waiting on it: a FIFO as config.json would block its open until a
 * writer came (an alarm fails the test rather than hang it). */
static void test_read_file_max_refuses_a_fifo(void **state)
{
	struct dir *d = *state;
	gantry_error_t err = NULL;
	char *text = NULL;
	size_t len;

	write_text(d->file, "{}");
	assert_int_equal(read_file_max(d->file, 16, &text, &len, &err), 0);
	assert_int_equal(len, 2);
	assert_string_equal(text, "{}");
	free(text);
	assert_int_equal(read_file_max(d->file, 1, &text, &len, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "larger than"));
	gantry_error_free(&err);
	unlink(d->file);
	assert_int_equal(mkfifo(d->file, 0600), 0);
	alarm(5);
	assert_int_equal(read_file_max(d->file, 16, &text, &len, &err), -1);
	alarm(0);
	assert_null(text);
	assert_non_null(strstr(gantry_error_str(err), "is not a regular file"));
	gantry_error_free(&err);
}

/* Settings are read from the environment once; a front end's own value
 * wins, for the library (gantry_home) and the workers it starts. */
static void test_settings_resolved_once(void **state)
{
	static const char *const keep[] = { "GANTRY_HOME", "NOT_A_SETTING", NULL };
	gantry_error_t err = NULL;
	char *home = NULL, **env;

	(void)state;
	setenv("GANTRY_HOME", "/from/env", 1);
	setenv("NOT_A_SETTING", "x", 1);
	gantry_settings_load();
	setenv("GANTRY_HOME", "/changed/later", 1);
	assert_string_equal(gantry_setting("GANTRY_HOME"), "/from/env");
	assert_int_equal(gantry_settings_set("GANTRY_HOME", "/front/end", &err), 0);
	assert_int_equal(gantry_home(&home, &err), 0);
	assert_string_equal(home, "/front/end");
	free(home);
	env = child_env_only(keep);
	assert_string_equal(env[0], "GANTRY_HOME=/front/end");
	assert_string_equal(env[1], "NOT_A_SETTING=x");
	assert_null(env[2]);
	strv_free(env);
	assert_int_equal(gantry_settings_set("NOT_A_SETTING", "y", &err), -1);
	gantry_error_free(&err);
	unsetenv("GANTRY_HOME");
	unsetenv("NOT_A_SETTING");
	gantry_settings_load();
	assert_null(gantry_setting("GANTRY_HOME"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_missing_and_empty, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_last_lines, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_control_characters, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_long_line_keeps_its_end, dir_setup,
						dir_teardown),
		cmocka_unit_test_setup_teardown(test_window_drops_partial_line, dir_setup,
						dir_teardown),
		cmocka_unit_test_setup_teardown(test_huge_file_without_newline, dir_setup,
						dir_teardown),
		cmocka_unit_test_setup_teardown(test_read_file_max_refuses_a_fifo, dir_setup,
						dir_teardown),
		cmocka_unit_test(test_settings_resolved_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
