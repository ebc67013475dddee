/* Our own streaming EROFS writer. A struct erofs_tree is the in-memory
 * directory tree of an image under construction; it owns nothing on disk but
 * writes file data straight into the image file's data area as it arrives
 * (blocks 1..n, in arrival order), so no file is ever held in memory whole.
 * erofs_write() then lays out inodes, xattrs and directories after the data
 * and writes the superblock. layer.c fills a tree from OCI layer tars.
 *
 * Paths given to the tree are image paths: leading '/' is dropped, '.' and
 * empty components are skipped and '..' is resolved lexically, clamped at the
 * image root (as containerd's archive applier does). Symlinks in parent
 * components are followed inside the tree only, with absolute targets and
 * '..' clamped at the image root; the last component is never followed.
 * Nothing on the host filesystem is ever looked up or written. */
#ifndef GANTRY_IMAGE_EROFS_H
#define GANTRY_IMAGE_EROFS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

struct erofs_tree;
struct erofs_inode;

/* Metadata of one entry, as a tar header carries it. */
struct erofs_attr {
	uint32_t mode; /* S_IFMT type | permission bits (07777) */
	uint32_t uid;
	uint32_t gid;
	int64_t mtime;
	uint32_t mtime_nsec;
	uint32_t rdev_major; /* character and block devices */
	uint32_t rdev_minor;
};

/* Start an image in fd (read-write, truncated here); the caller keeps fd. */
int erofs_tree_new(int fd, struct erofs_tree **out, gantry_error_t *err);
void erofs_tree_free(struct erofs_tree *t);

/* Start the next layer: whiteouts only hide what earlier layers wrote. */
void erofs_tree_begin_layer(struct erofs_tree *t);

/* Create path (missing parents become 0755 root-owned directories). A
 * directory over a directory takes the new metadata, drops the old xattrs
 * and keeps the children; anything else replaces what was there. symlink is
 * the target for S_IFLNK, else NULL. *out (may be NULL) gets the inode for
 * xattrs and data. */
int erofs_tree_add(struct erofs_tree *t, const char *path, const struct erofs_attr *attr,
		   const char *symlink, struct erofs_inode **out, gantry_error_t *err);
/* Hardlink path to the non-directory already at target; a missing target
 * is an error (never resolved outside the tree). */
int erofs_tree_link(struct erofs_tree *t, const char *path, const char *target,
		    gantry_error_t *err);
/* Whiteout: delete name in dir, but only what earlier layers wrote. */
int erofs_tree_remove(struct erofs_tree *t, const char *dir, const char *name, gantry_error_t *err);
/* Opaque directory: delete everything earlier layers wrote under dir. */
int erofs_tree_opaque(struct erofs_tree *t, const char *dir, gantry_error_t *err);

/* Set (or replace) xattr "prefix.name". Names outside user., trusted.,
 * security. and the two POSIX ACLs cannot be stored in EROFS: they are
 * dropped and counted in erofs_tree_dropped_xattrs(). For regular files
 * call before erofs_inode_reserve(). */
int erofs_inode_set_xattr(struct erofs_tree *t, struct erofs_inode *ino, const char *name,
			  const void *value, size_t size, gantry_error_t *err);
unsigned long erofs_tree_dropped_xattrs(const struct erofs_tree *t);

/* Give a regular file its size and reserve its blocks in the data area;
 * then feed its data in any order with erofs_inode_pwrite (bytes never
 * written read back as zeros, which is how sparse tar entries land). */
int erofs_inode_reserve(struct erofs_tree *t, struct erofs_inode *ino, uint64_t size,
			gantry_error_t *err);
int erofs_inode_pwrite(struct erofs_tree *t, struct erofs_inode *ino, const void *buf, size_t len,
		       uint64_t off, gantry_error_t *err);

/* Read the regular file at path as the layers so far left it (before
 * erofs_write; symlinks followed inside the tree, the last one too, with
 * relative targets joined lexically). *data is NUL-terminated, or NULL when
 * path is missing or not a regular file; a file larger than max is an error. */
int erofs_tree_read_file(struct erofs_tree *t, const char *path, size_t max, char **data,
			 size_t *len, gantry_error_t *err);

/* Finish the image: metadata after the data area, then the superblock.
 * Does not fsync; erofs_publish does. */
int erofs_write(struct erofs_tree *t, gantry_error_t *err);

/* Atomic publication: build in "<path>.tmp-XXXXXX" next to path, then
 * erofs_publish fsyncs it, renames it over path and fsyncs the directory.
 * On any failure the caller unlinks *tmp_path. */
int erofs_open_temp(const char *path, char **tmp_path, gantry_error_t *err);
int erofs_publish(int fd, const char *tmp_path, const char *path, gantry_error_t *err);

#endif
