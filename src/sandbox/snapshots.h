/* Snapshots of sandboxes (docs/snapshots.md): a running sandbox saved
 * under $GANTRY_HOME/snapshots/SNAP/, new sandboxes started from one, and
 * fork (a snapshot and its clones at once).
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

#include <jansson.h>
#include <stddef.h>

#include "common/cancel.h"
#include "common/error.h"
#include "sandbox/lifecycle.h"

struct agent_result;
struct sandbox_process_opts;
struct sandbox_stdio;

#define SNAPSHOTS_SUBDIR "snapshots"
#define SNAPSHOT_LAYER	 "rwlayer.ext4"
#define FORK_MAX	 100

/* from's data ranges into to (made, 0600): a reflink where the filesystem
 * can, else a sparse copy; its modification time as from's, which a
 * restore's virtio-blk checks a disk by. */
int sandbox_snapshot_copy(const char *from, const char *to, gantry_error_t *err);

/* Save the running sandbox name as snapshot as (NULL: NAME-TIME) while
 * it runs on: its supervisor saves its VM live (paused meanwhile, nothing
 * of it stopped) and copies its writable layer (ctl "snapshot"). *made
 * (optional) gets the snapshot's name. A sandbox that holds secrets is
 * saved only with_secrets: their values are in its memory. */
int sandbox_snapshot_take(const char *name, const char *as, bool with_secrets, char **made,
			  gantry_error_t *err);
/* The snapshots, each as `snapshot inspect` shows one, by name. */
int sandbox_snapshot_list(json_t **out, gantry_error_t *err);
json_t *sandbox_snapshot_inspect(const char *snap, gantry_error_t *err);
int sandbox_snapshot_remove(const char *snap, gantry_error_t *err);
/* A new sandbox name from snapshot snap: its configuration, a copy of
 * its writable layer and its VM restored (the guest renews its identity
 * as name). ports: its own published ports (the source's host ports are
 * the source's); env: where its secrets from the environment come from,
 * as for sandbox_resume. Returns once it runs. */
int sandbox_start_from(const char *name, const char *snap, char *const *ports, size_t nr_ports,
		       sandbox_env_fn env, const struct gantry_cancel *cancel, gantry_error_t *err);
/* Snapshot name as prefix (NULL: NAME-fork) and start n clones of it at
 * once, PREFIX-1 to PREFIX-n; the snapshot stays for more. The clones
 * that started, in *started. */
/* `gantry exec -from SNAP`: a sandbox name (NULL: exec-XXXXXXXX) started
 * from snapshot snap as sandbox_start_from does, po's process run in it
 * as sandbox_exec does, and the sandbox deleted, whatever became of
 * either. A process killed with SIGKILL leaves it running and listed,
 * for `gantry delete`. */
int sandbox_exec_from(const char *snap, const char *name, char *const *ports, size_t nr_ports,
		      sandbox_env_fn env, const struct sandbox_process_opts *po,
		      const struct sandbox_stdio *io,
		      const struct gantry_cancel *cancel, struct agent_result *res,
		      gantry_error_t *err);
int sandbox_fork(const char *name, unsigned int n, const char *prefix, bool with_secrets,
		 sandbox_env_fn env, unsigned int *started,
		 gantry_error_t *err);

#endif
