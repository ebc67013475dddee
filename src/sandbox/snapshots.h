/* Snapshots of sandboxes (docs/snapshots.md), the lifecycle's and the
 * supervisor's side: the calls front ends make (take, list, inspect,
 * remove, start from, exec from, fork) are sandbox/lifecycle.h's, which
 * this header includes; no front end includes it.
 *
 * A snapshot directory (0700) holds the VM's save (snapshot/files.h:
 * state, memory, origin: the live save its supervisor made), rwlayer.ext4 (a copy of the writable layer as it was, reflinked
 * where the filesystem can, else sparse, with its modification time, which
 * virtio-blk's restore checks), sandbox.json (the source's configuration)
 * and snapshot.json (what `snapshot ls` shows). A clone takes copies and
 * links of its own: removing a snapshot never touches a sandbox made
 * from it. */
#ifndef GANTRY_SANDBOX_SNAPSHOTS_H
#define GANTRY_SANDBOX_SNAPSHOTS_H

#include "common/error.h"
#include "sandbox/lifecycle.h"

#define SNAPSHOTS_SUBDIR "snapshots"
#define SNAPSHOT_LAYER	 "rwlayer.ext4"

/* from's data ranges into to (made, 0600): a reflink where the filesystem
 * can, else a sparse copy; its modification time as from's, which a
 * restore's virtio-blk checks a disk by. */
int sandbox_snapshot_copy(const char *from, const char *to, gantry_error_t *err);

#endif
