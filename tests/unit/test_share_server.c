/* The share server through a fake FUSE client over a temp tree: the
 * operations a developer's tools use; the escape suite's cases that
 * need no guest are in test_share_escape*.c. Every test ends with the
 * canary directory beside the shares unchanged. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include "share_client.h"

/* ---- what tools do ---- */

static void test_hub(void **state)
{
	FX();
	struct fuse_read_in rd = { .size = 4096 };
	int64_t fh = cl_open(c, FUSE_OPENDIR, FUSE_ROOT_ID, O_RDONLY);
	const struct fuse_dirent *d;
	int names = 0;

	assert_true(fh > 0);
	rd.fh = (uint64_t)fh;
	assert_int_equal(CALL(c, FUSE_READDIR, FUSE_ROOT_ID, ARG(rd)), 0);
	for (size_t off = 0; off < c->rep_len; off += FUSE_DIRENT_SIZE(d)) {
		d = (const void *)(c->rep + off);
		names += (d->namelen == 2 && !memcmp(d->name, "rw", 2)) ||
			 (d->namelen == 5 && !memcmp(d->name, "other", 5));
	}
	assert_int_equal(names, 2);
	assert_int_equal(cl_release(c, FUSE_RELEASEDIR, FUSE_ROOT_ID, (uint64_t)fh), 0);
	assert_int_equal(cl_lookup(c, FUSE_ROOT_ID, "nope"), -ENOENT);
	assert_true(S_ISDIR(cl_attr(c, FUSE_ROOT_ID)->mode));
	/* The hub takes no changes. */
	struct fuse_mkdir_in mk = { .mode = 0755 };
	assert_int_equal(CALL(c, FUSE_MKDIR, FUSE_ROOT_ID, ARG(mk), STR("new")), -EROFS);
	canary_same(f);
}

/* A device reset forgets every node and handle the guest was given: it
 * must INIT again, and its old ids are stale then. */
static void test_reset(void **state)
{
	FX();
	struct fuse_getattr_in ga = { 0 };
	int64_t node;

	cl_put(c, "share/kept", "x");
	node = cl_lookup(c, c->rw, "kept");
	assert_true(node > 0);
	fs_server_reset(c->s);
	assert_int_equal(CALL(c, FUSE_GETATTR, (uint64_t)node, ARG(ga)), -EIO);
	cl_init(c);
	assert_int_equal(CALL(c, FUSE_GETATTR, (uint64_t)node, ARG(ga)), -ESTALE);
	assert_true(cl_lookup(c, c->rw, "kept") > node);
	canary_same(f);
}

static void test_create_write_read(void **state)
{
	FX();
	uint64_t fh;
	int64_t n = cl_create(c, c->rw, "new", O_RDWR | O_CREAT, 0640, &fh);

	assert_true(n > 1);
	assert_int_equal(cl_write(c, (uint64_t)n, fh, 0, "written by the guest"), 0);
	assert_int_equal(((const struct fuse_write_out *)c->rep)->size, 20);
	assert_int_equal(cl_read(c, (uint64_t)n, fh, 8, 100), 12);
	assert_memory_equal(c->rep, "by the guest", 12);
	assert_int_equal(cl_release(c, FUSE_RELEASE, (uint64_t)n, fh), 0);
	assert_string_equal(cl_get(c, "share/new"), "written by the guest");
	struct stat st;
	assert_int_equal(stat(cl_path(c, "share/new"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	/* An existing name without O_EXCL opens it; with O_EXCL it is EEXIST. */
	assert_int_equal(cl_create(c, c->rw, "new", O_RDWR | O_CREAT | O_EXCL, 0640, &fh), -EEXIST);
	assert_int_equal(cl_create(c, c->rw, "new", O_RDONLY | O_CREAT, 0640, &fh), n);
	canary_same(f);
}

static void test_rename_over(void **state)
{
	FX();
	uint64_t fh;
	int64_t n = cl_create(c, c->rw, "f.tmp", O_WRONLY | O_CREAT, 0644, &fh);
	struct fuse_rename_in rn = { .newdir = c->rw };

	assert_int_equal(cl_write(c, (uint64_t)n, fh, 0, "saved"), 0);
	assert_int_equal(CALL(c, FUSE_RENAME, c->rw, ARG(rn), STR("f.tmp"), STR("f")), 0);
	assert_string_equal(cl_get(c, "share/f"), "saved");
	assert_null(cl_get(c, "share/f.tmp"));
	/* NOREPLACE over an existing name, EXCHANGE of two. */
	struct fuse_rename2_in r2 = { .newdir = c->rw, .flags = RENAME_NOREPLACE };
	assert_int_equal(CALL(c, FUSE_RENAME2, c->rw, ARG(r2), STR("f"), STR("d")), -EEXIST);
	r2.flags = RENAME_EXCHANGE;
	assert_int_equal(CALL(c, FUSE_RENAME2, c->rw, ARG(r2), STR("f"), STR("d")), 0);
	assert_string_equal(cl_get(c, "share/d"), "saved");
	canary_same(f);
}

static void test_link_symlink(void **state)
{
	FX();
	int64_t fnode = cl_lookup(c, c->rw, "f");
	struct fuse_link_in ln = { .oldnodeid = (uint64_t)fnode };
	struct stat a, b;

	assert_int_equal(CALL(c, FUSE_LINK, c->rw, ARG(ln), STR("hard")), 0);
	assert_int_equal(((const struct fuse_entry_out *)c->rep)->nodeid, fnode);
	assert_int_equal(stat(cl_path(c, "share/f"), &a), 0);
	assert_int_equal(stat(cl_path(c, "share/hard"), &b), 0);
	assert_int_equal(a.st_ino, b.st_ino);
	assert_int_equal(CALL(c, FUSE_SYMLINK, c->rw, STR("sym"), STR("../../canary/secret")), 0);
	int64_t s = (int64_t)((const struct fuse_entry_out *)c->rep)->nodeid;
	assert_int_equal(CALL0(c, FUSE_READLINK, (uint64_t)s), 0);
	assert_int_equal(c->rep_len, strlen("../../canary/secret"));
	assert_memory_equal(c->rep, "../../canary/secret", c->rep_len);
	canary_same(f);
}

static void test_chmod_truncate_mtime(void **state)
{
	FX();
	int64_t n = cl_lookup(c, c->rw, "f");
	struct fuse_setattr_in sa = { .valid = FATTR_MODE, .mode = S_IFREG | 0751 };
	struct stat st;

	assert_int_equal(cl_setattr(c, (uint64_t)n, &sa), 0);
	assert_int_equal(stat(cl_path(c, "share/f"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0751);
	sa = (struct fuse_setattr_in){ .valid = FATTR_SIZE, .size = 2 };
	assert_int_equal(cl_setattr(c, (uint64_t)n, &sa), 0);
	assert_string_equal(cl_get(c, "share/f"), "he");
	assert_int_equal(((const struct fuse_attr_out *)c->rep)->attr.size, 2);
	sa = (struct fuse_setattr_in){ .valid = FATTR_MTIME, .mtime = 1000000000, .mtimensec = 5 };
	assert_int_equal(cl_setattr(c, (uint64_t)n, &sa), 0);
	assert_int_equal(stat(cl_path(c, "share/f"), &st), 0);
	assert_int_equal(st.st_mtim.tv_sec, 1000000000);
	assert_int_equal(st.st_mtim.tv_nsec, 5);
	/* chown is squashed: accepted, the host owner stays. */
	sa = (struct fuse_setattr_in){ .valid = FATTR_UID | FATTR_GID, .uid = 12345, .gid = 12345 };
	assert_int_equal(cl_setattr(c, (uint64_t)n, &sa), 0);
	assert_int_equal(stat(cl_path(c, "share/f"), &st), 0);
	assert_int_equal(st.st_uid, getuid());
	canary_same(f);
}

/* INIT once more after a DESTROY: the flags the server took. */
static uint64_t cl_init_flags(struct cl *c)
{
	struct fuse_init_in in = { .major = 7, .minor = 38, .flags = 0xffffffff };
	const struct fuse_init_out *o;

	assert_int_equal(CALL0(c, FUSE_DESTROY, 0), 0);
	assert_int_equal(CALL(c, FUSE_INIT, 0, ARG(in)), 0);
	o = (const void *)c->rep;
	return o->flags | (uint64_t)o->flags2 << 32;
}

/* FUSE_HANDLE_KILLPRIV_V2: the guest's kernel leaves killing the set-id
 * bits to the server, which keeps them only in the metadata: a write, an
 * O_TRUNC open or a truncate by a caller without CAP_FSETID, and every
 * chown, clear the set-user-ID bit, and the set-group-ID bit where the
 * group may execute; the same calls without the flag keep both. */
static void test_kill_setid(void **state)
{
	FX();
	uint64_t flags = cl_init_flags(c), fh;
	int64_t n = cl_create(c, c->rw, "sx", O_RDWR | O_CREAT, 0755, &fh);
	struct fuse_setattr_in sa = { .valid = FATTR_MODE, .mode = S_IFREG | 06755 };
	struct fuse_write_in wr = { .fh = fh, .size = 1, .write_flags = FUSE_WRITE_KILL_SUIDGID };
	struct fuse_open_in op = { .flags = O_WRONLY | O_TRUNC, .open_flags = FUSE_OPEN_KILL_SUIDGID };
	struct stat st;

	assert_true(n > 1);
	assert_int_equal(flags & FUSE_HANDLE_KILLPRIV_V2, FUSE_HANDLE_KILLPRIV_V2);
	/* Without the flag (a writer with CAP_FSETID): kept. */
	assert_int_equal(cl_setattr(c, (uint64_t)n, &sa), 0);
	if ((cl_attr(c, (uint64_t)n)->mode & 07777) != 06755)
		skip(); /* no user xattrs here: nothing is kept to kill */
	assert_int_equal(cl_write(c, (uint64_t)n, fh, 0, "x"), 0);
	assert_int_equal(cl_attr(c, (uint64_t)n)->mode & 07777, 06755);
	assert_int_equal(CALL(c, FUSE_WRITE, (uint64_t)n, ARG(wr), { "y", 1 }), 0);
	assert_int_equal(cl_attr(c, (uint64_t)n)->mode & 07777, 0755);
	assert_string_equal(cl_get(c, "share/sx"), "y");
	/* The group may not execute: its set-group-ID bit stays. */
	sa.mode = S_IFREG | 06745;
	assert_int_equal(cl_setattr(c, (uint64_t)n, &sa), 0);
	assert_int_equal(CALL(c, FUSE_WRITE, (uint64_t)n, ARG(wr), { "y", 1 }), 0);
	assert_int_equal(cl_attr(c, (uint64_t)n)->mode & 07777, 02745);
	/* An O_TRUNC open: only with O_TRUNC. */
	sa.mode = S_IFREG | 04755;
	assert_int_equal(cl_setattr(c, (uint64_t)n, &sa), 0);
	op.flags = O_WRONLY;
	assert_int_equal(CALL(c, FUSE_OPEN, (uint64_t)n, ARG(op)), 0);
	assert_int_equal(cl_attr(c, (uint64_t)n)->mode & 07777, 04755);
	op.flags = O_WRONLY | O_TRUNC;
	assert_int_equal(CALL(c, FUSE_OPEN, (uint64_t)n, ARG(op)), 0);
	assert_int_equal(cl_attr(c, (uint64_t)n)->mode & 07777, 0755);
	/* A chown. */
	assert_int_equal(cl_setattr(c, (uint64_t)n, &sa), 0);
	sa = (struct fuse_setattr_in){ .valid = FATTR_UID | FATTR_KILL_SUIDGID, .uid = 1000 };
	assert_int_equal(cl_setattr(c, (uint64_t)n, &sa), 0);
	assert_int_equal(((const struct fuse_attr_out *)c->rep)->attr.mode & 07777, 0755);
	assert_int_equal(((const struct fuse_attr_out *)c->rep)->attr.uid, 1000);
	/* The host file never had them. */
	assert_int_equal(stat(cl_path(c, "share/sx"), &st), 0);
	assert_false(st.st_mode & (S_ISUID | S_ISGID));
	canary_same(f);
}

static void test_readdirplus(void **state)
{
	FX();
	int64_t fh = cl_open(c, FUSE_OPENDIR, c->rw, O_RDONLY);
	struct fuse_read_in rd = { .size = 4096 };
	const struct fuse_direntplus *d;
	uint64_t fnode = 0;
	struct fs_stats st;
	int seen = 0;

	assert_true(fh > 0);
	rd.fh = (uint64_t)fh;
	assert_int_equal(CALL(c, FUSE_READDIRPLUS, c->rw, ARG(rd)), 0);
	for (size_t off = 0; off < c->rep_len; off += FUSE_DIRENTPLUS_SIZE(d)) {
		d = (const void *)(c->rep + off);
		seen++;
		if (d->dirent.namelen == 1 && d->dirent.name[0] == 'f')
			fnode = d->entry_out.nodeid;
	}
	assert_int_equal(seen, 4); /* . .. f d */
	assert_int_equal(cl_lookup(c, c->rw, "f"), (int64_t)fnode);
	/* A tiny buffer gets what fits, and nothing is counted that did not. */
	fs_server_stats(c->s, &st);
	rd.size = 80;
	assert_int_equal(CALL(c, FUSE_READDIRPLUS, c->rw, ARG(rd)), 0);
	assert_true(c->rep_len <= 80);
	assert_int_equal(cl_release(c, FUSE_RELEASEDIR, c->rw, (uint64_t)fh), 0);
	canary_same(f);
}

/* Plain READDIR gives each entry the type the guest made: a device kept
 * in a regular file (its xattr) is that device, in getdents' d_type too. */
static void test_readdir_types(void **state)
{
	FX();
	static const char dev[] = "0:0:0644:block-8-0";
	struct fuse_read_in rd = { .size = 4096 };
	const struct fuse_dirent *d;
	int64_t fh;
	int fd, seen = 0;

	fd = open(cl_path(c, "share/sda"), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	if (setxattr(cl_path(c, "share/sda"), "user.gantry.stat", dev, sizeof(dev) - 1, 0) < 0)
		skip(); /* no user xattrs where the test's files are */
	fh = cl_open(c, FUSE_OPENDIR, c->rw, O_RDONLY);
	assert_true(fh > 0);
	rd.fh = (uint64_t)fh;
	assert_int_equal(CALL(c, FUSE_READDIR, c->rw, ARG(rd)), 0);
	for (size_t off = 0; off < c->rep_len; off += FUSE_DIRENT_SIZE(d)) {
		d = (const void *)(c->rep + off);
		if (d->namelen == 3 && memcmp(d->name, "sda", 3) == 0) {
			assert_int_equal(d->type, DT_BLK);
			seen++;
		} else if (d->namelen == 1 && d->name[0] == 'f') {
			assert_int_equal(d->type, DT_REG);
			seen++;
		} else if (d->namelen == 1 && d->name[0] == 'd') {
			assert_int_equal(d->type, DT_DIR);
			seen++;
		}
	}
	assert_int_equal(seen, 3);
	assert_int_equal(cl_release(c, FUSE_RELEASEDIR, c->rw, (uint64_t)fh), 0);
	canary_same(f);
}

static void test_unlink_while_open(void **state)
{
	FX();
	int64_t n = cl_lookup(c, c->rw, "f");
	int64_t fh = cl_open(c, FUSE_OPEN, (uint64_t)n, O_RDWR);
	struct fs_stats st;

	assert_true(fh > 0);
	/* The guest's close needs no FLUSH (ops_file.c). */
	assert_true(((const struct fuse_open_out *)c->rep)->open_flags & FOPEN_NOFLUSH);
	assert_int_equal(CALL(c, FUSE_UNLINK, c->rw, STR("f")), 0);
	assert_null(cl_get(c, "share/f"));
	assert_int_equal(cl_write(c, (uint64_t)n, (uint64_t)fh, 5, " world"), 0);
	assert_int_equal(cl_read(c, (uint64_t)n, (uint64_t)fh, 0, 100), 11);
	assert_memory_equal(c->rep, "hello world", 11);
	assert_int_equal(cl_attr(c, (uint64_t)n)->nlink, 0);
	fs_server_stats(c->s, &st);
	assert_int_equal(cl_release(c, FUSE_RELEASE, (uint64_t)n, (uint64_t)fh), 0);
	assert_int_equal(cl_forget(c, (uint64_t)n, 1), 1);
	{
		struct fs_stats after;

		fs_server_stats(c->s, &after);
		assert_int_equal(after.nodes, st.nodes - 1);
	}
	assert_int_equal(cl_lookup(c, c->rw, "f"), -ENOENT);
	canary_same(f);
}

static void test_mkdir_rmdir_statfs_sync(void **state)
{
	FX();
	struct fuse_mkdir_in mk = { .mode = 02755 };
	struct fuse_fsync_in fs = { 0 };
	struct fuse_syncfs_in sf = { 0 };
	struct stat st;

	assert_int_equal(CALL(c, FUSE_MKDIR, c->rw, ARG(mk), STR("nd")), 0);
	assert_int_equal(stat(cl_path(c, "share/nd"), &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(CALL(c, FUSE_RMDIR, c->rw, STR("nd")), 0);
	assert_int_equal(CALL0(c, FUSE_STATFS, c->rw), 0);
	assert_true(((const struct fuse_statfs_out *)c->rep)->st.namelen > 0);
	int64_t n = cl_lookup(c, c->rw, "f");
	int64_t fh = cl_open(c, FUSE_OPEN, (uint64_t)n, O_RDWR);
	fs.fh = (uint64_t)fh;
	assert_int_equal(CALL(c, FUSE_FSYNC, (uint64_t)n, ARG(fs)), 0);
	struct fuse_flush_in fl = { .fh = (uint64_t)fh };
	assert_int_equal(CALL(c, FUSE_FLUSH, (uint64_t)n, ARG(fl)), 0);
	assert_int_equal(CALL(c, FUSE_SYNCFS, c->rw, ARG(sf)), 0);
	struct fuse_lseek_in ls = { .fh = (uint64_t)fh, .whence = SEEK_DATA };
	assert_int_equal(CALL(c, FUSE_LSEEK, (uint64_t)n, ARG(ls)), 0);
	struct fuse_fallocate_in fa = { .fh = (uint64_t)fh, .length = 8192 };
	int r = CALL(c, FUSE_FALLOCATE, (uint64_t)n, ARG(fa));
	assert_true(r == 0 || r == -EOPNOTSUPP);
	canary_same(f);
}

static void test_map_owner(void **state)
{
	FX();
	struct fs_export_opts o = { .map_owner = true, .uid = 4242, .gid = 4343 };
	gantry_error_t err = NULL;
	int fd = open(cl_path(c, "other"), O_PATH | O_DIRECTORY | O_CLOEXEC);

	assert_int_equal(fs_server_add_export(c->s, "mapped", fd, &o, &err), 0);
	close(fd);
	int64_t r = cl_lookup(c, FUSE_ROOT_ID, "mapped");
	int64_t g = cl_lookup(c, (uint64_t)r, "g");
	assert_int_equal(cl_attr(c, (uint64_t)g)->uid, 4242);
	assert_int_equal(cl_attr(c, (uint64_t)g)->gid, 4343);
	/* Removal: busy while a handle is open, unless forced; then ESTALE. */
	int64_t fh = cl_open(c, FUSE_OPEN, (uint64_t)g, O_RDONLY);
	assert_int_equal(fs_server_export_handles(c->s, "mapped"), 1);
	assert_int_equal(fs_server_remove_export(c->s, "mapped", false, &err), -1);
	gantry_error_free(&err);
	assert_int_equal(fs_server_remove_export(c->s, "mapped", true, &err), 0);
	assert_int_equal(cl_read(c, (uint64_t)g, (uint64_t)fh, 0, 10), -ESTALE);
	assert_int_equal(cl_lookup(c, FUSE_ROOT_ID, "mapped"), -ENOENT);
	canary_same(f);
}

/* Exports: tags checked, taken ones refused, only directories, a bound. */
static void test_add_export(void **state)
{
	FX();
	struct fs_export_opts o = { 0 };
	const char *bad[] = {
		"", ".", "..", "a/b", "a b", "0123456789012345678901234567890123456"
	};
	gantry_error_t err = NULL;
	int dir = open(cl_path(c, "other"), O_PATH | O_DIRECTORY | O_CLOEXEC);
	int file = open(cl_path(c, "other/g"), O_PATH | O_CLOEXEC);
	char tag[16];
	int i;

	for (size_t k = 0; k < ARRAY_SIZE(bad); k++) {
		assert_int_equal(fs_server_add_export(c->s, bad[k], dir, &o, &err), -1);
		gantry_error_free(&err);
	}
	assert_int_equal(fs_server_add_export(c->s, "rw", dir, &o, &err), -1);
	assert_int_equal(err->status, EEXIST);
	gantry_error_free(&err);
	assert_int_equal(fs_server_add_export(c->s, "file", file, &o, &err), -1);
	assert_int_equal(err->status, ENOTDIR);
	gantry_error_free(&err);
	for (i = 0; i < FS_MAX_EXPORTS; i++) {
		snprintf(tag, sizeof(tag), "t%d", i);
		if (fs_server_add_export(c->s, tag, dir, &o, &err) < 0)
			break;
	}
	assert_int_equal(i, FS_MAX_EXPORTS - 3);
	assert_int_equal(err->status, ENOSPC);
	gantry_error_free(&err);
	assert_int_equal(fs_server_remove_export(c->s, "nope", false, &err), -1);
	gantry_error_free(&err);
	close(dir);
	close(file);
	canary_same(f);
}

#define RACE_THREADS 4
#define RACE_ROUNDS  200

struct racer {
	struct cl c; /* a copy: its own buffers, the shared server */
	int id, failures;
};

/* Each thread: create, write, read back, release, unlink, forget. */
static void *race(void *arg)
{
	struct racer *r = arg;
	char name[16], data[32];
	uint64_t fh;

	snprintf(name, sizeof(name), "t%d", r->id);
	for (int i = 0; i < RACE_ROUNDS; i++) {
		int64_t n = cl_create(&r->c, r->c.rw, name, O_RDWR | O_CREAT, 0644, &fh);

		snprintf(data, sizeof(data), "round %d of %d", i, r->id);
		r->failures += n < 0 || cl_write(&r->c, (uint64_t)n, fh, 0, data) != 0 ||
			       cl_read(&r->c, (uint64_t)n, fh, 0, 64) != (int)strlen(data) ||
			       memcmp(r->c.rep, data, strlen(data)) != 0;
		r->failures += cl_release(&r->c, FUSE_RELEASE, (uint64_t)n, fh) != 0;
		r->failures += CALL(&r->c, FUSE_UNLINK, r->c.rw, STR(name)) != 0;
		r->failures += cl_forget(&r->c, (uint64_t)n, 1) != 1;
	}
	return NULL;
}

/* Many callers at once: every request answered right, nothing left over. */
static void test_concurrent(void **state)
{
	FX();
	struct racer *r = xzalloc(RACE_THREADS * sizeof(*r));
	pthread_t t[RACE_THREADS];
	struct fs_stats before, after;

	fs_server_stats(c->s, &before);
	for (int i = 0; i < RACE_THREADS; i++) {
		memcpy(&r[i].c, c, sizeof(*c));
		r[i].c.unique = (uint64_t)(i + 1) << 40;
		r[i].id = i;
		assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
	}
	for (int i = 0; i < RACE_THREADS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(r[i].failures, 0);
	}
	fs_server_stats(c->s, &after);
	assert_int_equal(after.nodes, before.nodes);
	assert_int_equal(after.handles, before.handles);
	free(r);
	canary_same(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hub, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reset, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_write_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rename_over, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link_symlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chmod_truncate_mtime, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kill_setid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_readdirplus, setup, teardown),
		cmocka_unit_test_setup_teardown(test_readdir_types, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unlink_while_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mkdir_rmdir_statfs_sync, setup, teardown),
		cmocka_unit_test_setup_teardown(test_map_owner, setup, teardown),
		cmocka_unit_test_setup_teardown(test_add_export, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
