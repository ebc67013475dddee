/* The escape suite's cases that need no guest, each named after its number
 * in the design note's table: a hostile guest's requests (and the host's
 * races) against the share server over a temp tree. Each asserts the
 * errno and that the canary directory beside the shares is unchanged. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/un.h>

#include <cmocka.h>

#include "share_client.h"
#include "skip.h"

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

/* 17: character and block devices are never made. */
static void test_case17_mknod_devices(void **state)
{
	FX();
	struct fuse_mknod_in mn = { .mode = S_IFCHR | 0666, .rdev = makedev(1, 1) };

	assert_int_equal(CALL(c, FUSE_MKNOD, c->rw, ARG(mn), STR("null")), -EPERM);
	mn = (struct fuse_mknod_in){ .mode = S_IFBLK | 0666, .rdev = makedev(8, 0) };
	assert_int_equal(CALL(c, FUSE_MKNOD, c->rw, ARG(mn), STR("sda")), -EPERM);
	assert_int_equal(access(cl_path(c, "share/null"), F_OK), -1);
	assert_int_equal(access(cl_path(c, "share/sda"), F_OK), -1);
	/* FIFOs and sockets are made (usable guest-side only). */
	mn = (struct fuse_mknod_in){ .mode = S_IFIFO | 0644 };
	assert_int_equal(CALL(c, FUSE_MKNOD, c->rw, ARG(mn), STR("fifo")), 0);
	canary_same(f);
}

/* 19: existing FIFOs and sockets on the host are never opened. */
static void test_case19_open_special(void **state)
{
	FX();
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	uint64_t fh;
	int s;

	assert_int_equal(mkfifo(cl_path(c, "share/fifo"), 0666), 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", cl_path(c, "share/sock"));
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (strlen(cl_path(c, "share/sock")) < sizeof(sa.sun_path))
		assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(s);
	int64_t fifo = cl_lookup(c, c->rw, "fifo");
	assert_int_equal(cl_open(c, FUSE_OPEN, (uint64_t)fifo, O_RDONLY), -EPERM);
	assert_int_equal(cl_open(c, FUSE_OPEN, (uint64_t)fifo, O_WRONLY | O_NONBLOCK), -EPERM);
	assert_int_equal(cl_create(c, c->rw, "fifo", O_RDWR | O_CREAT, 0644, &fh), -EPERM);
	int64_t sock = cl_lookup(c, c->rw, "sock");
	if (sock > 0)
		assert_int_equal(cl_open(c, FUSE_OPEN, (uint64_t)sock, O_RDWR), -EPERM);
	canary_same(f);
}

/* 20: a handle-less truncate of a FIFO. */
static void test_case20_truncate_fifo(void **state)
{
	FX();
	struct fuse_setattr_in sa = { .valid = FATTR_SIZE, .size = 0 };

	assert_int_equal(mkfifo(cl_path(c, "share/fifo"), 0666), 0);
	assert_int_equal(cl_setattr(c, (uint64_t)cl_lookup(c, c->rw, "fifo"), &sa), -EPERM);
	assert_int_equal(cl_setattr(c, (uint64_t)cl_lookup(c, c->rw, "d"), &sa), -EISDIR);
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

static mode_t host_mode(struct cl *c, const char *rel)
{
	struct stat st;

	assert_int_equal(lstat(cl_path(c, rel), &st), 0);
	return st.st_mode;
}

/* 22: setuid and setgid never reach a host file. */
static void test_case22_setid(void **state)
{
	FX();
	struct fuse_setattr_in sa = { .valid = FATTR_MODE, .mode = S_IFREG | 06755 };
	struct fuse_mknod_in mn = { .mode = S_IFREG | 06755 };
	uint64_t fh;

	assert_true(cl_create(c, c->rw, "suid", O_RDWR | O_CREAT, 06755, &fh) > 1);
	assert_int_equal(host_mode(c, "share/suid") & 07777, 0755);
	assert_int_equal(cl_setattr(c, (uint64_t)cl_lookup(c, c->rw, "f"), &sa), 0);
	assert_int_equal(host_mode(c, "share/f") & 07777, 0755);
	assert_int_equal(CALL(c, FUSE_MKNOD, c->rw, ARG(mn), STR("m")), 0);
	assert_int_equal(host_mode(c, "share/m") & 07777, 0755);
	canary_same(f);
}

/* 23: a file created in a setgid directory has no S_ISGID. */
static void test_case23_setgid_dir(void **state)
{
	FX();
	struct fuse_mkdir_in mk = { .mode = 0775 };
	struct fuse_setattr_in sa = { .valid = FATTR_MODE, .mode = S_IFDIR | 02775 };
	uint64_t fh;

	assert_int_equal(CALL(c, FUSE_MKDIR, c->rw, ARG(mk), STR("sg")), 0);
	int64_t sg = (int64_t)((const struct fuse_entry_out *)c->rep)->nodeid;
	assert_int_equal(cl_setattr(c, (uint64_t)sg, &sa), 0);
	assert_true(host_mode(c, "share/sg") & S_ISGID);
	assert_true(cl_create(c, (uint64_t)sg, "file", O_RDWR | O_CREAT, 02775, &fh) > 1);
	assert_false(host_mode(c, "share/sg/file") & (S_ISGID | S_ISUID));
	canary_same(f);
}

/* 24: only user.* xattrs are written. */
static void test_case24_xattrs(void **state)
{
	FX();
	const char *names[] = { "security.capability", "trusted.x", "system.posix_acl_access" };
	struct fuse_setxattr_in sx = { .size = 4 };
	struct fuse_getxattr_in gx = { .size = 64 };
	uint64_t n = (uint64_t)cl_lookup(c, c->rw, "f");
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		assert_int_equal(
			CALL(c, FUSE_SETXATTR, n, { &sx, 8 }, STR(names[i]), { "\1\0\0\2", 4 }),
			-EPERM);
		assert_int_equal(CALL(c, FUSE_REMOVEXATTR, n, STR(names[i])), -EPERM);
		assert_int_equal(CALL(c, FUSE_GETXATTR, n, ARG(gx), STR(names[i])), -ENODATA);
	}
	r = CALL(c, FUSE_SETXATTR, n, { &sx, 8 }, STR("user.x"), { "vvvv", 4 });
	assert_true(r == 0 || r == -ENOTSUP);
	if (r == 0) {
		assert_int_equal(CALL(c, FUSE_GETXATTR, n, ARG(gx), STR("user.x")), 0);
		assert_memory_equal(c->rep, "vvvv", 4);
		assert_int_equal(CALL(c, FUSE_LISTXATTR, n, ARG(gx)), 0);
		assert_memory_equal(c->rep, "user.x", 7);
		/* No room for the value: ERANGE, not a size query's answer. */
		c->out_room = sizeof(struct fuse_out_header);
		assert_int_equal(CALL(c, FUSE_GETXATTR, n, ARG(gx), STR("user.x")), -ERANGE);
		c->out_room = 0;
	}
	canary_same(f);
}

/* 25: what the server never does, and INTERRUPT, which gets no reply. */
static void test_case25_enosys(void **state)
{
	FX();
	uint32_t ops[] = { FUSE_IOCTL,	 FUSE_POLL,  FUSE_BMAP,	 FUSE_SETUPMAPPING,
			   FUSE_TMPFILE, FUSE_GETLK, FUSE_SETLK, FUSE_COPY_FILE_RANGE,
			   9999 };
	uint8_t args[128] = { 0 };

	for (size_t i = 0; i < ARRAY_SIZE(ops); i++)
		assert_int_equal(CALL(c, ops[i], c->rw, { args, sizeof(args) }), -ENOSYS);
	assert_int_equal(CALL(c, FUSE_INTERRUPT, c->rw, { args, 8 }), 1);
	canary_same(f);
}

/* 26: every kind of change on the ro export is EROFS, the tree unchanged. */
static void test_case26_ro(void **state)
{
	FX();
	cleanup_free char *before = cl_tree(c, "share");
	uint64_t n = (uint64_t)cl_lookup(c, c->ro, "f");
	int64_t fh = cl_open(c, FUSE_OPEN, n, O_RDONLY);
	struct fuse_setattr_in sa = { .valid = FATTR_SIZE };
	struct fuse_mknod_in mn = { .mode = S_IFREG | 0644 };
	struct fuse_mkdir_in mk = { .mode = 0755 };
	struct fuse_link_in ln = { .oldnodeid = n };
	struct fuse_rename_in rn = { .newdir = c->ro };
	struct fuse_rename2_in r2 = { .newdir = c->ro };
	struct fuse_setxattr_in sx = { .size = 1 };
	struct fuse_fallocate_in fa = { .fh = (uint64_t)fh, .length = 4096 };
	uint64_t cfh;

	assert_true(fh > 0);
	assert_int_equal(cl_write(c, n, (uint64_t)fh, 0, "x"), -EROFS);
	assert_int_equal(cl_setattr(c, n, &sa), -EROFS);
	assert_int_equal(cl_create(c, c->ro, "new", O_RDONLY | O_CREAT, 0644, &cfh), -EROFS);
	assert_int_equal(CALL(c, FUSE_MKNOD, c->ro, ARG(mn), STR("n")), -EROFS);
	assert_int_equal(CALL(c, FUSE_MKDIR, c->ro, ARG(mk), STR("n")), -EROFS);
	assert_int_equal(CALL(c, FUSE_SYMLINK, c->ro, STR("n"), STR("t")), -EROFS);
	assert_int_equal(CALL(c, FUSE_LINK, c->ro, ARG(ln), STR("n")), -EROFS);
	assert_int_equal(CALL(c, FUSE_UNLINK, c->ro, STR("f")), -EROFS);
	assert_int_equal(CALL(c, FUSE_RMDIR, c->ro, STR("d")), -EROFS);
	assert_int_equal(CALL(c, FUSE_RENAME, c->ro, ARG(rn), STR("f"), STR("n")), -EROFS);
	assert_int_equal(CALL(c, FUSE_RENAME2, c->ro, ARG(r2), STR("f"), STR("n")), -EROFS);
	assert_int_equal(CALL(c, FUSE_SETXATTR, n, { &sx, 8 }, STR("user.x"), { "v", 1 }), -EROFS);
	assert_int_equal(CALL(c, FUSE_REMOVEXATTR, n, STR("user.x")), -EROFS);
	assert_int_equal(CALL(c, FUSE_FALLOCATE, n, ARG(fa)), -EROFS);
	assert_int_equal(cl_open(c, FUSE_OPEN, n, O_WRONLY), -EROFS);
	assert_int_equal(cl_open(c, FUSE_OPEN, n, O_RDWR), -EROFS);
	assert_int_equal(cl_open(c, FUSE_OPEN, n, O_RDONLY | O_TRUNC), -EROFS);
	struct fuse_access_in ac = { .mask = W_OK };
	assert_int_equal(CALL(c, FUSE_ACCESS, n, ARG(ac)), -EROFS);
	cleanup_free char *after = cl_tree(c, "share");
	assert_string_equal(before, after);
	canary_same(f);
}

/* 27: one directory shared ro and rw: nodes are not shared, and the ro
 * node with the rw handle still cannot write. */
static void test_case27_ro_rw_alias(void **state)
{
	FX();
	int64_t rwn = cl_lookup(c, c->rw, "f"), ron = cl_lookup(c, c->ro, "f");
	int64_t fh = cl_open(c, FUSE_OPEN, (uint64_t)rwn, O_RDWR);

	assert_true(rwn > 1 && ron > 1 && rwn != ron);
	assert_int_equal(cl_write(c, (uint64_t)ron, (uint64_t)fh, 0, "x"), -EROFS);
	assert_int_equal(cl_read(c, (uint64_t)ron, (uint64_t)fh, 0, 10), -EBADF);
	assert_string_equal(cl_get(c, "share/f"), "hello");
	canary_same(f);
}

/* 31: forged node ids and handles in every opcode. */
static void test_case31_forged_ids(void **state)
{
	FX();
	uint8_t args[256] = { 0 };
	uint64_t n = (uint64_t)cl_lookup(c, c->rw, "f");
	uint32_t fh_ops[] = { FUSE_READ,	FUSE_WRITE,	 FUSE_RELEASE, FUSE_FLUSH,
			      FUSE_FSYNC,	FUSE_FALLOCATE,	 FUSE_LSEEK,   FUSE_READDIR,
			      FUSE_READDIRPLUS, FUSE_RELEASEDIR, FUSE_FSYNCDIR };

	for (uint32_t op = 1; op <= 52; op++) {
		int r = CALL(c, op, 0xfeedface00ULL, { args, sizeof(args) });

		if (op == FUSE_FORGET || op == FUSE_BATCH_FORGET || op == FUSE_INTERRUPT)
			assert_int_equal(r, 1);
		else if (op == FUSE_INIT)
			assert_int_equal(r, -EPROTO);
		else if (op == FUSE_DESTROY)
			assert_int_equal(r, 0);
		else
			assert_true(r == -ESTALE || r == -ENOSYS || r == -EINVAL);
		if (op == FUSE_DESTROY)
			cl_init(c);
	}
	n = (uint64_t)cl_lookup(c, c->rw, "f");
	/* Handles: arguments start with fh, except FSYNC's, after which the
	 * layout is the same (fh first) for all of these. */
	for (size_t i = 0; i < ARRAY_SIZE(fh_ops); i++) {
		uint64_t fh = 0x0000000500000007ULL;
		struct fuse_write_in w = { .fh = fh, .size = 0 };

		memcpy(args, &fh, sizeof(fh));
		if (fh_ops[i] == FUSE_WRITE)
			assert_int_equal(CALL(c, FUSE_WRITE, n, ARG(w)), -EBADF);
		else
			assert_int_equal(CALL(c, fh_ops[i], n, { args, 64 }), -EBADF);
	}
	struct fuse_getattr_in ga = { .getattr_flags = FUSE_GETATTR_FH, .fh = 99 };
	assert_int_equal(CALL(c, FUSE_GETATTR, n, ARG(ga)), -EBADF);
	assert_string_equal(cl_get(c, "share/f"), "hello");
	canary_same(f);
}

/* 32: double RELEASE, another node's handle, FORGET beyond the lookups. */
static void test_case32_release_forget(void **state)
{
	FX();
	int64_t a = cl_lookup(c, c->rw, "f"), d = cl_lookup(c, c->rw, "d");
	int64_t fh = cl_open(c, FUSE_OPEN, (uint64_t)a, O_RDONLY);
	struct fs_stats st, now;

	assert_int_equal(cl_read(c, (uint64_t)d, (uint64_t)fh, 0, 10), -EBADF);
	assert_int_equal(cl_release(c, FUSE_RELEASE, (uint64_t)d, (uint64_t)fh), -EBADF);
	assert_int_equal(cl_release(c, FUSE_RELEASE, (uint64_t)a, (uint64_t)fh), 0);
	assert_int_equal(cl_release(c, FUSE_RELEASE, (uint64_t)a, (uint64_t)fh), -EBADF);
	/* A new handle in the same slot is not the old one. */
	int64_t fh2 = cl_open(c, FUSE_OPEN, (uint64_t)a, O_RDONLY);
	assert_true(fh2 != fh);
	assert_int_equal(cl_read(c, (uint64_t)a, (uint64_t)fh, 0, 10), -EBADF);
	assert_int_equal(cl_release(c, FUSE_RELEASE, (uint64_t)a, (uint64_t)fh2), 0);
	fs_server_stats(c->s, &st);
	assert_int_equal(cl_forget(c, (uint64_t)a, 1000), 1);
	assert_int_equal(cl_forget(c, (uint64_t)a, 1), 1);
	assert_int_equal(cl_forget(c, 0xabcdef, 1), 1);
	fs_server_stats(c->s, &now);
	assert_int_equal(now.nodes, st.nodes - 1);
	assert_int_equal(cl_attr(c, (uint64_t)d)->nlink, 2);
	struct fuse_getattr_in ga = { 0 };
	assert_int_equal(CALL(c, FUSE_GETATTR, (uint64_t)a, ARG(ga)), -ESTALE);
	/* A new lookup gives a new id: ids are never reused. */
	assert_true(cl_lookup(c, c->rw, "f") > d);
	/* BATCH_FORGET with a count beyond its payload is dropped whole. */
	struct fuse_batch_forget_in bf = { .count = 1000 };
	struct fuse_forget_one one = { .nodeid = (uint64_t)d, .nlookup = 1 };
	assert_int_equal(CALL(c, FUSE_BATCH_FORGET, 0, ARG(bf), ARG(one)), 1);
	assert_int_equal(cl_attr(c, (uint64_t)d)->nlink, 2);
	bf.count = 1;
	assert_int_equal(CALL(c, FUSE_BATCH_FORGET, 0, ARG(bf), ARG(one)), 1);
	assert_int_equal(CALL(c, FUSE_GETATTR, (uint64_t)d, ARG(ga)), -ESTALE);
	canary_same(f);
}

/* 33: more nodes than the limit: ENFILE; more handles: EMFILE; what the
 * guest holds keeps working. */
static void test_case33_limits(void **state)
{
	FX();
	struct cl *small = cl_new(8);
	struct rlimit rl;
	char name[16];
	int64_t keep = cl_lookup(small, small->other, "g"), n = 0;
	int i;

	(void)c;
	for (i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "share/n%d", i);
		cl_put(small, name, "");
		n = cl_lookup(small, small->rw, name + 6);
		if (n < 0)
			break;
	}
	assert_int_equal(n, -ENFILE);
	/* Nothing is made that could not be a node. */
	uint64_t cfh;
	struct fuse_mkdir_in mk = { .mode = 0755 };
	assert_int_equal(cl_create(small, small->rw, "made", O_RDWR | O_CREAT, 0644, &cfh),
			 -ENFILE);
	assert_int_equal(CALL(small, FUSE_MKDIR, small->rw, ARG(mk), STR("made")), -ENFILE);
	assert_int_equal(CALL(small, FUSE_SYMLINK, small->rw, STR("made"), STR("t")), -ENFILE);
	assert_int_equal(access(cl_path(small, "share/made"), F_OK), -1);
	assert_int_equal(cl_lookup(small, small->other, "g"), keep);
	assert_int_equal(cl_attr(small, (uint64_t)keep)->size, 1);
	cl_free(small);

	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < FS_MAX_HANDLES + 256)
		skip_because("RLIMIT_NOFILE hard %llu < %d handles",
			     (unsigned long long)rl.rlim_max, FS_MAX_HANDLES + 256);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	int64_t fnode = cl_lookup(c, c->rw, "f"), fh = 0;
	for (i = 0; i <= FS_MAX_HANDLES; i++) {
		fh = cl_open(c, FUSE_OPEN, (uint64_t)fnode, O_RDONLY);
		if (fh < 0)
			break;
	}
	assert_int_equal(i, FS_MAX_HANDLES);
	assert_int_equal(fh, -EMFILE);
	assert_int_equal(cl_open(c, FUSE_OPENDIR, c->other, O_RDONLY), -EMFILE);
	assert_int_equal(cl_lookup(c, c->other, "g") > 1, 1);
	canary_same(f);
}

/* Send raw bytes as the readable side; out_room as the writable. */
static int raw(struct cl *c, const void *p, size_t len)
{
	return cl_send_raw(c, p, len);
}

/* 34: framing: lengths short, long, lying; WRITE sizes that are not the
 * payload; a READ larger than its buffer; no room for a reply. */
static void test_case34_framing(void **state)
{
	FX();
	cleanup_free uint8_t *big = xzalloc(FS_MAX_REQUEST + 8192);
	struct fuse_in_header *h = (void *)big;
	uint64_t n = (uint64_t)cl_lookup(c, c->rw, "f");
	int64_t fh = cl_open(c, FUSE_OPEN, n, O_RDWR);
	struct fuse_write_in *w = (void *)(h + 1);

	*h = (struct fuse_in_header){
		.len = 20, .opcode = FUSE_GETATTR, .unique = 77, .nodeid = n
	};
	assert_int_equal(raw(c, big, 40 + 16), -EINVAL);
	h->len = 100;
	assert_int_equal(raw(c, big, 40 + 16), -EINVAL);
	h->len = FS_MAX_REQUEST + 1;
	assert_int_equal(raw(c, big, FS_MAX_REQUEST + 8192), -E2BIG);
	/* Not even a header: no reply at all. */
	assert_int_equal(raw(c, big, 39), 1);
	/* WRITE whose size is not its payload, or beyond max_write. */
	*h = (struct fuse_in_header){
		.len = 40 + 40 + 10, .opcode = FUSE_WRITE, .unique = 78, .nodeid = n
	};
	*w = (struct fuse_write_in){ .fh = (uint64_t)fh, .size = 11 };
	assert_int_equal(raw(c, big, h->len), -EINVAL);
	w->size = 9;
	assert_int_equal(raw(c, big, h->len), -EINVAL);
	h->len = 40 + 40 + FS_MAX_WRITE + 1;
	w->size = FS_MAX_WRITE + 1;
	assert_int_equal(raw(c, big, h->len), -EINVAL);
	assert_string_equal(cl_get(c, "share/f"), "hello");
	/* A READ larger than the room gets the room. */
	c->out_room = sizeof(struct fuse_out_header) + 3;
	assert_int_equal(cl_read(c, n, (uint64_t)fh, 0, 1 << 20), 3);
	assert_memory_equal(c->rep, "hel", 3);
	/* No room for even a header: nothing done, nothing answered. */
	c->out_room = 15;
	assert_int_equal(CALL(c, FUSE_UNLINK, c->rw, STR("f")), 1);
	c->out_room = 0;
	assert_string_equal(cl_get(c, "share/f"), "hello");
	/* A request before INIT is EIO, a second INIT EPROTO. */
	struct fuse_init_in in = { .major = 7, .minor = 38 };
	assert_int_equal(CALL(c, FUSE_INIT, 0, ARG(in)), -EPROTO);
	assert_int_equal(CALL0(c, FUSE_DESTROY, 0), 0);
	assert_int_equal(cl_lookup(c, c->rw, "f"), -EIO);
	in.major = 6;
	assert_int_equal(CALL(c, FUSE_INIT, 0, ARG(in)), -EPROTO);
	in.major = 8;
	assert_int_equal(CALL(c, FUSE_INIT, 0, ARG(in)), 0);
	assert_int_equal(((const struct fuse_init_out *)c->rep)->major, 7);
	cl_init(c);
	assert_int_equal(((const struct fuse_init_out *)c->rep)->max_write, FS_MAX_WRITE);
	/* DESTROY forgot every node but the export roots. */
	assert_int_equal(cl_attr(c, c->rw)->nlink >= 2, 1);
	struct fuse_getattr_in ga = { 0 };
	assert_int_equal(CALL(c, FUSE_GETATTR, n, ARG(ga)), -ESTALE);
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

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_case01_04_bad_names),	 T(test_case05_long_name),
		T(test_case06_unterminated),	 T(test_case09_symlink_node),
		T(test_case10_swap_before_open), T(test_case11_planted_before_create),
		T(test_case12_dir_swapped),	 T(test_case13_link_across),
		T(test_case14_link_symlink),	 T(test_case15_host_hardlink),
		T(test_case16_proc_links),	 T(test_case17_mknod_devices),
		T(test_case19_open_special),	 T(test_case20_truncate_fifo),
		T(test_case21_rename_flags),	 T(test_case22_setid),
		T(test_case23_setgid_dir),	 T(test_case24_xattrs),
		T(test_case25_enosys),		 T(test_case26_ro),
		T(test_case27_ro_rw_alias),	 T(test_case31_forged_ids),
		T(test_case32_release_forget),	 T(test_case33_limits),
		T(test_case34_framing),		 T(test_case38_moved_outside),
		T(test_case40_odd_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
