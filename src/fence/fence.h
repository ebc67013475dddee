/* `gantry fence`: a command in a private PID namespace under a small init
 * of ours, killed with everything it started when the fence's parent dies,
 * with guarded directories read-only in a private mount namespace. The
 * host is otherwise untouched: the same user, network, files, environment
 * and terminal. It keeps a run correct; it is no security boundary (see
 * docs/confined-use.md). */
#ifndef GANTRY_FENCE_FENCE_H
#define GANTRY_FENCE_FENCE_H

#include "common/error.h"
#include "fence/guard.h"

/* The fence itself failed (namespaces refused, a mount failed), not CMD;
 * 126 and 127 are CMD found but not runnable, and not found, as in a shell. */
#define FENCE_FAILED 125

/* Run argv (argv[0] looked up in PATH) fenced, guards read-only, and wait
 * for it: 0 with *status its wait status (SIGKILL when the fence's parent
 * died), -1 when no fence could be made. Call single-threaded: it unshares
 * namespaces of this process. */
int fence_run(struct fence_guards *guards, char *const *argv, int *status, gantry_error_t *err);

/* End this process as status says, as a shell sees it: exit with the
 * code, or die of the same signal (no core dump of ours; 128+N where the
 * signal cannot kill this process). */
__attribute__((noreturn)) void fence_exit(int status);

#endif
