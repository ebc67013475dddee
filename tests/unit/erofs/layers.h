/* Test helpers for the EROFS writer: tar layers described as tables and
 * written with libarchive, building images through the real API, and checking
 * an image against the table of what it should hold, through fsck.erofs and
 * through the independent reader. */
#ifndef GANTRY_TESTS_EROFS_LAYERS_H
#define GANTRY_TESTS_EROFS_LAYERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct archive;

struct txattr {
	const char *name;
	const char *value;
	size_t len; /* 0: strlen(value) */
};

/* One tar entry, or one entry an image must hold. Types: 'f' file, 'd' dir,
 * 'l' symlink, 'h' hardlink (data = target), 'c'/'b' devices, 'p' fifo. */
struct tent {
	const char *path;
	char type;
	unsigned int mode;  /* permission bits; 0 means 0644, or 0755 for 'd' */
	long long uid, gid; /* wide enough for out-of-range ids */
	const char *data;   /* file content, or link target */
	unsigned int major, minor;
	struct txattr xattrs[3];
	int64_t mtime;
	const char *same_as; /* image check: must be the same inode as this path */
};

/* filter: NULL, "gzip" or "zstd". Fails the test on error. */
struct archive *tw_open(const char *path, const char *filter);
void tw_add(struct archive *a, const struct tent *e);
void tw_close(struct archive *a);
void tw_layer(const char *path, const char *filter, const struct tent *v, size_t n);

/* Apply layer files in order and write the image; on failure return -1 and
 * the one-line error in *msg (caller frees). */
int build_image(const char *image, const char *const *layers, size_t n, char **msg,
		unsigned long *dropped_xattrs);

bool have_fsck(void);
/* Run argv, return its exit status (or -1). */
int run(const char *const *argv);

/* Check image against want[] (and, if entries is not 0, that it holds that
 * many entries in all) with the reader; then fsck.erofs, extraction into
 * xdir and a comparison of the extracted tree. Returns false if fsck.erofs
 * or root is missing, so the caller can skip with the reason printed. */
bool check_image(const char *image, const char *xdir, const struct tent *want, size_t n,
		 size_t entries);

/* FNV-1a 64 over a file (or -1 on error), for large contents. */
uint64_t hash_file(const char *path);
uint64_t hash_bytes(uint64_t h, const void *p, size_t n);
#define HASH_INIT 0xcbf29ce484222325ull

#endif
