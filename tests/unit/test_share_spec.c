/* Share specs (share/spec.h): what -share will accept, their canonical
 * form and its base64url encoding, the share list and the check of a host
 * directory against / and GANTRY_HOME. */
#include <fcntl.h>
#include <limits.h>
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
#include "share/spec.h"

#define CWD "/home/u/proj"

static void assert_canonical(const char *in, const char *want)
{
	gantry_error_t err = NULL;
	struct share_spec sp, back;
	cleanup_free char *canon = NULL, *again = NULL;

	if (share_spec_parse(in, CWD, &sp, &err) < 0)
		fail_msg("`%s`: %s", in, gantry_error_str(err));
	canon = share_spec_format(&sp);
	assert_string_equal(canon, want);
	/* The canonical form reads back as the same share, without a cwd. */
	if (share_spec_parse(canon, NULL, &back, &err) < 0)
		fail_msg("`%s`: %s", canon, gantry_error_str(err));
	assert_string_equal(back.tag, sp.tag);
	assert_string_equal(back.host_path, sp.host_path);
	assert_string_equal(back.ctr_path, sp.ctr_path);
	assert_true(back.ro == sp.ro && back.ids == sp.ids);
	assert_true(back.uid == sp.uid && back.gid == sp.gid);
	again = share_spec_format(&back);
	assert_string_equal(again, want);
	share_spec_free(&sp);
	share_spec_free(&back);
}

static void test_good(void **state)
{
	static const char *const table[][2] = {
		{ "src=/home/u/src", "src=/home/u/src@/host/src" },
		{ "src=/home/u/src@/work", "src=/home/u/src@/work" },
		{ "src=/home/u/src@/work,ro", "src=/home/u/src@/work,ro" },
		{ "a=/x,uid=1000,gid=100", "a=/x@/host/a,uid=1000,gid=100" },
		{ "a=/x,gid=100,uid=1000,ro", "a=/x@/host/a,ro,uid=1000,gid=100" },
		{ "a=/x,ro,uid=0,gid=0", "a=/x@/host/a,ro,uid=0,gid=0" },
		{ "a=/x,nogit,ro", "a=/x@/host/a,ro,nogit" },
		{ "a=/x,uid=1,gid=1,nogit", "a=/x@/host/a,nogit,uid=1,gid=1" },
		{ "a=/x,uid=4294967294,gid=4294967294",
		  "a=/x@/host/a,uid=4294967294,gid=4294967294" },
		{ "A.b_c-9=/x", "A.b_c-9=/x@/host/A.b_c-9" },
		{ "abcdefghijklmnopqrstuvwxyz0123456789=/x",
		  "abcdefghijklmnopqrstuvwxyz0123456789=/x@/host/"
		  "abcdefghijklmnopqrstuvwxyz0123456789" },
		{ "...=/x", "...=/x@/host/..." },
		/* Relative host paths are joined to the cwd; `..` is kept for the check. */
		{ "p=.", "p=" CWD "@/host/p" },
		{ "p=sub/dir/", "p=" CWD "/sub/dir@/host/p" },
		{ "p=../other", "p=" CWD "/../other@/host/p" },
		{ "p=//a//./b/@//w//./x/", "p=/a/b@/w/x" },
		{ "p=/with space@/my dir", "p=/with space@/my dir" },
		/* Commas that are no option belong to the path: encoded on the way out. */
		{ "p=/a,b", "p=L2EsYg@L2hvc3QvcA,encoding=base64url" },
		{ "p=/a,rw", "p=L2Escnc@L2hvc3QvcA,encoding=base64url" },
		{ "p=/a,B=1,ro", "p=L2EsQj0x@L2hvc3QvcA,ro,encoding=base64url" },
		{ "p=/a=b", "p=L2E9Yg@L2hvc3QvcA,encoding=base64url" },
		/* `@` is the last one. */
		{ "p=/a@b@/c", "p=L2FAYg@L2M,encoding=base64url" },
		{ "p=/proc", "p=/proc@/host/p" },
		{ "p=/x@/proccess", "p=/x@/proccess" },
		{ "p=/x@/run/gantryx", "p=/x@/run/gantryx" },
		{ "p=/x@/run", "p=/x@/run" },
		{ "p=L3g@L3k,encoding=base64url", "p=/x@/y" },
		{ "p=L3g,encoding=base64url", "p=/x@/host/p" },
		{ "p=L3g@L3k,encoding=base64url,ro", "p=/x@/y,ro" },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(table); i++)
		assert_canonical(table[i][0], table[i][1]);
}

static void test_fields(void **state)
{
	struct share_spec sp;

	(void)state;
	assert_int_equal(share_spec_parse("t=/a,b@/c,d,ro,uid=5,gid=6", NULL, &sp, NULL), 0);
	assert_string_equal(sp.tag, "t");
	assert_string_equal(sp.host_path, "/a,b");
	assert_string_equal(sp.ctr_path, "/c,d");
	assert_true(sp.ro && sp.ids);
	assert_int_equal(sp.uid, 5);
	assert_int_equal(sp.gid, 6);
	share_spec_free(&sp);
	/* The tag ends at the first `=`. */
	assert_int_equal(share_spec_parse("t=/a=b", NULL, &sp, NULL), 0);
	assert_string_equal(sp.host_path, "/a=b");
	share_spec_free(&sp);
}

static void assert_bad(const char *in, const char *cwd, const char *why)
{
	gantry_error_t err = NULL;
	struct share_spec sp;
	const char *msg;

	if (share_spec_parse(in, cwd, &sp, &err) == 0)
		fail_msg("`%s` parsed as %s@%s", in, sp.host_path, sp.ctr_path);
	msg = gantry_error_str(err);
	assert_string_equal(err->option, "shares"); /* -share in the CLI */
	assert_non_null(strstr(msg, "shares `"));
	assert_null(strchr(msg, '\n'));
	if (strstr(msg, why) == NULL)
		fail_msg("`%s`: `%s` lacks `%s`", in, msg, why);
	gantry_error_free(&err);
}

static void test_bad(void **state)
{
	char long_tag[64], *long_host, *long_ctr;

	(void)state;
	assert_bad("", CWD, "expected TAG=");
	assert_bad("src", CWD, "expected TAG=");
	assert_bad("/home/u/src", CWD, "expected TAG=");
	assert_bad("=/x", CWD, "a tag is");
	assert_bad(".=/x", CWD, "a tag is");
	assert_bad("..=/x", CWD, "a tag is");
	assert_bad("a/b=/x", CWD, "a tag is");
	assert_bad("a b=/x", CWD, "a tag is");
	assert_bad("a@b=/x", CWD, "a tag is");
	assert_bad("t\xc3\xa9=/x", CWD, "a tag is");
	memset(long_tag, 'a', 37);
	strcpy(long_tag + 37, "=/x");
	assert_bad(long_tag, CWD, "a tag is");
	assert_bad("t=", CWD, "no host path");
	assert_bad("t=@/c", CWD, "no host path");
	assert_bad("t=,ro", CWD, "no host path");
	assert_bad("t=rel", NULL, "host path must be absolute");
	assert_bad("t=rel", "relative/cwd", "host path must be absolute");
	assert_bad("t=/x@", CWD, "container path must be absolute");
	assert_bad("t=/x@c", CWD, "container path must be absolute");
	assert_bad("t=/a@b", CWD, "container path must be absolute");
	assert_bad("t=/x@/a/../b", CWD, "may not hold `..`");
	assert_bad("t=/x@/..", CWD, "may not hold `..`");
	assert_bad("t=/x@/", CWD, "may not be /");
	assert_bad("t=/x@//./", CWD, "may not be /");
	assert_bad("t=/x@/proc", CWD, "may not be /");
	assert_bad("t=/x@/proc/sys", CWD, "may not be /");
	assert_bad("t=/x@/sys/", CWD, "may not be /");
	assert_bad("t=/x@/dev/shm", CWD, "may not be /");
	assert_bad("t=/x@//run//gantry", CWD, "may not be /");
	assert_bad("t=/x@/run/gantry/x", CWD, "may not be /");
	assert_bad("t=/x,uid=1", CWD, "uid and gid go together");
	assert_bad("t=/x,gid=1,ro", CWD, "uid and gid go together");
	assert_bad("t=/x,uid=,gid=1", CWD, "uid must be a number");
	assert_bad("t=/x,uid=-1,gid=1", CWD, "uid must be a number");
	assert_bad("t=/x,uid=1,gid=4294967295", CWD, "gid must be a number");
	assert_bad("t=/x,uid=1,gid=99999999999999999999999", CWD, "gid must be a number");
	assert_bad("t=/x,uid=1,gid=0x10", CWD, "gid must be a number");
	assert_bad("t=/x,ro,ro", CWD, "ro given twice");
	assert_bad("t=/x,nogit,nogit", CWD, "nogit given twice");
	assert_bad("t=/x,uid=1,uid=1,gid=1", CWD, "uid given twice");
	assert_bad("t=/x,gid=1,uid=1,gid=1", CWD, "gid given twice");
	assert_bad("t=/x,rw=1", CWD, "unknown option `rw`");
	assert_bad("t=/x,size=1,ro", CWD, "unknown option `size`");
	assert_bad("t=/x,a=/b", CWD, "unknown option `a`");
	assert_bad("t=/x,encoding=base64", CWD, "only encoding is base64url");
	assert_bad("t=L3g,encoding=base64url,encoding=base64url", CWD, "encoding given twice");
	/* Encoded paths: unpadded base64url without NUL, one spelling each. */
	assert_bad("t=L3g=,encoding=base64url", CWD, "not unpadded base64url");
	assert_bad("t=L3g+,encoding=base64url", CWD, "not unpadded base64url");
	assert_bad("t=L3gL3,encoding=base64url", CWD, "not unpadded base64url");
	assert_bad("t=L3h,encoding=base64url", CWD, "not unpadded base64url");
	assert_bad("t=L3gA,encoding=base64url", CWD, "not unpadded base64url");
	assert_bad("t=L3g@,encoding=base64url", CWD, "container path must be absolute");
	assert_bad("t=,encoding=base64url", CWD, "no host path");
	assert_bad("t=eA@L3k,encoding=base64url", NULL, "host path must be absolute");
	assert_bad("t=L3g@eQ,encoding=base64url", CWD, "container path must be absolute");
	/* Quoted, the spec is made one safe line. */
	assert_bad("t\n=/x", CWD, "shares `t?=/x`");

	long_host = xmalloc(PATH_MAX + 8);
	long_host[0] = 't';
	long_host[1] = '=';
	memset(long_host + 2, 'a', PATH_MAX);
	long_host[2] = '/';
	long_host[2 + PATH_MAX] = '\0';
	assert_bad(long_host, CWD, "host path is longer than");
	long_host[1 + PATH_MAX] = '\0'; /* PATH_MAX - 1 bytes and its NUL: fits */
	{
		struct share_spec sp;

		assert_int_equal(share_spec_parse(long_host, CWD, &sp, NULL), 0);
		share_spec_free(&sp);
	}
	/* Joined to the cwd, a relative path can become too long. */
	long_host[2] = 'a';
	assert_bad(long_host, CWD, "host path is longer than");
	long_ctr = xmalloc(PATH_MAX + 16);
	strcpy(long_ctr, "t=/x@/");
	memset(long_ctr + 6, 'c', PATH_MAX);
	long_ctr[6 + PATH_MAX] = '\0';
	assert_bad(long_ctr, CWD, "container path is longer than");
	free(long_host);
	free(long_ctr);
}

static void test_encoding(void **state)
{
	static const char *const paths[] = {
		"/a,b",		"/a@b",	     "/a=b",
		"/,@=",		"/x,ro",     "/x,uid=1,gid=2",
		"/caf\xc3\xa9", "/\xff\xfe", "/tab\there",
		"/nl\nx",	"/\x7f",     "/a,",
		"/@",		"/==",	     "/y/,encoding=base64url",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
		for (int ctr = 0; ctr < 2; ctr++) {
			struct share_spec sp = {
				.tag = "t", .ro = i % 2, .ids = i % 3 == 0, .gid = 7
			};
			struct share_spec back;
			cleanup_free char *canon = NULL, *again = NULL;
			gantry_error_t err = NULL;

			sp.uid = sp.ids ? (uint32_t)i : 0;
			sp.gid = sp.ids ? 7 : 0;
			sp.host_path = xstrdup(ctr ? "/plain" : paths[i]);
			sp.ctr_path = xstrdup(ctr ? paths[i] : "/plain");
			canon = share_spec_format(&sp);
			assert_non_null(strstr(canon, ",encoding=base64url"));
			for (const char *c = canon; *c; c++)
				assert_true(*c > 0x20 && *c < 0x7f);
			if (share_spec_parse(canon, NULL, &back, &err) < 0)
				fail_msg("`%s`: %s", canon, gantry_error_str(err));
			assert_string_equal(back.host_path, sp.host_path);
			assert_string_equal(back.ctr_path, sp.ctr_path);
			assert_true(back.ro == sp.ro && back.ids == sp.ids);
			assert_true(back.uid == sp.uid && back.gid == sp.gid);
			again = share_spec_format(&back);
			assert_string_equal(again, canon);
			share_spec_free(&sp);
			share_spec_free(&back);
		}
	}
}

static void free_list(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void assert_add_bad(char ***v, size_t *n, const char *spec, const char *why)
{
	gantry_error_t err = NULL;
	size_t before = *n;

	assert_int_equal(shares_add(v, n, spec, CWD, &err), -1);
	if (strstr(gantry_error_str(err), why) == NULL)
		fail_msg("`%s`: `%s` lacks `%s`", spec, gantry_error_str(err), why);
	assert_null(strchr(gantry_error_str(err), '\n'));
	assert_int_equal(*n, before);
	gantry_error_free(&err);
}

static void test_list(void **state)
{
	char **v = NULL;
	size_t n = 0;

	(void)state;
	assert_int_equal(shares_add(&v, &n, "src=.", CWD, NULL), 0);
	assert_int_equal(shares_add(&v, &n, "data=/srv/data@/data,ro", CWD, NULL), 0);
	/* The same host directory twice, at two places, is allowed. */
	assert_int_equal(shares_add(&v, &n, "src-ro=.@/src-ro,ro", CWD, NULL), 0);
	assert_int_equal(n, 3);
	assert_string_equal(v[0], "src=" CWD "@/host/src");
	assert_string_equal(v[1], "data=/srv/data@/data,ro");
	assert_string_equal(v[2], "src-ro=" CWD "@/src-ro,ro");
	assert_null(v[3]);

	assert_add_bad(&v, &n, "src=/other@/other", "tag src is already shared");
	assert_add_bad(&v, &n, "x=/other@/data", "overlaps share data's");
	assert_add_bad(&v, &n, "x=/other@/data/sub", "overlaps share data's");
	assert_add_bad(&v, &n, "x=/other@/", "may not be /");
	assert_add_bad(&v, &n, "x=/other@/host", "overlaps share src's");
	assert_add_bad(&v, &n, "x=/other,uid=1", "uid and gid");
	/* Prefixes that are not parents do not overlap. */
	assert_int_equal(shares_add(&v, &n, "x=/other@/dat", CWD, NULL), 0);
	assert_int_equal(shares_add(&v, &n, "y=/other@/data2", CWD, NULL), 0);

	for (int i = (int)n; i < SHARES_MAX; i++) {
		char spec[64];

		snprintf(spec, sizeof(spec), "s%d=/h/%d@/m/%d", i, i, i);
		assert_int_equal(shares_add(&v, &n, spec, CWD, NULL), 0);
	}
	assert_int_equal(n, SHARES_MAX);
	assert_add_bad(&v, &n, "last=/h@/last", "at most 64 shares");
	free_list(v, n);
}

static char tmp[] = "/tmp/gantry-share-XXXXXX";

static void assert_check_bad(const char *path, const char *why)
{
	gantry_error_t err = NULL;
	int fd = -1;

	assert_int_equal(share_host_check(path, &fd, &err), -1);
	assert_int_equal(fd, -1);
	if (strstr(gantry_error_str(err), why) == NULL)
		fail_msg("`%s`: `%s` lacks `%s`", path, gantry_error_str(err), why);
	assert_null(strchr(gantry_error_str(err), '\n'));
	gantry_error_free(&err);
}

static void assert_check_good(const char *path)
{
	gantry_error_t err = NULL;
	struct stat a, b;
	int fd = -1;

	if (share_host_check(path, &fd, &err) < 0)
		fail_msg("`%s`: %s", path, gantry_error_str(err));
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &a), 0);
	assert_int_equal(stat(path, &b), 0);
	assert_true(a.st_dev == b.st_dev && a.st_ino == b.st_ino);
	close(fd);
	assert_int_equal(share_host_check(path, NULL, NULL), 0);
}

static char *at(const char *rel)
{
	char *p;

	xasprintf(&p, "%s/%s", tmp, rel);
	return p;
}

static void mk(const char *rel)
{
	cleanup_free char *p = at(rel);

	assert_int_equal(mkdir(p, 0700), 0);
}

static void test_host_check(void **state)
{
	cleanup_free char *home = NULL, *proj = NULL, *file = NULL, *link = NULL;
	cleanup_free char *inner = NULL, *link_home = NULL, *home_parent = NULL;
	int fd;

	(void)state;
	assert_non_null(mkdtemp(tmp));
	mk("home");
	mk("home/.gantry");
	mk("home/.gantry/sandboxes");
	mk("proj");
	home = at("home/.gantry");
	proj = at("proj");
	file = at("proj/file");
	link = at("link-to-home");
	inner = at("home/.gantry/sandboxes");
	link_home = at("link-home");
	home_parent = at("home");
	fd = open(file, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(symlink(home, link), 0);
	assert_int_equal(setenv("GANTRY_HOME", home, 1), 0);
	gantry_settings_load();

	assert_check_good(proj);
	assert_check_bad("/", "is /");
	assert_check_bad(file, "is not a directory");
	{
		cleanup_free char *missing = at("missing");

		assert_check_bad(missing, "does not exist");
	}
	assert_check_bad(home, "is Gantry's state directory");
	assert_check_bad(inner, "is inside Gantry's state directory");
	assert_check_bad(link, "is Gantry's state directory");
	assert_check_bad(tmp, "holds Gantry's state directory");
	{
		cleanup_free char *h = at("home");

		assert_check_bad(h, "holds Gantry's state directory");
	}

	/* GANTRY_HOME through a symlink, and one that does not exist yet. */
	assert_int_equal(symlink(home_parent, link_home), 0);
	{
		cleanup_free char *via = NULL;

		xasprintf(&via, "%s/.gantry", link_home);
		assert_int_equal(setenv("GANTRY_HOME", via, 1), 0);
		gantry_settings_load();
		assert_check_bad(inner, "is inside Gantry's state directory");
		assert_check_good(proj);
		free(via);
		xasprintf(&via, "%s/not/yet", link_home);
		assert_int_equal(setenv("GANTRY_HOME", via, 1), 0);
		gantry_settings_load();
		{
			cleanup_free char *h = at("home");

			assert_check_bad(h, "holds Gantry's state directory");
		}
		assert_check_good(proj);
	}
}

static int cleanup(void **state)
{
	char *cmd;

	(void)state;
	if (strchr(tmp, 'X') == NULL) {
		xasprintf(&cmd, "rm -rf '%s'", tmp);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", tmp);
		free(cmd);
	}
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good), cmocka_unit_test(test_fields),
		cmocka_unit_test(test_bad),  cmocka_unit_test(test_encoding),
		cmocka_unit_test(test_list), cmocka_unit_test(test_host_check),
	};

	return cmocka_run_group_tests(tests, NULL, cleanup);
}
