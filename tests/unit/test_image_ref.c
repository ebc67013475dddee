/* Tests for image/reference.c, image/pull.c's platform parsing and
 * image/creds.c's own file: Docker's reference grammar and defaults, the
 * plain-HTTP rule, registry names as users type them, and credentials
 * stored 0600 and read back without Docker's config. */
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

#include "common/settings.h"
#include "common/util.h"
#include "image/creds.h"
#include "image/pull.h"
#include "image/reference.h"
#include "image/registry_host.h"

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"

static void canonical(const char *in, const char *want)
{
	gantry_error_t err = NULL;
	struct image_ref r;
	char *s;

	if (image_ref_parse(in, &r, &err) < 0)
		fail_msg("%s: %s", in, gantry_error_str(err));
	s = image_ref_string(&r);
	if (strcmp(s, want) != 0)
		fail_msg("%s: got %s, want %s", in, s, want);
	free(s);
	image_ref_free(&r);
}

static void refused(const char *in, const char *words)
{
	gantry_error_t err = NULL;
	struct image_ref r;

	if (image_ref_parse(in, &r, &err) == 0)
		fail_msg("%s: parsed", in);
	if (strstr(gantry_error_str(err), words) == NULL)
		fail_msg("%s: `%s` lacks `%s`", in, gantry_error_str(err), words);
	gantry_error_free(&err);
}

static void test_references(void **state)
{
	(void)state;
	canonical("busybox", "docker.io/library/busybox:latest");
	canonical("python:3.12", "docker.io/library/python:3.12");
	canonical("user/app", "docker.io/user/app:latest");
	canonical("docker.io/busybox", "docker.io/library/busybox:latest");
	canonical("index.docker.io/user/app:v1", "docker.io/user/app:v1");
	canonical("localhost/app", "localhost/app:latest");
	canonical("localhost:5000/a/b/c:tag_1.0-x", "localhost:5000/a/b/c:tag_1.0-x");
	canonical("127.0.0.1:5000/test/multi:1", "127.0.0.1:5000/test/multi:1");
	canonical("[::1]:5000/app", "[::1]:5000/app:latest");
	canonical("ghcr.io/o/r@" D1, "ghcr.io/o/r@" D1);
	canonical("ghcr.io/o/r:t@" D1, "ghcr.io/o/r:t@" D1);
	canonical("a__b/c-d--e/f.g", "docker.io/a__b/c-d--e/f.g:latest");
	/* Host names are case-insensitive; the repository is not. */
	canonical("GHCR.io/o/r", "ghcr.io/o/r:latest");
	/* A registry only by its capitals keeps them, so it stays a registry. */
	canonical("usoB0/a/b:t", "usoB0/a/b:t");
	canonical("LocalHost/x", "localhost/x:latest");
	canonical("LocalHost:5000/app", "localhost:5000/app:latest");
	canonical("Docker.IO/busybox", "docker.io/library/busybox:latest");
	canonical("Index.Docker.io/user/app:v1", "docker.io/user/app:v1");
	canonical("Registry-1.Docker.IO/user/app", "docker.io/user/app:latest");

	refused("", "empty");
	refused("Busybox", "lowercase");
	refused("example.com/Org/app", "lowercase");
	refused("a b", "space");
	refused("app:", "invalid tag");
	refused("app:-x", "invalid tag");
	refused("app@sha256:12", "");
	refused("app@md5:" D1 + 7, "");
	refused("-app", "invalid repository");
	refused("a..b", "invalid repository");
	refused("a/", "invalid repository");
	refused("example.com:0/app", "invalid registry");
	refused("exa_mple.com/app", "invalid registry");
	refused("[::1/app", "invalid registry");
}

static void test_object_and_hosts(void **state)
{
	gantry_error_t err = NULL;
	struct image_ref r;
	char *n;

	(void)state;
	assert_int_equal(image_ref_parse("busybox@" D1, &r, &err), 0);
	assert_null(r.tag);
	assert_string_equal(image_ref_object(&r), D1);
	image_ref_free(&r);

	assert_string_equal(registry_api_host("docker.io"), "registry-1.docker.io");
	assert_string_equal(registry_api_host("ghcr.io"), "ghcr.io");
	assert_true(registry_is_loopback("127.0.0.1:5000"));
	assert_true(registry_is_loopback("127.1.2.3"));
	assert_true(registry_is_loopback("localhost:80"));
	assert_true(registry_is_loopback("[::1]:5000"));
	assert_false(registry_is_loopback("128.0.0.1"));
	assert_false(registry_is_loopback("localhost.example.com"));

	unsetenv(REGISTRY_INSECURE_ENV);
	gantry_settings_load();
	assert_false(registry_plain_http("reg.lan:5000", NULL));
	assert_true(registry_plain_http("reg.lan:5000", "other,reg.lan:5000"));
	setenv(REGISTRY_INSECURE_ENV, "x.lan, reg.lan", 1);
	gantry_settings_load();
	assert_true(registry_plain_http("reg.lan:5000", NULL));
	assert_false(registry_plain_http("reg.lan.evil:5000", NULL));
	unsetenv(REGISTRY_INSECURE_ENV);
	gantry_settings_load();

	n = registry_normalize("https://index.docker.io/v1/");
	assert_string_equal(n, "docker.io");
	free(n);
	n = registry_normalize("Localhost:5000/");
	assert_string_equal(n, "localhost:5000");
	free(n);
	assert_null(registry_normalize("not a host"));
}

static void test_platforms(void **state)
{
	gantry_error_t err = NULL;
	struct platform p;

	(void)state;
	assert_int_equal(platform_parse(NULL, &p, &err), 0);
	assert_string_equal(p.arch, OCI_HOST_ARCH);
	assert_int_equal(platform_parse("linux/arm64/v8", &p, &err), 0);
	assert_string_equal(p.arch, "arm64");
	assert_string_equal(p.variant, "v8");
	assert_string_equal(p.str, "linux/arm64/v8");
	assert_int_equal(platform_parse("windows/amd64", &p, &err), -1);
	gantry_error_free(&err);
	assert_int_equal(platform_parse("linux/amd64!", &p, &err), -1);
	gantry_error_free(&err);
	assert_int_equal(platform_parse("linux", &p, &err), -1);
	gantry_error_free(&err);
}

static void rm_file(const char *dir, const char *name)
{
	char *p;

	xasprintf(&p, "%s/%s", dir, name);
	unlink(p);
	free(p);
}

static void test_own_credentials(void **state)
{
	char dir[] = "/tmp/gantry-creds.XXXXXX", *path;
	struct registry_creds c;
	gantry_error_t err = NULL;
	struct stat st;
	bool removed;

	(void)state;
	assert_non_null(mkdtemp(dir));
	setenv("GANTRY_HOME", dir, 1);
	gantry_settings_load();
	setenv("DOCKER_CONFIG", dir, 1); /* no config.json there */
	assert_int_equal(creds_lookup("reg.lan", &c, &err), 0);
	gantry_settings_load();
	assert_int_equal(creds_store("reg.lan", "u", "p:a:ss", &err), 0);
	assert_int_equal(creds_file(&path, &err), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(creds_lookup("reg.lan", &c, &err), 1);
	assert_string_equal(c.user, "u");
	assert_string_equal(c.pass, "p:a:ss");
	assert_non_null(strstr(c.source, "Gantry credentials"));
	creds_free(&c);
	assert_int_equal(creds_erase("reg.lan", &removed, &err), 0);
	assert_true(removed);
	assert_int_equal(creds_lookup("reg.lan", &c, &err), 0);
	/* Readable by others: refused, not used. */
	chmod(path, 0644);
	assert_int_equal(creds_lookup("reg.lan", &c, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "chmod 600"));
	gantry_error_free(&err);
	unlink(path);
	free(path);
	rm_file(dir, "credentials.json.lock");
	rmdir(dir);
}

static void write_text(const char *dir, const char *name, const char *text, mode_t mode)
{
	char *p;
	FILE *f;

	xasprintf(&p, "%s/%s", dir, name);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	chmod(p, mode);
	free(p);
}

static bool exists(const char *dir, const char *name)
{
	struct stat st;
	char *p;
	bool r;

	xasprintf(&p, "%s/%s", dir, name);
	r = stat(p, &st) == 0;
	free(p);
	return r;
}

/* Logout removes every key naming the registry, login replaces them all,
 * and both remove what a killed save left. */
static void test_own_credentials_keys(void **state)
{
	char dir[] = "/tmp/gantry-creds.XXXXXX";
	struct registry_creds c;
	gantry_error_t err = NULL;
	bool removed;

	(void)state;
	assert_non_null(mkdtemp(dir));
	setenv("GANTRY_HOME", dir, 1);
	gantry_settings_load();
	setenv("DOCKER_CONFIG", dir, 1);
	gantry_settings_load();
	write_text(dir, "credentials.json",
		   "{\"auths\":{\"https://Reg.LAN/v1/\":{\"auth\":\"dTE6cDE=\"},"
		   "\"reg.lan\":{\"auth\":\"dTI6cDI=\"},\"other.lan\":{\"auth\":\"dTM6cDM=\"}}}",
		   0600);
	write_text(dir, "credentials.json.tmp-Ab12Cd", "{}", 0600);
	assert_int_equal(creds_store("reg.lan", "u4", "p4", &err), 0);
	assert_false(exists(dir, "credentials.json.tmp-Ab12Cd"));
	assert_int_equal(creds_lookup("reg.lan", &c, &err), 1);
	assert_string_equal(c.user, "u4");
	creds_free(&c);

	write_text(dir, "credentials.json",
		   "{\"auths\":{\"https://Reg.LAN/v1/\":{\"auth\":\"dTE6cDE=\"},"
		   "\"reg.lan\":{\"auth\":\"dTI6cDI=\"},\"other.lan\":{\"auth\":\"dTM6cDM=\"}}}",
		   0600);
	write_text(dir, "credentials.json.tmp-Zz9999", "{}", 0600);
	assert_int_equal(creds_erase("reg.lan", &removed, &err), 0);
	assert_true(removed);
	assert_false(exists(dir, "credentials.json.tmp-Zz9999"));
	assert_int_equal(creds_lookup("reg.lan", &c, &err), 0);
	assert_int_equal(creds_lookup("other.lan", &c, &err), 1);
	assert_string_equal(c.user, "u3");
	creds_free(&c);
	assert_int_equal(creds_erase("reg.lan", &removed, &err), 0);
	assert_false(removed);

	rm_file(dir, "credentials.json");
	rm_file(dir, "credentials.json.lock");
	rmdir(dir);
}

/* The Basic credentials' base64, every padding length. */
static void test_basic_base64(void **state)
{
	static const char *const cases[][3] = {
		{ "user", "pass", "dXNlcjpwYXNz" },
		{ "u", "pw", "dTpwdw==" },
		{ "ab", "cd", "YWI6Y2Q=" },
		{ "a", "\xff\xfe", "YTr//g==" },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *b = creds_basic(cases[i][0], cases[i][1]);

		assert_string_equal(b, cases[i][2]);
		free(b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_references),
		cmocka_unit_test(test_object_and_hosts),
		cmocka_unit_test(test_platforms),
		cmocka_unit_test(test_own_credentials),
		cmocka_unit_test(test_own_credentials_keys),
		cmocka_unit_test(test_basic_base64),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
