/* Unit tests for src/secret: the spec grammar and its errors (which never
 * quote a value), Go durations, dotenv files, the arena's memory flags as
 * /proc/self/smaps shows them and its wipe on fork, and a store's sources:
 * the environment, a file with its ttl, a command, and each way a source
 * fails closed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/error.h"
#include "common/util.h"
#include "secret/spec.h"
#include "secret/store.h"

#define SENTINEL "s3ntinel-7f1c"

static void parses(const char *in, const char *name, enum secret_source src, size_t hosts,
		   int64_t ttl)
{
	struct secret_spec s;
	gantry_error_t err = NULL;
	char *again;

	if (secret_spec_parse(in, &s, &err) < 0)
		fail_msg("%s: %s", in, gantry_error_str(err));
	assert_string_equal(s.name, name);
	assert_int_equal(s.source, src);
	assert_int_equal(s.nr_hosts, hosts);
	assert_int_equal(s.ttl_ms, ttl);
	/* What a sandbox keeps parses back to the same. */
	again = secret_spec_format(&s);
	{
		struct secret_spec t;

		assert_int_equal(secret_spec_parse(again, &t, &err), 0);
		assert_string_equal(t.name, s.name);
		assert_int_equal(t.source, s.source);
		assert_int_equal(t.nr_hosts, s.nr_hosts);
		assert_int_equal(t.ttl_ms, s.ttl_ms);
		secret_spec_free(&t);
	}
	free(again);
	secret_spec_free(&s);
}

static void refused(const char *in, const char *says)
{
	struct secret_spec s;
	gantry_error_t err = NULL;

	assert_int_equal(secret_spec_parse(in, &s, &err), -1);
	assert_non_null(err);
	if (strstr(gantry_error_str(err), says) == NULL)
		fail_msg("%s: `%s` does not say `%s`", in, gantry_error_str(err), says);
	assert_null(strstr(gantry_error_str(err), SENTINEL));
	assert_true(gantry_error_is_usage(err));
	gantry_error_free(&err);
}

static void test_spec_grammar(void **state)
{
	struct secret_spec s;
	gantry_error_t err = NULL;

	(void)state;
	parses("TOKEN", "TOKEN", SECRET_FROM_ENV, 0, -1);
	parses("_a1", "_a1", SECRET_FROM_ENV, 0, -1);
	parses("K=@/run/keys/k", "K", SECRET_FROM_FILE, 0, -1);
	parses("K=@/run/keys/k,ttl=90s", "K", SECRET_FROM_FILE, 0, 90000);
	parses("K=@/p,ttl=0", "K", SECRET_FROM_FILE, 0, 0);
	parses("K=!pass show api/key", "K", SECRET_FROM_CMD, 0, -1);
	parses("K=!/bin/echo a,ttl=1m30s", "K", SECRET_FROM_CMD, 0, 90000);
	parses("GH@github.com", "GH", SECRET_FROM_ENV, 1, -1);
	parses("GH@github.com,*.githubusercontent.com=@/k", "GH", SECRET_FROM_FILE, 2, -1);

	assert_int_equal(secret_spec_parse("K=!pass show a b", &s, &err), 0);
	assert_string_equal(s.argv[0], "pass");
	assert_string_equal(s.argv[3], "b");
	assert_null(s.argv[4]);
	secret_spec_free(&s);
	/* The last ,ttl= is the option: a path may hold a comma. */
	assert_int_equal(secret_spec_parse("K=@/a,b,ttl=2s", &s, &err), 0);
	assert_string_equal(s.path, "/a,b");
	assert_int_equal(s.ttl_ms, 2000);
	secret_spec_free(&s);

	refused("TOKEN=" SENTINEL, "would put the value in the command line");
	refused("TOKEN=" SENTINEL ",ttl=5s", "would put the value");
	refused("", "empty");
	refused("9X", "invalid secret name");
	refused("A-B", "invalid secret name");
	refused("A\tB", "control character");
	refused("K=@relative", "absolute path");
	refused("K=!", "needs a command");
	refused("K=!   ", "needs a command");
	refused("K,ttl=5s", "ttl needs");
	refused("K=@/p,ttl=5", "not a duration");
	refused("K=@/p,ttl=-5s", "not a duration");
	refused("K=@/p,ttl=5y", "not a duration");
	refused("K@Upper.example", "lowercase DNS name");
	refused("K@-a.example", "lowercase DNS name");
	refused("K@a..example", "lowercase DNS name");
	refused("K@", "lowercase DNS name");
	refused("K$", "invalid secret name");
}

static void test_ttl(void **state)
{
	int64_t ms;

	(void)state;
	assert_int_equal(secret_ttl_parse("0", 1, &ms), 0);
	assert_int_equal(ms, 0);
	assert_int_equal(secret_ttl_parse("1h2m3.5s", 8, &ms), 0);
	assert_int_equal(ms, 3723500);
	assert_int_equal(secret_ttl_parse("1500us", 6, &ms), 0);
	assert_int_equal(ms, 1);
	assert_int_equal(secret_ttl_parse("2\xc2\xb5s", 4, &ms), 0);
	assert_int_equal(secret_ttl_parse(".5s", 3, &ms), 0);
	assert_int_equal(ms, 500);
	assert_int_equal(secret_ttl_parse("s", 1, &ms), -1);
	assert_int_equal(secret_ttl_parse("5", 1, &ms), -1);
	assert_int_equal(secret_ttl_parse("1d", 2, &ms), -1);
	assert_int_equal(secret_ttl_parse("99999999h", 9, &ms), -1);
	assert_int_equal(secret_ttl_parse("", 0, &ms), -1);
}

struct seen {
	char text[1024];
};

static int collect(void *opaque, const char *name, size_t name_len, const char *value,
		   size_t value_len, gantry_error_t *err)
{
	struct seen *s = opaque;
	size_t n = strlen(s->text);

	(void)err;
	snprintf(s->text + n, sizeof(s->text) - n, "%.*s=[%.*s];", (int)name_len, name,
		 (int)value_len, value);
	return 0;
}

static void test_dotenv(void **state)
{
	const char in[] = "# a comment\n\nA=1\r\n  B = x\nC=\"quoted value\"\nD='single'\n"
			  "E=\"unbalanced\nF=\nG=a=b\n";
	const char bad[] = "A=1\nnot a line\nB=" SENTINEL "\n";
	struct seen s = { { 0 } };
	gantry_error_t err = NULL;

	(void)state;
	assert_int_equal(secret_dotenv_parse("A=1\nB=2", 7, collect, &s, &err), 0);
	assert_string_equal(s.text, "A=[1];B=[2];");
	memset(&s, 0, sizeof(s));
	/* "  B = x": the name is "B " and is refused. */
	assert_int_equal(secret_dotenv_parse(in, sizeof(in) - 1, collect, &s, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "line 4: invalid name"));
	gantry_error_free(&err);
	memset(&s, 0, sizeof(s));
	{
		const char good[] = "# a comment\n\nA=1\r\nC=\"quoted value\"\nD='single'\n"
				    "E=\"unbalanced\nF=\nG=a=b";

		assert_int_equal(secret_dotenv_parse(good, sizeof(good) - 1, collect, &s, &err), 0);
		assert_string_equal(s.text, "A=[1];C=[quoted value];D=[single];E=[\"unbalanced];"
					    "F=[];G=[a=b];");
	}
	memset(&s, 0, sizeof(s));
	assert_int_equal(secret_dotenv_parse(bad, sizeof(bad) - 1, collect, &s, &err), -1);
	assert_string_equal(gantry_error_str(err), "line 2: no `=` (NAME=VALUE)");
	gantry_error_free(&err);
	assert_int_equal(secret_dotenv_parse("A=x\0y\n", 6, collect, &s, &err), -1);
	assert_null(strstr(gantry_error_str(err), "x"));
	gantry_error_free(&err);
}

/* The VmFlags line of the smaps entry holding p. */
static void vmflags_of(const void *p, char *out, size_t cap)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	bool in = false;

	assert_non_null(f);
	out[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' '))
			in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
		else if (in && strncmp(line, "VmFlags:", 8) == 0) {
			snprintf(out, cap, "%s", line + 8);
			break;
		}
	}
	fclose(f);
}

static void test_arena_flags_and_fork(void **state)
{
	char flags[512];
	char *p = secret_alloc(100);
	int pfd[2], status;
	char got = 'x';
	pid_t pid;

	(void)state;
	assert_non_null(p);
	strcpy(p, SENTINEL);
	vmflags_of(p, flags, sizeof(flags));
	assert_non_null(strstr(flags, " dd")); /* MADV_DONTDUMP */
	assert_non_null(strstr(flags, " wf")); /* MADV_WIPEONFORK */
#ifndef __SANITIZE_ADDRESS__
	if (secret_arena_locked())
		assert_non_null(strstr(flags, " lo"));
	else
		print_message("arena not locked (RLIMIT_MEMLOCK): no `lo` to check\n");
#endif /* (ASan's mlock does nothing and says it did) */
	/* A child sees zeros where the value was. */
	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char c = p[0];

		(void)!write(pfd[1], &c, 1);
		_exit(0);
	}
	close(pfd[1]);
	assert_int_equal(read(pfd[0], &got, 1), 1);
	close(pfd[0]);
	waitpid(pid, &status, 0);
	assert_int_equal(got, 0);
	assert_string_equal(p, SENTINEL);
	/* Zeroed when freed. */
	secret_free(p, 100);
	for (int i = 0; i < 100; i++)
		assert_int_equal(p[i], 0);
	/* Full: NULL, not an overflow. */
	assert_null(secret_alloc(64u << 20));
}

static char *tmpfile_with(const char *text)
{
	char *path = xstrdup("/tmp/gantry-secret-test.XXXXXX");
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static char *env_of(struct secret_store *st, const char *name)
{
	struct secret_env e;
	gantry_error_t err = NULL;
	char *found = NULL;

	if (secret_store_env(st, &e, &err) < 0) {
		char *why = xstrdup(gantry_error_str(err));

		gantry_error_free(&err);
		return why; /* "!" marks an error */
	}
	for (size_t i = 0; e.envp[i]; i++)
		if (strncmp(e.envp[i], name, strlen(name)) == 0 && e.envp[i][strlen(name)] == '=')
			found = xstrdup(e.envp[i] + strlen(name) + 1);
	secret_env_free(&e);
	return found;
}

static void test_store_sources(void **state)
{
	struct secret_store st;
	gantry_error_t err = NULL;
	char *file = tmpfile_with(SENTINEL "-file\n"), *spec, *v;

	(void)state;
	secret_store_init(&st);
	assert_int_equal(secret_store_add(&st, "FROM_ENV", SENTINEL "-env", &err), 0);
	assert_int_equal(secret_store_add(&st, "UNSET", NULL, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "not set in this environment"));
	gantry_error_free(&err);
	xasprintf(&spec, "FROM_FILE=@%s,ttl=0", file);
	assert_int_equal(secret_store_add(&st, spec, NULL, &err), 0);
	free(spec);
	assert_int_equal(secret_store_add(&st, "FROM_CMD=!printf %s " SENTINEL "-cmd", NULL, &err),
			 0);
	assert_int_equal(secret_store_add(&st, "BOUND@api.example.com=@/nonexistent", NULL, &err),
			 0);
	assert_int_equal(secret_store_add_value(&st, "LINE", 4, "v", 1, &err), 0);

	v = env_of(&st, "FROM_ENV");
	assert_string_equal(v, SENTINEL "-env");
	free(v);
	v = env_of(&st, "FROM_FILE");
	assert_string_equal(v, SENTINEL "-file");
	free(v);
	v = env_of(&st, "FROM_CMD");
	assert_string_equal(v, SENTINEL "-cmd");
	free(v);
	/* Bound to a host: never in the environment. */
	assert_null(env_of(&st, "BOUND"));

	/* ttl=0: read on every use; a file gone fails closed. */
	unlink(file);
	v = env_of(&st, "FROM_FILE");
	assert_non_null(strstr(v, "secret `FROM_FILE`: open"));
	assert_null(strstr(v, SENTINEL));
	free(v);
	free(file);
	file = tmpfile_with("again");
	xasprintf(&spec, "FROM_FILE=@%s,ttl=0", file);
	assert_int_equal(secret_store_add(&st, spec, NULL, &err), 0);
	free(spec);
	v = env_of(&st, "FROM_FILE");
	assert_string_equal(v, "again");
	free(v);
	unlink(file);
	free(file);

	{
		char **names = secret_store_names(&st);

		assert_string_equal(names[0], "FROM_ENV");
		assert_null(names[5]);
		for (size_t i = 0; names[i]; i++)
			free(names[i]);
		free(names);
	}
	secret_store_free(&st);
}

static void fails_closed(const char *spec, const char *says)
{
	struct secret_store st;
	gantry_error_t err = NULL;
	char *v;

	secret_store_init(&st);
	assert_int_equal(secret_store_add(&st, spec, NULL, &err), 0);
	v = env_of(&st, "K");
	if (v == NULL || strstr(v, says) == NULL)
		fail_msg("%s: `%s` does not say `%s`", spec, v ? v : "(nothing)", says);
	free(v);
	secret_store_free(&st);
}

static void test_sources_fail_closed(void **state)
{
	(void)state;
	fails_closed("K=!false", "its command failed (status 1)");
	fails_closed("K=!/nonexistent/cmd", "run `/nonexistent/cmd`: No such file");
	fails_closed("K=!no-such-command-here", "not found");
	fails_closed("K=!head -c 70000 /dev/zero", "printed more than 64 KiB");
	fails_closed("K=!printf a\\000b", "holds a NUL byte");
	fails_closed("K=@/dev/null", "not a regular file");
	fails_closed("K=@/nonexistent", "open `/nonexistent`");
	{
		/* Its stdout closed, the command lives on: the timeout still
		 * holds, and it ends (10 s). */
		char *script = tmpfile_with("#!/bin/sh\necho tok\nexec >&-\nsleep 60\n"), *spec;

		chmod(script, 0700);
		xasprintf(&spec, "K=!%s", script ? script : "/");
		fails_closed(spec, "took more than 10 s");
		unlink(script);
		free(script);
		free(spec);
	}
}

/* secret_store_put: all or nothing; remove zeroes and forgets. */
static void test_store_put_and_remove(void **state)
{
	struct secret_store st;
	gantry_error_t err = NULL;
	char *file = tmpfile_with("from-file\n"), *spec, *v;
	size_t bytes;

	(void)state;
	secret_store_init(&st);
	assert_int_equal(secret_store_put(&st, "TOK", SENTINEL "-1", strlen(SENTINEL) + 2, &err),
			 0);
	bytes = st.bytes;
	/* A file that cannot be read leaves the secret as it was. */
	assert_int_equal(secret_store_put(&st, "TOK=@/nonexistent/k", NULL, 0, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "secret `TOK`: open"));
	gantry_error_free(&err);
	v = env_of(&st, "TOK");
	assert_string_equal(v, SENTINEL "-1");
	free(v);
	assert_int_equal(st.bytes, bytes);
	/* A value only with a secret from the environment, and one always then. */
	assert_int_equal(secret_store_put(&st, "TOK=@/k", "x", 1, &err), -1);
	gantry_error_free(&err);
	assert_int_equal(secret_store_put(&st, "TOK", NULL, 0, &err), -1);
	gantry_error_free(&err);
	assert_int_equal(secret_store_put(&st, "TOK=literal", NULL, 0, &err), -1);
	gantry_error_free(&err);
	/* Replaced by a file: read at once; a command waits for its use. */
	xasprintf(&spec, "TOK=@%s", file);
	assert_int_equal(secret_store_put(&st, spec, NULL, 0, &err), 0);
	free(spec);
	v = env_of(&st, "TOK");
	assert_string_equal(v, "from-file");
	free(v);
	assert_int_equal(secret_store_put(&st, "CMD=!printf %s ran", NULL, 0, &err), 0);
	assert_int_equal(st.n, 2);
	v = env_of(&st, "CMD");
	assert_string_equal(v, "ran");
	free(v);
	assert_true(secret_store_remove(&st, "TOK"));
	assert_false(secret_store_remove(&st, "TOK"));
	assert_int_equal(st.n, 1);
	assert_null(env_of(&st, "TOK"));
	assert_true(secret_store_remove(&st, "CMD"));
	assert_int_equal(st.bytes, 0);
	unlink(file);
	free(file);
	secret_store_free(&st);
}

static bool same_host(const char *pattern, const char *host)
{
	return strcmp(pattern, host) == 0;
}

/* A value handed over takes the spec it was kept by: bound to hosts, it
 * leaves the environment and is the broker's. */
static void test_store_adopt(void **state)
{
	struct secret_store st;
	struct secret_value v;
	gantry_error_t err = NULL;

	(void)state;
	secret_store_init(&st);
	assert_int_equal(secret_store_add_value(&st, "GH", 2, SENTINEL, strlen(SENTINEL), &err), 0);
	assert_int_equal(secret_store_adopt(&st, "NOPE@git.test", &err), 0);
	assert_int_equal(secret_store_adopt(&st, "GH@git.test", &err), 1);
	assert_true(secret_store_has_bound(&st));
	assert_null(env_of(&st, "GH"));
	assert_int_equal(secret_store_for_host(&st, "other.test", same_host, &v, &err), 0);
	assert_int_equal(secret_store_for_host(&st, "git.test", same_host, &v, &err), 1);
	assert_string_equal(v.name, "GH");
	assert_string_equal(v.value, SENTINEL);
	assert_int_equal(v.len, strlen(SENTINEL));
	secret_value_free(&v);
	secret_store_free(&st);
}

/* Injected secrets: the options, in any order; the environment gets a
 * placeholder kept while the name is (a value handed over and adopted
 * too); the egress worker's view has the value; the git broker never
 * serves one. */
static void test_inject(void **state)
{
	struct secret_store st;
	struct secret_value v;
	struct secret_spec s;
	gantry_error_t err = NULL;
	char *ph, *block;
	size_t size, len;
	json_t *desc;

	(void)state;
	parses("K@api.test,inject", "K", SECRET_FROM_ENV, 1, -1);
	parses("K@a.test,b.test=@/k,format=Bearer %s,header=Authorization,ttl=5m", "K",
	       SECRET_FROM_FILE, 2, 300000);
	assert_int_equal(secret_spec_parse("K@a.test=@/k,header=X-Key,ttl=1m", &s, &err), 0);
	assert_true(s.inject);
	assert_string_equal(s.header, "X-Key");
	assert_null(s.format);
	secret_spec_free(&s);
	refused("K,inject", "needs the hosts");
	refused("K@*.a.test,inject", "no *.name");
	/* Blanks after inject: still the option, as a command drops them. */
	refused("K=!cmd x,inject ", "needs the hosts");
	refused("K@a.test,format=Bearer %s", "format= needs header=");
	refused("K@a.test,header=X,format=no-percent", "one %s");
	refused("K@a.test,header=X,format=%s%d", "one %s");
	refused("K@a.test,header=a b", "one HTTP header name");
	refused("K@a.test,ttl=1m,ttl=2m", "ttl is not a duration");

	secret_store_init(&st);
	assert_int_equal(secret_store_add(&st, "K@api.test,inject", SENTINEL, &err), 0);
	assert_true(secret_store_has_injected(&st));
	assert_false(secret_store_has_bound(&st));
	ph = env_of(&st, "K");
	assert_non_null(ph);
	assert_int_equal(strlen(ph), SECRET_PLACEHOLDER_LEN);
	assert_memory_equal(ph, "gantry-", 7);
	assert_null(strstr(ph, SENTINEL));
	assert_int_equal(secret_store_for_host(&st, "api.test", same_host, &v, &err), 0);
	/* A new value keeps the placeholder; the worker's view has the value. */
	assert_int_equal(secret_store_add(&st, "K@api.test,inject", SENTINEL "2", &err), 0);
	{
		char *again = env_of(&st, "K");

		assert_string_equal(again, ph);
		free(again);
	}
	assert_int_equal(secret_store_injected(&st, &desc, &block, &size, &len, &err), 0);
	assert_int_equal(json_array_size(desc), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(desc, 0),
							      "placeholder")),
			    ph);
	assert_int_equal(len, strlen(SENTINEL "2"));
	assert_memory_equal(block, SENTINEL "2", len);
	secret_free(block, size);
	json_decref(desc);
	free(ph);
	secret_store_free(&st);

	/* A value handed over, adopted by its injected spec. */
	secret_store_init(&st);
	assert_int_equal(secret_store_add_value(&st, "K", 1, SENTINEL, strlen(SENTINEL), &err), 0);
	assert_int_equal(secret_store_adopt(&st, "K@api.test,inject", &err), 1);
	ph = env_of(&st, "K");
	assert_non_null(ph);
	assert_memory_equal(ph, "gantry-", 7);
	free(ph);
	secret_store_free(&st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spec_grammar),
		cmocka_unit_test(test_ttl),
		cmocka_unit_test(test_dotenv),
		cmocka_unit_test(test_arena_flags_and_fork),
		cmocka_unit_test(test_store_sources),
		cmocka_unit_test(test_sources_fail_closed),
		cmocka_unit_test(test_store_put_and_remove), cmocka_unit_test(test_store_adopt),
		cmocka_unit_test(test_inject),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
