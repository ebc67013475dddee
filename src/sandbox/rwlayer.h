/* Writable layers: the ext4 disk (/dev/vdc) whose /upper and /work are the
 * overlay's upper layer in the guest. Made by mke2fs (e2fsprogs), paired
 * with one image through a sidecar file <layer>.image so it is never
 * attached to another image by accident, and locked exclusively by the VMM
 * (virtio-blk) while a VM uses it. */
#ifndef GANTRY_SANDBOX_RWLAYER_H
#define GANTRY_SANDBOX_RWLAYER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

#define RWLAYER_MIN_MIB	    64
#define RWLAYER_MAX_MIB	    65536
#define RWLAYER_DEFAULT_MIB 512
#define RWLAYER_LABEL	    "rwlayer"
#define RWLAYER_SIDECAR	    ".image"

/* The mke2fs rwlayer_create runs: in /usr/sbin or /sbin, else "mke2fs"
 * (from PATH). */
const char *rwlayer_mke2fs(void);
/* A new empty ext4 of size_mib at path (made beside it, then renamed). */
int rwlayer_create(const char *path, uint64_t size_mib, gantry_error_t *err);
/* Check that the layer at path belongs to image_id; with a layer that has
 * no sidecar, write one when adopt (a layer just made), else refuse. */
int rwlayer_pair(const char *path, const char *image_id, bool adopt, gantry_error_t *err);
/* Whether a VM holds the layer now (refusing to share it). */
bool rwlayer_in_use(const char *path);
/* Remove the layer and its sidecar. */
void rwlayer_remove(const char *path);

#endif
