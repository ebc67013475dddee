/* Starting and ending a sandbox's network worker: `gantry __net-worker`
 * (net.h) executed afresh with the VMM's frame socket and a control socket,
 * for a sandbox's machine (src/sandbox/machine.c) and `gantry run -net`. */
#ifndef GANTRY_NET_SPAWN_H
#define GANTRY_NET_SPAWN_H

#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"

#define NET_WORKER_READY_MS 10000
#define NET_WORKER_STOP_MS  2000
#define NET_WORKER_SOCKBUF  (4 * 1024 * 1024)

struct net_worker {
	pid_t pid;  /* -1: none (or reaped) */
	int vmm_fd; /* the VMM's end of the frame socketpair, non-blocking */
	int ctl_fd; /* SEQPACKET, one JSON request or answer per message */
};

#define NET_WORKER_NONE ((struct net_worker){ .pid = -1, .vmm_fd = -1, .ctl_fd = -1 })

/* Start `gantry __net-worker` with ports (canonical specs), its stderr on
 * log_fd; wait (bounded, 10 s) for its first message; *w->vmm_fd is the
 * VMM's end of the frame socketpair (SEQPACKET, 4 MiB bufs). An error is
 * the worker's own one line when it says why it could not start. */
int net_worker_start(struct net_worker *w, char *const *ports, size_t nr_ports, int log_fd,
		     gantry_error_t *err);
/* Close both fds, SIGTERM, reap (bounded; SIGKILL after 2 s). */
void net_worker_stop(struct net_worker *w);

#endif
