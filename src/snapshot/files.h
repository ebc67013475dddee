/* A saved VM on disk: DIR/state (the state file, state.h) and DIR/memory
 * (its RAM, a sparse file of RAM's size), both 0600. A save is written
 * beside them as .state.new and .memory.new and renamed over them only
 * once both are whole and synced, the memory first: a state file in
 * place says its memory is, and a save that fails leaves the last good
 * one. Used by `gantry run -snapshot/-restore` and a sandbox's
 * `stop -snapshot`. */
#ifndef GANTRY_SNAPSHOT_FILES_H
#define GANTRY_SNAPSHOT_FILES_H

#include <stdbool.h>

#include "common/error.h"

#define SNAP_STATE	"state"
#define SNAP_MEMORY	"memory"
#define SNAP_ORIGIN	"origin" /* the name of the machine saved, for its clones */
#define SNAP_STATE_NEW	".state.new"
#define SNAP_MEMORY_NEW ".memory.new"

struct snap_save {
	const char *path; /* the caller's, for messages */
	int dir;	  /* -1: none */
	int state_fd, mem_fd;
};

/* Whether path holds a save (its state file). */
bool snap_exists(const char *path);
/* path's state and memory, read-only, into *state_fd and *mem_fd. */
int snap_open_restore(const char *path, int *state_fd, int *mem_fd, gantry_error_t *err);
/* Make path (0700) and its two new files, empty, into s. */
int snap_open_save(struct snap_save *s, const char *path, gantry_error_t *err);
/* After the VM ended: with ok and a state file that was written, the save
 * put in place (1); else its new files removed (0); -1 when the renames
 * fail. Closes s's files either way. */
int snap_finish(struct snap_save *s, bool ok, gantry_error_t *err);
/* Remove path's save (after a restore took it): its files, then path if
 * empty. SNAP_ORIGIN goes with it. */
void snap_remove(const char *path);
/* A live save was just written into s's files: they move into the
 * directory to (its state and memory), and new empty ones take their
 * names, open in *state_fd and *mem_fd, for the next save (s's own
 * fds are the caller's to swap for them). 1: moved; 0: to is on another
 * filesystem, nothing moved (the caller copies); -1: an error. */
int snap_take(struct snap_save *s, const char *to, int *state_fd, int *mem_fd,
	      gantry_error_t *err);

#endif
