/* Images and registries for every front end (`gantry image ...` now):
 * pull, list, remove and prune the cache, log in to and out of a
 * registry. Here because removing needs to know which cached images the
 * saved sandboxes hold (image/inventory.h reads no sandbox state): this is
 * the one place that reads it on the cache's behalf. Each call opens the
 * cache itself; calls may come from threads (the cache locks its entries). */
#ifndef GANTRY_SANDBOX_IMAGES_H
#define GANTRY_SANDBOX_IMAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "image/inventory.h"
#include "image/source.h"

/* One entry per saved sandbox whose sandbox.json names a cached image
 * ("image_digest"); sandboxes being created or deleted, and those made
 * from a prebuilt .erofs, have none. A sandbox.json that cannot be read is
 * an error naming the sandbox: better no removal than the wrong one. */
int sandbox_images_in_use(struct image_use **out, size_t *n, gantry_error_t *err);
void sandbox_images_free(struct image_use *u, size_t n);

/* `image pull`: src into the cache, a tag resolved again (o->pull is
 * implied); *img as image_resolve_with gives it. */
int sandbox_image_pull(const char *src, const struct image_resolve_opts *o, struct image *img,
		       gantry_error_t *err);
/* `image ls`: the complete entries, newest first (image_entries_free). */
int sandbox_image_list(struct image_entry **out, size_t *n, gantry_error_t *err);
/* `image rm WHAT`: as image_remove, an image a saved sandbox uses kept. */
int sandbox_image_remove(const char *what, char **digest, gantry_error_t *err);
/* `image prune`: every image no saved sandbox uses, and pull leftovers. */
int sandbox_image_prune(size_t *removed, uint64_t *freed, gantry_error_t *err);

/* `image login`: check user and pass against registry (insecure: plain
 * HTTP) and store them in Gantry's credentials file; *reg gets the
 * registry's normalized name, *path the file's. */
int sandbox_registry_login(const char *registry, const char *user, const char *pass,
			   bool insecure, char **reg, char **path, gantry_error_t *err);
/* `image logout`: remove registry's stored credentials (an error when
 * there were none); *reg as for login. */
int sandbox_registry_logout(const char *registry, char **reg, gantry_error_t *err);
/* `image credentials`: which source would give registry's credentials
 * (*source NULL: none, anonymous); *reg as for login. */
int sandbox_registry_source(const char *registry, char **reg, char **source,
			    gantry_error_t *err);

#endif
