/* Unit tests for common/text.c: what untrusted text may keep on its way to
 * a terminal, a log or a JSON string, and gantry_error_sanitize and the
 * errors that name a caller's option on top. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"
#include "common/text.h"
#include "common/util.h"

/* text_sanitize(in, max) on a copy of in, compared with want. */
static void sanitized_is(const char *in, size_t max, const char *want)
{
	char *s = xstrdup(in);

	assert_ptr_equal(text_sanitize(s, max), s);
	assert_string_equal(s, want);
	free(s);
}

static void lines_are(const char *in, size_t max, const char *want)
{
	char *s = xstrdup(in);

	assert_ptr_equal(text_sanitize_lines(s, max), s);
	assert_string_equal(s, want);
	free(s);
}

static void test_c0(void **state)
{
	(void)state;
	sanitized_is("plain text, kept", 0, "plain text, kept");
	sanitized_is("a\x01"
		     "b\tc\nd\re",
		     0, "a?b?c?d?e");
	/* An escape sequence loses its ESC, so a terminal shows it as text. */
	sanitized_is("\x1b[31mred\x1b[0m", 0, "?[31mred?[0m");
	sanitized_is("\x1f", 0, "?");
	sanitized_is("", 0, "");
}

static void test_del(void **state)
{
	(void)state;
	sanitized_is("x\x7fy", 0, "x?y");
	sanitized_is("~ is kept", 0, "~ is kept");
}

static void test_c1(void **state)
{
	(void)state;
	/* U+009B, the one-character CSI some terminals obey: one '?'. */
	sanitized_is("a\xc2\x9b"
		     "31m",
		     0, "a?31m");
	sanitized_is("\xc2\x80\xc2\x9f", 0, "??");
	/* Its neighbours are ordinary characters. */
	sanitized_is("\xc2\xa0\xc3\xa9\xe2\x82\xac\xf0\x9f\x90\xb3", 0,
		     "\xc2\xa0\xc3\xa9\xe2\x82\xac\xf0\x9f\x90\xb3");
}

static void test_invalid_utf8(void **state)
{
	(void)state;
	sanitized_is("a\xff"
		     "b",
		     0, "a?b");
	sanitized_is("\x80", 0, "?");				     /* a lone continuation byte */
	sanitized_is("\xc0\xaf", 0, "??");			     /* an overlong '/' */
	sanitized_is("\xe0\x80\xaf", 0, "???");			     /* overlong in three bytes */
	sanitized_is("\xed\xa0\x80", 0, "???");			     /* a surrogate */
	sanitized_is("\xf4\x90\x80\x80", 0, "????");		     /* above U+10FFFF */
	sanitized_is("ok\xe2\x82", 0, "ok??");			     /* cut short at the end */
	sanitized_is("\xe2\x82x\xe2\x82\xac", 0, "??x\xe2\x82\xac"); /* cut short inside */
}

static void test_cut(void **state)
{
	(void)state;
	sanitized_is("abcdefghij", 8, "abcde...");
	sanitized_is("abcdefgh", 8, "abcdefgh"); /* exactly max: kept whole */
	sanitized_is("abcdefghij", 0, "abcdefghij");
	/* max counts what is left after sanitising. */
	sanitized_is("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a", 8, "?????...");
	/* "abc" then three 3-byte euro signs: byte 5 is inside the first one,
	 * so the cut goes back to its start. */
	sanitized_is("abc\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac", 8, "abc...");
	/* On a boundary already: the whole character stays. */
	sanitized_is("ab\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac", 8, "ab\xe2\x82\xac...");
}

static void test_lines(void **state)
{
	(void)state;
	lines_are("one\ntwo\n", 0, "one\ntwo\n");
	lines_are("tab\there\r\n\x1b[2J\xc2\x9b", 0, "tab?here?\n?[2J?");
	lines_are("line one\nline two\nline three", 16, "line one\nline...");
}

static void test_copy(void **state)
{
	const char buf[] = { 'a', '\0', 'b', '\n', 'c' };
	char *s;

	(void)state;
	s = text_sanitized(buf, sizeof(buf), 0);
	assert_string_equal(s, "a?b?c");
	free(s);
	s = text_sanitized("a long guest line", 17, 8);
	assert_string_equal(s, "a lon...");
	free(s);
	s = text_sanitized("", 0, 0);
	assert_string_equal(s, "");
	free(s);
}

static void test_utf8_only(void **state)
{
	char s[] = "root:x:0:0:R\xe9my\t:/root:/bin/sh\r\nbin:x:1:1::/:\xc3\xa9\xc2\x9b\n";

	(void)state;
	/* Controls, newlines and C1 stay; the Latin-1 byte does not. */
	assert_ptr_equal(text_sanitize_utf8(s), s);
	assert_string_equal(s,
			    "root:x:0:0:R?my\t:/root:/bin/sh\r\nbin:x:1:1::/:\xc3\xa9\xc2\x9b\n");
}

static void test_error_sanitize(void **state)
{
	gantry_error_t err = NULL;

	(void)state;
	gantry_error(&err, 0, "entry `%s`: bad", "a\nb\x1b[1m");
	assert_int_equal(gantry_error_sanitize(&err, 0), -1);
	assert_string_equal(gantry_error_str(err), "entry `a?b?[1m`: bad");
	gantry_error_free(&err);

	gantry_error(&err, 0, "%s", "0123456789abcdef");
	gantry_error_sanitize(&err, 10);
	assert_string_equal(gantry_error_str(err), "0123456...");
	gantry_error_free(&err);

	/* No error: nothing to do, still -1 for the caller to return. */
	assert_int_equal(gantry_error_sanitize(&err, 0), -1);
	assert_int_equal(gantry_error_sanitize(NULL, 0), -1);
}

static const char *as_flag(const char *option)
{
	return strcmp(option, "cpus") == 0 ? "-cpus" : NULL;
}

/* An option's error keeps the option for the caller, and its name in the
 * message is the front end's, wherever prefixes and strerror put it. */
static void test_error_option(void **state)
{
	gantry_error_t err = NULL;

	(void)state;
	gantry_error_opt(&err, "cpus", " %d: this host allows 1 to %d", 300, 2);
	gantry_error_prefix(&err, "start `cpus`");
	assert_string_equal(err->option, "cpus");
	assert_string_equal(gantry_error_str(err), "start `cpus`: cpus 300: this host allows 1 to 2");
	gantry_error_free(&err);

	gantry_error_set_namer(as_flag);
	gantry_error_opt(&err, "cpus", " %d: too many", 300);
	gantry_error_prefix(&err, "start `cpus`");
	err->status = EINVAL;
	assert_string_equal(gantry_error_str(err),
			    "start `cpus`: -cpus 300: too many: Invalid argument");
	assert_string_equal(gantry_error_str(err),
			    "start `cpus`: -cpus 300: too many: Invalid argument");
	gantry_error_free(&err);

	/* A parser's error made an option's; a name the namer does not know
	 * stays as it is. */
	gantry_error(&err, 0, "want auto, required or off");
	gantry_error_prefix_opt(&err, "isolation", " `%s`", "x");
	assert_string_equal(err->option, "isolation");
	assert_string_equal(gantry_error_str(err), "isolation `x`: want auto, required or off");
	gantry_error_free(&err);
	gantry_error_set_namer(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_c0),
		cmocka_unit_test(test_del),
		cmocka_unit_test(test_c1),
		cmocka_unit_test(test_invalid_utf8),
		cmocka_unit_test(test_cut),
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_copy),
		cmocka_unit_test(test_utf8_only),
		cmocka_unit_test(test_error_sanitize),
		cmocka_unit_test(test_error_option),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
