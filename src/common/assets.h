/* Where Gantry finds what it boots: the guest kernel, the system root
 * (gantry-init and crun) and the default image. $GANTRY_ASSETS names the
 * directory; otherwise it is `assets/` beside the gantry binary, which the
 * build fills (make assets), or where `make install` puts them: PREFIX/
 * lib/gantry/assets for PREFIX/bin/gantry. */
#ifndef GANTRY_COMMON_ASSETS_H
#define GANTRY_COMMON_ASSETS_H

#include "common/error.h"

#define ASSETS_INSTALLED    "lib/gantry/assets" /* under PREFIX */
#define ASSET_KERNEL        "vmlinux"
#define ASSET_SYSROOT       "sysroot.erofs"
#define ASSET_DEFAULT_IMAGE "default-image"

/* The path of asset name, which must exist; *out is malloc()ed. */
int assets_path(const char *name, char **out, gantry_error_t *err);

#endif
