/* The image cache: converted images and what we know about them, in one
 * directory ($GANTRY_IMAGES, else $GANTRY_HOME/images, else
 * ~/.gantry/images):
 *
 *   sha256-<hex>.erofs   the flattened image, keyed by its manifest digest
 *                        (a docker-save tar has none: its config digest)
 *   sha256-<hex>.json    our metadata: digest, what it digests (keyed_by),
 *                        source, created, config
 *   index.json           source reference -> digest, and a fingerprint: the
 *                        file version of a tar, the platform of a registry
 *                        reference
 *
 * Every file is written to a temporary name, fsynced and renamed, so a
 * reader sees all of an entry or none of it; the .json goes last and marks
 * the entry complete. Conversions of one digest and updates of index.json
 * run under lock files that are removed on release. */
#ifndef GANTRY_IMAGE_CACHE_H
#define GANTRY_IMAGE_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "common/error.h"
#include "image/config.h"

struct image_cache {
	char *dir;
};

/* Find (and create, 0700) the cache directory. */
int image_cache_open(struct image_cache *c, gantry_error_t *err);
void image_cache_close(struct image_cache *c);
/* "<dir>/sha256-<hex><ext>" for a valid digest; caller frees. */
char *image_cache_path(const struct image_cache *c, const char *digest, const char *ext);

struct cache_lock {
	char *path;
	int fd;
};
/* Exclusive lock named name ("sha256-<hex>", "index"), waiting for it. */
int image_cache_lock(const struct image_cache *c, const char *name, struct cache_lock *l,
		     gantry_error_t *err);
/* The same without waiting: 1 when another process holds it. */
int image_cache_trylock(const struct image_cache *c, const char *name, struct cache_lock *l,
			gantry_error_t *err);
/* The lock of one digest's entry ("sha256-<hex>"), held while the entry is
 * converted, removed or its metadata rewritten; wait false: as trylock. */
int image_cache_lock_digest(const struct image_cache *c, const char *digest, bool wait,
			    struct cache_lock *l, gantry_error_t *err);
void image_cache_unlock(struct cache_lock *l);

/* What an entry's digest is the digest of. */
#define CACHE_KEY_MANIFEST "manifest"
#define CACHE_KEY_CONFIG   "config"

struct image_meta {
	char *digest;
	char *keyed_by; /* CACHE_KEY_*; NULL in entries made before it was kept */
	char *source;
	char *created; /* RFC 3339, UTC */
	struct image_config config;
};
void image_meta_free(struct image_meta *m);

/* 1 and *m filled when both files of the entry exist and the metadata
 * reads back, else 0 (a miss: converting again rewrites the entry). */
int image_cache_load(const struct image_cache *c, const char *digest, struct image_meta *m,
		     gantry_error_t *err);
/* Write the entry's .json (the image must already be in place). */
int image_cache_store(const struct image_cache *c, const struct image_meta *m, gantry_error_t *err);
/* Remove an entry's files (a conversion that failed after publishing). */
void image_cache_remove(const struct image_cache *c, const char *digest);
/* Remove temporary files a conversion of digest left when it was killed;
 * only under that digest's lock. */
void image_cache_sweep(const struct image_cache *c, const char *digest);

/* index.json: 1 with *digest (and *fingerprint, may be NULL) when ref is
 * listed, else 0. */
int image_cache_ref_get(const struct image_cache *c, const char *ref, char **digest,
			char **fingerprint, gantry_error_t *err);
/* Point ref at digest; fingerprint (may be NULL) identifies the source file
 * version so an unchanged tar need not be read again. */
int image_cache_ref_set(const struct image_cache *c, const char *ref, const char *digest,
			const char *fingerprint, gantry_error_t *err);

/* index.json's "refs" object: ref -> {"digest", "fingerprint", "updated"};
 * the caller owns the reference. */
json_t *image_cache_refs(const struct image_cache *c);
/* Drop the entry ref (may be NULL) and every entry pointing at digest (may
 * be NULL); *dropped counts them. */
int image_cache_refs_drop(const struct image_cache *c, const char *ref, const char *digest,
			  size_t *dropped, gantry_error_t *err);

/* Write path atomically: temp file, fsync, rename, fsync the directory. */
int cache_write_atomic(const char *path, const char *data, size_t len, gantry_error_t *err);
/* The current time as RFC 3339 UTC ("2024-01-02T03:04:05Z"). */
char *cache_now(void);

#endif
