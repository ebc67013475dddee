/* Starting and ending a sandbox's network worker: `gantry __net-worker`
 * (net.h) started as every worker is (worker/worker.h), its channel the
 * control socket and the VMM's frame socket given at birth, for a
 * sandbox's machine (src/sandbox/machine.c) and `gantry run -net`. */
#ifndef GANTRY_NET_SPAWN_H
#define GANTRY_NET_SPAWN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "confine/confine.h"

#define NET_WORKER_READY_MS 10000
#define NET_WORKER_SOCKBUF  (4 * 1024 * 1024)
#define NET_WORKER_NOFILE   16384 /* its flows, listeners and DNS sockets, at most */

struct net_worker {
	pid_t pid;	   /* -1: none (or reaped) */
	int vmm_fd;	   /* the VMM's end of the frame socketpair, non-blocking */
	int ctl_fd;	   /* its channel (worker/worker.h): one JSON request or answer a message */
	json_t *isolation; /* its confinement report (confine.h); NULL: off */
	uint64_t next_id;  /* the last request's id */
};

#define NET_WORKER_NONE                                                                            \
	((struct net_worker){ .pid = -1, .vmm_fd = -1, .ctl_fd = -1, .isolation = NULL })

#define NET_PROXY_IPS_MAX 16

/* What a worker starts with. */
struct net_worker_opts {
	char *const *ports; /* canonical specs */
	size_t nr_ports;
	json_t *policy;	  /* a policy document (net/policy.h); NULL: the default */
	bool allow_local; /* -allow-local-net */
	uint32_t proxy_ips[NET_PROXY_IPS_MAX]; /* the workload's proxy, host order */
	size_t nr_proxy_ips;
	uint16_t proxy_port;
	bool proxy_enforce;
	/* The egress worker's end for the HTTPS connections to inject_hosts
	 * (egress/spawn.h), when there are any. Not closed here. */
	int inject_fd;
	char *const *inject_hosts;
	size_t nr_inject;
	enum confine_mode isolation; /* how it is confined (confine.h) */
	const char *const *env;	     /* the variables it keeps; NULL: those it reads */
};

/* Start `gantry __net-worker` as o says, its stderr on log_fd; wait
 * (bounded, 10 s) for its first message, then give it o->policy and the
 * published ports, each host socket bound here (port_spec_bind): a root
 * caller's worker runs in a user namespace as uid 65534 outside
 * (CONFINE_ROOT_UNPRIVILEGED) and could not bind a port below 1024;
 * *w->vmm_fd is the VMM's end of the frame socketpair (SEQPACKET, 4 MiB
 * bufs). An error is the worker's own one line when it says why it could
 * not start. */
int net_worker_start(struct net_worker *w, const struct net_worker_opts *o, int log_fd,
		     gantry_error_t *err);
/* The same in two halves, for a caller with other work meanwhile (the
 * VM's boot): start it (a failure stops it); then wait for it and give it
 * its policy (a failure leaves it to the caller to stop, once nothing
 * uses its fds). */
int net_worker_spawn(struct net_worker *w, const struct net_worker_opts *o, int log_fd,
		     gantry_error_t *err);
int net_worker_ready(struct net_worker *w, const struct net_worker_opts *o, gantry_error_t *err);
/* One control request while nothing else uses w->ctl_fd (at start):
 * sent, and its answer (bounded, 10 s) in *answer when it says ok. */
int net_worker_request(struct net_worker *w, json_t *req, json_t **answer, gantry_error_t *err);
/* The same with fd (not closed; -1: none) sent beside it: a publish's host
 * socket. */
int net_worker_request_fd(struct net_worker *w, json_t *req, int fd, json_t **answer,
			  gantry_error_t *err);
/* Close both fds and worker_stop() it. */
void net_worker_stop(struct net_worker *w);

#endif
