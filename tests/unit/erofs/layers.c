/* Test helpers for the EROFS writer (see layers.h). */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/mount.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "image/erofs.h"
#include "image/layer.h"
#include "layers.h"
#include "reader.h"

extern char **environ;

#define DEFAULT_MTIME 1600000000

struct archive *tw_open(const char *path, const char *filter)
{
	struct archive *a = archive_write_new();

	assert_non_null(a);
	assert_int_equal(archive_write_set_format_pax(a), ARCHIVE_OK);
	if (filter && strcmp(filter, "gzip") == 0)
		assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
	else if (filter && strcmp(filter, "zstd") == 0)
		assert_int_equal(archive_write_add_filter_zstd(a), ARCHIVE_OK);
	assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
	return a;
}

static unsigned int default_perm(const struct tent *t)
{
	if (t->mode)
		return t->mode;
	return t->type == 'd' ? 0755 : t->type == 'l' ? 0777 : 0644;
}

void tw_add(struct archive *a, const struct tent *t)
{
	struct archive_entry *e = archive_entry_new();
	size_t size = t->type == 'f' && t->data ? strlen(t->data) : 0;
	static const struct {
		char type;
		unsigned int ae;
	} types[] = { { 'f', AE_IFREG }, { 'd', AE_IFDIR }, { 'l', AE_IFLNK }, { 'h', AE_IFREG },
		      { 'c', AE_IFCHR }, { 'b', AE_IFBLK }, { 'p', AE_IFIFO } };
	int r;

	archive_entry_set_pathname(e, t->path);
	for (size_t i = 0; i < ARRAY_SIZE(types); i++)
		if (types[i].type == t->type)
			archive_entry_set_filetype(e, types[i].ae);
	archive_entry_set_perm(e, default_perm(t));
	archive_entry_set_uid(e, t->uid);
	archive_entry_set_gid(e, t->gid);
	archive_entry_set_mtime(e, t->mtime ? t->mtime : DEFAULT_MTIME, 0);
	archive_entry_set_size(e, (la_int64_t)size);
	if (t->type == 'l')
		archive_entry_set_symlink(e, t->data);
	if (t->type == 'h')
		archive_entry_set_hardlink(e, t->data);
	archive_entry_set_rdevmajor(e, t->major);
	archive_entry_set_rdevminor(e, t->minor);
	for (size_t i = 0; i < ARRAY_SIZE(t->xattrs) && t->xattrs[i].name; i++)
		archive_entry_xattr_add_entry(e, t->xattrs[i].name, t->xattrs[i].value,
					      t->xattrs[i].len ? t->xattrs[i].len
							       : strlen(t->xattrs[i].value));
	r = archive_write_header(a, e);
	if (r < ARCHIVE_WARN)
		fail_msg("write header `%s`: %s", t->path, archive_error_string(a));
	if (size)
		assert_int_equal(archive_write_data(a, t->data, size), (la_ssize_t)size);
	archive_entry_free(e);
}

void tw_close(struct archive *a)
{
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
}

void tw_layer(const char *path, const char *filter, const struct tent *v, size_t n)
{
	struct archive *a = tw_open(path, filter);

	for (size_t i = 0; i < n; i++)
		tw_add(a, &v[i]);
	tw_close(a);
}

int build_image(const char *image, const char *const *layers, size_t n, char **msg,
		unsigned long *dropped_xattrs)
{
	gantry_error_t err = NULL;
	struct erofs_tree *t = NULL;
	char *tmp = NULL;
	int fd = erofs_open_temp(image, &tmp, &err), ret = -1;

	if (fd < 0 || erofs_tree_new(fd, &t, &err) < 0)
		goto out;
	for (size_t i = 0; i < n; i++)
		if (layer_apply_file(t, layers[i], &err) < 0)
			goto out;
	if (erofs_write(t, &err) < 0 || erofs_publish(fd, tmp, image, &err) < 0)
		goto out;
	if (dropped_xattrs)
		*dropped_xattrs = erofs_tree_dropped_xattrs(t);
	ret = 0;
out:
	if (ret < 0) {
		*msg = xstrdup(gantry_error_str(err));
		gantry_error_free(&err);
		if (tmp)
			unlink(tmp); /* a failed build never reaches the final path */
	}
	erofs_tree_free(t);
	if (fd >= 0)
		close(fd);
	free(tmp);
	return ret;
}

static int spawn(const char *const *argv, bool quiet)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int st, r;

	posix_spawn_file_actions_init(&fa);
	if (quiet)
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	r = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0)
		return -1;
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

int run(const char *const *argv)
{
	return spawn(argv, false);
}

bool have_fsck(void)
{
	const char *argv[] = { "fsck.erofs", "-V", NULL };

	return spawn(argv, true) == 0;
}

uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

uint64_t hash_file(const char *path)
{
	uint8_t *buf = xmalloc(1 << 20);
	uint64_t h = HASH_INIT;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t r;

	if (fd < 0)
		return (uint64_t)-1;
	while ((r = read(fd, buf, 1 << 20)) > 0)
		h = hash_bytes(h, buf, (size_t)r);
	close(fd);
	free(buf);
	return r < 0 ? (uint64_t)-1 : h;
}

static char want_type(const struct tent *w)
{
	return w->type == 'h' ? 'f' : w->type;
}

static unsigned int mode_type(char type)
{
	switch (type) {
	case 'f':
		return S_IFREG;
	case 'd':
		return S_IFDIR;
	case 'l':
		return S_IFLNK;
	case 'c':
		return S_IFCHR;
	case 'b':
		return S_IFBLK;
	}
	return S_IFIFO;
}

static void check_read(struct rd *r, const struct tent *w)
{
	struct rd_inode ino, other;
	char *buf;

	if (rd_lookup(r, w->path, &ino) < 0)
		fail_msg("`%s` missing from the image", w->path);
	assert_int_equal(ino.mode & S_IFMT, mode_type(want_type(w)));
	if (w->type != 'l')
		assert_int_equal(ino.mode & 07777, default_perm(w));
	assert_int_equal(ino.uid, w->uid);
	assert_int_equal(ino.gid, w->gid);
	assert_int_equal(ino.mtime, w->mtime ? w->mtime : DEFAULT_MTIME);
	if (w->type == 'f' || w->type == 'l') {
		size_t len = w->data ? strlen(w->data) : 0;

		assert_int_equal(ino.size, len);
		buf = xmalloc(len + 1);
		assert_int_equal(rd_read(r, &ino, 0, buf, len), 0);
		assert_memory_equal(buf, w->data ? w->data : "", len);
		free(buf);
	}
	if (w->type == 'c' || w->type == 'b') {
		assert_int_equal((ino.u & 0xfff00) >> 8, w->major);
		assert_int_equal((ino.u & 0xff) | ((ino.u >> 12) & 0xfff00), w->minor);
	}
	for (size_t i = 0; i < ARRAY_SIZE(w->xattrs) && w->xattrs[i].name; i++) {
		size_t len = w->xattrs[i].len ? w->xattrs[i].len : strlen(w->xattrs[i].value);
		char val[65536];

		if (rd_getxattr(r, &ino, w->xattrs[i].name, val, sizeof(val)) != (long)len)
			fail_msg("`%s`: xattr %s missing or wrong size", w->path,
				 w->xattrs[i].name);
		assert_memory_equal(val, w->xattrs[i].value, len);
	}
	if (w->same_as) {
		assert_int_equal(rd_lookup(r, w->same_as, &other), 0);
		assert_int_equal(other.nid, ino.nid);
		assert_true(ino.nlink >= 2);
	}
}

/* Compare one entry of a filesystem tree (extracted by fsck.erofs, or the
 * image mounted by the kernel) with what it should be. */
static void check_fs(const char *root, const struct tent *w, bool kernel)
{
	char *path, *buf;
	struct stat st;

	xasprintf(&path, "%s/%s", root, w->path);
	if (lstat(path, &st) < 0)
		fail_msg("`%s` not in `%s`: %s", w->path, root, strerror(errno));
	assert_int_equal(st.st_mode & S_IFMT, mode_type(want_type(w)));
	/* fsck.erofs 1.5 chowns after chmod, which clears set-id bits */
	if (w->type != 'l')
		assert_int_equal(st.st_mode & (kernel ? 07777 : 01777),
				 default_perm(w) & (kernel ? 07777 : 01777));
	assert_int_equal(st.st_uid, w->uid);
	assert_int_equal(st.st_gid, w->gid);
	if (w->type != 'l')
		assert_int_equal(st.st_mtime, w->mtime ? w->mtime : DEFAULT_MTIME);
	if (w->type == 'f' || w->type == 'h') {
		size_t len = w->data ? strlen(w->data) : 0;
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		assert_int_equal(st.st_size, len);
		buf = xmalloc(len + 1);
		assert_true(fd >= 0);
		assert_int_equal(read_full(fd, buf, len), 0);
		assert_memory_equal(buf, w->data ? w->data : "", len);
		close(fd);
		free(buf);
	}
	if (w->type == 'l') {
		char target[8192];
		ssize_t n = readlink(path, target, sizeof(target));

		assert_int_equal(n, strlen(w->data));
		assert_memory_equal(target, w->data, (size_t)n);
	}
	if (w->type == 'c' || w->type == 'b') {
		assert_int_equal(major(st.st_rdev), w->major);
		assert_int_equal(minor(st.st_rdev), w->minor);
	}
	/* fsck.erofs 1.5 does not extract xattrs (newer ones do); the kernel
	 * must show them all, ACLs if it was built with them. */
	for (size_t i = 0; i < ARRAY_SIZE(w->xattrs) && w->xattrs[i].name; i++) {
		char val[65536];
		ssize_t n = lgetxattr(path, w->xattrs[i].name, val, sizeof(val));
		size_t len = w->xattrs[i].len ? w->xattrs[i].len : strlen(w->xattrs[i].value);

		if (n < 0 && kernel &&
		    !(errno == EOPNOTSUPP && strncmp(w->xattrs[i].name, "system.", 7) == 0))
			fail_msg("`%s`: lgetxattr %s: %s", w->path, w->xattrs[i].name,
				 strerror(errno));
		if (n < 0)
			continue;
		assert_int_equal(n, len);
		assert_memory_equal(val, w->xattrs[i].value, len);
	}
	/* fsck.erofs 1.5 extracts hardlinks as copies */
	if (w->same_as && kernel) {
		struct stat other;
		char *o;

		xasprintf(&o, "%s/%s", root, w->same_as);
		assert_int_equal(lstat(o, &other), 0);
		assert_int_equal(st.st_ino, other.st_ino);
		assert_true(st.st_nlink >= 2);
		free(o);
	}
	free(path);
}

static unsigned long nftw_count;

static int count_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)p, (void)st, (void)flag;
	nftw_count += f->level > 0;
	return 0;
}

/* Where this machine lets root loop-mount erofs, the kernel is the last
 * judge; elsewhere say why it was not asked. */
static void check_mounted(const char *image, const char *xdir, const struct tent *want, size_t n,
			  size_t entries)
{
	char *mnt;

	xasprintf(&mnt, "%s.mnt", xdir);
	assert_int_equal(mkdir(mnt, 0755), 0);
	{
		const char *argv[] = { "mount", "-t", "erofs", "-o", "ro,loop", image, mnt, NULL };

		if (spawn(argv, true) != 0) {
			print_message(
				"note: no kernel check, `mount -t erofs -o loop` failed here\n");
			rmdir(mnt);
			free(mnt);
			return;
		}
	}
	for (size_t i = 0; i < n; i++)
		check_fs(mnt, &want[i], true);
	if (entries) {
		nftw_count = 0;
		assert_int_equal(nftw(mnt, count_one, 16, FTW_PHYS), 0);
		assert_int_equal(nftw_count, entries);
	}
	assert_int_equal(umount2(mnt, 0), 0);
	rmdir(mnt);
	free(mnt);
}

bool check_image(const char *image, const char *xdir, const struct tent *want, size_t n,
		 size_t entries)
{
	const char *fsck[] = { "fsck.erofs", image, NULL };
	char *extract;
	uint64_t ninodes, nentries;
	struct rd r;

	assert_int_equal(rd_open(&r, image), 0);
	assert_int_equal(rd_check_tree(&r, &ninodes, &nentries), 0);
	assert_int_equal(ninodes, r.inos);
	assert_int_equal(r.root_nid <= UINT16_MAX, 1);
	for (size_t i = 0; i < n; i++)
		check_read(&r, &want[i]);
	if (entries)
		assert_int_equal(nentries, entries);
	rd_close(&r);

	if (!have_fsck()) {
		print_message("skip: fsck.erofs is not installed (erofs-utils)\n");
		return false;
	}
	assert_int_equal(run(fsck), 0);
	if (geteuid() != 0) {
		print_message("skip: extracting owners and device nodes needs root\n");
		return false;
	}
	xasprintf(&extract, "--extract=%s", xdir);
	{
		const char *argv[] = { "fsck.erofs", extract, "--preserve", image, NULL };

		assert_int_equal(run(argv), 0);
	}
	free(extract);
	for (size_t i = 0; i < n; i++)
		check_fs(xdir, &want[i], false);
	if (entries) {
		nftw_count = 0;
		assert_int_equal(nftw(xdir, count_one, 16, FTW_PHYS), 0);
		assert_int_equal(nftw_count, entries);
	}
	check_mounted(image, xdir, want, n, entries);
	return true;
}
