/* Starting and serving the VMM worker (machine/worker.h has what it is and
 * its protocol), the caller's side: the supervisor, or the CLI for a
 * one-shot exec. */
#ifndef GANTRY_SANDBOX_VMMWORKER_H
#define GANTRY_SANDBOX_VMMWORKER_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"
#include "confine/confine.h"
#include "machine/worker.h"
#include "vmm/console.h"

#define VMM_WORKER_READY_MS 20000 /* its set-up: the guest's memory, KVM, the devices */

struct machine;
struct share_spec;

struct vmm_worker {
	pid_t pid; /* -1: none, or reaped */
	int chan;  /* the channel */
	int console; /* the console pipe's read end, relayed; -1: the worker writes console_fd */
	struct console con; /* the capped log it is relayed into */
	bool con_open;
	json_t *isolation; /* its report */
};

#define VMM_WORKER_NONE                                                                            \
	((struct vmm_worker){ .pid = -1,                                                           \
			      .chan = -1,                                                          \
			      .console = -1 })

/* Start the worker for m's configuration (machine_config's) and wait,
 * bounded, until it is set up and confined. Its error is its own line. */
int vmm_worker_start(struct vmm_worker *w, struct machine *m, gantry_error_t *err);
/* Serve the channel (the guest's vsock dials, checked against the ports
 * the agent listens on; the console, into its capped file) until the
 * worker says how its VM ended, or dies. *rc, *status and err: as
 * vmm_run's. */
void vmm_worker_serve(struct vmm_worker *w, struct machine *m, int *rc, int *status,
		      gantry_error_t *err);
/* Close our ends; with wait, reap it (SIGKILL if it lingers), else only
 * if it is gone already (what exits on its own need not be waited for by
 * a process about to exit). */
void vmm_worker_stop(struct vmm_worker *w, bool wait);

#endif
