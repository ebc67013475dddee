/* Applying OCI image layers (tar, tar+gzip, tar+zstd; pax, GNU and ustar
 * headers) to an erofs_tree, in order, with the OCI whiteout rules: `.wh.NAME`
 * hides NAME from earlier layers, `.wh..wh..opq` hides everything earlier
 * layers put in its directory. Each entry's data streams into the image. */
#ifndef GANTRY_IMAGE_LAYER_H
#define GANTRY_IMAGE_LAYER_H

#include "common/error.h"
#include "image/erofs.h"

struct archive;

/* Apply one layer from an archive opened for reading by the caller. Errors
 * are one line naming the entry ("entry `a/b`: ...") or libarchive's reason. */
int layer_apply(struct erofs_tree *t, struct archive *a, gantry_error_t *err);
/* Open fd (compression detected: none, gzip or zstd) and apply it. */
int layer_apply_fd(struct erofs_tree *t, int fd, gantry_error_t *err);
int layer_apply_file(struct erofs_tree *t, const char *path, gantry_error_t *err);

#endif
