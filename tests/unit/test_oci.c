/* gantry-oci's config.json reader and container records (oci/oci.h): what
 * a bundle's process, root, mounts and resources become, the errors that
 * name the field that is wrong, IDs, signals, and the status a record
 * reads as while its holder lives and after. */
#include <setjmp.h>
#include <signal.h>
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

#include "common/files.h"
#include "common/util.h"
#include "oci/oci.h"
#include "sandbox/lifecycle.h"
#include "sandbox/state.h"
#include "share/spec.h"

static int parse(const char *text, struct oci_spec *s, gantry_error_t *err)
{
	return oci_spec_parse(text, strlen(text), "/b", s, err);
}

static void expect_error(const char *text, const char *want)
{
	struct oci_spec s;
	gantry_error_t err = NULL;

	assert_int_equal(parse(text, &s, &err), -1);
	assert_non_null(err);
	if (strstr(gantry_error_str(err), want) == NULL)
		fail_msg("`%s`: got `%s`, want `%s`", text, gantry_error_str(err), want);
	assert_null(strchr(gantry_error_str(err), '\n'));
	gantry_error_free(&err);
}

static void test_full(void **state)
{
	char dir[] = "/tmp/oci-test-XXXXXX", *text;
	struct oci_spec s;
	gantry_error_t err = NULL;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_true(asprintf(&text,
			     "{\"ociVersion\":\"1.0.2\",\"process\":{\"terminal\":false,"
			     "\"user\":{\"uid\":1000,\"gid\":100,\"additionalGids\":[1,7]},"
			     "\"args\":[\"sh\",\"-c\",\"echo hi\"],\"env\":[\"PATH=/bin\",\"A=b=c\"],"
			     "\"cwd\":\"/work\",\"rlimits\":[{\"type\":\"RLIMIT_NOFILE\",\"soft\":10,"
			     "\"hard\":20},{\"type\":\"rlimit_core\",\"soft\":0,\"hard\":0}],"
			     "\"capabilities\":{\"bounding\":[\"CAP_KILL\",\"CAP_SYS_ADMIN\"],"
			     "\"ambient\":[\"CAP_CHOWN\"]}},\"root\":{\"path\":\"rootfs\","
			     "\"readonly\":true},\"hostname\":\"box\",\"mounts\":["
			     "{\"destination\":\"/proc\",\"type\":\"proc\",\"source\":\"proc\"},"
			     "{\"destination\":\"/data\",\"type\":\"bind\",\"source\":\"%s\","
			     "\"options\":[\"rbind\",\"ro\"]},"
			     "{\"destination\":\"/etc/hosts\",\"type\":\"bind\",\"source\":\"/etc/hosts\","
			     "\"options\":[\"bind\"]},"
			     "{\"destination\":\"/d2\",\"source\":\"%s\",\"options\":[\"rbind\"]},"
			     "{\"destination\":\"/scratch\",\"type\":\"tmpfs\",\"source\":\"tmpfs\","
			     "\"options\":[\"rw\",\"noexec\",\"nosuid\",\"size=8m\",\"mode=755\"]}],"
			     "\"linux\":{\"resources\":{\"memory\":{\"limit\":268435456},"
			     "\"cpu\":{\"quota\":150000,\"period\":100000}}},"
			     "\"annotations\":{\"x\":\"y\"}}",
			     dir, dir) > 0);
	assert_int_equal(parse(text, &s, &err), 0);
	assert_int_equal(s.nargs, 3);
	assert_string_equal(s.args[2], "echo hi");
	assert_null(s.args[3]);
	assert_int_equal(s.nr_env, 2);
	assert_string_equal(s.cwd, "/work");
	assert_int_equal(s.uid, 1000);
	assert_int_equal(s.gid, 100);
	assert_true(s.has_gids && s.ngids == 2 && s.gids[0] == 1 && s.gids[1] == 7);
	assert_true(s.has_rlimits && s.nrlimits == 2);
	assert_int_equal(s.rlimits[0].resource, 7); /* RLIMIT_NOFILE */
	assert_true(s.rlimits[0].soft == 10 && s.rlimits[0].hard == 20);
	assert_int_equal(s.rlimits[1].resource, 4); /* RLIMIT_CORE, any case */
	assert_int_equal(s.nr_tmpfs, 1);
	assert_string_equal(s.tmpfs[0], "x:8192:755:/scratch");
	assert_true(s.has_caps);
	assert_true(s.caps[PROTO_CAPS_BOUNDING] == ((1ULL << 5) | (1ULL << 21)));
	assert_true(s.caps[PROTO_CAPS_AMBIENT] == 1ULL);
	assert_true(s.caps[PROTO_CAPS_EFFECTIVE] == 0);
	assert_false(s.terminal);
	assert_string_equal(s.root, "/b/rootfs");
	assert_true(s.readonly);
	assert_string_equal(s.hostname, "box");
	/* Directories bound become shares; proc and a file do not. */
	assert_int_equal(s.nr_binds, 2);
	assert_string_equal(s.binds[0].destination, "/data");
	assert_true(s.binds[0].ro);
	assert_string_equal(s.binds[1].destination, "/d2");
	assert_false(s.binds[1].ro);
	assert_int_equal(s.skipped, 2);
	assert_int_equal(s.mem_mib, 256);
	assert_int_equal(s.cpus, 2); /* 1.5 CPUs, rounded up */
	assert_string_equal(json_string_value(json_object_get(s.annotations, "x")), "y");
	oci_spec_free(&s);
	free(text);
	rmdir(dir);
}

static void test_defaults_and_annotations(void **state)
{
	struct oci_spec s;
	gantry_error_t err = NULL;

	(void)state;
	assert_int_equal(parse("{\"process\":{\"args\":[\"true\"]},\"root\":{\"path\":\"/abs\"},"
			       "\"linux\":{\"resources\":{\"memory\":{\"limit\":1}}},"
			       "\"annotations\":{\"io.gantry.cpus\":\"3\",\"io.gantry.mem_mib\":\"512\"}}",
			       &s, &err),
			 0);
	assert_string_equal(s.cwd, "/");
	assert_string_equal(s.root, "/abs");
	assert_int_equal(s.uid, 0);
	assert_int_equal(s.cpus, 3);
	assert_int_equal(s.mem_mib, 512); /* the annotation wins over the limit */
	assert_null(s.hostname);
	oci_spec_free(&s);
}

static void test_network_namespace(void **state)
{
	struct oci_spec s;
	gantry_error_t err = NULL;

	(void)state;
	assert_int_equal(parse("{\"process\":{\"args\":[\"a\"]},\"root\":{\"path\":\"r\"}}", &s,
			       &err),
			 0);
	assert_false(s.netns); /* the caller's network */
	oci_spec_free(&s);
	assert_int_equal(parse("{\"process\":{\"args\":[\"a\"]},\"root\":{\"path\":\"r\"},"
			       "\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"network\"}]}}",
			       &s, &err),
			 0);
	assert_true(s.netns); /* a new, empty one */
	assert_null(s.netns_path);
	oci_spec_free(&s);
	assert_int_equal(parse("{\"process\":{\"args\":[\"a\"]},\"root\":{\"path\":\"r\"},"
			       "\"linux\":{\"namespaces\":[{\"type\":\"network\","
			       "\"path\":\"/run/netns/pod\"}]}}",
			       &s, &err),
			 0);
	assert_string_equal(s.netns_path, "/run/netns/pod");
	oci_spec_free(&s);
	expect_error("{\"process\":{\"args\":[\"a\"]},\"root\":{\"path\":\"r\"},"
		     "\"linux\":{\"namespaces\":[{\"type\":\"network\",\"path\":\"rel\"}]}}",
		     "not absolute");
	expect_error("{\"process\":{\"args\":[\"a\"]},\"root\":{\"path\":\"r\"},"
		     "\"linux\":{\"namespaces\":[{\"type\":\"network\"},{\"type\":\"network\"}]}}",
		     "twice");
	expect_error("{\"process\":{\"args\":[\"a\"]},\"root\":{\"path\":\"r\"},"
		     "\"linux\":{\"namespaces\":[{\"path\":\"/x\"}]}}",
		     "namespaces[0]");
}

/* RLIM_INFINITY, past what the JSON reader takes, is read as unlimited;
 * the same digits in a string stay as they are. */
static void test_unlimited(void **state)
{
	static const char text[] =
		"{\"process\":{\"args\":[\"a\"],\"env\":[\"X=18446744073709551615\"],"
		"\"rlimits\":[{\"type\":\"RLIMIT_CORE\",\"soft\": 18446744073709551615,"
		"\"hard\":18446744073709551615}]},\"root\":{\"path\":\"r\"}}";
	struct oci_spec s;
	gantry_error_t err = NULL;

	(void)state;
	assert_int_equal(parse(text, &s, &err), 0);
	assert_string_equal(s.env[0], "X=18446744073709551615");
	assert_true(s.rlimits[0].soft == UINT64_MAX && s.rlimits[0].hard == UINT64_MAX);
	oci_spec_free(&s);
	expect_error("{\"process\":{\"args\":[\"a\"],\"rlimits\":[{\"type\":\"RLIMIT_CORE\","
		     "\"soft\":18446744073709551616,\"hard\":1}]},\"root\":{\"path\":\"r\"}}",
		     "too big");
}

static void test_errors(void **state)
{
	(void)state;
	expect_error("[]", "not a JSON object");
	expect_error("{\"process\":{\"args\":[]},\"root\":{\"path\":\"r\"}}", "`process.args` is empty");
	expect_error("{\"process\":{\"args\":[1]},\"root\":{\"path\":\"r\"}}", "`process.args` holds");
	expect_error("{\"process\":{\"args\":[\"a\"],\"cwd\":\"rel\"},\"root\":{\"path\":\"r\"}}",
		     "`process.cwd` is not an absolute path");
	expect_error("{\"process\":{\"args\":[\"a\"],\"env\":[\"NOEQ\"]},\"root\":{\"path\":\"r\"}}",
		     "`process.env`");
	expect_error("{\"process\":{\"args\":[\"a\"],\"user\":{\"uid\":-1}},\"root\":{\"path\":\"r\"}}",
		     "`process.user.uid`");
	expect_error("{\"process\":{\"args\":[\"a\"],\"terminal\":\"yes\"},\"root\":{\"path\":\"r\"}}",
		     "`process.terminal`");
	expect_error("{\"process\":{\"args\":[\"a\"],\"user\":{\"additionalGids\":[\"x\"]}},"
		     "\"root\":{\"path\":\"r\"}}",
		     "`process.user.additionalGids`");
	expect_error("{\"process\":{\"args\":[\"a\"],\"rlimits\":[{\"type\":\"RLIMIT_X\","
		     "\"soft\":1,\"hard\":1}]},\"root\":{\"path\":\"r\"}}",
		     "unknown resource `RLIMIT_X`");
	expect_error("{\"process\":{\"args\":[\"a\"],\"rlimits\":[{\"type\":\"RLIMIT_CPU\","
		     "\"soft\":1,\"hard\":1},{\"type\":\"RLIMIT_CPU\",\"soft\":1,\"hard\":1}]},"
		     "\"root\":{\"path\":\"r\"}}",
		     "RLIMIT_CPU twice");
	expect_error("{\"process\":{\"args\":[\"a\"],\"rlimits\":[{\"type\":\"RLIMIT_CPU\","
		     "\"soft\":2,\"hard\":1}]},\"root\":{\"path\":\"r\"}}",
		     "soft is over hard");
	expect_error("{\"process\":{\"args\":[\"a\"],\"capabilities\":{\"effective\":"
		     "[\"CAP_NOPE\"]}},\"root\":{\"path\":\"r\"}}",
		     "unknown capability `CAP_NOPE`");
	expect_error("{\"process\":{\"args\":[\"a\"]},\"root\":{\"path\":\"r\"},\"mounts\":["
		     "{\"destination\":\"/t\",\"type\":\"tmpfs\",\"options\":[\"size=lots\"]}]}",
		     "is not a size");
	/* 2^34 GiB and 2^54 KiB: 2^64 bytes, which would wrap to 0. */
	expect_error("{\"process\":{\"args\":[\"a\"]},\"root\":{\"path\":\"r\"},\"mounts\":["
		     "{\"destination\":\"/t\",\"type\":\"tmpfs\","
		     "\"options\":[\"size=17179869184g\"]}]}",
		     "is not a size");
	expect_error("{\"process\":{\"args\":[\"a\"]},\"root\":{\"path\":\"r\"},\"mounts\":["
		     "{\"destination\":\"/t\",\"type\":\"tmpfs\","
		     "\"options\":[\"size=18014398509481984k\"]}]}",
		     "is not a size");
	expect_error("{\"process\":{\"args\":[\"a\"]},\"root\":{\"path\":\"r\"},\"mounts\":["
		     "{\"destination\":\"/t/../x\",\"type\":\"tmpfs\"}]}",
		     "mounts[0]");
	{
		struct sandbox_tmpfs t;
		gantry_error_t err = NULL;

		assert_int_equal(sandbox_tmpfs_parse("rx:0:1777:/a:b", &t, &err), 0);
		assert_true(t.ro && t.noexec && t.size_kib == 0 && t.mode == 01777);
		assert_string_equal(t.path, "/a:b");
		assert_int_equal(sandbox_tmpfs_parse("-:1:8888:/a", &t, &err), -1);
		gantry_error_free(&err);
		assert_int_equal(sandbox_tmpfs_parse("-:1:755:/", &t, &err), -1);
		gantry_error_free(&err);
		assert_int_equal(sandbox_tmpfs_parse("q:1:755:/a", &t, &err), -1);
		gantry_error_free(&err);
	}
	expect_error("{\"process\":{\"args\":[\"a\"]}}", "`root` is missing");
	expect_error("{\"process\":{\"args\":[\"a\"]},\"root\":{\"path\":\"\"}}", "`root.path` is empty");
	expect_error("{\"process\":{\"args\":[\"a\"]},\"root\":{\"path\":\"r\"},\"mounts\":{}}",
		     "`mounts` is not a list");
	expect_error("{\"process\":{\"args\":[\"a\"]},\"root\":{\"path\":\"r\"},"
		     "\"mounts\":[{\"destination\":\"rel\"}]}",
		     "mounts[0].destination");
	expect_error("{\"process\":{\"args\":[\"a\"]},\"root\":{\"path\":\"r\"},"
		     "\"annotations\":{\"io.gantry.cpus\":\"0\"}}",
		     "io.gantry.cpus");
	expect_error("{\"process\":{\"args\":[\"a\"]},\"root\":{\"path\":\"r\"},\"linux\":[]}",
		     "`linux` is not an object");
	expect_error("{\"process\":{\"args\":[\"a\"]},\"root\":{\"path\":\"r\"},\"x\":1,\"x\":2}",
		     "config.json");
}

static void test_ids_and_signals(void **state)
{
	(void)state;
	assert_true(oci_id_valid("c1"));
	assert_true(oci_id_valid("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
	assert_false(oci_id_valid(""));
	assert_false(oci_id_valid("."));
	assert_false(oci_id_valid(".hidden"));
	assert_false(oci_id_valid("-x"));
	assert_false(oci_id_valid("a/b"));
	assert_false(oci_id_valid("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0"));
	assert_int_equal(oci_signal_parse("9"), SIGKILL);
	assert_int_equal(oci_signal_parse("KILL"), SIGKILL);
	assert_int_equal(oci_signal_parse("SIGTERM"), SIGTERM);
	assert_int_equal(oci_signal_parse("sigusr1"), SIGUSR1);
	assert_int_equal(oci_signal_parse("0"), 0);
	assert_int_equal(oci_signal_parse("65"), 0);
	assert_int_equal(oci_signal_parse("NOPE"), 0);
	assert_int_equal(oci_signal_parse(""), 0);
}

static void test_state_follows_the_holder(void **state)
{
	char root[] = "/tmp/oci-state-XXXXXX";
	cleanup_free char *dir = NULL;
	struct oci_state st = { 0 }, back;
	gantry_error_t err = NULL;
	json_t *j;
	pid_t pid;

	(void)state;
	assert_non_null(mkdtemp(root));
	assert_int_equal(oci_state_dir(root, "../x", true, &dir, &err), -1);
	gantry_error_free(&err);
	assert_int_equal(oci_state_dir(root, "c1", true, &dir, &err), 0);
	free(steal_pointer(&dir));
	assert_int_equal(oci_state_dir(root, "c1", true, &dir, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "exists"));
	gantry_error_free(&err);
	assert_int_equal(oci_state_dir(root, "c1", false, &dir, &err), 0);

	pid = fork();
	if (pid == 0) {
		pause();
		_exit(0);
	}
	st = (struct oci_state){ .id = "c1", .bundle = "/b", .root = "/b/rootfs",
				 .created = "2026-01-01T00:00:00Z", .pid = pid,
				 .pid_start = oci_pid_start(pid) };
	assert_true(st.pid_start > 0);
	assert_int_equal(oci_state_save(dir, &st, &err), 0);
	assert_int_equal(oci_state_load(dir, &back, &err), 0);
	assert_int_equal(oci_status_of(&back), OCI_CREATED);
	back.started = true;
	assert_int_equal(oci_status_of(&back), OCI_RUNNING);
	j = oci_state_json(&back);
	assert_string_equal(json_string_value(json_object_get(j, "status")), "running");
	assert_int_equal(json_integer_value(json_object_get(j, "pid")), pid);
	assert_string_equal(json_string_value(json_object_get(j, "bundle")), "/b");
	json_decref(j);
	/* Its sandbox held paused (`gantry-oci pause`): paused, until it
	 * runs on. */
	{
		cleanup_free char *home = NULL, *sdir = NULL, *frozen = NULL;

		xasprintf(&home, "%s/home", root);
		setenv("GANTRY_HOME", home, 1);
		assert_int_equal(sandbox_dir("c1", &sdir, &err), 0);
		assert_int_equal(mkdir_p(sdir, &err), 0);
		xasprintf(&frozen, "%s/%s", sdir, SANDBOX_FROZEN);
		assert_int_equal(write_file_atomic(frozen, "", 0, 0600, &err), 0);
		assert_int_equal(oci_status_of(&back), OCI_PAUSED);
		j = oci_state_json(&back);
		assert_string_equal(json_string_value(json_object_get(j, "status")), "paused");
		json_decref(j);
		unlink(frozen);
		assert_int_equal(oci_status_of(&back), OCI_RUNNING);
		unsetenv("GANTRY_HOME");
	}
	/* Another process under the same pid is not the holder. */
	back.pid_start++;
	assert_int_equal(oci_status_of(&back), OCI_STOPPED);
	back.pid_start--;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	assert_int_equal(oci_status_of(&back), OCI_STOPPED);
	j = oci_state_json(&back);
	assert_string_equal(json_string_value(json_object_get(j, "status")), "stopped");
	assert_int_equal(json_integer_value(json_object_get(j, "pid")), 0);
	json_decref(j);
	oci_state_free(&back);
	rm_tree(root);
}

/* The share a sandbox option list holds at i, parsed back. */
static void expect_share(const struct sandbox_opts *o, size_t i, const char *host,
			 const char *ctr, bool ro)
{
	struct share_spec sp;
	gantry_error_t err = NULL;

	assert_true(i < o->nr_shares);
	assert_int_equal(share_spec_parse(o->shares[i], NULL, &sp, &err), 0);
	assert_string_equal(sp.host_path, host);
	assert_string_equal(sp.ctr_path, ctr);
	assert_int_equal(sp.ro, ro);
	share_spec_free(&sp);
}

/* A bind's paths are taken as they are, whatever the share spec's
 * delimiters (`,` `@` `=`) or -v's `:` they hold. */
static void test_binds_with_delimiters(void **state)
{
	char dir[] = "/tmp/oci-test-XXXXXX", *src, *text, *vol;
	struct oci_spec s;
	struct sandbox_opts o;
	gantry_error_t err = NULL;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_true(asprintf(&src, "%s/a,ro@b=c:d", dir) > 0);
	assert_int_equal(mkdir(src, 0755), 0);
	assert_true(asprintf(&text,
			     "{\"process\":{\"args\":[\"a\"]},\"root\":{\"path\":\"r\"},"
			     "\"mounts\":[{\"destination\":\"/srv/x,ro@y\",\"type\":\"bind\","
			     "\"source\":\"%s\"},{\"destination\":\"/plain\",\"type\":\"bind\","
			     "\"source\":\"%s\",\"options\":[\"ro\"]}]}",
			     src, dir) > 0);
	assert_int_equal(parse(text, &s, &err), 0);
	oci_sandbox_opts(&s, "box", &o, &err);
	assert_null(err);
	assert_int_equal(o.nr_shares, 2);
	expect_share(&o, 0, src, "/srv/x,ro@y", false);
	expect_share(&o, 1, dir, "/plain", true);
	/* The plain form where it can carry the paths, readable in sandbox.json. */
	assert_null(strstr(o.shares[1], "encoding="));
	/* -v splits at `:`; the rest of each path is its own. */
	assert_true(asprintf(&vol, "%s/a,ro@b=c:/m@n,ro=1:ro", dir) > 0);
	assert_int_equal(sandbox_opts_volume(&o, vol, &err), 0);
	free(src);
	assert_true(asprintf(&src, "%s/a,ro@b=c", dir) > 0);
	expect_share(&o, 2, src, "/m@n,ro=1", true);
	sandbox_opts_free(&o);
	oci_spec_free(&s);
	free(vol);
	free(text);
	free(src);
	assert_true(asprintf(&src, "%s/a,ro@b=c:d", dir) > 0);
	rmdir(src);
	free(src);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full),
		cmocka_unit_test(test_defaults_and_annotations),
		cmocka_unit_test(test_network_namespace),
		cmocka_unit_test(test_binds_with_delimiters),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_unlimited),
		cmocka_unit_test(test_ids_and_signals),
		cmocka_unit_test(test_state_follows_the_holder),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
