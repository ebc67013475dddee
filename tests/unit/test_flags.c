/* Unit tests for cli/flags.c, the Go-style flag parser every command uses:
 * each kind of flag, `-name value`, `-name=value` and `--name` spellings,
 * `--`, where the flags end, bad values, unknown flags and FLAG_UINT's
 * bound, with the one-line errors users see. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/flags.h"
#include "common/util.h"

struct opts {
	bool verbose;
	const char *name;
	uint64_t count, big;
	char *env[4];
	size_t nenv;
};

static int add_env(void *opaque, const char *value, gantry_error_t *err)
{
	struct opts *o = opaque;

	if (strchr(value, '=') == NULL)
		return gantry_error(err, 0, "`%s`: want KEY=VALUE", value);
	if (o->nenv == ARRAY_SIZE(o->env))
		return gantry_error(err, 0, "too many");
	o->env[o->nenv++] = (char *)value;
	return 0;
}

/* Parse argv (NULL-terminated) against the test's flags. */
static int parse(struct opts *o, char **argv, int *rest, bool *dashdash, gantry_error_t *err)
{
	const struct flag flags[] = {
		{ "v", FLAG_BOOL, &o->verbose, NULL, NULL, "say more", 0 },
		{ "name", FLAG_STRING, &o->name, NULL, "NAME", "the name", 0 },
		{ "count", FLAG_UINT, &o->count, NULL, "N", "how many (at most 10)", 10 },
		{ "big", FLAG_UINT, &o->big, NULL, "N", "no bound", 0 },
		{ "e", FLAG_FUNC, o, add_env, "KEY=VALUE", "an environment variable", 0 },
		{ 0 },
	};
	int argc = 0;

	while (argv[argc])
		argc++;
	*o = (struct opts){ 0 };
	return flags_parse("cmd", flags, argc, argv, rest, dashdash, err);
}

/* Parse must succeed; the index of the first positional argument. */
static int parse_ok(struct opts *o, char **argv, bool *dashdash)
{
	gantry_error_t err = NULL;
	bool dd;
	int rest = -1;

	if (parse(o, argv, &rest, dashdash ? dashdash : &dd, &err) < 0)
		fail_msg("%s", gantry_error_str(err));
	return rest;
}

/* Parse must fail with exactly want. */
static void parse_fails(char **argv, const char *want)
{
	gantry_error_t err = NULL;
	struct opts o;
	bool dd;
	int rest;

	assert_int_equal(parse(&o, argv, &rest, &dd, &err), -1);
	assert_non_null(err);
	assert_string_equal(gantry_error_str(err), want);
	gantry_error_free(&err);
}

#define ARGV(...) ((char *[]){ __VA_ARGS__, NULL })

static void test_bool(void **state)
{
	struct opts o;

	(void)state;
	assert_int_equal(parse_ok(&o, ARGV("-v"), NULL), 1);
	assert_true(o.verbose);
	assert_int_equal(parse_ok(&o, ARGV("--v"), NULL), 1);
	assert_true(o.verbose);
	parse_ok(&o, ARGV("-v=true"), NULL);
	assert_true(o.verbose);
	parse_ok(&o, ARGV("-v=1"), NULL);
	assert_true(o.verbose);
	parse_ok(&o, ARGV("-v", "-v=false"), NULL);
	assert_false(o.verbose);
	parse_ok(&o, ARGV("-v", "--v=0"), NULL);
	assert_false(o.verbose);
	/* A boolean never takes the next argument: "false" is positional. */
	assert_int_equal(parse_ok(&o, ARGV("-v", "false"), NULL), 1);
	assert_true(o.verbose);
	parse_fails(ARGV("-v=yes"), "cmd: -v=yes: want true or false");
	parse_fails(ARGV("-v="), "cmd: -v=: want true or false");
}

static void test_string(void **state)
{
	struct opts o;

	(void)state;
	assert_int_equal(parse_ok(&o, ARGV("-name", "box"), NULL), 2);
	assert_string_equal(o.name, "box");
	assert_int_equal(parse_ok(&o, ARGV("-name=a=b"), NULL), 1);
	assert_string_equal(o.name, "a=b");
	parse_ok(&o, ARGV("--name", "-v"), NULL); /* the value may look like a flag */
	assert_string_equal(o.name, "-v");
	assert_false(o.verbose);
	parse_ok(&o, ARGV("--name="), NULL);
	assert_string_equal(o.name, "");
	parse_ok(&o, ARGV("-name", "first", "-name", "last"), NULL);
	assert_string_equal(o.name, "last");
	parse_fails(ARGV("-name"), "cmd: -name needs a value");
	parse_fails(ARGV("-v", "--name"), "cmd: -name needs a value");
}

static void test_uint(void **state)
{
	struct opts o;

	(void)state;
	parse_ok(&o, ARGV("-count", "7"), NULL);
	assert_int_equal(o.count, 7);
	parse_ok(&o, ARGV("-count=0"), NULL);
	assert_int_equal(o.count, 0);
	parse_fails(ARGV("-count", "abc"), "cmd: -count abc: not a whole number");
	parse_fails(ARGV("-count", "-1"), "cmd: -count -1: not a whole number");
	parse_fails(ARGV("-count="), "cmd: -count : not a whole number");
	parse_fails(ARGV("-count", "3x"), "cmd: -count 3x: not a whole number");
	parse_fails(ARGV("-count"), "cmd: -count needs a value");
}

static void test_uint_bound(void **state)
{
	struct opts o;

	(void)state;
	parse_ok(&o, ARGV("-count", "10"), NULL);
	assert_int_equal(o.count, 10);
	parse_fails(ARGV("-count", "11"), "cmd: -count 11: too large (at most 10)");
	parse_fails(ARGV("-count=99999999999999999999"),
		    "cmd: -count 99999999999999999999: too large (at most 10)");
	/* max 0: anything a uint64_t holds. */
	parse_ok(&o, ARGV("-big", "18446744073709551615"), NULL);
	assert_true(o.big == UINT64_MAX);
	parse_fails(ARGV("-big", "18446744073709551616"),
		    "cmd: -big 18446744073709551616: too large (at most 18446744073709551615)");
}

static void test_func(void **state)
{
	struct opts o;

	(void)state;
	assert_int_equal(parse_ok(&o, ARGV("-e", "A=1", "--e=B=2", "-e", "C="), NULL), 5);
	assert_int_equal(o.nenv, 3);
	assert_string_equal(o.env[0], "A=1");
	assert_string_equal(o.env[1], "B=2");
	assert_string_equal(o.env[2], "C=");
	/* The function's own error, with the flag in front. */
	parse_fails(ARGV("-e", "A=1", "-e", "nokey"), "cmd: -e: `nokey`: want KEY=VALUE");
	parse_fails(ARGV("-e"), "cmd: -e needs a value");
}

static void test_dashdash(void **state)
{
	struct opts o;
	bool dd;

	(void)state;
	assert_int_equal(parse_ok(&o, ARGV("-v", "--", "-name", "x"), &dd), 2);
	assert_true(dd);
	assert_true(o.verbose);
	assert_null(o.name); /* after `--`, nothing is a flag */
	assert_int_equal(parse_ok(&o, ARGV("--"), &dd), 1);
	assert_true(dd);
	/* `--` as a value is a value. */
	assert_int_equal(parse_ok(&o, ARGV("-name", "--", "pos"), &dd), 2);
	assert_false(dd);
	assert_string_equal(o.name, "--");
}

static void test_positional(void **state)
{
	struct opts o;
	bool dd;

	(void)state;
	/* The first argument that is not a flag ends them. */
	assert_int_equal(parse_ok(&o, ARGV("-v", "image", "-name", "x"), &dd), 1);
	assert_false(dd);
	assert_null(o.name);
	assert_int_equal(parse_ok(&o, ARGV("-", "-v"), &dd), 0); /* "-" is an argument */
	assert_false(o.verbose);
	assert_int_equal(parse_ok(&o, ARGV(""), &dd), 0);
	assert_int_equal(parse_ok(&o, (char *[]){ NULL }, &dd), 0);
	assert_false(dd);
}

static void test_unknown(void **state)
{
	(void)state;
	parse_fails(ARGV("-nope"), "cmd: unknown flag `-nope` (see gantry cmd -help)");
	parse_fails(ARGV("--nope=1"), "cmd: unknown flag `--nope=1` (see gantry cmd -help)");
	/* Names match whole: no prefixes, no case folding. */
	parse_fails(ARGV("-nam", "x"), "cmd: unknown flag `-nam` (see gantry cmd -help)");
	parse_fails(ARGV("-names", "x"), "cmd: unknown flag `-names` (see gantry cmd -help)");
	parse_fails(ARGV("-V"), "cmd: unknown flag `-V` (see gantry cmd -help)");
	parse_fails(ARGV("---v"), "cmd: unknown flag `---v` (see gantry cmd -help)");
	/* Flags before the unknown one were taken; the error still wins. */
	parse_fails(ARGV("-v", "-x"), "cmd: unknown flag `-x` (see gantry cmd -help)");
}

static void test_usage(void **state)
{
	const struct flag flags[] = {
		{ "v", FLAG_BOOL, NULL, NULL, NULL, "say more", 0 },
		{ "name", FLAG_STRING, NULL, NULL, "NAME", "the name", 0 },
		{ 0 },
	};
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	(void)state;
	assert_non_null(f);
	flags_usage(f, flags);
	fclose(f);
	assert_string_equal(text, "  -v                     say more\n"
				  "  -name NAME             the name\n");
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bool),	   cmocka_unit_test(test_string),
		cmocka_unit_test(test_uint),	   cmocka_unit_test(test_uint_bound),
		cmocka_unit_test(test_func),	   cmocka_unit_test(test_dashdash),
		cmocka_unit_test(test_positional), cmocka_unit_test(test_unknown),
		cmocka_unit_test(test_usage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
