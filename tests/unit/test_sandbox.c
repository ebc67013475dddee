/* Unit tests for src/sandbox, first part: names, sandbox.json round
 * trips, the lifetime lock and stale clean-up, a delete while a start is
 * still making the sandbox, and writable-layer pairing. The temporary
 * GANTRY_HOME and sandbox directories are in sandbox_rig.h; the control
 * socket, sessions and starts are in test_sandbox_supervisor.c. No VM
 * boots here. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/settings.h"
#include "common/util.h"
#include "common/files.h"
#include "sandbox/lifecycle.h"
#include "sandbox/rwlayer.h"
#include "sandbox/state.h"
#include "skip.h"
#include "sandbox_rig.h"

static void test_names(void **state)
{
	static const char *const good[] = { "a", "A.b_c-9", "..a", ".x", "a..", "a-" };
	static const char *const bad[] = { "",	   ".", "..",  "a/b", "a b",
					   "~new", "ä", "a\n", "-",   "-x" };
	char long_name[SANDBOX_NAME_MAX + 2];
	gantry_error_t err = NULL;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(good); i++)
		assert_true(sandbox_name_valid(good[i]));
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		assert_false(sandbox_name_valid(bad[i]));
	memset(long_name, 'x', sizeof(long_name));
	long_name[SANDBOX_NAME_MAX] = '\0';
	assert_true(sandbox_name_valid(long_name));
	long_name[SANDBOX_NAME_MAX] = 'x';
	long_name[SANDBOX_NAME_MAX + 1] = '\0';
	assert_false(sandbox_name_valid(long_name));
	/* The error is one line, control characters and all. */
	assert_int_equal(sandbox_name_check("a\nb", &err), -1);
	assert_null(strchr(gantry_error_str(err), '\n'));
	gantry_error_free(&err);
	assert_int_equal(sandbox_name_check("-x", &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "may not start with '-'"));
	gantry_error_free(&err);
}

static void test_json_round_trip(void **state)
{
	cleanup_free char *dir = NULL, *buf = NULL;
	struct sandbox sb = { 0 }, back;
	gantry_error_t err = NULL;
	json_t *j;

	(void)state;
	make_dir("rt", &dir);
	sb.name = xstrdup("rt");
	sb.image = xstrdup("docker.io/library/alpine:3");
	sb.image_digest =
		xstrdup("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
	sb.image_path = xstrdup("/cache/x.erofs");
	sb.config = xzalloc(sizeof(*sb.config));
	sb.config->user = xstrdup("nobody");
	sb.config->working_dir = xstrdup("/srv");
	sb.cpus = 2;
	sb.mem_mib = 1024;
	sb.disk_mib = 128;
	sb.writable = true;
	sb.rwlayer = xstrdup("/layers/rt.ext4");
	sb.rwlayer_managed = true;
	sb.state = SANDBOX_RUNNING;
	sb.pid = 4242;
	sb.oauth_custody = true;
	sb.oauth_providers = xstrdup("/home/u/.config/gantry/oauth-providers.json");
	assert_int_equal(sandbox_save(dir, &sb, &err), 0);
	assert_int_equal(sandbox_load(dir, &back, &err), 0);
	assert_string_equal(back.name, "rt");
	assert_true(back.oauth_custody);
	assert_string_equal(back.oauth_providers, sb.oauth_providers);
	assert_string_equal(back.image_digest, sb.image_digest);
	assert_string_equal(back.image_path, "/cache/x.erofs");
	assert_string_equal(back.config->user, "nobody");
	assert_string_equal(back.config->working_dir, "/srv");
	assert_int_equal(back.cpus, 2);
	assert_int_equal(back.mem_mib, 1024);
	assert_int_equal(back.disk_mib, 128);
	assert_true(back.writable && back.rwlayer_managed);
	assert_string_equal(back.rwlayer, "/layers/rt.ext4");
	assert_int_equal(back.state, SANDBOX_RUNNING);
	assert_int_equal(back.pid, 4242);
	assert_string_equal(sandbox_image_id(&back), sb.image_digest);
	sandbox_free(&back);
	sandbox_free(&sb);

	/* The field image prune reads. */
	xasprintf(&buf, "%s/%s", dir, SANDBOX_JSON);
	j = json_load_file(buf, 0, NULL);
	assert_non_null(j);
	assert_string_equal(
		json_string_value(json_object_get(j, "image_digest")),
		"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
	json_decref(j);
}

static void test_load_refuses_junk(void **state)
{
	cleanup_free char *dir = NULL, *path = NULL;
	struct sandbox sb;
	gantry_error_t err = NULL;
	static const char *const docs[] = {
		"{",
		"[]",
		"{\"name\":\"x\"}",
		"{\"name\":\"x\",\"image\":\"i\",\"image_path\":\"/"
		"p\",\"state\":\"odd\",\"cpus\":1,"
		"\"mem_mib\":1,\"disk_mib\":1}",
		"{\"name\":\"x\",\"image\":\"i\",\"image_path\":\"/"
		"p\",\"state\":\"stopped\",\"cpus\":-1,"
		"\"mem_mib\":1,\"disk_mib\":1}",
		"{\"name\":\"x\",\"image\":\"i\",\"image_path\":\"/"
		"p\",\"state\":\"stopped\",\"cpus\":1,"
		"\"mem_mib\":1,\"disk_mib\":1,\"writable\":true}",
		/* custody's providers: absolute, and only with custody */
		"{\"name\":\"x\",\"image\":\"i\",\"image_path\":\"/"
		"p\",\"state\":\"stopped\",\"cpus\":1,"
		"\"mem_mib\":1,\"disk_mib\":1,\"oauth_custody\":true,"
		"\"oauth_providers\":\"rel/p.json\"}",
		"{\"name\":\"x\",\"image\":\"i\",\"image_path\":\"/"
		"p\",\"state\":\"stopped\",\"cpus\":1,"
		"\"mem_mib\":1,\"disk_mib\":1,\"oauth_providers\":\"/p.json\"}",
	};

	(void)state;
	make_dir("junk", &dir);
	assert_int_equal(sandbox_load(dir, &sb, &err), -1);
	assert_int_equal(err->status, ENOENT);
	gantry_error_free(&err);
	xasprintf(&path, "%s/%s", dir, SANDBOX_JSON);
	for (size_t i = 0; i < ARRAY_SIZE(docs); i++) {
		FILE *f = fopen(path, "w");

		fputs(docs[i], f);
		fclose(f);
		assert_int_equal(sandbox_load(dir, &sb, &err), -1);
		assert_non_null(err);
		gantry_error_free(&err);
	}
}

static void test_lock_and_stale_cleanup(void **state)
{
	cleanup_free char *dir = NULL, *sock = NULL;
	struct sandbox sb = { 0 }, back;
	gantry_error_t err = NULL;
	int fd, fd2;

	(void)state;
	make_sandbox("lk", &dir, &sb);
	sb.state = SANDBOX_RUNNING;
	sb.pid = 99999;
	assert_int_equal(sandbox_save(dir, &sb, &err), 0);
	xasprintf(&sock, "%s/%s", dir, SANDBOX_CTL);
	close(open(sock, O_CREAT | O_WRONLY, 0600));

	/* Held: running, and clean-up leaves it alone. */
	assert_int_equal(sandbox_lock(dir, true, &fd, &err), 1);
	assert_true(sandbox_is_running(dir));
	assert_int_equal(sandbox_lock(dir, true, &fd2, &err), 0);
	sandbox_cleanup_stale(dir, &sb);
	assert_int_equal(sb.state, SANDBOX_RUNNING);
	assert_int_equal(access(sock, F_OK), 0);
	close(fd);

	/* Released without a stop: a crash, recorded, and its socket gone. */
	assert_false(sandbox_is_running(dir));
	sandbox_cleanup_stale(dir, &sb);
	assert_int_equal(sb.state, SANDBOX_CRASHED);
	assert_non_null(sb.reason);
	assert_int_equal(access(sock, F_OK), -1);
	assert_int_equal(sandbox_load(dir, &back, &err), 0);
	assert_int_equal(back.state, SANDBOX_CRASHED);
	assert_int_equal(back.pid, 0);
	sandbox_free(&back);
	sandbox_free(&sb);
}

/* A supervisor that writes "stopped" after a command read "running" is
 * not recorded as crashed: clean-up rereads the file under the lock. */
static void test_stale_cleanup_rereads(void **state)
{
	cleanup_free char *dir = NULL;
	struct sandbox sb = { 0 }, back;
	gantry_error_t err = NULL;

	(void)state;
	make_sandbox("rr", &dir, &sb);
	sb.state = SANDBOX_STOPPED;
	assert_int_equal(sandbox_save(dir, &sb, &err), 0);
	sb.state = SANDBOX_RUNNING; /* what the command read before */
	sb.pid = 99999;
	sandbox_cleanup_stale(dir, &sb);
	assert_int_equal(sb.state, SANDBOX_STOPPED);
	assert_null(sb.reason);
	assert_int_equal(sandbox_load(dir, &back, &err), 0);
	assert_int_equal(back.state, SANDBOX_STOPPED);
	assert_null(back.reason);
	sandbox_free(&back);

	/* A crashed one being resumed (its supervisor holds the lock) shows as
	 * running, not crashed. */
	sb.state = SANDBOX_CRASHED;
	assert_int_equal(sandbox_save(dir, &sb, &err), 0);
	{
		int fd;

		assert_int_equal(sandbox_lock(dir, true, &fd, &err), 1);
		sandbox_cleanup_stale(dir, &sb);
		assert_int_equal(sb.state, SANDBOX_RUNNING);
		close(fd);
	}
	assert_int_equal(sandbox_load(dir, &back, &err), 0);
	assert_int_equal(back.state, SANDBOX_CRASHED);
	sandbox_free(&back);
	sandbox_free(&sb);
}

/* A sandbox a live `gantry start` is still making is not deleted under it;
 * one whose start died is, managed layer first. */
static void test_delete_while_creating(void **state)
{
	cleanup_free char *dir = NULL, *layer = NULL;
	struct sandbox sb = { 0 };
	gantry_error_t err = NULL;
	pid_t dead;

	(void)state;
	make_sandbox("mk", &dir, &sb);
	assert_int_equal(sandbox_rwlayer_default("mk", &layer, &err), 0);
	close(open(layer, O_CREAT | O_WRONLY, 0600));
	sb.writable = sb.rwlayer_managed = true;
	sb.rwlayer = xstrdup(layer);
	sb.state = SANDBOX_CREATING;
	sb.pid = (long)getppid();
	assert_int_equal(sandbox_save(dir, &sb, &err), 0);
	assert_int_equal(sandbox_delete("mk", false, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "being created"));
	gantry_error_free(&err);
	assert_int_equal(access(dir, F_OK), 0);
	assert_int_equal(access(layer, F_OK), 0);

	dead = fork();
	if (dead == 0)
		_exit(0);
	assert_int_equal(waitpid(dead, NULL, 0), dead);
	sb.pid = (long)dead;
	assert_int_equal(sandbox_save(dir, &sb, &err), 0);
	assert_int_equal(sandbox_resume("mk", NULL, NULL, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "never fully created"));
	gantry_error_free(&err);
	assert_int_equal(sandbox_delete("mk", false, &err), 0);
	assert_int_equal(access(dir, F_OK), -1);
	assert_int_equal(access(layer, F_OK), -1);
	sandbox_free(&sb);
}

static void test_rwlayer_pairing(void **state)
{
	cleanup_free char *layer = NULL;
	gantry_error_t err = NULL;
	int fd;

	(void)state;
	xasprintf(&layer, "%s/layer.ext4", home);
	close(open(layer, O_CREAT | O_WRONLY, 0600));
	/* A layer with no sidecar is not attached... */
	assert_int_equal(rwlayer_pair(layer, "sha256:aa", false, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "refusing"));
	gantry_error_free(&err);
	/* ...unless just made; then it is paired for good. */
	assert_int_equal(rwlayer_pair(layer, "sha256:aa", true, &err), 0);
	assert_int_equal(rwlayer_pair(layer, "sha256:aa", false, &err), 0);
	assert_int_equal(rwlayer_pair(layer, "sha256:bb", true, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "another image"));
	gantry_error_free(&err);

	assert_false(rwlayer_in_use(layer));
	fd = open(layer, O_RDWR);
	assert_int_equal(flock(fd, LOCK_EX), 0);
	assert_true(rwlayer_in_use(layer));
	close(fd);
	assert_false(rwlayer_in_use(layer));
	rwlayer_remove(layer);
	assert_int_equal(access(layer, F_OK), -1);
}

static void test_rwlayer_create(void **state)
{
	cleanup_free char *layer = NULL;
	gantry_error_t err = NULL;
	struct stat st;

	(void)state;
	if (access("/usr/sbin/mke2fs", X_OK) < 0 && access("/sbin/mke2fs", X_OK) < 0)
		skip_because("mke2fs is not installed (e2fsprogs)");
	xasprintf(&layer, "%s/new.ext4", home);
	assert_int_equal(rwlayer_create(layer, 1, &err), -1); /* too small */
	gantry_error_free(&err);
	assert_int_equal(rwlayer_create(layer, RWLAYER_MIN_MIB, &err), 0);
	assert_int_equal(stat(layer, &st), 0);
	assert_int_equal(st.st_size, RWLAYER_MIN_MIB * MiB);
	free(layer);
	xasprintf(&layer, "%s/new.ext4.new", home);
	assert_int_equal(access(layer, F_OK), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test_setup_teardown(test_json_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_load_refuses_junk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_and_stale_cleanup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_cleanup_rereads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_delete_while_creating, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rwlayer_pairing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rwlayer_create, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
