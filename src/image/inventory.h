/* What the image cache holds and taking things out of it: the complete
 * entries with the references that point at them (`gantry image ls`),
 * removing one (`image rm`), and dropping every entry no saved sandbox
 * uses (`image prune`), along with what killed conversions left behind. */
#ifndef GANTRY_IMAGE_INVENTORY_H
#define GANTRY_IMAGE_INVENTORY_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "image/cache.h"

/* Where sandboxes keep their state: $GANTRY_HOME/sandboxes/<name>/. */
#define SANDBOXES_DIR "sandboxes"
#define SANDBOX_FILE  "sandbox.json"

struct image_entry {
	char *digest;
	char *created;
	char *source;
	uint64_t size; /* of the .erofs */
	char **refs;   /* NULL-terminated, sorted */
	size_t nrefs;
};

/* Complete entries only (image and metadata both readable), newest first. */
int image_list(const struct image_cache *c, struct image_entry **out, size_t *n,
	       gantry_error_t *err);
void image_entries_free(struct image_entry *e, size_t n);

/* Remove what (a reference, an index.json key, a digest or a unique prefix
 * of one). A reference goes from index.json, and its image too when no
 * other reference points at it; a digest goes with all its references. An
 * image a saved sandbox uses stays. *digest gets what was removed (NULL
 * when only the reference went). */
int image_remove(const struct image_cache *c, const char *what, char **digest,
		 gantry_error_t *err);

/* Digests the saved sandboxes use ("image_digest" of each sandbox.json),
 * NULL-terminated; *names (may be NULL) the sandbox of each. */
int sandbox_digests(char ***digests, char ***names, size_t *n, gantry_error_t *err);

/* Remove every entry no saved sandbox uses, the index.json entries that
 * point nowhere, and leftovers of killed conversions. */
int image_prune(const struct image_cache *c, size_t *removed, uint64_t *freed,
		gantry_error_t *err);

#endif
