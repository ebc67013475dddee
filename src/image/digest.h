/* Content addresses ("sha256:<64 hex>", libcrypto's EVP) and verified blob
 * streams: a struct blob pulls the bytes of one blob from any source (a file,
 * a tar member, later an HTTP body), hashes and counts them as they pass, and
 * at the end says whether they are the bytes the descriptor named. Nothing
 * is trusted before blob_finish() returns 0. */
#ifndef GANTRY_IMAGE_DIGEST_H
#define GANTRY_IMAGE_DIGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

#define DIGEST_PREFIX  "sha256:"
#define DIGEST_HEX_LEN 64
/* "sha256:" + 64 hex + NUL */
#define DIGEST_STR_MAX (sizeof(DIGEST_PREFIX) + DIGEST_HEX_LEN)
/* Read size of file-backed blob sources. */
#define BLOB_READ_BLOCK (256u * 1024u)

/* "sha256:" followed by 64 lowercase hex digits; nothing else is accepted. */
bool digest_valid(const char *d);
/* The hex part of a valid digest. */
const char *digest_hex(const char *d);
/* One line saying why d is not a digest we take ("unsupported algorithm"). */
int digest_check(const char *d, gantry_error_t *err);

struct evp_md_ctx_st;
struct sha256 {
	struct evp_md_ctx_st *ctx;
	bool failed; /* libcrypto refused a step: sha256_final says so */
};

/* A failure in init or update (libcrypto out of memory, or configured
 * without sha256) is kept and reported by sha256_final. */
void sha256_init(struct sha256 *h);
void sha256_update(struct sha256 *h, const void *p, size_t n);
/* Writes "sha256:<hex>" (or "" on failure) and frees the context. */
int sha256_final(struct sha256 *h, char out[DIGEST_STR_MAX], gantry_error_t *err);
void sha256_release(struct sha256 *h);
int sha256_buf(const void *p, size_t n, char out[DIGEST_STR_MAX], gantry_error_t *err);

/* A source of blob bytes: set *buf to the next bytes and return how many
 * (0 at the end), or -1 with err filled. The bytes stay valid until the
 * next call. */
typedef ssize_t (*blob_pull_fn)(void *arg, const void **buf, gantry_error_t *err);

struct blob {
	blob_pull_fn pull;
	void *arg;
	char *label;		     /* names the blob in errors: "layer sha256:..." */
	char digest[DIGEST_STR_MAX]; /* expected, or "" when the source has none */
	int64_t size;		     /* expected byte count, or -1 when unknown */
	uint64_t got;
	char computed[DIGEST_STR_MAX]; /* set by a blob_finish that got to the end */
	struct sha256 hash;
	bool eof;
	gantry_error_t err; /* first failure, kept for libarchive callbacks */
};

/* digest may be NULL and size -1 when the source does not name them (the
 * layers of an old docker-save tar); the caller then checks something else
 * (diff_ids). label is copied. */
void blob_init(struct blob *b, const char *label, const char *digest, int64_t size,
	       blob_pull_fn pull, void *arg);
/* Next bytes, hashed and counted; more than size is an error. -1 leaves
 * the reason in b->err. */
ssize_t blob_read(struct blob *b, const void **buf);
/* Read what is left, then check the size and the digest. On error the
 * message is one line naming the blob. Earlier errors from blob_read come
 * out here first. */
int blob_finish(struct blob *b, gantry_error_t *err);
void blob_release(struct blob *b);
/* Move b->err into *err (if that is empty); returns -1. */
int blob_take_error(struct blob *b, gantry_error_t *err);
/* Read a whole small blob (at most max bytes) and verify it; *out is
 * NUL-terminated for the JSON parsers. */
int blob_read_all(struct blob *b, size_t max, char **out, size_t *len, gantry_error_t *err);

/* Source: a file descriptor, read in BLOB_READ_BLOCK pieces. */
struct blob_fd {
	int fd;
	uint8_t *buf;
};
void blob_fd_init(struct blob_fd *s, int fd);
void blob_fd_release(struct blob_fd *s);
ssize_t blob_pull_fd(void *arg, const void **buf, gantry_error_t *err);

/* Source: the data of the current entry of a libarchive reader (a member of
 * an outer tar). Sparse members are refused. */
struct blob_archive {
	struct archive *a;
	int64_t pos;
};
ssize_t blob_pull_archive(void *arg, const void **buf, gantry_error_t *err);

#endif
