/* Verified layers into an EROFS image (see flatten.h).
 *
 * Each layer runs through two libarchive readers: the outer one has the
 * decompression filters and the raw format, and its read callback pulls the
 * blob's bytes as stored (hashed against the descriptor's digest); the inner
 * one reads tar from the outer one's output, which its callback hashes
 * against the diff_id. No byte is copied between them and nothing touches
 * the host filesystem but the image file. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "image/config.h"
#include "image/erofs.h"
#include "image/flatten.h"
#include "image/layer.h"
#include "image/lazylib.h"

struct flatten {
	char *path;
	char *tmp_path;
	int fd;
	struct erofs_tree *tree;
	bool published;
	bool broken; /* a layer failed half-way: the tree is not the image */
};

/* One layer in flight. */
struct pipeline {
	struct blob *blob;
	struct archive *outer; /* filters + raw: the uncompressed tar */
	struct sha256 diff;
	bool plain; /* no decompression: the diff_id is the blob's own digest */
	bool outer_eof;
};

int flatten_new(const char *path, struct flatten **out, gantry_error_t *err)
{
	struct flatten *f = xzalloc(sizeof(*f));

	f->path = xstrdup(path);
	f->fd = erofs_open_temp(path, &f->tmp_path, err);
	if (f->fd < 0 || erofs_tree_new(f->fd, &f->tree, err) < 0) {
		flatten_free(f);
		return -1;
	}
	*out = f;
	return 0;
}

void flatten_free(struct flatten *f)
{
	if (f == NULL)
		return;
	if (f->tree)
		erofs_tree_free(f->tree);
	if (f->fd >= 0)
		close(f->fd);
	if (f->tmp_path && !f->published)
		unlink(f->tmp_path);
	free(f->tmp_path);
	free(f->path);
	free(f);
}

static la_ssize_t outer_read(struct archive *a, void *arg, const void **buf)
{
	struct blob *b = arg;
	ssize_t n = blob_read(b, buf);

	if (n < 0) {
		sym_archive_set_error(a, EIO, "%s", b->err ? b->err->msg : "read failed");
		return -1;
	}
	return n;
}

/* Next bytes of the uncompressed tar, hashed for the diff_id. */
static ssize_t outer_next(struct pipeline *p, const void **buf)
{
	for (;;) {
		la_int64_t off;
		size_t len;
		int r;

		if (p->outer_eof)
			return 0;
		r = sym_archive_read_data_block(p->outer, buf, &len, &off);
		if (r == ARCHIVE_EOF) {
			p->outer_eof = true;
			return 0;
		}
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
			return -1;
		if (len == 0)
			continue;
		if (!p->plain)
			sha256_update(&p->diff, *buf, len);
		return (ssize_t)len;
	}
}

static la_ssize_t inner_read(struct archive *a, void *arg, const void **buf)
{
	struct pipeline *p = arg;
	ssize_t n = outer_next(p, buf);

	if (n < 0) {
		const char *msg = sym_archive_error_string(p->outer);

		sym_archive_set_error(a, sym_archive_errno(p->outer), "%s",
				  msg ? msg : "corrupt or truncated compressed data");
		return -1;
	}
	return n;
}

static int outer_fail(struct archive *a, gantry_error_t *err)
{
	const char *msg = sym_archive_error_string(a);

	return gantry_error(err, 0, "read layer: %s", msg ? msg : "unknown libarchive error");
}

/* Open the outer reader and step to its one entry (none for an empty blob). */
static int outer_open(struct pipeline *p, gantry_error_t *err)
{
	struct archive_entry *e;
	int r;

	if (lazy_archive(err) < 0)
		return -1;
	p->outer = sym_archive_read_new();
	if (p->outer == NULL)
		return gantry_error(err, 0, "libarchive reader");
	/* Only what OCI layers use: no filter that runs an external program. */
	sym_archive_read_support_filter_gzip(p->outer);
	sym_archive_read_support_filter_zstd(p->outer);
	sym_archive_read_support_format_raw(p->outer);
	sym_archive_read_support_format_empty(p->outer);
	if (sym_archive_read_open(p->outer, p->blob, NULL, outer_read, NULL) != ARCHIVE_OK)
		return outer_fail(p->outer, err);
	p->plain = sym_archive_filter_count(p->outer) == 1;
	r = sym_archive_read_next_header(p->outer, &e);
	if (r == ARCHIVE_EOF) {
		p->outer_eof = true;
		return 0;
	}
	if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
		return outer_fail(p->outer, err);
	return 0;
}

static int apply_tar(struct flatten *f, struct pipeline *p, gantry_error_t *err)
{
	struct archive *inner;
	const void *buf;
	ssize_t n;
	int ret;

	if (outer_open(p, err) < 0)
		return -1;
	inner = sym_archive_read_new();
	if (inner == NULL)
		return gantry_error(err, 0, "libarchive reader");
	sym_archive_read_support_format_tar(inner);
	sym_archive_read_support_format_empty(inner);
	if (sym_archive_read_open(inner, p, NULL, inner_read, NULL) != ARCHIVE_OK) {
		const char *msg = sym_archive_error_string(inner);

		ret = gantry_error(err, 0, "read layer: %s", msg ? msg : "not a tar");
	} else {
		ret = layer_apply(f->tree, inner, err);
	}
	sym_archive_read_free(inner);
	if (ret < 0)
		return -1;
	/* The tar ends before its blob may: hash the rest (padding, trailers),
	 * which also makes the decompressor check its own end. */
	while ((n = outer_next(p, &buf)) > 0)
		;
	if (n < 0)
		return outer_fail(p->outer, err);
	return 0;
}

int flatten_layer(struct flatten *f, const struct layer_src *l, blob_pull_fn pull, void *arg,
		  gantry_error_t *err)
{
	struct blob blob;
	struct pipeline p = { .blob = &blob };
	gantry_error_t aerr = NULL;
	char diff[DIGEST_STR_MAX];
	int ret = -1;

	if (f->broken)
		return gantry_error(err, 0, "%s: an earlier layer failed", l->label);
	f->broken = true;
	blob_init(&blob, l->label, l->digest, l->size, pull, arg);
	sha256_init(&p.diff);
	if (apply_tar(f, &p, &aerr) < 0) {
		/* A corrupt blob fails in the decompressor or the tar reader;
		 * say what is wrong with the blob when something is. */
		if (blob.err) {
			blob_take_error(&blob, err);
		} else if (blob_finish(&blob, err) == 0) {
			gantry_error(err, 0, "%s: %s", l->label, gantry_error_str(aerr));
		}
		goto out;
	}
	if (blob_finish(&blob, err) < 0)
		goto out;
	if (p.plain)
		memcpy(diff, blob.computed, sizeof(diff));
	else if (sha256_final(&p.diff, diff, err) < 0)
		goto out;
	if (l->diff_id && strcmp(diff, l->diff_id) != 0) {
		gantry_error(err, 0, "%s: uncompressed content does not match diff_id %s (got %s)",
			     l->label, l->diff_id, diff);
		goto out;
	}
	f->broken = false;
	ret = 0;
out:
	if (p.outer)
		sym_archive_read_free(p.outer);
	gantry_error_free(&aerr);
	sha256_release(&p.diff);
	blob_release(&blob);
	return ret;
}

int flatten_layer_fd(struct flatten *f, const struct layer_src *l, int fd, gantry_error_t *err)
{
	struct blob_fd src;
	int ret;

	blob_fd_init(&src, fd);
	ret = flatten_layer(f, l, blob_pull_fd, &src, err);
	blob_fd_release(&src);
	return ret;
}

int flatten_layer_archive(struct flatten *f, const struct layer_src *l, struct archive *a,
			  gantry_error_t *err)
{
	struct blob_archive src = { .a = a };

	return flatten_layer(f, l, blob_pull_archive, &src, err);
}

int flatten_finish(struct flatten *f, char **passwd, char **group, gantry_error_t *err)
{
	cleanup_free char *pw = NULL, *gr = NULL;
	size_t len;

	if (f->broken)
		return gantry_error(err, 0, "a layer failed");
	if (erofs_tree_read_file(f->tree, "/etc/passwd", IMAGE_ETC_MAX, &pw, &len, err) < 0 ||
	    erofs_tree_read_file(f->tree, "/etc/group", IMAGE_ETC_MAX, &gr, &len, err) < 0)
		return -1;
	if (erofs_write(f->tree, err) < 0 || erofs_publish(f->fd, f->tmp_path, f->path, err) < 0)
		return -1;
	f->published = true;
	if (passwd)
		*passwd = steal_pointer(&pw);
	if (group)
		*group = steal_pointer(&gr);
	return 0;
}
