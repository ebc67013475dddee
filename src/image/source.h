/* Image sources to a runnable image: `-image SRC` names an OCI image layout
 * directory, a docker-save tar or a prebuilt .erofs, or, when no such path
 * exists, a registry reference (reference.h). The first use converts the
 * image into the cache (see cache.h); later uses find it there by digest,
 * and a reference the cache's index.json lists is not resolved again. */
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

struct image_resolve_opts {
	const char *platform; /* registry images: "linux/ARCH[/VARIANT]", NULL: the host's */
	bool insecure;	      /* plain HTTP to this reference's registry */
	bool pull;	      /* resolve a registry tag again even when cached */
	int progress_fd;      /* the caller's terminal for per-layer progress; 0: none */
	/* A pull from a registry ends at its next wait once this fires
	 * (ECANCELED), leaving nothing in the cache; or NULL. */
	const struct gantry_cancel *cancel;
};

/* Resolve src, converting on first use. Errors are one line that names
 * the source and, for a bad blob, the blob. */
int image_resolve(const char *src, struct image *out, gantry_error_t *err);
int image_resolve_with(const char *src, const struct image_resolve_opts *o, struct image *out,
		       gantry_error_t *err);
void image_free(struct image *img);

#endif
