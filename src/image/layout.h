/* OCI image layout directories (oci-layout, index.json, blobs/sha256/...):
 * the index is followed (nested indexes too) to the manifest for this
 * host's platform, and every blob read from the layout is verified against
 * the descriptor that named it. */
#ifndef GANTRY_IMAGE_LAYOUT_H
#define GANTRY_IMAGE_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "image/digest.h"
#include "image/manifest.h"

struct flatten;

/* Indexes followed from index.json to a manifest. */
#define LAYOUT_MAX_NESTING 4

struct layout {
	char *dir;
	int dfd;
	char manifest_digest[DIGEST_STR_MAX]; /* the platform manifest: the cache key */
	struct oci_manifest manifest;
};

/* Whether dir holds an oci-layout file. */
bool layout_is(const char *dir);
/* The digest of the platform manifest for linux/arch when index.json names
 * it directly (1), read from index.json alone: nothing is hashed, so a cache
 * lookup by that digest costs no blob read. 0 when that takes more (a nested
 * index, no media type) or index.json is bad: layout_open() says what. */
int layout_peek(const char *dir, const char *arch, char digest[DIGEST_STR_MAX]);
/* Read index.json and the platform manifest for linux/arch. */
int layout_open(const char *dir, const char *arch, struct layout *l, gantry_error_t *err);
void layout_close(struct layout *l);
/* The image config blob, verified and NUL-terminated. */
int layout_read_config(struct layout *l, char **buf, size_t *len, gantry_error_t *err);
/* Apply every layer in order; diff_ids (n of them, may be 0) from the
 * config are checked when given. */
int layout_apply(struct layout *l, struct flatten *f, char *const *diff_ids, size_t n,
		 gantry_error_t *err);

#endif
