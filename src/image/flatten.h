/* Flattening verified layers into one EROFS image. A struct flatten owns an
 * image under construction in a temporary file next to its final path; each
 * layer is pulled through a struct blob (so its bytes are hashed and counted
 * as libarchive decompresses them) and through a second hash over the
 * uncompressed tar (the config's diff_id), then applied in order. Sources
 * (layout directories, docker-save tars, and later registry responses) only
 * say where the bytes come from. */
#ifndef GANTRY_IMAGE_FLATTEN_H
#define GANTRY_IMAGE_FLATTEN_H

#include <stdint.h>

#include "common/error.h"
#include "image/digest.h"

struct archive;
struct flatten;

/* What a layer must be. */
struct layer_src {
	const char *label;   /* names it in errors: "layer sha256:...", "layer `x/layer.tar`" */
	const char *digest;  /* sha256 of the bytes as stored (compressed), or NULL */
	int64_t size;	     /* their count, or -1 when the source does not say */
	const char *diff_id; /* sha256 of the uncompressed tar, or NULL */
};

/* Start an image to be published at path. */
int flatten_new(const char *path, struct flatten **out, gantry_error_t *err);
/* Apply the next layer (tar, tar+gzip or tar+zstd) from any byte source.
 * Every byte is checked before this returns 0; a mismatch is one line
 * naming the layer, and the image is then unusable. */
int flatten_layer(struct flatten *f, const struct layer_src *l, blob_pull_fn pull, void *arg,
		  gantry_error_t *err);
/* The same from a file descriptor (read to its end) or from the current
 * entry of an outer archive (a member of a docker-save tar). */
int flatten_layer_fd(struct flatten *f, const struct layer_src *l, int fd, gantry_error_t *err);
int flatten_layer_archive(struct flatten *f, const struct layer_src *l, struct archive *a,
			  gantry_error_t *err);
/* Write the image and publish it at its path (fsync, rename). *passwd and
 * *group (may be NULL) get the image's /etc/passwd and /etc/group, or NULL. */
int flatten_finish(struct flatten *f, char **passwd, char **group, gantry_error_t *err);
/* Free; an image not published is removed. */
void flatten_free(struct flatten *f);

#endif
