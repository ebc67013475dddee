/* The share server's masks (protect= and hide=, docs/shares.md): over a
 * temp tree exported once more with share/p and share/cfg protected and
 * share/hid hidden, every change a hostile guest can ask for on or
 * beneath a protected inode is EROFS, by any name (a rename, a
 * replacement, a hard link), a hidden directory shows its attributes and
 * nothing in it, and the rest of the export stays writable. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "share/spec.h"
#pragma GCC diagnostic ignored "-Wunused-function" /* share_client.h is a kit */
#include "share_client.h"

/* "m": share/ again, with its masks. */
static uint64_t masked_export(struct cl *c)
{
	struct fs_export_opts o = { 0 };
	gantry_error_t err = NULL;
	int fd;

	assert_int_equal(mkdir(cl_path(c, "share/p"), 0755), 0);
	assert_int_equal(mkdir(cl_path(c, "share/hid"), 0755), 0);
	cl_put(c, "share/p/h", "hook");
	cl_put(c, "share/cfg", "config");
	cl_put(c, "share/hid/s", "hidden");
	fd = open(cl_path(c, "share"), O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(fs_export_mask(&o, fd, "p", false, &err), 0);
	assert_int_equal(fs_export_mask(&o, fd, "cfg", false, &err), 0);
	assert_int_equal(fs_export_mask(&o, fd, "hid", true, &err), 0);
	assert_int_equal(fs_export_mask(&o, fd, "missing/x", true, &err), 0);
	assert_int_equal(mkdir(cl_path(c, "share/a"), 0755), 0);
	assert_int_equal(mkdir(cl_path(c, "share/a/b"), 0755), 0);
	cl_put(c, "share/a/b/hook", "nested");
	assert_int_equal(fs_export_mask(&o, fd, "a/b/hook", false, &err), 0);
	assert_int_equal(fs_export_mask(&o, fd, "a/commondir", false, &err), 0);
	assert_int_equal(o.nr_masks, 4);
	assert_int_equal(o.nr_keeps, 3); /* a, a/b, and the name commondir in a */
	assert_int_equal(fs_server_add_export(c->s, "m", fd, &o, &err), 0);
	close(fd);
	return (uint64_t)cl_lookup(c, FUSE_ROOT_ID, "m");
}

static void test_protected(void **state)
{
	FX();
	uint64_t m = masked_export(c), p, h, cfg, fh;
	struct fuse_mkdir_in mk = { .mode = 0755 };
	struct fuse_rename_in rn = { 0 };
	struct fuse_link_in ln = { 0 };
	struct fuse_setattr_in sa = { .valid = FATTR_SIZE, .size = 0 };

	p = (uint64_t)cl_lookup(c, m, "p");
	h = (uint64_t)cl_lookup(c, p, "h");
	cfg = (uint64_t)cl_lookup(c, m, "cfg");
	assert_true(p > 1 && h > 1 && cfg > 1);
	/* In the protected directory, and its file. */
	assert_int_equal(cl_create(c, p, "new", O_WRONLY, 0644, &fh), -EROFS);
	assert_int_equal(CALL(c, FUSE_MKDIR, p, ARG(mk), STR("sub")), -EROFS);
	assert_int_equal(CALL(c, FUSE_UNLINK, p, STR("h")), -EROFS);
	assert_int_equal(cl_open(c, FUSE_OPEN, h, O_WRONLY), -EROFS);
	assert_int_equal(cl_open(c, FUSE_OPEN, h, O_RDONLY | O_TRUNC), -EROFS);
	assert_int_equal(cl_setattr(c, h, &sa), -EROFS);
	assert_true(cl_open(c, FUSE_OPEN, h, O_RDONLY) > 0);
	/* The protected file, and the names of both in their parent. */
	assert_int_equal(cl_open(c, FUSE_OPEN, cfg, O_RDWR), -EROFS);
	assert_int_equal(cl_setattr(c, cfg, &sa), -EROFS);
	assert_int_equal(CALL(c, FUSE_UNLINK, m, STR("cfg")), -EROFS);
	assert_int_equal(CALL(c, FUSE_RMDIR, m, STR("p")), -EROFS);
	rn.newdir = m;
	assert_int_equal(CALL(c, FUSE_RENAME, m, ARG(rn), STR("cfg"), STR("cfg2")), -EROFS);
	assert_int_equal(CALL(c, FUSE_RENAME, m, ARG(rn), STR("p"), STR("p2")), -EROFS);
	assert_int_equal(CALL(c, FUSE_RENAME, m, ARG(rn), STR("f"), STR("cfg")), -EROFS);
	assert_int_equal(CALL(c, FUSE_RENAME, m, ARG(rn), STR("f"), STR("p")), -EROFS);
	rn.newdir = p;
	assert_int_equal(CALL(c, FUSE_RENAME, m, ARG(rn), STR("f"), STR("f")), -EROFS);
	ln.oldnodeid = cfg;
	assert_int_equal(CALL(c, FUSE_LINK, m, ARG(ln), STR("cfg-link")), -EROFS);
	ln.oldnodeid = h;
	assert_int_equal(CALL(c, FUSE_LINK, m, ARG(ln), STR("h-link")), -EROFS);
	/* A CREATE of the protected file's name without O_EXCL opens what is
	 * there, as an OPEN would: not for writing, not truncated. */
	assert_int_equal(cl_create(c, m, "cfg", O_WRONLY | O_TRUNC, 0644, &fh), -EROFS);
	assert_int_equal(cl_create(c, m, "cfg", O_RDWR, 0644, &fh), -EROFS);
	assert_int_equal(cl_create(c, p, "h", O_WRONLY, 0644, &fh), -EROFS);
	/* The rest is writable. */
	assert_true(cl_open(c, FUSE_OPEN, (uint64_t)cl_lookup(c, m, "f"), O_WRONLY) > 0);
	assert_true(cl_create(c, m, "new", O_WRONLY, 0644, &fh) > 1);
	assert_string_equal(cl_get(c, "share/cfg"), "config");
	assert_string_equal(cl_get(c, "share/p/h"), "hook");
	assert_null(cl_get(c, "share/p/new"));
	canary_same(f);
}

/* A directory on the way down to a protected path can be neither renamed
 * nor exchanged (a new one of its name would hold what the guest likes at
 * the protected path), and a protected name that was not there cannot be
 * made, by any call that makes a name. */
static void test_ways_and_missing_names(void **state)
{
	FX();
	uint64_t m = masked_export(c), a, b, fh;
	struct fuse_mkdir_in mk = { .mode = 0755 };
	struct fuse_mknod_in mn = { .mode = S_IFIFO | 0644 };
	struct fuse_rename_in rn = { .newdir = 0 };
	struct fuse_rename2_in rx = { .flags = RENAME_EXCHANGE };
	struct fuse_link_in ln = { 0 };

	a = (uint64_t)cl_lookup(c, m, "a");
	b = (uint64_t)cl_lookup(c, a, "b");
	assert_true(a > 1 && b > 1);
	rn.newdir = a;
	assert_int_equal(CALL(c, FUSE_RENAME, a, ARG(rn), STR("b"), STR("b.old")), -EROFS);
	rn.newdir = m;
	assert_int_equal(CALL(c, FUSE_RENAME, m, ARG(rn), STR("a"), STR("a.old")), -EROFS);
	assert_int_equal(CALL(c, FUSE_MKDIR, m, ARG(mk), STR("other")), 0);
	rx.newdir = m;
	assert_int_equal(CALL(c, FUSE_RENAME2, m, ARG(rx), STR("other"), STR("a")), -EROFS);
	assert_int_equal(CALL(c, FUSE_RMDIR, a, STR("b")), -EROFS);
	/* The kept directories are not read-only: their other names are the
	 * guest's. */
	assert_true(cl_create(c, b, "mine", O_WRONLY, 0644, &fh) > 1);
	rn.newdir = b;
	assert_int_equal(CALL(c, FUSE_RENAME, b, ARG(rn), STR("mine"), STR("mine2")), 0);
	/* The banned name, by each call that makes one. */
	assert_int_equal(cl_create(c, a, "commondir", O_WRONLY, 0644, &fh), -EROFS);
	assert_int_equal(CALL(c, FUSE_MKDIR, a, ARG(mk), STR("commondir")), -EROFS);
	assert_int_equal(CALL(c, FUSE_MKNOD, a, ARG(mn), STR("commondir")), -EROFS);
	assert_int_equal(CALL(c, FUSE_SYMLINK, a, STR("commondir"), STR("/x")), -EROFS);
	ln.oldnodeid = (uint64_t)cl_lookup(c, m, "f");
	assert_int_equal(CALL(c, FUSE_LINK, a, ARG(ln), STR("commondir")), -EROFS);
	rn.newdir = a;
	assert_int_equal(CALL(c, FUSE_RENAME, m, ARG(rn), STR("f"), STR("commondir")), -EROFS);
	/* Only there: the same name elsewhere is the guest's. */
	assert_true(cl_create(c, m, "commondir", O_WRONLY, 0644, &fh) > 1);
	assert_null(cl_get(c, "share/a/commondir"));
	assert_string_equal(cl_get(c, "share/a/b/hook"), "nested");
	canary_same(f);
}

/* nogit: no entry named .git can be made, changed, removed or renamed, by
 * any call; what is beneath one is read-only; other names are the guest's. */
static void test_nogit(void **state)
{
	FX();
	struct fs_export_opts o = { .no_git = true };
	gantry_error_t err = NULL;
	uint64_t m, sub, g, fh;
	struct fuse_mkdir_in mk = { .mode = 0755 };
	struct fuse_rename_in rn = { 0 };
	struct fuse_link_in ln = { 0 };
	int fd;

	assert_int_equal(mkdir(cl_path(c, "share/sub"), 0755), 0);
	assert_int_equal(mkdir(cl_path(c, "share/sub/.git"), 0755), 0);
	cl_put(c, "share/sub/.git/config", "kept");
	fd = open(cl_path(c, "share"), O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(fs_server_add_export(c->s, "n", fd, &o, &err), 0);
	close(fd);
	m = (uint64_t)cl_lookup(c, FUSE_ROOT_ID, "n");
	sub = (uint64_t)cl_lookup(c, m, "sub");
	g = (uint64_t)cl_lookup(c, sub, ".git");
	assert_true(m > 1 && sub > 1 && g > 1);
	/* Made, by each call that makes a name. */
	assert_int_equal(CALL(c, FUSE_MKDIR, m, ARG(mk), STR(".git")), -EROFS);
	assert_int_equal(cl_create(c, m, ".git", O_WRONLY, 0644, &fh), -EROFS);
	assert_int_equal(CALL(c, FUSE_SYMLINK, m, STR(".git"), STR("sub/.git")), -EROFS);
	ln.oldnodeid = (uint64_t)cl_lookup(c, m, "f");
	assert_int_equal(CALL(c, FUSE_LINK, m, ARG(ln), STR(".git")), -EROFS);
	assert_int_equal(CALL(c, FUSE_MKDIR, m, ARG(mk), STR("newdir")), 0);
	rn.newdir = m;
	assert_int_equal(CALL(c, FUSE_RENAME, m, ARG(rn), STR("newdir"), STR(".git")), -EROFS);
	/* The one there: nothing in it changes, it stays where it is. */
	assert_int_equal(cl_create(c, g, "hooks", O_WRONLY, 0644, &fh), -EROFS);
	assert_int_equal(cl_open(c, FUSE_OPEN, (uint64_t)cl_lookup(c, g, "config"), O_WRONLY),
			 -EROFS);
	rn.newdir = sub;
	assert_int_equal(CALL(c, FUSE_RENAME, sub, ARG(rn), STR(".git"), STR("git")), -EROFS);
	assert_int_equal(CALL(c, FUSE_RMDIR, sub, STR(".git")), -EROFS);
	/* Other names are the guest's. */
	assert_true(cl_create(c, m, ".gitignore", O_WRONLY, 0644, &fh) > 1);
	assert_int_equal(CALL(c, FUSE_MKDIR, m, ARG(mk), STR("git")), 0);
	assert_string_equal(cl_get(c, "share/sub/.git/config"), "kept");
	assert_null(cl_get(c, "share/.git"));
	canary_same(f);
}

static void test_hidden(void **state)
{
	FX();
	uint64_t m = masked_export(c), hid;

	hid = (uint64_t)cl_lookup(c, m, "hid");
	assert_true(hid > 1);
	assert_non_null(cl_attr(c, hid));
	assert_int_equal(cl_lookup(c, hid, "s"), -EACCES);
	assert_int_equal(cl_open(c, FUSE_OPENDIR, hid, O_RDONLY), -EACCES);
	{
		uint64_t fh;

		/* Nor through a CREATE of its name in its parent. */
		assert_int_equal(cl_create(c, m, "hid", O_RDONLY, 0644, &fh), -EACCES);
	}
	/* The same directory through the unmasked export is as it was. */
	assert_true(cl_lookup(c, (uint64_t)cl_lookup(c, c->rw, "hid"), "s") > 1);
	canary_same(f);
}

/* protect= and hide= in a spec: base64url relative paths, kept in the
 * canonical form, `..` and absolute paths refused. */
static void test_spec(void **state)
{
	struct share_spec sp;
	gantry_error_t err = NULL;
	cleanup_free char *hooks = share_b64url(".git/hooks"), *home = share_b64url("root");
	cleanup_free char *spec = NULL, *canon = NULL, *up = share_b64url("../x"),
			  *abs = share_b64url("/etc"), *bad = NULL;

	(void)state;
	xasprintf(&spec, "r=/srv/repo,protect=%s,hide=%s", hooks, home);
	assert_int_equal(share_spec_parse(spec, NULL, &sp, &err), 0);
	assert_int_equal(sp.nr_masks, 2);
	canon = share_spec_format(&sp);
	share_spec_free(&sp);
	assert_int_equal(share_spec_parse(canon, NULL, &sp, &err), 0);
	assert_int_equal(sp.nr_masks, 2);
	for (size_t i = 0; i < 2; i++)
		assert_string_equal(sp.masks[i].rel, sp.masks[i].hide ? "root" : ".git/hooks");
	share_spec_free(&sp);
	xasprintf(&bad, "r=/srv/repo,protect=%s", up);
	assert_int_equal(share_spec_parse(bad, NULL, &sp, &err), -1);
	gantry_error_free(&err);
	free(bad);
	xasprintf(&bad, "r=/srv/repo,hide=%s", abs);
	assert_int_equal(share_spec_parse(bad, NULL, &sp, &err), -1);
	gantry_error_free(&err);
	assert_int_equal(share_spec_parse("r=/srv/repo,hide=!!", NULL, &sp, &err), -1);
	gantry_error_free(&err);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_protected),
		T(test_ways_and_missing_names),
		T(test_nogit),
		T(test_hidden),
		cmocka_unit_test(test_spec),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
