/* What the image cache holds and taking things out of it: the complete
 * entries with the references that point at them (`gantry image ls`),
 * removing one (`image rm`), and dropping every entry no saved sandbox
 * uses (`image prune`), along with what killed conversions left behind.
 * Which images the sandboxes use is the caller's to say (struct image_use,
 * from sandbox/images.h): nothing here reads a sandbox's state. */
#ifndef GANTRY_IMAGE_INVENTORY_H
#define GANTRY_IMAGE_INVENTORY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "image/cache.h"

struct image_entry {
	char *digest;
	char *keyed_by; /* CACHE_KEY_* (image/cache.h), or NULL */
	char *created;
	char *source;
	uint64_t size; /* of the .erofs */
	char **refs;   /* NULL-terminated, sorted */
	size_t nrefs;
};

/* An image a saved sandbox holds: rm refuses it, prune keeps it. */
struct image_use {
	char *digest;  /* "sha256:<hex>" */
	char *sandbox; /* its name, for the error */
};

/* Complete entries only (image and metadata both readable), newest first. */
int image_list(const struct image_cache *c, struct image_entry **out, size_t *n,
	       gantry_error_t *err);
void image_entries_free(struct image_entry *e, size_t n);
/* The entries as `image ls --json` prints them: an array of objects with
 * references (an array), digest, keyed_by, size (bytes), created, source. */
json_t *image_entries_json(const struct image_entry *e, size_t n);

/* Remove what (a reference, an index.json key, a digest or a unique prefix
 * of one). A reference goes from index.json, and its image too when no
 * other reference points at it; a digest goes with all its references. An
 * image in uses[0..nuses) stays, with an error naming its sandbox. *digest
 * gets what was removed (NULL when only the reference went). */
int image_remove(const struct image_cache *c, const char *what, const struct image_use *uses,
		 size_t nuses, char **digest, gantry_error_t *err);

/* Remove every entry not in uses[0..nuses), the index.json entries that
 * point nowhere, and leftovers of killed conversions. */
int image_prune(const struct image_cache *c, const struct image_use *uses, size_t nuses,
		size_t *removed, uint64_t *freed, gantry_error_t *err);

#endif
