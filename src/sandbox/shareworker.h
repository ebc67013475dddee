/* Starting and asking the share worker (share/worker.h has what it is and
 * its protocol), the caller's side: the supervisor, or the CLI for a
 * one-shot exec. */
#ifndef GANTRY_SANDBOX_SHAREWORKER_H
#define GANTRY_SANDBOX_SHAREWORKER_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"
#include "share/rpc.h"
#include "share/worker.h"

#define SHARE_WORKER_READY_MS 20000

struct machine;
struct share_spec;

struct share_worker {
	pid_t pid; /* -1: none, or reaped */
	int chan;
	pthread_mutex_t lock;		 /* one share request at a time */
	int rpc[SHARE_RPC_SOCKS_MAX];	 /* our ends, for the VMM worker, until it has them */
	size_t nr_rpc;
	json_t *isolation; /* its report */
	uint64_t next_id;  /* the last request's id (worker_request) */
};

#define SHARE_WORKER_NONE                                                                          \
	((struct share_worker){ .pid = -1, .chan = -1, .lock = PTHREAD_MUTEX_INITIALIZER })

/* Start it for m's shares and send its configuration; the RPC sockets'
 * near ends stay in w->rpc for the VMM worker's configuration. */
int share_worker_start(struct share_worker *w, struct machine *m, gantry_error_t *err);
/* The VMM worker has them: ours go. */
void share_worker_rpc_given(struct share_worker *w);
/* Wait, bounded, until it is confined; its error is its own line. */
int share_worker_ready(struct share_worker *w, gantry_error_t *err);
/* As fs_server_add_export, remove_export and export_handles, in it. */
int share_worker_add(struct share_worker *w, const struct share_spec *sp, int root_fd,
		     gantry_error_t *err);
int share_worker_rm(struct share_worker *w, const char *tag, bool force, gantry_error_t *err);
size_t share_worker_handles(struct share_worker *w, const char *tag);
/* Close our ends and reap it (SIGKILL if it lingers). */
void share_worker_stop(struct share_worker *w);


#endif
