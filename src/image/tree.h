/* Internals of struct erofs_tree, shared by tree.c (building the tree),
 * inode.c (what an inode holds) and erofs.c (laying out and writing).
 * Nothing outside src/image includes this. */
#ifndef GANTRY_IMAGE_TREE_H
#define GANTRY_IMAGE_TREE_H

#include <stdbool.h>
#include <stdint.h>

#include "image/erofs.h"
#include "image/erofs_format.h"

/* Regular-file tails (size % block) kept in memory to be inlined next to
 * their inode, as mkfs.erofs does; past this budget tails get a data block. */
#define EROFS_TAIL_BUDGET (64u << 20)
/* Block addresses are 32-bit: 16 TiB images. */
#define EROFS_MAX_BLOCKS UINT32_MAX
/* The on-disk xattr count is 16-bit: at most this many bytes of ibody. */
#define EROFS_XATTR_IBODY_MAX (12u + 4u * (UINT16_MAX - 1u))

struct erofs_xattr {
	uint8_t index; /* EROFS_XATTR_INDEX_* */
	uint8_t name_len;
	uint16_t value_len;
	char *data; /* name (no prefix, no NUL) then value */
};

struct erofs_dentry {
	struct erofs_dentry *next; /* hash chain */
	struct erofs_inode *inode;
	uint32_t hash;
	uint32_t layer; /* layer that last wrote this entry */
	uint8_t name_len;
	char name[]; /* NUL-terminated */
};

/* Children of a directory: chained hash table keyed by name. */
struct erofs_dir {
	struct erofs_inode *parent; /* ".."; the root is its own parent */
	struct erofs_dentry **buckets;
	uint32_t nbuckets; /* power of two */
	uint32_t count;
};

struct erofs_inode {
	uint32_t mode;
	uint32_t uid;
	uint32_t gid;
	int64_t mtime;
	uint32_t mtime_nsec;
	uint32_t rdev; /* new_encode_dev() form */
	uint32_t refs; /* dentries naming it: the nlink of a non-directory */
	uint64_t size;
	uint32_t blkaddr; /* first data block of a regular file */
	uint64_t nblocks; /* data blocks reserved for it (dead once replaced) */
	uint8_t *tail;	  /* regular file: in-memory tail, size % block bytes */
	bool reserved;	  /* regular file: erofs_inode_reserve done */
	char *symlink;
	struct erofs_xattr *xattrs;
	uint16_t nxattrs;
	struct erofs_dir *dir;

	/* Filled by erofs_write. */
	uint64_t nid;
	uint32_t seq; /* 1-based position in layout order; 0 = not yet seen */
	uint32_t xattr_size;
	uint32_t inline_size;
	uint8_t layout;
	uint64_t data_size;	/* directories: dirent bytes */
	uint32_t extra_blkaddr; /* blocks written after the metadata */
	uint32_t nlink;
};

/* Files and directories an image may hold (directories made for a path
 * count too): what a layer's long names and many entries cost the host's
 * memory while the image is built stays bounded. Real images hold well
 * under a million. */
#define EROFS_TREE_INODES_MAX (4u << 20)
/* A path in a layer, as Linux's PATH_MAX: longer ones no program could
 * open, and each of their components would be a directory. */
#define EROFS_PATH_MAX 4096

struct erofs_tree {
	int fd;
	struct erofs_inode *root;
	uint32_t layer;
	uint32_t hash_seed;
	uint64_t next_blk; /* next free data block */
	uint64_t tail_bytes;
	unsigned long dropped_xattrs;
	uint64_t nr_inodes; /* live, at most EROFS_TREE_INODES_MAX */
};

/* Find what path names, following every symlink; *out is NULL when nothing
 * does (a parent that is a file, a symlink loop). */
int erofs_tree_lookup(struct erofs_tree *t, const char *path, struct erofs_inode **out,
		      gantry_error_t *err);
/* Mode bits to dirent file type. */
uint8_t erofs_ftype(uint32_t mode);
/* Bytes of inline xattrs after the inode: 0, or the 12-byte header plus
 * 4-byte-aligned entries. */
uint32_t erofs_xattr_ibody_size(const struct erofs_inode *ino);

#endif
