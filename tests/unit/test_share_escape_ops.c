/* The escape suite's cases that need no guest, second part: what a
 * hostile guest's request can do to a node it reached. Devices, FIFOs and
 * sockets made or opened, setuid and setgid bits, xattrs, opcodes the
 * server does not serve, the ro export, file handles, forged node ids and
 * handles, the limits on nodes and handles, lying lengths, OPEN flags, and
 * offsets at the edges of off_t. Each case is named after its number in
 * the design note's table (docs/shares.md lists them all) and runs against
 * the same temp tree as test_share_escape.c's; each asserts the errno and
 * that the canary directory beside the shares is unchanged. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>

#include <cmocka.h>

#include "share_client.h"
#include "share_escape_rig.h"
#include "skip.h"

#define XATTR_VALUE_MAX (64 * 1024) /* the server's limit on a value (docs/shares.md) */

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

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_case17_mknod_devices),
		T(test_case18_fifo_socket),
		T(test_case19_open_special),
		T(test_case20_truncate_fifo),
		T(test_case22_setid),
		T(test_case23_setgid_dir),
		T(test_case24_xattrs),
		T(test_case25_enosys),
		T(test_case26_ro),
		T(test_case27_ro_rw_alias),
		T(test_case30_file_handles),
		T(test_case31_forged_ids),
		T(test_case32_release_forget),
		T(test_case33_limits),
		T(test_case34_framing),
		T(test_case49_mknod_types),
		T(test_case50_xattr_namespaces),
		T(test_case51_open_flags),
		T(test_case52_offsets),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
