/* The escape suite's cases that need no guest, first part: where a
 * hostile guest's request can reach. Names ("..", ".", "a/b", too long,
 * not terminated, odd bytes), symlinks out of the share, links and renames
 * across shares and into the hub; the host moving, unlinking or replacing
 * what the guest holds, and removing a share; share paths the spec and the
 * GANTRY_HOME check refuse. Each case is named after its number in the
 * design note's table (1-40; 41 on were added since, docs/shares.md lists
 * them all) and runs against the share server over a temp tree. Each
 * asserts the errno and that the canary directory beside the shares is
 * unchanged: names, modes, sizes, mtimes, inodes and contents. What a
 * request does to a node it reached is in test_share_escape_ops.c; the
 * host's races are in test_share_escape_races.c. */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "common/settings.h"
#include "share/spec.h"
#include "share_client.h"
/* The suite's shared helpers; not every one of them is used here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "share_escape_rig.h"
#pragma GCC diagnostic pop

static const char *bad_names[] = { "..", ".", "a/b", "/etc", "", "../canary" };

/* 1-4: "..", ".", multi-component and absolute names, the empty name: in
 * LOOKUP at the hub, the export root and deeper, and in every op that
 * takes a name. */
static void test_case01_04_bad_names(void **state)
{
	FX();
	int64_t d = cl_lookup(c, c->rw, "d");
	uint64_t dirs[] = { FUSE_ROOT_ID, c->rw, (uint64_t)d };
	struct fuse_mkdir_in mk = { .mode = 0755 };
	struct fuse_mknod_in mn = { .mode = S_IFREG | 0644 };
	struct fuse_rename_in rn = { .newdir = c->rw };
	struct fuse_link_in ln = { .oldnodeid = (uint64_t)cl_lookup(c, c->rw, "f") };
	uint64_t fh;

	for (size_t i = 0; i < ARRAY_SIZE(bad_names); i++) {
		const char *n = bad_names[i];

		for (size_t j = 0; j < ARRAY_SIZE(dirs); j++)
			assert_int_equal(cl_lookup(c, dirs[j], n), -EINVAL);
		assert_int_equal(CALL(c, FUSE_MKDIR, c->rw, ARG(mk), STR(n)), -EINVAL);
		assert_int_equal(CALL(c, FUSE_MKNOD, c->rw, ARG(mn), STR(n)), -EINVAL);
		assert_int_equal(cl_create(c, c->rw, n, O_RDWR | O_CREAT, 0644, &fh), -EINVAL);
		assert_int_equal(CALL(c, FUSE_SYMLINK, c->rw, STR(n), STR("t")), -EINVAL);
		assert_int_equal(CALL(c, FUSE_UNLINK, c->rw, STR(n)), -EINVAL);
		assert_int_equal(CALL(c, FUSE_RMDIR, c->rw, STR(n)), -EINVAL);
		assert_int_equal(CALL(c, FUSE_RENAME, c->rw, ARG(rn), STR("f"), STR(n)), -EINVAL);
		assert_int_equal(CALL(c, FUSE_RENAME, c->rw, ARG(rn), STR(n), STR("g")), -EINVAL);
		assert_int_equal(CALL(c, FUSE_LINK, c->rw, ARG(ln), STR(n)), -EINVAL);
	}
	assert_string_equal(cl_get(c, "share/f"), "hello");
	canary_same(f);
}

/* 5: a 256-byte name; 255 is fine. */
static void test_case05_long_name(void **state)
{
	FX();
	char name[257];

	memset(name, 'a', 256);
	name[256] = 0;
	assert_int_equal(cl_lookup(c, c->rw, name), -ENAMETOOLONG);
	name[255] = 0;
	assert_int_equal(cl_lookup(c, c->rw, name), -ENOENT);
	canary_same(f);
}

/* 6: a name not NUL-terminated inside the request, and trailing bytes. */
static void test_case06_unterminated(void **state)
{
	FX();

	assert_int_equal(CALL(c, FUSE_LOOKUP, c->rw, { "f", 1 }), -EINVAL);
	assert_int_equal(CALL(c, FUSE_LOOKUP, c->rw, { "f\0x", 3 }), -EINVAL);
	assert_int_equal(CALL(c, FUSE_UNLINK, c->rw, { "f", 1 }), -EINVAL);
	assert_int_equal(CALL(c, FUSE_SYMLINK, c->rw, STR("s"), { "t", 1 }), -EINVAL);
	assert_string_equal(cl_get(c, "share/f"), "hello");
	canary_same(f);
}

/* 7: an absolute symlink in the share to a host file outside it (the
 * canary's secret, and /etc/passwd): a symlink node whose target is text
 * the guest resolves in its own root; the server opens nothing through it,
 * lists its own attributes, and READLINK hands back the text. */
static void test_case07_absolute_symlink(void **state)
{
	FX();
	char secret[512];
	const char *targets[] = { secret, "/etc/passwd" };

	snprintf(secret, sizeof(secret), "%s/canary/secret", c->root);
	for (size_t i = 0; i < ARRAY_SIZE(targets); i++) {
		int64_t l;

		assert_int_equal(unlink(cl_path(c, "share/p")) == 0 || errno == ENOENT, 1);
		assert_int_equal(symlink(targets[i], cl_path(c, "share/p")), 0);
		l = cl_lookup(c, c->rw, "p");
		assert_true(l > 1);
		assert_true(S_ISLNK(cl_attr(c, (uint64_t)l)->mode));
		assert_int_equal(cl_attr(c, (uint64_t)l)->size, strlen(targets[i]));
		assert_int_equal(CALL0(c, FUSE_READLINK, (uint64_t)l), 0);
		assert_int_equal(c->rep_len, strlen(targets[i]));
		assert_memory_equal(c->rep, targets[i], c->rep_len);
		assert_int_equal(cl_open(c, FUSE_OPEN, (uint64_t)l, O_RDONLY), -ELOOP);
		assert_int_equal(cl_open(c, FUSE_OPEN, (uint64_t)l, O_WRONLY | O_APPEND), -ELOOP);
		assert_int_equal(cl_lookup(c, (uint64_t)l, "x"), -ENOTDIR);
		/* READLINK of anything else is EINVAL, not some file's content. */
		assert_int_equal(CALL0(c, FUSE_READLINK, (uint64_t)cl_lookup(c, c->rw, "f")),
				 -EINVAL);
		cl_forget(c, (uint64_t)l, 1);
	}
	canary_same(f);
}

/* 8: relative symlinks that climb out of the share, to the canary's file
 * and to the canary directory: the same, and a directory link is not a
 * directory to any operation that takes a parent (ENOTDIR from each). */
static void test_case08_relative_symlink(void **state)
{
	FX();
	struct fuse_mkdir_in mk = { .mode = 0755 };
	struct fuse_mknod_in mn = { .mode = S_IFREG | 0644 };
	struct fuse_rename_in rn = { .newdir = c->rw };
	struct fuse_link_in ln = { .oldnodeid = (uint64_t)cl_lookup(c, c->rw, "f") };
	uint64_t fh;
	int64_t q, dl;

	assert_int_equal(symlink("../../../../../../../../canary/secret", cl_path(c, "share/q")),
			 0);
	assert_int_equal(symlink("../canary", cl_path(c, "share/dl")), 0);
	q = cl_lookup(c, c->rw, "q");
	assert_int_equal(cl_open(c, FUSE_OPEN, (uint64_t)q, O_RDONLY), -ELOOP);
	assert_int_equal(CALL0(c, FUSE_READLINK, (uint64_t)q), 0);
	assert_false(leaked(c));
	dl = cl_lookup(c, c->rw, "dl");
	assert_true(S_ISLNK(cl_attr(c, (uint64_t)dl)->mode));
	assert_int_equal(cl_lookup(c, (uint64_t)dl, "secret"), -ENOTDIR);
	assert_int_equal(cl_open(c, FUSE_OPENDIR, (uint64_t)dl, O_RDONLY), -ENOTDIR);
	assert_int_equal(CALL(c, FUSE_MKDIR, (uint64_t)dl, ARG(mk), STR("m")), -ENOTDIR);
	assert_int_equal(CALL(c, FUSE_MKNOD, (uint64_t)dl, ARG(mn), STR("m")), -ENOTDIR);
	assert_int_equal(cl_create(c, (uint64_t)dl, "m", O_RDWR | O_CREAT, 0644, &fh), -ENOTDIR);
	assert_int_equal(CALL(c, FUSE_SYMLINK, (uint64_t)dl, STR("m"), STR("t")), -ENOTDIR);
	assert_int_equal(CALL(c, FUSE_UNLINK, (uint64_t)dl, STR("secret")), -ENOTDIR);
	assert_int_equal(CALL(c, FUSE_RMDIR, (uint64_t)dl, STR("sub")), -ENOTDIR);
	assert_int_equal(CALL(c, FUSE_RENAME, (uint64_t)dl, ARG(rn), STR("secret"), STR("s")),
			 -ENOTDIR);
	rn.newdir = (uint64_t)dl;
	assert_int_equal(CALL(c, FUSE_RENAME, c->rw, ARG(rn), STR("f"), STR("f")), -ENOTDIR);
	assert_int_equal(CALL(c, FUSE_LINK, (uint64_t)dl, ARG(ln), STR("f")), -ENOTDIR);
	assert_string_equal(cl_get(c, "share/f"), "hello");
	canary_same(f);
}

/* 9: OPEN, SETATTR size and xattrs on a symlink node: nothing followed. */
static void test_case09_symlink_node(void **state)
{
	FX();
	struct fuse_setattr_in sa = { .valid = FATTR_SIZE, .size = 0 };
	struct fuse_setxattr_in sx = { .size = 1 };
	int64_t l;

	assert_int_equal(symlink("../canary/secret", cl_path(c, "share/l")), 0);
	l = cl_lookup(c, c->rw, "l");
	assert_true(l > 1);
	assert_true(S_ISLNK(cl_attr(c, (uint64_t)l)->mode));
	assert_int_equal(cl_open(c, FUSE_OPEN, (uint64_t)l, O_RDONLY), -ELOOP);
	assert_int_equal(cl_open(c, FUSE_OPEN, (uint64_t)l, O_RDWR | O_TRUNC), -ELOOP);
	assert_int_equal(cl_open(c, FUSE_OPENDIR, (uint64_t)l, O_RDONLY), -ENOTDIR);
	assert_int_equal(cl_setattr(c, (uint64_t)l, &sa), -EPERM);
	sa = (struct fuse_setattr_in){ .valid = FATTR_MODE, .mode = 0777 };
	assert_int_equal(cl_setattr(c, (uint64_t)l, &sa), -EOPNOTSUPP);
	assert_int_equal(CALL(c, FUSE_SETXATTR, (uint64_t)l, { &sx, 8 }, STR("user.x"), { "v", 1 }),
			 -EPERM);
	assert_int_equal(cl_lookup(c, (uint64_t)l, "secret"), -ENOTDIR);
	canary_same(f);
}

/* 10: the host swaps a file for a symlink between LOOKUP and OPEN. */
static void test_case10_swap_before_open(void **state)
{
	FX();
	int64_t n = cl_lookup(c, c->rw, "f");
	int64_t fh;

	assert_int_equal(rename(cl_path(c, "share/f"), cl_path(c, "share/f.old")), 0);
	assert_int_equal(symlink("../canary/secret", cl_path(c, "share/f")), 0);
	fh = cl_open(c, FUSE_OPEN, (uint64_t)n, O_RDWR);
	assert_true(fh > 0);
	assert_int_equal(cl_read(c, (uint64_t)n, (uint64_t)fh, 0, 100), 5);
	assert_memory_equal(c->rep, "hello", 5);
	assert_int_equal(cl_write(c, (uint64_t)n, (uint64_t)fh, 0, "HELLO"), 0);
	assert_string_equal(cl_get(c, "share/f.old"), "HELLO");
	/* A fresh LOOKUP sees the link, which does not open. */
	int64_t l = cl_lookup(c, c->rw, "f");
	assert_int_equal(cl_open(c, FUSE_OPEN, (uint64_t)l, O_RDWR), -ELOOP);
	canary_same(f);
}

/* 11: a symlink planted where the guest creates. */
static void test_case11_planted_before_create(void **state)
{
	FX();
	uint64_t fh;

	assert_int_equal(symlink("../canary/new", cl_path(c, "share/new")), 0);
	assert_int_equal(symlink("../canary/secret", cl_path(c, "share/new2")), 0);
	assert_int_equal(cl_create(c, c->rw, "new", O_RDWR | O_CREAT, 0644, &fh), -ELOOP);
	assert_int_equal(cl_create(c, c->rw, "new", O_RDWR | O_CREAT | O_EXCL, 0644, &fh), -EEXIST);
	assert_int_equal(cl_create(c, c->rw, "new2", O_RDWR | O_CREAT | O_TRUNC, 0644, &fh),
			 -ELOOP);
	assert_null(cl_get(c, "canary/new"));
	canary_same(f);
}

/* 12: the host swaps a directory for a symlink before a child LOOKUP. */
static void test_case12_dir_swapped(void **state)
{
	FX();
	int64_t d = cl_lookup(c, c->rw, "d");

	assert_int_equal(rename(cl_path(c, "share/d"), cl_path(c, "share/d.old")), 0);
	assert_int_equal(symlink("../canary", cl_path(c, "share/d")), 0);
	assert_int_equal(cl_lookup(c, (uint64_t)d, "secret"), -ENOENT);
	assert_true(cl_lookup(c, (uint64_t)d, "x") > 1);
	int64_t l = cl_lookup(c, c->rw, "d");
	assert_int_equal(cl_lookup(c, (uint64_t)l, "secret"), -ENOTDIR);
	assert_int_equal(cl_open(c, FUSE_OPENDIR, (uint64_t)l, O_RDONLY), -ENOTDIR);
	struct fuse_mkdir_in mk = { .mode = 0755 };
	assert_int_equal(CALL(c, FUSE_MKDIR, (uint64_t)l, ARG(mk), STR("m")), -ENOTDIR);
	canary_same(f);
}

/* 13: LINK of another export's node, or of a forged node id. */
static void test_case13_link_across(void **state)
{
	FX();
	struct fuse_link_in ln = { .oldnodeid = (uint64_t)cl_lookup(c, c->other, "g") };

	assert_int_equal(CALL(c, FUSE_LINK, c->rw, ARG(ln), STR("g")), -EXDEV);
	ln.oldnodeid = 0x123456789;
	assert_int_equal(CALL(c, FUSE_LINK, c->rw, ARG(ln), STR("g")), -ESTALE);
	ln.oldnodeid = FUSE_ROOT_ID;
	assert_int_equal(CALL(c, FUSE_LINK, c->rw, ARG(ln), STR("g")), -EROFS);
	/* and RENAME across exports, or into the hub */
	struct fuse_rename_in rn = { .newdir = c->other };
	assert_int_equal(CALL(c, FUSE_RENAME, c->rw, ARG(rn), STR("f"), STR("f")), -EXDEV);
	rn.newdir = FUSE_ROOT_ID;
	assert_int_equal(CALL(c, FUSE_RENAME, c->rw, ARG(rn), STR("f"), STR("f")), -EROFS);
	assert_null(cl_get(c, "share/g"));
	canary_same(f);
}

/* 14: LINK of a symlink node pointing outside links the symlink itself. */
static void test_case14_link_symlink(void **state)
{
	FX();
	char buf[64] = { 0 };
	struct stat st;

	assert_int_equal(symlink("../canary/secret", cl_path(c, "share/l")), 0);
	struct fuse_link_in ln = { .oldnodeid = (uint64_t)cl_lookup(c, c->rw, "l") };
	assert_int_equal(CALL(c, FUSE_LINK, c->rw, ARG(ln), STR("l2")), 0);
	assert_int_equal(lstat(cl_path(c, "share/l2"), &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_true(readlink(cl_path(c, "share/l2"), buf, sizeof(buf) - 1) > 0);
	assert_string_equal(buf, "../canary/secret");
	/* Directories do not link. */
	ln.oldnodeid = (uint64_t)cl_lookup(c, c->rw, "d");
	assert_int_equal(CALL(c, FUSE_LINK, c->rw, ARG(ln), STR("d2")), -EPERM);
	canary_same(f);
}

/* 15: a hard link the host user made to a file outside is readable (the
 * host user's choice, documented), and changes nothing else outside. */
static void test_case15_host_hardlink(void **state)
{
	FX();
	int64_t n, fh;

	assert_int_equal(link(cl_path(c, "canary/secret"), cl_path(c, "share/hl")), 0);
	free(f->canary);
	f->canary = cl_tree(c, "canary");
	n = cl_lookup(c, c->ro, "hl");
	fh = cl_open(c, FUSE_OPEN, (uint64_t)n, O_RDONLY);
	assert_int_equal(cl_read(c, (uint64_t)n, (uint64_t)fh, 0, 64), 10);
	assert_int_equal(cl_lookup(c, c->ro, "secret"), -ENOENT);
	canary_same(f);
}

/* 16: a link into procfs's magic links: a symlink node, never opened. */
static void test_case16_proc_links(void **state)
{
	FX();
	int64_t self;

	assert_int_equal(symlink("/proc/self/root", cl_path(c, "share/self")), 0);
	assert_int_equal(symlink("/proc/self/fd/3", cl_path(c, "share/fd3")), 0);
	self = cl_lookup(c, c->rw, "self");
	assert_true(S_ISLNK(cl_attr(c, (uint64_t)self)->mode));
	assert_int_equal(cl_lookup(c, (uint64_t)self, "etc"), -ENOTDIR);
	assert_int_equal(cl_open(c, FUSE_OPEN, (uint64_t)self, O_RDONLY), -ELOOP);
	assert_int_equal(cl_open(c, FUSE_OPEN, (uint64_t)cl_lookup(c, c->rw, "fd3"), O_RDONLY),
			 -ELOOP);
	canary_same(f);
}

/* 21: RENAME2 with WHITEOUT, and with an unknown flag. */
static void test_case21_rename_flags(void **state)
{
	FX();
	struct fuse_rename2_in r2 = { .newdir = c->rw, .flags = RENAME_WHITEOUT };

	assert_int_equal(CALL(c, FUSE_RENAME2, c->rw, ARG(r2), STR("f"), STR("g")), -EPERM);
	r2.flags = 0x80;
	assert_int_equal(CALL(c, FUSE_RENAME2, c->rw, ARG(r2), STR("f"), STR("g")), -EINVAL);
	assert_string_equal(cl_get(c, "share/f"), "hello");
	canary_same(f);
}

/* 28: moves and links across shares, the same directory's ro alias as the
 * target, the hub as source or target, a file or symlink as the new
 * parent: EXDEV, EROFS, ENOTDIR; COPY_FILE_RANGE is ENOSYS (the guest
 * copies). Both shares' trees are unchanged. */
static void test_case28_across_shares(void **state)
{
	FX();
	cleanup_free char *share = cl_tree(c, "share"), *other = cl_tree(c, "other");
	struct fuse_rename2_in r2 = { .newdir = c->other };
	struct fuse_link_in ln = { .oldnodeid = (uint64_t)cl_lookup(c, c->ro, "f") };
	struct fuse_mkdir_in mk = { .mode = 0755 };
	struct fuse_setattr_in sa = { .valid = FATTR_MODE, .mode = S_IFDIR | 0777 };
	uint32_t flags[] = { 0, RENAME_NOREPLACE, RENAME_EXCHANGE };
	uint64_t fh;

	assert_int_equal(symlink("../canary", cl_path(c, "share/dl")), 0);
	free(share);
	share = cl_tree(c, "share");
	for (size_t i = 0; i < ARRAY_SIZE(flags); i++) {
		r2.flags = flags[i];
		r2.newdir = c->other;
		assert_int_equal(CALL(c, FUSE_RENAME2, c->rw, ARG(r2), STR("f"), STR("g")), -EXDEV);
		r2.newdir = c->ro;
		assert_int_equal(CALL(c, FUSE_RENAME2, c->rw, ARG(r2), STR("f"), STR("f2")),
				 -EXDEV);
		assert_int_equal(CALL(c, FUSE_RENAME2, c->ro, ARG(r2), STR("f"), STR("f2")),
				 -EROFS);
		r2.newdir = FUSE_ROOT_ID;
		assert_int_equal(CALL(c, FUSE_RENAME2, c->rw, ARG(r2), STR("f"), STR("f2")),
				 -EROFS);
		assert_int_equal(CALL(c, FUSE_RENAME2, FUSE_ROOT_ID, ARG(r2), STR("rw"), STR("x")),
				 -EROFS);
		r2.newdir = (uint64_t)cl_lookup(c, c->rw, "f");
		assert_int_equal(CALL(c, FUSE_RENAME2, c->rw, ARG(r2), STR("d"), STR("d")),
				 -ENOTDIR);
		r2.newdir = (uint64_t)cl_lookup(c, c->rw, "dl");
		assert_int_equal(CALL(c, FUSE_RENAME2, c->rw, ARG(r2), STR("d"), STR("d")),
				 -ENOTDIR);
	}
	/* EXCHANGE with WHITEOUT, across or not: EPERM before anything else */
	r2 = (struct fuse_rename2_in){ .newdir = c->other,
				       .flags = RENAME_EXCHANGE | RENAME_WHITEOUT };
	assert_int_equal(CALL(c, FUSE_RENAME2, c->rw, ARG(r2), STR("f"), STR("g")), -EPERM);
	assert_int_equal(CALL(c, FUSE_LINK, c->rw, ARG(ln), STR("f2")), -EXDEV);
	assert_int_equal(CALL(c, FUSE_LINK, c->other, ARG(ln), STR("f2")), -EXDEV);
	ln.oldnodeid = (uint64_t)cl_lookup(c, c->rw, "f");
	assert_int_equal(CALL(c, FUSE_LINK, c->other, ARG(ln), STR("f2")), -EXDEV);
	assert_int_equal(CALL(c, FUSE_LINK, FUSE_ROOT_ID, ARG(ln), STR("f2")), -EROFS);
	/* the hub takes no change of any kind */
	assert_int_equal(CALL(c, FUSE_MKDIR, FUSE_ROOT_ID, ARG(mk), STR("new")), -EROFS);
	assert_int_equal(CALL(c, FUSE_SYMLINK, FUSE_ROOT_ID, STR("new"), STR("/")), -EROFS);
	assert_int_equal(CALL(c, FUSE_RMDIR, FUSE_ROOT_ID, STR("rw")), -EROFS);
	assert_int_equal(CALL(c, FUSE_UNLINK, FUSE_ROOT_ID, STR("rw")), -EROFS);
	assert_int_equal(cl_create(c, FUSE_ROOT_ID, "new", O_RDWR | O_CREAT, 0644, &fh), -EROFS);
	assert_int_equal(cl_setattr(c, FUSE_ROOT_ID, &sa), -EROFS);
	uint8_t cfr[64] = { 0 };
	assert_int_equal(CALL(c, FUSE_COPY_FILE_RANGE, c->rw, { cfr, sizeof(cfr) }), -ENOSYS);
	cleanup_free char *share_now = cl_tree(c, "share"), *other_now = cl_tree(c, "other");
	assert_string_equal(share, share_now);
	assert_string_equal(other, other_now);
	canary_same(f);
}

/* 29: a file open in the guest, unlinked on the host and a new one made
 * under its name: the guest's handle and node keep the old inode (read,
 * write, truncate, fstat with nlink 0), LINK cannot bring it back into the
 * share (ENOENT), the new file is reached only by a new LOOKUP, and the
 * inode goes when the guest releases and forgets it. */
static void test_case29_unlinked_open(void **state)
{
	FX();
	int64_t n = cl_lookup(c, c->rw, "f");
	int64_t fh = cl_open(c, FUSE_OPEN, (uint64_t)n, O_RDWR);
	struct fuse_link_in ln = { .oldnodeid = (uint64_t)n };
	struct fuse_setattr_in sa = { .valid = FATTR_SIZE, .size = 2 };
	struct fuse_getattr_in ga = { .getattr_flags = FUSE_GETATTR_FH, .fh = (uint64_t)fh };
	struct fs_stats before, after;

	assert_true(fh > 0);
	assert_int_equal(unlink(cl_path(c, "share/f")), 0);
	cl_put(c, "share/f", "new file");
	assert_int_equal(cl_read(c, (uint64_t)n, (uint64_t)fh, 0, 64), 5);
	assert_memory_equal(c->rep, "hello", 5);
	assert_int_equal(cl_write(c, (uint64_t)n, (uint64_t)fh, 0, "HELLO"), 0);
	assert_int_equal(CALL(c, FUSE_GETATTR, (uint64_t)n, ARG(ga)), 0);
	assert_int_equal(((const struct fuse_attr_out *)c->rep)->attr.nlink, 0);
	assert_int_equal(cl_setattr(c, (uint64_t)n, &sa), 0);
	assert_int_equal(cl_attr(c, (uint64_t)n)->size, 2);
	assert_int_equal(CALL(c, FUSE_LINK, c->rw, ARG(ln), STR("back")), -ENOENT);
	assert_int_equal(access(cl_path(c, "share/back"), F_OK), -1);
	assert_int_equal(cl_read(c, (uint64_t)n, (uint64_t)fh, 0, 64), 2);
	assert_memory_equal(c->rep, "HE", 2);
	assert_string_equal(cl_get(c, "share/f"), "new file");
	int64_t m = cl_lookup(c, c->rw, "f");
	assert_true(m > 1 && m != n);
	fs_server_stats(c->s, &before);
	assert_int_equal(cl_release(c, FUSE_RELEASE, (uint64_t)n, (uint64_t)fh), 0);
	assert_int_equal(cl_forget(c, (uint64_t)n, 1), 1);
	fs_server_stats(c->s, &after);
	assert_int_equal(after.nodes, before.nodes - 1);
	assert_int_equal(after.handles, before.handles - 1);
	canary_same(f);
}

static int fds_under(const char *dir)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d))) {
		char link[300], buf[600];
		ssize_t k;

		snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
		k = readlink(link, buf, sizeof(buf) - 1);
		if (k <= 0)
			continue;
		buf[k] = 0;
		n += strncmp(buf, dir, strlen(dir)) == 0;
	}
	closedir(d);
	return n;
}

/* 35: a share removed while the guest holds a file open there: refused
 * without force (EBUSY); with force every node and handle goes, the old
 * ids answer ESTALE, no fd of this process points into the directory, and
 * the same tag added again gives new ids that the old ones do not reach. */
static void test_case35_remove_export(void **state)
{
	FX();
	int64_t g = cl_lookup(c, c->other, "g");
	int64_t fh = cl_open(c, FUSE_OPEN, (uint64_t)g, O_RDWR);
	struct fs_export_opts rw = { 0 };
	gantry_error_t err = NULL;
	char dir[512];
	int fd;

	snprintf(dir, sizeof(dir), "%s/other", c->root);
	assert_true(fh > 0 && fds_under(dir) > 0);
	assert_int_equal(fs_server_export_handles(c->s, "other"), 1);
	assert_int_not_equal(fs_server_remove_export(c->s, "other", false, &err), 0);
	gantry_error_free(&err);
	assert_int_equal(cl_read(c, (uint64_t)g, (uint64_t)fh, 0, 8), 1);
	assert_int_equal(fs_server_remove_export(c->s, "other", true, &err), 0);
	assert_int_equal(cl_read(c, (uint64_t)g, (uint64_t)fh, 0, 8), -ESTALE);
	assert_int_equal(cl_write(c, (uint64_t)g, (uint64_t)fh, 0, "x"), -ESTALE);
	assert_int_equal(cl_lookup(c, c->other, "g"), -ESTALE);
	assert_int_equal(cl_lookup(c, FUSE_ROOT_ID, "other"), -ENOENT);
	assert_int_equal(fds_under(dir), 0);
	fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(fs_server_add_export(c->s, "other", fd, &rw, &err), 0);
	close(fd);
	int64_t again = cl_lookup(c, FUSE_ROOT_ID, "other");
	assert_true(again > 1 && (uint64_t)again != c->other);
	assert_int_equal(cl_lookup(c, c->other, "g"), -ESTALE);
	assert_true(cl_lookup(c, (uint64_t)again, "g") > g);
	assert_string_equal(cl_get(c, "other/g"), "g");
	canary_same(f);
}

/* What the guest can do with a share root the host deleted: nothing. */
static void root_is_dead(struct cl *c)
{
	struct fuse_mkdir_in mk = { .mode = 0755 };
	uint64_t roots[] = { c->rw, c->ro };
	uint64_t fh;

	for (size_t i = 0; i < ARRAY_SIZE(roots); i++) {
		int64_t dh;

		assert_int_equal(cl_lookup(c, roots[i], "f"), -ENOENT);
		assert_int_equal(cl_lookup(c, roots[i], "secret"), -ENOENT);
		dh = cl_open(c, FUSE_OPENDIR, roots[i], O_RDONLY);
		assert_true(dh > 0);
		assert_int_equal(readdir_call(c, FUSE_READDIRPLUS, roots[i], (uint64_t)dh, 0),
				 -ENOENT);
		cl_release(c, FUSE_RELEASEDIR, roots[i], (uint64_t)dh);
	}
	assert_int_equal(cl_create(c, c->rw, "new", O_RDWR | O_CREAT, 0644, &fh), -ENOENT);
	assert_int_equal(CALL(c, FUSE_MKDIR, c->rw, ARG(mk), STR("new")), -ENOENT);
	assert_int_equal(CALL(c, FUSE_SYMLINK, c->rw, STR("new"), STR("t")), -ENOENT);
}

/* 36: the host removes the share's root and makes a new directory (then a
 * symlink to the canary) under its path: the guest keeps the old, deleted
 * root, which finds, lists and takes nothing (ENOENT); the new
 * directory is not reachable until the share is added again. */
static void test_case36_root_replaced(void **state)
{
	FX();

	assert_int_equal(unlink(cl_path(c, "share/f")), 0);
	assert_int_equal(unlink(cl_path(c, "share/d/x")), 0);
	assert_int_equal(rmdir(cl_path(c, "share/d")), 0);
	assert_int_equal(rmdir(cl_path(c, "share")), 0);
	assert_int_equal(mkdir(cl_path(c, "share"), 0755), 0);
	cl_put(c, "share/f", "replaced");
	root_is_dead(c);
	assert_int_equal(unlink(cl_path(c, "share/f")), 0);
	assert_int_equal(rmdir(cl_path(c, "share")), 0);
	assert_int_equal(symlink("canary", cl_path(c, "share")), 0);
	root_is_dead(c);
	assert_null(cl_get(c, "canary/new"));
	canary_same(f);
}

/* 37: a container path through procfs or with `..` (how a container could
 * point the bind elsewhere): refused by the share spec before anything is
 * started; the server itself never sees a container path. */
static void test_case37_ctr_path(void **state)
{
	FX();
	const char *bad[] = { "t=/srv@/proc/1/root/etc", "t=/srv@/workspace/../proc/self",
			      "t=/srv@/sys/kernel",	 "t=/srv@/dev/sda",
			      "t=/srv@/run/gantry/x",	 "t=/srv@/",
			      "t=/srv@workspace" };
	struct share_spec sp;

	(void)c;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		gantry_error_t err = NULL;

		assert_true(share_spec_parse(bad[i], "/", &sp, &err) < 0);
		gantry_error_free(&err);
	}
	canary_same(f);
}

/* 38: the host moves a shared subdirectory outside while the guest holds
 * it: its subtree stays reachable, its new siblings do not. */
static void test_case38_moved_outside(void **state)
{
	FX();
	int64_t d = cl_lookup(c, c->rw, "d");

	assert_int_equal(mkdir(cl_path(c, "outside"), 0755), 0);
	cl_put(c, "outside/sibling", "s");
	assert_int_equal(rename(cl_path(c, "share/d"), cl_path(c, "outside/d")), 0);
	assert_true(cl_lookup(c, (uint64_t)d, "x") > 1);
	assert_int_equal(cl_lookup(c, (uint64_t)d, ".."), -EINVAL);
	assert_int_equal(cl_lookup(c, (uint64_t)d, "sibling"), -ENOENT);
	assert_int_equal(cl_lookup(c, c->rw, "d"), -ENOENT);
	canary_same(f);
}

/* 39: GANTRY_HOME, a directory inside it, one above it and a symlink to
 * it as a share's host path: refused when the share is checked; the
 * canary beside them is fine. */
static void test_case39_gantry_home(void **state)
{
	FX();
	char home[512], link[512], parent[512], inner[512];
	const char *bad[] = { home, inner, parent, link };
	cleanup_free char *old = getenv("GANTRY_HOME") ? xstrdup(getenv("GANTRY_HOME")) : NULL;

	snprintf(parent, sizeof(parent), "%s/state", c->root);
	snprintf(home, sizeof(home), "%s/state/home", c->root);
	snprintf(inner, sizeof(inner), "%s/state/home/sandboxes", c->root);
	snprintf(link, sizeof(link), "%s/home-link", c->root);
	assert_int_equal(mkdir(parent, 0755), 0);
	assert_int_equal(mkdir(home, 0700), 0);
	assert_int_equal(mkdir(inner, 0700), 0);
	assert_int_equal(symlink(home, link), 0);
	setenv("GANTRY_HOME", home, 1);
	gantry_settings_load();
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		gantry_error_t err = NULL;

		assert_true(share_host_check(bad[i], NULL, &err) < 0);
		gantry_error_free(&err);
	}
	gantry_error_t err = NULL;
	assert_int_equal(share_host_check(cl_path(c, "canary"), NULL, &err), 0);
	if (old)
		setenv("GANTRY_HOME", old, 1);
	else
		unsetenv("GANTRY_HOME");
	gantry_settings_load();
	canary_same(f);
}

/* 40: names with a newline, 0xff bytes and 255 bytes round-trip. */
static void test_case40_odd_names(void **state)
{
	FX();
	char long_name[256];
	const char *names[] = { "new\nline", "\xff\xfe", long_name };
	struct fuse_read_in rd = { .size = 65536 };
	const struct fuse_dirent *d;
	uint64_t fh;
	int found = 0;

	memset(long_name, 'n', 255);
	long_name[255] = 0;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		assert_true(cl_create(c, c->rw, names[i], O_RDWR | O_CREAT, 0644, &fh) > 1);
	}
	rd.fh = (uint64_t)cl_open(c, FUSE_OPENDIR, c->rw, O_RDONLY);
	assert_int_equal(CALL(c, FUSE_READDIR, c->rw, ARG(rd)), 0);
	for (size_t off = 0; off < c->rep_len; off += FUSE_DIRENT_SIZE(d)) {
		d = (const void *)(c->rep + off);
		for (size_t i = 0; i < ARRAY_SIZE(names); i++)
			found += d->namelen == strlen(names[i]) &&
				 !memcmp(d->name, names[i], d->namelen);
	}
	assert_int_equal(found, 3);
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		char rel[300];

		snprintf(rel, sizeof(rel), "share/%s", names[i]);
		assert_int_equal(access(cl_path(c, rel), F_OK), 0);
	}
	canary_same(f);
}

/* 53: a directory the guest holds (node and open handle) removed on the
 * host and replaced, by a symlink to the canary and then by a new
 * directory: the old node finds, lists and takes nothing (ENOENT), even
 * by LINK or RENAME into it; the replacement is a new
 * node, reached only by a new LOOKUP. */
static void test_case53_dir_replaced(void **state)
{
	FX();
	int64_t d = cl_lookup(c, c->rw, "d");
	int64_t dh = cl_open(c, FUSE_OPENDIR, (uint64_t)d, O_RDONLY);
	struct fuse_mkdir_in mk = { .mode = 0755 };
	struct fuse_mknod_in mn = { .mode = S_IFREG | 0644 };
	struct fuse_link_in ln = { .oldnodeid = (uint64_t)cl_lookup(c, c->rw, "f") };
	struct fuse_rename_in rn = { .newdir = (uint64_t)d };
	uint64_t fh;

	assert_int_equal(unlink(cl_path(c, "share/d/x")), 0);
	assert_int_equal(rmdir(cl_path(c, "share/d")), 0);
	for (int round = 0; round < 2; round++) {
		if (round == 0) {
			assert_int_equal(symlink("../canary", cl_path(c, "share/d")), 0);
		} else {
			assert_int_equal(unlink(cl_path(c, "share/d")), 0);
			assert_int_equal(mkdir(cl_path(c, "share/d"), 0755), 0);
			cl_put(c, "share/d/x", "new x");
		}
		assert_int_equal(cl_lookup(c, (uint64_t)d, "x"), -ENOENT);
		assert_int_equal(cl_lookup(c, (uint64_t)d, "secret"), -ENOENT);
		assert_int_equal(readdir_call(c, FUSE_READDIRPLUS, (uint64_t)d, (uint64_t)dh, 0),
				 -ENOENT);
		assert_int_equal(cl_create(c, (uint64_t)d, "n", O_RDWR | O_CREAT, 0644, &fh),
				 -ENOENT);
		assert_int_equal(CALL(c, FUSE_MKDIR, (uint64_t)d, ARG(mk), STR("n")), -ENOENT);
		assert_int_equal(CALL(c, FUSE_MKNOD, (uint64_t)d, ARG(mn), STR("n")), -ENOENT);
		assert_int_equal(CALL(c, FUSE_SYMLINK, (uint64_t)d, STR("n"), STR("t")), -ENOENT);
		assert_int_equal(CALL(c, FUSE_LINK, (uint64_t)d, ARG(ln), STR("n")), -ENOENT);
		assert_int_equal(CALL(c, FUSE_RENAME, c->rw, ARG(rn), STR("f"), STR("n")), -ENOENT);
		int64_t now = cl_lookup(c, c->rw, "d");
		assert_true(now > 1 && now != d);
		if (round == 0)
			assert_int_equal(cl_lookup(c, (uint64_t)now, "secret"), -ENOTDIR);
		else
			assert_true(cl_lookup(c, (uint64_t)now, "x") > 1);
	}
	assert_string_equal(cl_get(c, "share/f"), "hello");
	assert_null(cl_get(c, "canary/n"));
	canary_same(f);
}

/* 54: RENAME_EXCHANGE inside the share of a directory and a symlink to the
 * canary: only the two names swap (the host sees the link moved, the
 * canary untouched); the guest's node of the directory still reaches its
 * children; exchanging with a missing name is ENOENT, and EXCHANGE with
 * NOREPLACE EINVAL. */
static void test_case54_exchange(void **state)
{
	FX();
	int64_t d = cl_lookup(c, c->rw, "d");
	struct fuse_rename2_in r2 = { .newdir = c->rw, .flags = RENAME_EXCHANGE };
	char buf[64] = { 0 };

	assert_int_equal(symlink("../canary", cl_path(c, "share/dl")), 0);
	assert_int_equal(CALL(c, FUSE_RENAME2, c->rw, ARG(r2), STR("d"), STR("dl")), 0);
	assert_true(readlink(cl_path(c, "share/d"), buf, sizeof(buf) - 1) > 0);
	assert_string_equal(buf, "../canary");
	assert_string_equal(cl_get(c, "share/dl/x"), "x");
	assert_true(cl_lookup(c, (uint64_t)d, "x") > 1);
	assert_int_equal(cl_lookup(c, (uint64_t)cl_lookup(c, c->rw, "d"), "secret"), -ENOTDIR);
	assert_int_equal(CALL(c, FUSE_RENAME2, c->rw, ARG(r2), STR("d"), STR("nothing")), -ENOENT);
	r2.flags = RENAME_EXCHANGE | RENAME_NOREPLACE;
	assert_int_equal(CALL(c, FUSE_RENAME2, c->rw, ARG(r2), STR("d"), STR("dl")), -EINVAL);
	/* exchanging the file with the directory link, into the subdirectory */
	r2 = (struct fuse_rename2_in){ .newdir = (uint64_t)d, .flags = RENAME_EXCHANGE };
	assert_int_equal(CALL(c, FUSE_RENAME2, c->rw, ARG(r2), STR("d"), STR("x")), 0);
	memset(buf, 0, sizeof(buf));
	assert_true(readlink(cl_path(c, "share/dl/x"), buf, sizeof(buf) - 1) > 0);
	assert_string_equal(buf, "../canary");
	assert_string_equal(cl_get(c, "share/d"), "x");
	canary_same(f);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_case01_04_bad_names),
		T(test_case05_long_name),
		T(test_case06_unterminated),
		T(test_case07_absolute_symlink),
		T(test_case08_relative_symlink),
		T(test_case09_symlink_node),
		T(test_case10_swap_before_open),
		T(test_case11_planted_before_create),
		T(test_case12_dir_swapped),
		T(test_case13_link_across),
		T(test_case14_link_symlink),
		T(test_case15_host_hardlink),
		T(test_case16_proc_links),
		T(test_case21_rename_flags),
		T(test_case28_across_shares),
		T(test_case29_unlinked_open),
		T(test_case35_remove_export),
		T(test_case36_root_replaced),
		T(test_case37_ctr_path),
		T(test_case38_moved_outside),
		T(test_case39_gantry_home),
		T(test_case40_odd_names),
		T(test_case53_dir_replaced),
		T(test_case54_exchange),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
