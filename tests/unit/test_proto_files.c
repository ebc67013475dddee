/* Unit tests for proto/files.c: the host's reader of the file helper's
 * records, against what the helper writes and against what a hostile
 * guest could write instead. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "proto/files.h"

static int next(const char *buf, size_t *off, struct files_record *r, const char **why)
{
	return files_next(buf, strlen(buf), off, r, why);
}

static void test_records(void **state)
{
	const char buf[] = "e d 0 755 1796475687 0 0 root root 2\n/d\n"
			   "e f 5 644 -3 1000 50 - staff 9\n/d/new\nli\n"
			   "x 5\n/nope\n"
			   "n 8\n/d/a.txt\n";
	struct files_record r;
	const char *why = NULL;
	size_t off = 0;

	(void)state;
	assert_int_equal(next(buf, &off, &r, &why), 1);
	assert_int_equal(r.kind, 'e');
	assert_int_equal(r.type, 'd');
	assert_int_equal(r.mode, 0755);
	assert_int_equal(r.mtime, 1796475687);
	assert_string_equal(r.owner, "root");
	assert_int_equal(r.path_len, 2);
	assert_memory_equal(r.path, "/d", 2);

	assert_int_equal(next(buf, &off, &r, &why), 1);
	assert_int_equal(r.type, 'f');
	assert_int_equal(r.size, 5);
	assert_int_equal(r.mtime, -3);
	assert_int_equal(r.uid, 1000);
	assert_int_equal(r.gid, 50);
	assert_string_equal(r.owner, "");
	assert_string_equal(r.group, "staff");
	/* A newline in a path is the path's. */
	assert_int_equal(r.path_len, 9);
	assert_memory_equal(r.path, "/d/new\nli", 9);

	assert_int_equal(next(buf, &off, &r, &why), 1);
	assert_int_equal(r.kind, 'x');
	assert_memory_equal(r.path, "/nope", 5);
	assert_int_equal(next(buf, &off, &r, &why), 1);
	assert_int_equal(r.kind, 'n');
	assert_int_equal(next(buf, &off, &r, &why), 0);
}

static void test_processes(void **state)
{
	const char buf[] = "p 1 0 0 S 1504 18\n/dev/.gantry-pause\n"
			   "p 42 1 1000 R 0 8\nsleep 33\n";
	struct files_record r;
	const char *why = NULL;
	size_t off = 0;

	(void)state;
	assert_int_equal(next(buf, &off, &r, &why), 1);
	assert_int_equal(r.kind, 'p');
	assert_int_equal(r.pid, 1);
	assert_int_equal(r.ppid, 0);
	assert_int_equal(r.state, 'S');
	assert_int_equal(r.rss_kib, 1504);
	assert_memory_equal(r.path, "/dev/.gantry-pause", 18);
	assert_int_equal(next(buf, &off, &r, &why), 1);
	assert_int_equal(r.uid, 1000);
	assert_memory_equal(r.path, "sleep 33", 8);
	assert_int_equal(next(buf, &off, &r, &why), 0);
}

static void test_watch_records(void **state)
{
	const char buf[] = "y 2\n/w\nw c 9\nsub/f.txt\nw m 1\ng\n";
	struct files_record r;
	const char *why = NULL;
	size_t off = 0;

	(void)state;
	assert_int_equal(files_record_len(buf, 3), 0); /* the line not whole yet */
	assert_int_equal(files_record_len(buf, 6), 0); /* the path not whole yet */
	assert_int_equal(files_record_len(buf, sizeof(buf) - 1), 7);
	assert_int_equal(next(buf, &off, &r, &why), 1);
	assert_int_equal(r.kind, 'y');
	assert_int_equal(files_record_len(buf + off, sizeof(buf) - 1 - off), 16);
	assert_int_equal(next(buf, &off, &r, &why), 1);
	assert_int_equal(r.kind, 'w');
	assert_int_equal(r.type, 'c');
	assert_memory_equal(r.path, "sub/f.txt", 9);
	assert_int_equal(next(buf, &off, &r, &why), 1);
	assert_int_equal(r.type, 'm');
	assert_int_equal(next(buf, &off, &r, &why), 0);
	assert_int_equal(files_record_len("w c x\n", 6), -1);
}

static void test_malformed(void **state)
{
	static const char *const bad[] = {
		"q 2\n/d\n",			       /* unknown kind */
		"e d 0 755 1 0 0 root root 3\n/d\n",   /* LEN past the end */
		"e d 0 755 1 0 0 root root 2\n/d",     /* no newline after the path */
		"e d 0 755 1 0 0 root root 2\n/dX",    /* not a newline after it */
		"e d 0 17777 1 0 0 root root 2\n/d\n", /* mode over 07777 */
		"e d 0 758 1 0 0 root root 2\n/d\n",   /* not octal */
		"e d 0 755 1 0 0 ro/ot root 2\n/d\n",  /* owner alphabet */
		"e d 0 755 1 0 0 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa root 2\n/d\n", /* 33 */
		"e d 0 755 1 4294967296 0 root root 2\n/d\n", /* uid over 32 bits */
		"e d 18446744073709551616 755 1 0 0 root root 2\n/d\n",
		"e z 0 755 1 0 0 root root 2\n/d\n",  /* type */
		"e d 0 755 1 0 0 root root\n/d\n",    /* no LEN */
		"e d 0 755 1 0 0 root root 2 \n/d\n", /* trailing space */
		"e d  0 755 1 0 0 root root 2\n/d\n", /* two spaces */
		"x 0\n\n",			      /* empty path */
		"x 4097\n",			      /* over the bound */
		"x -1\n/\n",
		"x 2", /* no line end */
		"x 1\n",
		"p 1 0 0 ? 4 1\nx\n", /* state */
		"p 1 0 0 SS 4 1\nx\n",
		"p 1 0 0 S -4 1\nx\n",	       /* rss */
		"p 1 0 S 4 1\nx\n",	       /* a field short */
		"p 4294967296 0 0 S 4 1\nx\n", /* pid over 32 bits */
		"w z 1\nx\n",		       /* a change's type */
		"w cc 1\nx\n",
		"y\n/\n",
	};
	struct files_record r;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *why = NULL;
		size_t off = 0;

		assert_int_equal(files_next(bad[i], strlen(bad[i]), &off, &r, &why), -1);
		assert_non_null(why);
		assert_int_equal(off, 0);
	}
}

static void test_nul_in_path(void **state)
{
	const char buf[] = "x 4\n/a\0b\n";
	struct files_record r;
	const char *why = NULL;
	size_t off = 0;

	(void)state;
	assert_int_equal(files_next(buf, sizeof(buf) - 1, &off, &r, &why), -1);
	assert_string_equal(why, "a record's path holds a NUL");
}

static void test_line_without_end(void **state)
{
	char buf[400];
	struct files_record r;
	const char *why = NULL;
	size_t off = 0;

	(void)state;
	memset(buf, '1', sizeof(buf));
	buf[0] = 'x';
	buf[1] = ' ';
	buf[sizeof(buf) - 1] = '\n';
	assert_int_equal(files_next(buf, sizeof(buf), &off, &r, &why), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_records),	      cmocka_unit_test(test_processes),
		cmocka_unit_test(test_watch_records), cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_nul_in_path),   cmocka_unit_test(test_line_without_end),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
