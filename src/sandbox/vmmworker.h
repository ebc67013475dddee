/* The VMM worker: a sandbox's VM (KVM, its vCPUs, every device) in a
 * process of its own, the gantry binary executed afresh as
 * `gantry __vmm-worker`, confined (confine.h) before the guest runs one
 * instruction. The supervisor, or the CLI for a one-shot exec, opens
 * every file and socket the VM needs and hands them over; the worker opens
 * nothing by path and makes no socket.
 *
 * Its fds: 0 and 1 /dev/null, 2 the caller's stderr, 3 the channel (a
 * SOCK_SEQPACKET socket, one JSON message each way, with descriptors;
 * worker.h). The share server is not in it: its virtio-fs device's
 * requests go to the share worker (shareworker.h) over the RPC sockets
 * the configuration brings, guest RAM a memfd it sends there first.
 *
 * The channel, in order:
 *   caller -> worker  {"op":"config",...} with the fds it lists: kernel,
 *                     console, stop eventfd, the frame socket, disks, the
 *                     vsock listener, the share worker's RPC sockets
 *   worker -> caller  {"op":"ready","isolation":REPORT} once set up and
 *                     confined, or {"op":"error","error":LINE}
 *   worker -> caller  {"op":"connect","id":N,"port":P} when the guest
 *                     dials host port P; the answer {"op":"connected",
 *                     "id":N,"ok":B} carries the connected socket
 *   worker -> caller  {"op":"exit","rc":R,"status":S[,"error":LINE]} last. */
#ifndef GANTRY_SANDBOX_VMMWORKER_H
#define GANTRY_SANDBOX_VMMWORKER_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"
#include "confine/confine.h"
#include "vmm/console.h"

#define VMM_WORKER_ROLE	    "__vmm-worker"
#define VMM_WORKER_READY_MS 20000 /* its set-up: the guest's memory, KVM, the devices */
#define VMM_WORKER_NOFILE   4096 /* vsock streams and ours */

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

/* `gantry __vmm-worker`: the worker's side (vmmworker_main.c). */
int vmm_worker_main(int argc, char **argv);

#endif
