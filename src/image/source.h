/* Image sources to a runnable image: `-image SRC` names an OCI image layout
 * directory, a docker-save tar or a prebuilt .erofs (registry references
 * come later). The first use converts the image into the cache (see
 * cache.h); later uses find it there by digest. */
#ifndef GANTRY_IMAGE_SOURCE_H
#define GANTRY_IMAGE_SOURCE_H

#include <stdbool.h>

#include "common/error.h"
#include "image/config.h"

struct image {
	/* The EROFS image to attach. */
	char *path;
	/* "sha256:<hex>" of the platform manifest (of the config for a
	 * docker-save tar); NULL for a prebuilt .erofs. */
	char *digest;
	/* The absolute path that was resolved. */
	char *source;
	/* NULL for a prebuilt .erofs: nothing is known about it. */
	struct image_config *config;
	/* Built by this call, not found in the cache. */
	bool converted;
};

/* Resolve src, converting on first use. Errors are one line that names
 * the source and, for a bad blob, the blob. */
int image_resolve(const char *src, struct image *out, gantry_error_t *err);
void image_free(struct image *img);

#endif
