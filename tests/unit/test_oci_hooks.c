/* gantry-oci's config.json hooks (oci/hooks.c), run on this host with
 * /bin/sh: a hook's status and stderr in the error, and its timeout, which
 * holds for a hook that closes its stderr and runs on, and for a timeout
 * too large to count in milliseconds. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/files.h"
#include "common/util.h"
#include "oci/oci.h"

struct bundle {
	char path[64];
	char config[96];
	char pid[96];
};

static int bundle_setup(void **state)
{
	struct bundle *b = xzalloc(sizeof(*b));

	snprintf(b->path, sizeof(b->path), "/tmp/gantry-hooks-XXXXXX");
	assert_non_null(mkdtemp(b->path));
	snprintf(b->config, sizeof(b->config), "%s/config.json", b->path);
	snprintf(b->pid, sizeof(b->pid), "%s/pid", b->path);
	*state = b;
	return 0;
}

static int bundle_teardown(void **state)
{
	struct bundle *b = *state;

	rm_tree(b->path);
	free(b);
	return 0;
}

/* A config.json with one prestart hook: sh -c script, with timeout
 * (none when 0). */
static void one_hook(const struct bundle *b, const char *script, unsigned long long timeout)
{
	cleanup_free char *text = NULL;
	json_t *hook = json_pack("{s:s, s:[s, s, s]}", "path", "/bin/sh", "args", "sh", "-c",
				 script);
	json_t *cfg;

	if (timeout)
		json_object_set_new(hook, "timeout", json_integer((json_int_t)timeout));
	cfg = json_pack("{s:{s:[o]}}", "hooks", "prestart", hook);
	text = json_dumps(cfg, JSON_COMPACT);
	json_decref(cfg);
	assert_int_equal(write_file_atomic(b->config, text, strlen(text), 0600, NULL), 0);
}

static int run(const struct bundle *b, gantry_error_t *err)
{
	struct oci_state st = { .id = "c1", .bundle = (char *)b->path };

	return oci_hooks_run(b->path, "prestart", &st, err);
}

static void test_status_and_stderr(void **state)
{
	struct bundle *b = *state;
	gantry_error_t err = NULL;

	one_hook(b, "cat >/dev/null; exit 0", 0);
	assert_int_equal(run(b, &err), 0);
	one_hook(b, "echo oops >&2; exit 3", 0);
	assert_int_equal(run(b, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "status 3"));
	assert_non_null(strstr(gantry_error_str(err), "oops"));
	gantry_error_free(&err);
	/* Its stderr closed early, its status still counts. */
	one_hook(b, "exec >&- 2>&-; sleep 0.2; exit 4", 0);
	assert_int_equal(run(b, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "status 4"));
	gantry_error_free(&err);
}

/* A hook that closes its stderr and runs on is killed at its timeout, and
 * reaped. An alarm fails the test where it would wait for the hook. */
static void test_timeout_after_stderr_closed(void **state)
{
	struct bundle *b = *state;
	gantry_error_t err = NULL;
	cleanup_free char *script = NULL, *text = NULL;
	uint64_t t0 = now_ms();
	size_t len;

	xasprintf(&script, "echo $$ >%s; exec >&- 2>&- sleep 100", b->pid);
	one_hook(b, script, 1);
	alarm(20);
	assert_int_equal(run(b, &err), -1);
	alarm(0);
	assert_true(now_ms() - t0 < 10000);
	assert_non_null(strstr(gantry_error_str(err), "ran past its timeout of 1 s"));
	gantry_error_free(&err);
	assert_int_equal(read_file_max(b->pid, 32, &text, &len, &err), 0);
	assert_non_null(text);
	assert_int_equal(kill(atoi(text), 0), -1);
	assert_int_equal(errno, ESRCH);
}

/* A timeout of years is no timeout of 0 ms: its milliseconds would wrap. */
static void test_huge_timeout(void **state)
{
	struct bundle *b = *state;
	gantry_error_t err = NULL;

	one_hook(b, "exit 0", (unsigned long long)INT64_MAX);
	assert_int_equal(run(b, &err), 0);
	one_hook(b, "exit 0", 4294968ULL);
	assert_int_equal(run(b, &err), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_status_and_stderr, bundle_setup,
						bundle_teardown),
		cmocka_unit_test_setup_teardown(test_timeout_after_stderr_closed, bundle_setup,
						bundle_teardown),
		cmocka_unit_test_setup_teardown(test_huge_timeout, bundle_setup, bundle_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
