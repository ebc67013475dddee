/* A minimal EROFS reader for the tests, written from the kernel's
 * fs/erofs/erofs_fs.h by byte offsets and sharing no code or structs with
 * src/image, so the writer is checked against the format, not itself. It
 * reads what fsck.erofs 1.5 cannot extract: xattrs and hardlink identity. */
#ifndef GANTRY_TESTS_EROFS_READER_H
#define GANTRY_TESTS_EROFS_READER_H

#include <stddef.h>
#include <stdint.h>

struct rd {
	int fd;
	uint64_t file_size;
	uint32_t meta_blkaddr;
	uint32_t blocks;
	uint64_t root_nid;
	uint64_t inos;
};

struct rd_inode {
	uint64_t nid;
	unsigned int layout; /* 0 flat plain, 2 flat inline */
	unsigned int xattr_isize;
	uint32_t mode;
	uint64_t size;
	uint32_t u; /* raw_blkaddr or rdev */
	uint32_t uid, gid, nlink;
	int64_t mtime;
	uint32_t mtime_nsec;
};

/* Each returns 0 or -1 after printing why on stderr. */
int rd_open(struct rd *r, const char *path);
void rd_close(struct rd *r);
int rd_inode(struct rd *r, uint64_t nid, struct rd_inode *ino);
int rd_read(struct rd *r, const struct rd_inode *ino, uint64_t off, void *buf, size_t len);
/* Look a path up from the root without following symlinks. */
int rd_lookup(struct rd *r, const char *path, struct rd_inode *ino);
/* Value length, or -1 if absent (no message). */
long rd_getxattr(struct rd *r, const struct rd_inode *ino, const char *name, void *buf, size_t cap);
/* Walk everything: dirents sorted, "." and ".." right, names within their
 * block, directory nlink right; counts distinct inodes and all entries but
 * the root, "." and "..". */
int rd_check_tree(struct rd *r, uint64_t *ninodes, uint64_t *nentries);

#endif
