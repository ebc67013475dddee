/* Which cached images the saved sandboxes hold, for `gantry image rm` and
 * `gantry image prune` (image/inventory.h): the one place that reads
 * sandbox state on the image cache's behalf. */
#ifndef GANTRY_SANDBOX_IMAGES_H
#define GANTRY_SANDBOX_IMAGES_H

#include <stddef.h>

#include "common/error.h"
#include "image/inventory.h"

/* One entry per saved sandbox whose sandbox.json names a cached image
 * ("image_digest"); sandboxes being created or deleted, and those made
 * from a prebuilt .erofs, have none. A sandbox.json that cannot be read is
 * an error naming the sandbox: better no removal than the wrong one. */
int sandbox_images_in_use(struct image_use **out, size_t *n, gantry_error_t *err);
void sandbox_images_free(struct image_use *u, size_t n);

#endif
