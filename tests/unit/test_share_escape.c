/* The escape suite's cases that need no guest, each named after its number
 * in the design note's table (1-40; 41 on are races and bounds added since,
 * docs/shares.md lists them all): a hostile guest's requests, and the
 * host's races while the guest works, against the share server over a temp
 * tree. Each asserts the errno and that the canary directory beside the
 * shares is unchanged: names, modes, sizes, mtimes, inodes and contents.
 * The races run a host thread that swaps names in a loop while the test
 * sends requests for RACE_MS, and check that no reply ever held the
 * canary's secret and that nothing new appeared beside the shares. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <time.h>

#include <cmocka.h>

#include "common/settings.h"
#include "share/spec.h"
#include "share_client.h"
#include "skip.h"

#define SECRET		"top secret" /* canary/secret's content: never in a reply */
#define RACE_MS		300
#define XATTR_VALUE_MAX (64 * 1024) /* the server's limit on a value (docs/shares.md) */

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

/* 17: character and block devices are never made on the host: the guest
 * sees its device, the host an empty file of its own, 0600 (or, where the
 * host's filesystem keeps no user xattrs, EPERM and nothing). */
static void test_case17_mknod_devices(void **state)
{
	FX();
	struct fuse_mknod_in mn = { .mode = S_IFCHR | 0666, .rdev = makedev(1, 1) };
	const char *names[] = { "null", "sda" };
	struct stat st;
	int r;

	r = CALL(c, FUSE_MKNOD, c->rw, ARG(mn), STR("null"));
	assert_true(r == 0 || r == -EPERM);
	if (r == 0) {
		const struct fuse_attr *a = &((const struct fuse_entry_out *)c->rep)->attr;

		assert_int_equal(a->mode, S_IFCHR | 0666);
		assert_int_equal(a->rdev, makedev(1, 1));
	}
	mn = (struct fuse_mknod_in){ .mode = S_IFBLK | 0666, .rdev = makedev(8, 0) };
	assert_int_equal(CALL(c, FUSE_MKNOD, c->rw, ARG(mn), STR("sda")), r);
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		char path[32];

		snprintf(path, sizeof(path), "share/%s", names[i]);
		if (r < 0) {
			assert_int_equal(access(cl_path(c, path), F_OK), -1);
			continue;
		}
		assert_int_equal(lstat(cl_path(c, path), &st), 0);
		assert_int_equal(st.st_mode, S_IFREG | 0600);
		assert_int_equal(st.st_size, 0);
		/* and the guest cannot open its bytes */
		assert_int_equal(
			cl_open(c, FUSE_OPEN, (uint64_t)cl_lookup(c, c->rw, names[i]), O_RDWR),
			-EACCES);
	}
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

/* 23: a setgid directory is one in the guest's view only; a file created
 * in it has no S_ISGID on the host. */
static void test_case23_setgid_dir(void **state)
{
	FX();
	struct fuse_mkdir_in mk = { .mode = 0775 };
	struct fuse_setattr_in sa = { .valid = FATTR_MODE, .mode = S_IFDIR | 02775 };
	uint64_t fh;

	assert_int_equal(CALL(c, FUSE_MKDIR, c->rw, ARG(mk), STR("sg")), 0);
	int64_t sg = (int64_t)((const struct fuse_entry_out *)c->rep)->nodeid;
	assert_int_equal(cl_setattr(c, (uint64_t)sg, &sa), 0);
	assert_false(host_mode(c, "share/sg") & (S_ISGID | S_ISUID));
	assert_true(cl_create(c, (uint64_t)sg, "file", O_RDWR | O_CREAT, 02775, &fh) > 1);
	assert_false(host_mode(c, "share/sg/file") & (S_ISGID | S_ISUID));
	canary_same(f);
}

/* 24: only user.* xattrs are written. */
static void test_case24_xattrs(void **state)
{
	FX();
	const char *names[] = { "security.capability", "trusted.x", "system.posix_acl_access",
				"user.gantry.stat" };
	struct fuse_setxattr_in sx = { .size = 4 };
	struct fuse_getxattr_in gx = { .size = 64 };
	uint64_t n = (uint64_t)cl_lookup(c, c->rw, "f");
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		/* POSIX ACLs: none here, as on a filesystem without them */
		int want = strncmp(names[i], "system.", 7) == 0 ? -EOPNOTSUPP : -EPERM;

		assert_int_equal(
			CALL(c, FUSE_SETXATTR, n, { &sx, 8 }, STR(names[i]), { "\1\0\0\2", 4 }),
			want);
		assert_int_equal(CALL(c, FUSE_REMOVEXATTR, n, STR(names[i])), want);
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

/* ---- what the cases below share ---- */

/* Did the last reply carry the canary's secret? */
static bool leaked(const struct cl *c)
{
	return c->ret && memmem(c->out, c->ret, SECRET, strlen(SECRET)) != NULL;
}

/* Does the READDIR(PLUS) reply in c->rep name something of the canary? */
static bool lists_canary(const struct cl *c, bool plus)
{
	static const char *const names[] = { "secret", "sub", "link" };
	size_t off = 0;

	while (off < c->rep_len) {
		const struct fuse_dirent *d =
			plus ? &((const struct fuse_direntplus *)(c->rep + off))->dirent
			     : (const struct fuse_dirent *)(c->rep + off);

		for (size_t i = 0; i < ARRAY_SIZE(names); i++)
			if (d->namelen == strlen(names[i]) &&
			    !memcmp(d->name, names[i], d->namelen))
				return true;
		off += plus ? FUSE_DIRENTPLUS_SIZE((const struct fuse_direntplus *)(c->rep + off))
			    : FUSE_DIRENT_SIZE(d);
	}
	return false;
}

/* The names in dir (one level, sorted, "." and ".." left out), as text. */
static char *names_in(const char *dir)
{
	struct dirent **v;
	char *s = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&s, &len);
	int n = scandir(dir, &v, NULL, alphasort);

	for (int i = 0; i < n; i++) {
		if (strcmp(v[i]->d_name, ".") && strcmp(v[i]->d_name, ".."))
			fprintf(f, "%s\n", v[i]->d_name);
		free(v[i]);
	}
	if (n >= 0)
		free(v);
	fclose(f);
	return s;
}

static int readdir_call(struct cl *c, uint32_t op, uint64_t node, uint64_t fh, uint64_t off)
{
	struct fuse_read_in rd = { .fh = fh, .offset = off, .size = 65536 };

	return CALL(c, op, node, ARG(rd));
}

/* Every file beneath rel: no setuid bit, and setgid on directories only. */
static int setid_walk(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)p, (void)flag, (void)f;
	if (st->st_mode & S_ISUID)
		return 1;
	if (!S_ISDIR(st->st_mode) && (st->st_mode & S_ISGID))
		return 1;
	return 0;
}

static void no_setid(struct cl *c, const char *rel)
{
	assert_int_equal(nftw(cl_path(c, rel), setid_walk, 16, FTW_PHYS), 0);
}

/* ---- races: a host thread changing names while the guest works ---- */

struct race {
	struct cl *c;
	char a[512], b[512], tmp[512]; /* host paths the thread works on */
	void (*host)(struct race *r, unsigned long i);
	atomic_bool stop;
	pthread_t thread;
	unsigned long swaps, rounds;
	char *beside; /* the names beside the shares, before */
	int bad_line; /* the first failed expectation on the guest side */
	long bad_val;
	struct timespec start;
};

/* Record the first failed expectation; asserted once the thread is gone. */
#define EXPECT(r, cond, val)                                                                       \
	do {                                                                                       \
		if (!(cond) && !(r)->bad_line) {                                                   \
			(r)->bad_line = __LINE__;                                                  \
			(r)->bad_val = (long)(val);                                                \
		}                                                                                  \
	} while (0)

static void *race_thread(void *p)
{
	struct race *r = p;

	while (!atomic_load(&r->stop))
		r->host(r, r->swaps++);
	return NULL;
}

static void race_start(struct race *r, struct cl *c, const char *a, const char *b,
		       void (*host)(struct race *, unsigned long))
{
	memset(r, 0, sizeof(*r));
	r->c = c;
	snprintf(r->a, sizeof(r->a), "%s/%s", c->root, a);
	snprintf(r->b, sizeof(r->b), "%s/%s", c->root, b);
	snprintf(r->tmp, sizeof(r->tmp), "%s/%s.tmp", c->root, a);
	r->host = host;
	r->beside = names_in(c->root);
	clock_gettime(CLOCK_MONOTONIC, &r->start);
	assert_int_equal(pthread_create(&r->thread, NULL, race_thread, r), 0);
}

/* Another round of guest requests? */
static bool race_on(struct race *r)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	r->rounds++;
	return (now.tv_sec - r->start.tv_sec) * 1000 + (now.tv_nsec - r->start.tv_nsec) / 1000000 <
	       RACE_MS;
}

static void race_stop(struct race *r)
{
	cleanup_free char *beside = r->beside, *now = NULL;

	atomic_store(&r->stop, true);
	pthread_join(r->thread, NULL);
	if (r->bad_line)
		fail_msg("race: expectation at line %d failed (%ld) after %lu rounds, %lu swaps",
			 r->bad_line, r->bad_val, r->rounds, r->swaps);
	assert_true(r->swaps > 0 && r->rounds > 1);
	print_message("race: %lu guest rounds, %lu host swaps\n", r->rounds, r->swaps);
	/* nothing new beside the shares */
	now = names_in(r->c->root);
	assert_string_equal(beside, now);
}

/* a and b swap names, atomically on even rounds; on odd ones a is moved
 * aside, b's kind planted at a's name, then put back: the guest also sees
 * a missing and a half-done state. */
static void swap_names(struct race *r, unsigned long i)
{
	char target[512];
	ssize_t n;

	if (i % 2 == 0) {
		renameat2(AT_FDCWD, r->a, AT_FDCWD, r->b, RENAME_EXCHANGE);
		return;
	}
	n = readlink(r->b, target, sizeof(target) - 1);
	if (n <= 0) /* a and b are swapped now: swap back first */
		renameat2(AT_FDCWD, r->a, AT_FDCWD, r->b, RENAME_EXCHANGE);
	n = readlink(r->b, target, sizeof(target) - 1);
	if (n <= 0 || rename(r->a, r->tmp) < 0)
		return;
	target[n] = 0;
	if (symlink(target, r->a) == 0)
		unlink(r->a);
	rename(r->tmp, r->a);
}

/* a is moved to b (outside the share) and back. */
static void move_out_and_back(struct race *r, unsigned long i)
{
	(void)i;
	if (rename(r->a, r->b) == 0)
		rename(r->b, r->a);
}

/* A symlink out of the share is planted at a, then removed. */
static void plant_link(struct race *r, unsigned long i)
{
	if (symlink(i % 2 ? "../canary" : "../canary/new", r->a) == 0)
		unlink(r->a);
}

/* 41: the host swaps a directory for a symlink to the canary directory in
 * a loop while the guest looks it up and opens, reads and lists what is
 * beneath: children resolve under the pinned directory or ENOTDIR under
 * the link; the canary's names and secret are never seen. */
static void test_case41_race_dir_lookup(void **state)
{
	FX();
	struct race r;

	assert_int_equal(symlink("../canary", cl_path(c, "share/dl")), 0);
	race_start(&r, c, "share/d", "share/dl", swap_names);
	while (race_on(&r)) {
		const char *name = r.rounds % 2 ? "d" : "dl";
		int64_t d = cl_lookup(c, c->rw, name), x, fh;

		EXPECT(&r, !leaked(c), d);
		if (d < 0)
			continue;
		x = cl_lookup(c, (uint64_t)d, "secret");
		EXPECT(&r, x == -ENOENT || x == -ENOTDIR, x);
		x = cl_lookup(c, (uint64_t)d, "x");
		EXPECT(&r, x > 1 || x == -ENOTDIR, x);
		if (x > 1 && (fh = cl_open(c, FUSE_OPEN, (uint64_t)x, O_RDONLY)) > 0) {
			int n = cl_read(c, (uint64_t)x, (uint64_t)fh, 0, 64);

			EXPECT(&r, n == 1 && c->rep[0] == 'x', n);
			cl_release(c, FUSE_RELEASE, (uint64_t)x, (uint64_t)fh);
		}
		fh = cl_open(c, FUSE_OPENDIR, (uint64_t)d, O_RDONLY);
		EXPECT(&r, fh > 0 || fh == -ENOTDIR, fh);
		if (fh > 0) {
			int ret = readdir_call(c, FUSE_READDIRPLUS, (uint64_t)d, (uint64_t)fh, 0);

			EXPECT(&r, ret == 0 && !lists_canary(c, true) && !leaked(c), ret);
			cl_release(c, FUSE_RELEASEDIR, (uint64_t)d, (uint64_t)fh);
		}
		x = cl_lookup(c, (uint64_t)d, "sub");
		EXPECT(&r, x == -ENOENT || x == -ENOTDIR, x);
	}
	race_stop(&r);
	canary_same(f);
}

/* 42: the host swaps a file for a symlink to the canary's secret between
 * the guest's LOOKUP and OPEN, in a loop, while the guest opens, reads,
 * writes, truncates and CREATEs (no O_EXCL) the name: it gets the share's
 * file or ELOOP (CREATE also ENOENT, when the name went between its
 * exclusive create and its lookup), never a byte of the secret, and the
 * canary is unchanged. */
static void test_case42_race_file_open(void **state)
{
	FX();
	struct race r;

	assert_int_equal(symlink("../canary/secret", cl_path(c, "share/fl")), 0);
	race_start(&r, c, "share/f", "share/fl", swap_names);
	while (race_on(&r)) {
		const char *name = r.rounds % 2 ? "f" : "fl";
		int64_t n = cl_lookup(c, c->rw, name), fh;
		uint64_t cfh;

		EXPECT(&r, !leaked(c), n);
		if (n > 0) {
			fh = cl_open(c, FUSE_OPEN, (uint64_t)n, O_RDWR);
			EXPECT(&r, fh > 0 || fh == -ELOOP, fh);
			if (fh > 0) {
				struct fuse_setattr_in sa = { .valid = FATTR_SIZE | FATTR_FH,
							      .fh = (uint64_t)fh,
							      .size = 5 };
				int k = cl_read(c, (uint64_t)n, (uint64_t)fh, 0, 64);

				/* 0: a file CREATE made while the name was gone */
				EXPECT(&r, (k == 5 || k == 0) && !leaked(c), k);
				k = cl_write(c, (uint64_t)n, (uint64_t)fh, 0, "hello");
				EXPECT(&r, k == 0, k);
				k = cl_setattr(c, (uint64_t)n, &sa);
				EXPECT(&r, k == 0, k);
				cl_release(c, FUSE_RELEASE, (uint64_t)n, (uint64_t)fh);
			}
		}
		n = cl_create(c, c->rw, name, O_RDWR | O_CREAT, 0644, &cfh);
		EXPECT(&r, n > 1 || n == -ELOOP || n == -ENOENT, n);
		if (n > 1) {
			int k = cl_read(c, (uint64_t)n, cfh, 0, 64);

			EXPECT(&r, k >= 0 && !leaked(c), k);
			cl_release(c, FUSE_RELEASE, (uint64_t)n, cfh);
		}
	}
	race_stop(&r);
	canary_same(f);
}

/* 43: READDIR and READDIRPLUS of the share's root and of a directory the
 * host keeps swapping for a symlink to the canary: listings hold the
 * share's names only; READDIRPLUS's attributes are the share's inodes. */
static void test_case43_race_readdir(void **state)
{
	FX();
	struct race r;
	int64_t d = cl_lookup(c, c->rw, "d");
	int64_t dfh = cl_open(c, FUSE_OPENDIR, (uint64_t)d, O_RDONLY);

	assert_int_equal(symlink("../canary", cl_path(c, "share/dl")), 0);
	race_start(&r, c, "share/d", "share/dl", swap_names);
	while (race_on(&r)) {
		uint32_t op = r.rounds % 2 ? FUSE_READDIRPLUS : FUSE_READDIR;
		int64_t fh = cl_open(c, FUSE_OPENDIR, c->rw, O_RDONLY), n;
		int ret;

		EXPECT(&r, fh > 0, fh);
		ret = readdir_call(c, op, c->rw, (uint64_t)fh, 0);
		EXPECT(&r, ret == 0 && !lists_canary(c, op == FUSE_READDIRPLUS) && !leaked(c), ret);
		cl_release(c, FUSE_RELEASEDIR, c->rw, (uint64_t)fh);
		ret = readdir_call(c, op, (uint64_t)d, (uint64_t)dfh, 0);
		EXPECT(&r, ret == 0 && !lists_canary(c, op == FUSE_READDIRPLUS) && !leaked(c), ret);
		n = cl_lookup(c, c->rw, "dl");
		if (n > 0 && (fh = cl_open(c, FUSE_OPENDIR, (uint64_t)n, O_RDONLY)) > 0) {
			ret = readdir_call(c, op, (uint64_t)n, (uint64_t)fh, 0);
			EXPECT(&r, ret == 0 && !lists_canary(c, op == FUSE_READDIRPLUS), ret);
			cl_release(c, FUSE_RELEASEDIR, (uint64_t)n, (uint64_t)fh);
		}
	}
	race_stop(&r);
	canary_same(f);
}

/* 44: RENAMEs into, out of and within a directory the host keeps swapping
 * for a symlink to the canary: they act in the share or fail (ENOTDIR on
 * the link's node); nothing moves into or out of the canary. */
static void test_case44_race_rename(void **state)
{
	FX();
	struct race r;

	assert_int_equal(symlink("../canary", cl_path(c, "share/dl")), 0);
	race_start(&r, c, "share/d", "share/dl", swap_names);
	while (race_on(&r)) {
		int64_t d = cl_lookup(c, c->rw, r.rounds % 2 ? "d" : "dl");
		struct fuse_rename_in in = { .newdir = (uint64_t)d }, out = { .newdir = c->rw };
		struct fuse_rename2_in noreplace = { .newdir = c->rw, .flags = RENAME_NOREPLACE };
		int ret;

		if (d < 0)
			continue;
		ret = CALL(c, FUSE_RENAME, c->rw, ARG(in), STR("f"), STR("f2"));
		EXPECT(&r, ret == 0 || ret == -ENOTDIR || ret == -ENOENT, ret);
		ret = CALL(c, FUSE_RENAME, (uint64_t)d, ARG(out), STR("f2"), STR("f"));
		EXPECT(&r, ret == 0 || ret == -ENOTDIR || ret == -ENOENT, ret);
		ret = CALL(c, FUSE_RENAME, (uint64_t)d, ARG(out), STR("secret"), STR("stolen"));
		EXPECT(&r, ret == -ENOENT || ret == -ENOTDIR, ret);
		ret = CALL(c, FUSE_RENAME2, (uint64_t)d, ARG(noreplace), STR("x"), STR("x2"));
		EXPECT(&r, ret == 0 || ret == -ENOTDIR || ret == -ENOENT || ret == -EEXIST, ret);
		ret = CALL(c, FUSE_RENAME, c->rw, ARG(in), STR("x2"), STR("x"));
		EXPECT(&r, ret == 0 || ret == -ENOTDIR || ret == -ENOENT, ret);
	}
	race_stop(&r);
	canary_same(f);
	assert_null(cl_get(c, "share/stolen"));
}

/* 45: LINKs of a file node while the host swaps the file for a symlink to
 * the canary's secret: the new name is the pinned inode or the symlink
 * itself, never the secret's inode, whose link count stays 1. */
static void test_case45_race_link(void **state)
{
	FX();
	struct race r;
	struct stat secret, st;

	assert_int_equal(stat(cl_path(c, "canary/secret"), &secret), 0);
	assert_int_equal(symlink("../canary/secret", cl_path(c, "share/fl")), 0);
	race_start(&r, c, "share/f", "share/fl", swap_names);
	while (race_on(&r)) {
		char name[32], host[600];
		int64_t n = cl_lookup(c, c->rw, r.rounds % 2 ? "f" : "fl");
		struct fuse_link_in ln = { .oldnodeid = (uint64_t)n };
		int ret;

		if (n < 0)
			continue;
		snprintf(name, sizeof(name), "h%lu", r.rounds);
		ret = CALL(c, FUSE_LINK, c->rw, ARG(ln), STR(name));
		EXPECT(&r, ret == 0 || ret == -ENOENT, ret);
		if (ret < 0)
			continue;
		snprintf(host, sizeof(host), "%s/share/%s", c->root, name);
		EXPECT(&r, lstat(host, &st) == 0 && st.st_ino != secret.st_ino, st.st_ino);
		ret = CALL(c, FUSE_UNLINK, c->rw, STR(name));
		EXPECT(&r, ret == 0, ret);
	}
	race_stop(&r);
	assert_int_equal(stat(cl_path(c, "canary/secret"), &st), 0);
	assert_int_equal(st.st_nlink, 1);
	canary_same(f);
}

/* 46: the host moves a directory out of the share and back in a loop
 * while the guest reads, creates, makes directories and renames in it:
 * while it is out the guest keeps that one subtree (the documented limit),
 * never its new siblings; once it is back, nothing the guest did is left
 * outside, and the canary is unchanged. */
static void test_case46_race_moved_out(void **state)
{
	FX();
	struct race r;

	assert_int_equal(mkdir(cl_path(c, "outside"), 0755), 0);
	cl_put(c, "outside/sibling", SECRET);
	race_start(&r, c, "share/d", "outside/d", move_out_and_back);
	while (race_on(&r)) {
		int64_t d = cl_lookup(c, c->rw, "d"), x;
		struct fuse_mkdir_in mk = { .mode = 0755 };
		struct fuse_rename_in back = { .newdir = c->rw };
		uint64_t fh;
		int ret;

		if (d < 0)
			continue;
		x = cl_lookup(c, (uint64_t)d, "sibling");
		EXPECT(&r, x == -ENOENT && !leaked(c), x);
		x = cl_lookup(c, (uint64_t)d, "..");
		EXPECT(&r, x == -EINVAL, x);
		x = cl_create(c, (uint64_t)d, "new", O_RDWR | O_CREAT | O_EXCL, 0644, &fh);
		EXPECT(&r, x > 1, x);
		if (x > 1) {
			cl_release(c, FUSE_RELEASE, (uint64_t)x, fh);
			ret = CALL(c, FUSE_RENAME, (uint64_t)d, ARG(back), STR("new"), STR("new"));
			EXPECT(&r, ret == 0, ret);
			ret = CALL(c, FUSE_UNLINK, c->rw, STR("new"));
			EXPECT(&r, ret == 0, ret);
		}
		ret = CALL(c, FUSE_MKDIR, (uint64_t)d, ARG(mk), STR("m"));
		EXPECT(&r, ret == 0, ret);
		ret = CALL(c, FUSE_RMDIR, (uint64_t)d, STR("m"));
		EXPECT(&r, ret == 0, ret);
	}
	race_stop(&r);
	cleanup_free char *out = names_in(cl_path(c, "outside"));
	assert_string_equal(out, "sibling\n");
	cleanup_free char *in = names_in(cl_path(c, "share/d"));
	assert_string_equal(in, "x\n");
	canary_same(f);
}

/* 47: chmod to 06777 and CREATE with mode 06777 while the host swaps the
 * file for a symlink to the canary's secret: the secret's mode is
 * unchanged, and no file in the share has a setuid bit or a setgid one. */
static void test_case47_race_setid(void **state)
{
	FX();
	struct race r;

	assert_int_equal(symlink("../canary/secret", cl_path(c, "share/fl")), 0);
	race_start(&r, c, "share/f", "share/fl", swap_names);
	while (race_on(&r)) {
		int64_t n = cl_lookup(c, c->rw, r.rounds % 2 ? "f" : "fl"), k;
		struct fuse_setattr_in sa = { .valid = FATTR_MODE, .mode = S_IFREG | 06777 };
		uint64_t fh;
		int ret;

		if (n > 0) {
			ret = cl_setattr(c, (uint64_t)n, &sa);
			EXPECT(&r, ret == 0 || ret == -EOPNOTSUPP, ret);
		}
		k = cl_create(c, c->rw, r.rounds % 2 ? "fl" : "s", O_RDWR | O_CREAT, 06777, &fh);
		EXPECT(&r, k > 1 || k == -ELOOP, k);
		if (k > 1) {
			sa.valid = FATTR_MODE | FATTR_FH;
			sa.fh = fh;
			ret = cl_setattr(c, (uint64_t)k, &sa);
			EXPECT(&r, ret == 0, ret);
			cl_release(c, FUSE_RELEASE, (uint64_t)k, fh);
		}
	}
	race_stop(&r);
	no_setid(c, "share");
	canary_same(f);
}

/* 48: symlinks out of the share planted and removed by the host where the
 * guest CREATEs (no O_EXCL), MKNODs, MKDIRs and SYMLINKs: each makes its
 * inode in the share, or fails (ELOOP, EEXIST, ENOENT); nothing appears in
 * the canary. */
static void test_case48_race_create(void **state)
{
	FX();
	struct race r;

	race_start(&r, c, "share/n", "share/unused", plant_link);
	while (race_on(&r)) {
		struct fuse_mknod_in mn = { .mode = S_IFREG | 0644 };
		struct fuse_mkdir_in mk = { .mode = 0755 };
		uint64_t fh;
		int64_t k = cl_create(c, c->rw, "n", O_RDWR | O_CREAT | O_TRUNC, 0644, &fh);
		int ret;

		EXPECT(&r, k > 1 || k == -ELOOP || k == -ENOENT, k);
		if (k > 1) {
			ret = cl_write(c, (uint64_t)k, fh, 0, "mine");
			EXPECT(&r, ret == 0, ret);
			cl_release(c, FUSE_RELEASE, (uint64_t)k, fh);
		}
		switch (r.rounds % 3) {
		case 0:
			ret = CALL(c, FUSE_MKNOD, c->rw, ARG(mn), STR("n"));
			break;
		case 1:
			ret = CALL(c, FUSE_MKDIR, c->rw, ARG(mk), STR("n"));
			break;
		default:
			ret = CALL(c, FUSE_SYMLINK, c->rw, STR("n"), STR("../canary/made"));
		}
		EXPECT(&r, ret == 0 || ret == -EEXIST, ret);
		/* the host's link is removed by the host; the guest's own things by it */
		if (CALL(c, FUSE_UNLINK, c->rw, STR("n")) < 0)
			CALL(c, FUSE_RMDIR, c->rw, STR("n"));
	}
	race_stop(&r);
	unlink(cl_path(c, "share/n"));
	rmdir(cl_path(c, "share/n"));
	assert_null(cl_get(c, "canary/new"));
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

/* 18: MKNOD of a FIFO and a socket: made in the share (usable only in the
 * guest, whose kernel keeps their data), with no setid bits and no device
 * number whatever the request said; the server never opens them. */
static void test_case18_fifo_socket(void **state)
{
	FX();
	struct fuse_mknod_in mn = { .mode = S_IFIFO | 06777, .rdev = makedev(1, 3) };
	struct stat st;

	assert_int_equal(CALL(c, FUSE_MKNOD, c->rw, ARG(mn), STR("fifo")), 0);
	mn.mode = S_IFSOCK | 06777;
	assert_int_equal(CALL(c, FUSE_MKNOD, c->rw, ARG(mn), STR("sock")), 0);
	assert_int_equal(lstat(cl_path(c, "share/fifo"), &st), 0);
	assert_true(S_ISFIFO(st.st_mode) && !(st.st_mode & 06000) && st.st_rdev == 0);
	assert_int_equal(lstat(cl_path(c, "share/sock"), &st), 0);
	assert_true(S_ISSOCK(st.st_mode) && !(st.st_mode & 06000) && st.st_rdev == 0);
	assert_int_equal(cl_open(c, FUSE_OPEN, (uint64_t)cl_lookup(c, c->rw, "fifo"), O_RDWR),
			 -EPERM);
	assert_int_equal(cl_open(c, FUSE_OPEN, (uint64_t)cl_lookup(c, c->rw, "sock"), O_RDWR),
			 -EPERM);
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

/* 30: file handles (name_to_handle_at/open_by_handle_at in the guest): the
 * server does not offer FUSE_EXPORT_SUPPORT, so the guest kernel never
 * sends a LOOKUP of "." or ".." on its behalf (they are EINVAL anyway);
 * a node id made from a host inode number is ESTALE. */
static void test_case30_file_handles(void **state)
{
	FX();
	struct fuse_init_in in = { .major = 7, .minor = 38, .flags = 0xffffffff };
	struct fuse_getattr_in ga = { 0 };
	struct stat st;

	assert_int_equal(CALL0(c, FUSE_DESTROY, 0), 0);
	assert_int_equal(CALL(c, FUSE_INIT, 0, ARG(in)), 0);
	assert_false(((const struct fuse_init_out *)c->rep)->flags & FUSE_EXPORT_SUPPORT);
	c->rw = (uint64_t)cl_lookup(c, FUSE_ROOT_ID, "rw");
	int64_t d = cl_lookup(c, c->rw, "d");
	assert_int_equal(cl_lookup(c, (uint64_t)d, ".."), -EINVAL);
	assert_int_equal(cl_lookup(c, (uint64_t)d, "."), -EINVAL);
	assert_int_equal(cl_lookup(c, FUSE_ROOT_ID, ".."), -EINVAL);
	assert_int_equal(stat(cl_path(c, "canary/secret"), &st), 0);
	if (st.st_ino > 1000) {
		assert_int_equal(CALL(c, FUSE_GETATTR, st.st_ino, ARG(ga)), -ESTALE);
		assert_int_equal(cl_open(c, FUSE_OPEN, st.st_ino, O_RDONLY), -ESTALE);
	}
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

/* 49: MKNOD of every file type and of bits that are no type: regular
 * files, FIFOs and sockets are made (no setid bits, no device number);
 * character and block devices, whatever their number, are empty regular
 * files 0600 on the host; directories, symlinks and non-types EINVAL;
 * nothing else appears in the share. */
static void test_case49_mknod_types(void **state)
{
	FX();
	static const struct {
		mode_t type;
		int want;
	} cases[] = {
		{ S_IFREG, 0 },	      { S_IFIFO, 0 },	    { S_IFSOCK, 0 },
		{ S_IFCHR, 0 },	      { S_IFBLK, 0 },	    { S_IFDIR, -EINVAL },
		{ S_IFLNK, -EINVAL }, { 0, -EINVAL },	    { S_IFMT, -EINVAL },
		{ 0030000, -EINVAL }, { 0050000, -EINVAL }, { 0070000, -EINVAL },
	};
	dev_t devs[] = { makedev(1, 1), makedev(1, 3), makedev(8, 0), makedev(10, 232), 0 };

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		for (size_t j = 0; j < ARRAY_SIZE(devs); j++) {
			struct fuse_mknod_in mn = { .mode = cases[i].type | 06777,
						    .rdev = (uint32_t)devs[j] };
			char name[16];
			struct stat st;

			snprintf(name, sizeof(name), "n%zu_%zu", i, j);
			assert_int_equal(CALL(c, FUSE_MKNOD, c->rw, ARG(mn), STR(name)),
					 cases[i].want);
			if (cases[i].want)
				continue;
			snprintf(name, sizeof(name), "share/n%zu_%zu", i, j);
			assert_int_equal(lstat(cl_path(c, name), &st), 0);
			if (cases[i].type == S_IFCHR || cases[i].type == S_IFBLK)
				assert_int_equal(st.st_mode, S_IFREG | 0600);
			else
				assert_int_equal(st.st_mode & S_IFMT, cases[i].type);
			assert_int_equal(st.st_mode & 06000, 0);
			assert_int_equal(st.st_rdev, 0);
		}
	}
	/* whiteouts (0:0 character devices) too: a file on the host */
	struct fuse_mknod_in wo = { .mode = S_IFCHR, .rdev = 0 };
	struct stat st;
	assert_int_equal(CALL(c, FUSE_MKNOD, c->rw, ARG(wo), STR("wh")), 0);
	assert_int_equal(lstat(cl_path(c, "share/wh"), &st), 0);
	assert_true(S_ISREG(st.st_mode));
	canary_same(f);
}

/* 50: xattrs outside user.*: "user." alone, "user" and "USER.x", the
 * security, trusted and system namespaces, on files, directories, FIFOs
 * and symlinks: written EPERM, read as absent; a host trusted.* xattr (as
 * root) is neither listed nor read; oversized names and values and unknown
 * flags are refused. */
static void test_case50_xattr_namespaces(void **state)
{
	FX();
	const char *names[] = { "user.",
				"user",
				"USER.x",
				"security.selinux",
				"security.ima",
				"trusted.overlay.opaque",
				"system.posix_acl_default",
				"system.nfs4_acl",
				"x" };
	struct fuse_setxattr_in sx = { .size = 1 };
	struct fuse_getxattr_in gx = { .size = 4096 };
	int64_t fifo, link;
	char longname[300];
	cleanup_free char *big = xzalloc(XATTR_VALUE_MAX + 2);

	assert_int_equal(mkfifo(cl_path(c, "share/fifo"), 0644), 0);
	assert_int_equal(symlink("../canary/secret", cl_path(c, "share/l")), 0);
	fifo = cl_lookup(c, c->rw, "fifo");
	link = cl_lookup(c, c->rw, "l");
	uint64_t nodes[] = { (uint64_t)cl_lookup(c, c->rw, "f"), (uint64_t)cl_lookup(c, c->rw, "d"),
			     c->rw };
	for (size_t i = 0; i < ARRAY_SIZE(nodes); i++) {
		for (size_t j = 0; j < ARRAY_SIZE(names); j++) {
			int want = strncmp(names[j], "system.posix_acl_", 17) == 0 ? -EOPNOTSUPP
										   : -EPERM;

			assert_int_equal(CALL(c, FUSE_SETXATTR, nodes[i], { &sx, 8 }, STR(names[j]),
					      { "v", 1 }),
					 want);
			assert_int_equal(CALL(c, FUSE_GETXATTR, nodes[i], ARG(gx), STR(names[j])),
					 -ENODATA);
			assert_int_equal(CALL(c, FUSE_REMOVEXATTR, nodes[i], STR(names[j])), want);
		}
	}
	/* user.* too, but not on a FIFO or a symlink (which would act on its target) */
	uint64_t others[] = { (uint64_t)fifo, (uint64_t)link, FUSE_ROOT_ID };
	for (size_t i = 0; i < ARRAY_SIZE(others); i++) {
		int want = others[i] == FUSE_ROOT_ID ? -EROFS : -EPERM;

		assert_int_equal(
			CALL(c, FUSE_SETXATTR, others[i], { &sx, 8 }, STR("user.x"), { "v", 1 }),
			want);
		assert_int_equal(CALL(c, FUSE_GETXATTR, others[i], ARG(gx), STR("user.x")),
				 -ENODATA);
		assert_int_equal(CALL(c, FUSE_LISTXATTR, others[i], ARG(gx)), 0);
		assert_int_equal(c->rep_len, 0);
	}
	memset(longname, 'a', sizeof(longname));
	memcpy(longname, "user.", 5);
	longname[256] = 0;
	assert_int_equal(CALL(c, FUSE_SETXATTR, nodes[0], { &sx, 8 }, STR(longname), { "v", 1 }),
			 -ERANGE);
	sx.size = XATTR_VALUE_MAX + 1;
	assert_int_equal(CALL(c, FUSE_SETXATTR, nodes[0], { &sx, 8 }, STR("user.big"),
			      { big, XATTR_VALUE_MAX + 1 }),
			 -E2BIG);
	sx = (struct fuse_setxattr_in){ .size = 1, .flags = 0x10 };
	assert_int_equal(CALL(c, FUSE_SETXATTR, nodes[0], { &sx, 8 }, STR("user.x"), { "v", 1 }),
			 -EINVAL);
	/* a size that is not the value's */
	sx = (struct fuse_setxattr_in){ .size = 100 };
	assert_int_equal(CALL(c, FUSE_SETXATTR, nodes[0], { &sx, 8 }, STR("user.x"), { "v", 1 }),
			 -EINVAL);
	if (getuid() == 0 &&
	    lsetxattr(cl_path(c, "share/f"), "trusted.secret", SECRET, strlen(SECRET), 0) == 0) {
		assert_int_equal(CALL(c, FUSE_LISTXATTR, nodes[0], ARG(gx)), 0);
		assert_null(memmem(c->rep, c->rep_len, "trusted", 7));
		assert_int_equal(CALL(c, FUSE_GETXATTR, nodes[0], ARG(gx), STR("trusted.secret")),
				 -ENODATA);
		assert_false(leaked(c));
	}
	canary_same(f);
}

/* 51: OPEN flags the guest may not choose: O_PATH, O_NOFOLLOW, O_CREAT,
 * O_EXCL, O_TMPFILE, O_NOATIME and O_DIRECTORY tricks on a symlink node, a
 * file, a directory and the hub: the allowlist drops what is not data
 * access, a symlink node never opens (ELOOP) whatever the flags, a file
 * is not a directory, a directory opens read-only only. */
static void test_case51_open_flags(void **state)
{
	FX();
	uint32_t sneaky[] = { O_PATH,
			      O_PATH | O_NOFOLLOW,
			      O_RDONLY | O_NOFOLLOW,
			      O_RDONLY | O_DIRECTORY,
			      O_RDWR | O_CREAT | O_EXCL,
			      O_RDONLY | O_NOATIME,
			      O_PATH | O_DIRECTORY };
	int64_t l, n = cl_lookup(c, c->rw, "f"), d = cl_lookup(c, c->rw, "d"), fh;

	assert_int_equal(symlink("../canary/secret", cl_path(c, "share/l")), 0);
	l = cl_lookup(c, c->rw, "l");
	for (size_t i = 0; i < ARRAY_SIZE(sneaky); i++)
		assert_int_equal(cl_open(c, FUSE_OPEN, (uint64_t)l, sneaky[i]), -ELOOP);
	/* O_PATH is dropped: a plain read-only handle that reads */
	fh = cl_open(c, FUSE_OPEN, (uint64_t)n, O_PATH);
	assert_true(fh > 0);
	assert_int_equal(cl_read(c, (uint64_t)n, (uint64_t)fh, 0, 64), 5);
	assert_int_equal(cl_open(c, FUSE_OPEN, (uint64_t)n, O_RDONLY | O_DIRECTORY), -ENOTDIR);
	assert_int_equal(cl_open(c, FUSE_OPENDIR, (uint64_t)n, O_RDONLY), -ENOTDIR);
	assert_int_equal(cl_open(c, FUSE_OPEN, (uint64_t)d, O_RDWR), -EISDIR);
	assert_int_equal(cl_open(c, FUSE_OPEN, (uint64_t)d, O_TMPFILE | O_RDWR), -EISDIR);
	assert_int_equal(cl_open(c, FUSE_OPEN, FUSE_ROOT_ID, O_RDONLY), -EISDIR);
	/* O_CREAT|O_EXCL on OPEN makes nothing */
	assert_true(cl_open(c, FUSE_OPEN, (uint64_t)d, O_RDONLY | O_CREAT | O_EXCL) > 0);
	assert_true(cl_open(c, FUSE_OPEN, c->rw, O_RDONLY | O_DIRECTORY) > 0);
	cleanup_free char *in_d = names_in(cl_path(c, "share/d"));
	assert_string_equal(in_d, "x\n");
	/* CREATE of a directory or with O_DIRECTORY, or of another type */
	struct fuse_create_in cr = { .flags = O_RDWR | O_CREAT | O_DIRECTORY,
				     .mode = S_IFDIR | 0755 };
	assert_int_equal(CALL(c, FUSE_CREATE, c->rw, ARG(cr), STR("cd")), -EINVAL);
	cr.mode = S_IFLNK | 0777;
	assert_int_equal(CALL(c, FUSE_CREATE, c->rw, ARG(cr), STR("cd")), -EINVAL);
	assert_int_equal(access(cl_path(c, "share/cd"), F_OK), -1);
	canary_same(f);
}

/* 52: offsets and lengths at and past the edges of off_t: READ, WRITE,
 * FALLOCATE, LSEEK, READDIR and SETATTR size with 2^63 and more are
 * EINVAL/ENXIO/EFBIG, never a wrap to a small offset; a sparse write far
 * out lands in the file itself; fallocate modes that shift data are
 * EOPNOTSUPP; every other file is unchanged. */
static void test_case52_offsets(void **state)
{
	FX();
	cleanup_free char *other = cl_tree(c, "other");
	int64_t n = cl_lookup(c, c->rw, "f"), d = cl_lookup(c, c->rw, "d");
	uint64_t fh = (uint64_t)cl_open(c, FUSE_OPEN, (uint64_t)n, O_RDWR);
	uint64_t dfh = (uint64_t)cl_open(c, FUSE_OPENDIR, (uint64_t)d, O_RDONLY);
	const uint64_t huge[] = { 1ULL << 63, UINT64_MAX, (1ULL << 63) + 5 };
	struct fuse_setattr_in sa = { .valid = FATTR_SIZE };
	uint32_t bad_modes[] = { FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE, 0x80, 0x100 };

	for (size_t i = 0; i < ARRAY_SIZE(huge); i++) {
		struct fuse_fallocate_in fa = { .fh = fh, .offset = huge[i], .length = 1 };
		struct fuse_lseek_in ls = { .fh = fh, .offset = huge[i], .whence = SEEK_DATA };

		assert_int_equal(cl_read(c, (uint64_t)n, fh, huge[i], 16), -EINVAL);
		assert_int_equal(cl_write(c, (uint64_t)n, fh, huge[i], "x"), -EINVAL);
		assert_int_equal(CALL(c, FUSE_FALLOCATE, (uint64_t)n, ARG(fa)), -EINVAL);
		fa = (struct fuse_fallocate_in){ .fh = fh, .offset = 0, .length = huge[i] };
		assert_int_equal(CALL(c, FUSE_FALLOCATE, (uint64_t)n, ARG(fa)), -EINVAL);
		assert_int_equal(CALL(c, FUSE_LSEEK, (uint64_t)n, ARG(ls)), -ENXIO);
		assert_int_equal(readdir_call(c, FUSE_READDIR, (uint64_t)d, dfh, huge[i]), -EINVAL);
		sa.size = huge[i];
		assert_true(cl_setattr(c, (uint64_t)n, &sa) < 0);
	}
	/* INT64_MAX itself: nothing to read, nothing may be written there */
	int k = cl_read(c, (uint64_t)n, fh, INT64_MAX, 16);
	assert_true(k == 0 || k == -EINVAL);
	assert_true(cl_write(c, (uint64_t)n, fh, INT64_MAX, "x") < 0);
	struct fuse_fallocate_in fa = { .fh = fh, .offset = INT64_MAX, .length = INT64_MAX };
	assert_true(CALL(c, FUSE_FALLOCATE, (uint64_t)n, ARG(fa)) < 0);
	for (size_t i = 0; i < ARRAY_SIZE(bad_modes); i++) {
		fa = (struct fuse_fallocate_in){ .fh = fh, .length = 4096, .mode = bad_modes[i] };
		assert_int_equal(CALL(c, FUSE_FALLOCATE, (uint64_t)n, ARG(fa)), -EOPNOTSUPP);
	}
	/* whence other than DATA/HOLE, and past the end */
	struct fuse_lseek_in ls = { .fh = fh, .whence = SEEK_END };
	assert_int_equal(CALL(c, FUSE_LSEEK, (uint64_t)n, ARG(ls)), -EINVAL);
	ls = (struct fuse_lseek_in){ .fh = fh, .offset = 5, .whence = SEEK_DATA };
	assert_int_equal(CALL(c, FUSE_LSEEK, (uint64_t)n, ARG(ls)), -ENXIO);
	/* a sparse write 64 GiB out, then cut back */
	assert_int_equal(cl_write(c, (uint64_t)n, fh, 1ULL << 36, "far"), 0);
	assert_int_equal(cl_attr(c, (uint64_t)n)->size, (1ULL << 36) + 3);
	assert_int_equal(cl_read(c, (uint64_t)n, fh, 1ULL << 36, 16), 3);
	assert_memory_equal(c->rep, "far", 3);
	sa.size = 5;
	assert_int_equal(cl_setattr(c, (uint64_t)n, &sa), 0);
	assert_string_equal(cl_get(c, "share/f"), "hello");
	assert_string_equal(cl_get(c, "share/d/x"), "x");
	cleanup_free char *other_now = cl_tree(c, "other");
	assert_string_equal(other, other_now);
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
		T(test_case17_mknod_devices),
		T(test_case18_fifo_socket),
		T(test_case19_open_special),
		T(test_case20_truncate_fifo),
		T(test_case21_rename_flags),
		T(test_case22_setid),
		T(test_case23_setgid_dir),
		T(test_case24_xattrs),
		T(test_case25_enosys),
		T(test_case26_ro),
		T(test_case27_ro_rw_alias),
		T(test_case28_across_shares),
		T(test_case29_unlinked_open),
		T(test_case30_file_handles),
		T(test_case31_forged_ids),
		T(test_case32_release_forget),
		T(test_case33_limits),
		T(test_case34_framing),
		T(test_case35_remove_export),
		T(test_case36_root_replaced),
		T(test_case37_ctr_path),
		T(test_case38_moved_outside),
		T(test_case39_gantry_home),
		T(test_case40_odd_names),
		T(test_case41_race_dir_lookup),
		T(test_case42_race_file_open),
		T(test_case43_race_readdir),
		T(test_case44_race_rename),
		T(test_case45_race_link),
		T(test_case46_race_moved_out),
		T(test_case47_race_setid),
		T(test_case48_race_create),
		T(test_case49_mknod_types),
		T(test_case50_xattr_namespaces),
		T(test_case51_open_flags),
		T(test_case52_offsets),
		T(test_case53_dir_replaced),
		T(test_case54_exchange),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
