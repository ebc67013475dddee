/* `docker save` tars: manifest.json names the config and the layer members
 * by path inside the tar. Nothing is extracted: members are read in place
 * with libarchive, and layers stream from the outer tar into the flattener.
 * The tar's member order need not match the layer order, so layers are
 * applied over as many passes as the order needs (one when they appear in
 * order, as docker writes them); on an uncompressed tar a pass seeks over
 * the members it does not read, on a compressed one it decompresses all. */
#ifndef GANTRY_IMAGE_DOCKERSAVE_H
#define GANTRY_IMAGE_DOCKERSAVE_H

#include <stddef.h>

#include "common/error.h"
#include "image/digest.h"
#include "image/manifest.h"

struct flatten;

struct dockersave {
	char *path;
	struct docker_manifest manifest;
	char *config; /* the config JSON, NUL-terminated */
	size_t config_len;
	char config_digest[DIGEST_STR_MAX]; /* the image ID: the cache key */
};

/* Read manifest.json and the config (verified when its name is a digest). */
int dockersave_open(const char *path, struct dockersave *d, gantry_error_t *err);
void dockersave_close(struct dockersave *d);
/* Apply the layers in manifest order, each checked against its diff_id
 * (n must match the layer count) and, for blobs/sha256/<hex> names, its
 * digest. */
int dockersave_apply(struct dockersave *d, struct flatten *f, char *const *diff_ids, size_t n,
		     gantry_error_t *err);

#endif
