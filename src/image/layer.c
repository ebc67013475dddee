/* OCI layer tar streams into an erofs_tree (see layer.h). The tree applies
 * the path rules; this file maps tar entries and whiteouts onto it. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "image/layer.h"
#include "image/lazylib.h"

#define LAYER_READ_BLOCK (128u * 1024u)
/* Error messages carry names from the layer: keep them to one short line. */
#define LAYER_MSG_MAX 1024

#define WHITEOUT_PREFIX ".wh."
#define WHITEOUT_OPAQUE ".wh..wh..opq"
#define WHITEOUT_META	".wh..wh." /* aufs bookkeeping, never content */

static int archive_fail(gantry_error_t *err, struct archive *a, const char *what)
{
	const char *msg = sym_archive_error_string(a);

	return gantry_error(err, 0, "%s: %s", what, msg ? msg : "unknown libarchive error");
}

static int copy_data(struct erofs_tree *t, struct archive *a, struct archive_entry *e,
		     struct erofs_inode *ino, uint64_t size, gantry_error_t *err)
{
	uint64_t total = 0;

	for (;;) {
		const void *buf;
		size_t len;
		la_int64_t off;
		int r = sym_archive_read_data_block(a, &buf, &len, &off);

		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
			return archive_fail(err, a, "read data");
		if (off < 0)
			return gantry_error(err, 0, "negative data offset");
		if (len && erofs_inode_pwrite(t, ino, buf, len, (uint64_t)off, err) < 0)
			return -1;
		total += len;
	}
	/* Sparse entries carry less data than their size; the holes read as 0. */
	if (sym_archive_entry_sparse_count(e) == 0 && total != size)
		return gantry_error(err, 0, "%llu bytes of data for a size of %llu",
				    (unsigned long long)total, (unsigned long long)size);
	return 0;
}

static int entry_attr(struct archive_entry *e, struct erofs_attr *attr, gantry_error_t *err)
{
	la_int64_t uid = sym_archive_entry_uid(e), gid = sym_archive_entry_gid(e);
	long nsec = sym_archive_entry_mtime_nsec(e);

	if (uid < 0 || uid > UINT32_MAX || gid < 0 || gid > UINT32_MAX)
		return gantry_error(err, 0, "uid %lld or gid %lld out of range", (long long)uid,
				    (long long)gid);
	*attr = (struct erofs_attr){
		.mode = (uint32_t)sym_archive_entry_filetype(e) | (sym_archive_entry_perm(e) & 07777),
		.uid = (uint32_t)uid,
		.gid = (uint32_t)gid,
		.mtime = sym_archive_entry_mtime_is_set(e) ? sym_archive_entry_mtime(e) : 0,
		.mtime_nsec = nsec >= 0 && nsec < 1000000000 ? (uint32_t)nsec : 0,
		.rdev_major = (uint32_t)sym_archive_entry_rdevmajor(e),
		.rdev_minor = (uint32_t)sym_archive_entry_rdevminor(e),
	};
	return 0;
}

/* libarchive reports pax xattrs once per record, and writers emit both
 * LIBARCHIVE.xattr and SCHILY.xattr: apply each name once, the last wins. */
static int apply_xattrs(struct erofs_tree *t, struct archive_entry *e, struct erofs_inode *ino,
			gantry_error_t *err)
{
	struct xa {
		const char *name;
		const void *value;
		size_t size;
	};
	cleanup_free struct xa *v = NULL;
	size_t n = 0, cap = 0;
	struct xa x;

	sym_archive_entry_xattr_reset(e);
	while (sym_archive_entry_xattr_next(e, &x.name, &x.value, &x.size) == ARCHIVE_OK) {
		size_t i;

		for (i = 0; i < n && strcmp(v[i].name, x.name) != 0; i++)
			;
		if (i == n) {
			if (n == cap)
				v = xrealloc(v, (cap = cap ? cap * 2 : 8) * sizeof(*v));
			n++;
		}
		v[i] = x;
	}
	for (size_t i = 0; i < n; i++)
		if (erofs_inode_set_xattr(t, ino, v[i].name, v[i].value, v[i].size, err) < 0)
			return -1;
	return 0;
}

/* Whiteout entries never reach the image: they delete from it. */
static int apply_whiteout(struct erofs_tree *t, const char *path, bool *done, gantry_error_t *err)
{
	cleanup_free char *copy = xstrdup(path);
	size_t len = strlen(copy);
	const char *dir = "";
	char *base;

	while (len > 0 && copy[len - 1] == '/')
		copy[--len] = '\0';
	base = strrchr(copy, '/');
	if (base) {
		*base++ = '\0';
		dir = copy;
	} else {
		base = copy;
	}
	*done = strncmp(base, WHITEOUT_PREFIX, strlen(WHITEOUT_PREFIX)) == 0;
	if (!*done)
		return 0;
	if (strcmp(base, WHITEOUT_OPAQUE) == 0)
		return erofs_tree_opaque(t, dir, err);
	if (strncmp(base, WHITEOUT_META, strlen(WHITEOUT_META)) == 0)
		return 0;
	return erofs_tree_remove(t, dir, base + strlen(WHITEOUT_PREFIX), err);
}

static int apply_entry(struct erofs_tree *t, struct archive *a, struct archive_entry *e,
		       const char *path, gantry_error_t *err)
{
	const char *link = sym_archive_entry_hardlink(e);
	struct erofs_inode *ino;
	struct erofs_attr attr;
	uint64_t size;
	bool whiteout;

	if (apply_whiteout(t, path, &whiteout, err) < 0)
		return -1;
	if (whiteout)
		return 0;
	if (link)
		return erofs_tree_link(t, path, link, err);
	if (entry_attr(e, &attr, err) < 0 ||
	    erofs_tree_add(t, path, &attr, S_ISLNK(attr.mode) ? sym_archive_entry_symlink(e) : NULL,
			   &ino, err) < 0)
		return -1;
	if (apply_xattrs(t, e, ino, err) < 0)
		return -1;
	if (!S_ISREG(attr.mode))
		return 0;
	size = sym_archive_entry_size_is_set(e) && sym_archive_entry_size(e) > 0
		       ? (uint64_t)sym_archive_entry_size(e)
		       : 0;
	if (erofs_inode_reserve(t, ino, size, err) < 0)
		return -1;
	return copy_data(t, a, e, ino, size, err);
}

int layer_apply(struct erofs_tree *t, struct archive *a, gantry_error_t *err)
{
	struct archive_entry *e;

	erofs_tree_begin_layer(t);
	for (;;) {
		int r = sym_archive_read_next_header(a, &e);
		const char *path;

		if (r == ARCHIVE_EOF)
			return 0;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) { /* RETRY too: a damaged header */
			archive_fail(err, a, "read layer");
			gantry_error_sanitize(err, LAYER_MSG_MAX);
			return -1;
		}
		path = sym_archive_entry_pathname(e);
		if (path == NULL) {
			gantry_error(err, 0, "read layer: entry without a path");
			return -1;
		}
		if (apply_entry(t, a, e, path, err) < 0) {
			/* What is wrong must fit the message whatever the name. */
			gantry_error_prefix(err, "entry `%.256s%s`", path,
					    strlen(path) > 256 ? "..." : "");
			gantry_error_sanitize(err, LAYER_MSG_MAX);
			return -1;
		}
	}
}

int layer_apply_fd(struct erofs_tree *t, int fd, gantry_error_t *err)
{
	struct archive *a;
	int ret = -1;

	if (lazy_archive(err) < 0)
		return -1;
	a = sym_archive_read_new();
	if (a == NULL)
		return gantry_error(err, 0, "libarchive reader");
	/* Only what OCI layers use: no filter that runs an external program. */
	sym_archive_read_support_filter_gzip(a);
	sym_archive_read_support_filter_zstd(a);
	sym_archive_read_support_format_tar(a);
	sym_archive_read_support_format_empty(a);
	if (sym_archive_read_open_fd(a, fd, LAYER_READ_BLOCK) != ARCHIVE_OK) {
		archive_fail(err, a, "open layer");
		gantry_error_sanitize(err, LAYER_MSG_MAX);
	} else {
		ret = layer_apply(t, a, err);
	}
	sym_archive_read_free(a);
	return ret;
}

int layer_apply_file(struct erofs_tree *t, const char *path, gantry_error_t *err)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return gantry_error_errno(err, "open `%s`", path);
	if (layer_apply_fd(t, fd, err) < 0)
		return gantry_error_prefix(err, "layer `%s`", path);
	return 0;
}
