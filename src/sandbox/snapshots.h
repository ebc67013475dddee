/* Snapshots of sandboxes (docs/snapshots.md): a running sandbox saved
 * under $GANTRY_HOME/snapshots/SNAP/, new sandboxes started from one, and
 * fork (a snapshot and its clones at once).
 *
 * A snapshot directory (0700) holds the VM's save (snapshot/files.h:
 * state, memory, origin: hard links of the source's `stop -snapshot`
 * save), rwlayer.ext4 (a copy of the writable layer as it was, reflinked
 * where the filesystem can, else sparse, with its modification time, which
 * virtio-blk's restore checks), sandbox.json (the source's configuration)
 * and snapshot.json (what `snapshot ls` shows). A clone takes copies and
 * links of its own: removing a snapshot never touches a sandbox made
 * from it. */
#ifndef GANTRY_SANDBOX_SNAPSHOTS_H
#define GANTRY_SANDBOX_SNAPSHOTS_H

#include <jansson.h>
#include <stddef.h>

#include "common/cancel.h"
#include "common/error.h"

#define SNAPSHOTS_SUBDIR "snapshots"
#define FORK_MAX	 100

/* Save the running sandbox name as snapshot as (NULL: NAME-TIME) and let
 * it go on: it is stopped with a save (sandbox_pause, whose refusals are
 * this call's) and restored from it at once, so its processes keep their
 * memory; its connections through the NAT are reset as a restore's are.
 * *made (optional) gets the snapshot's name. */
int sandbox_snapshot_take(const char *name, const char *as, char **made, gantry_error_t *err);
/* The snapshots, each as `snapshot inspect` shows one, by name. */
int sandbox_snapshot_list(json_t **out, gantry_error_t *err);
json_t *sandbox_snapshot_inspect(const char *snap, gantry_error_t *err);
int sandbox_snapshot_remove(const char *snap, gantry_error_t *err);
/* A new sandbox name from snapshot snap: its configuration, a copy of
 * its writable layer and its VM restored (the guest renews its identity
 * as name). ports: its own published ports (the source's host ports are
 * the source's). Returns once it runs. */
int sandbox_start_from(const char *name, const char *snap, char *const *ports, size_t nr_ports,
		       const struct gantry_cancel *cancel, gantry_error_t *err);
/* Snapshot name as prefix (NULL: NAME-fork) and start n clones of it at
 * once, PREFIX-1 to PREFIX-n; the snapshot stays for more. The clones
 * that started, in *started. */
int sandbox_fork(const char *name, unsigned int n, const char *prefix, unsigned int *started,
		 gantry_error_t *err);

#endif
