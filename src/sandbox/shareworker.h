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
#include "confine/confine.h"
#include "share/rpc.h"
#include "share/worker.h"

#define SHARE_WORKER_READY_MS 20000

struct machine;
struct share_spec;

struct share_worker {
	pid_t pid; /* -1: none, or reaped */
	int chan;
	pthread_mutex_t lock;		 /* one share request at a time */
	int rpc[SHARE_RPC_SOCKS_MAX];	 /* our ends, for the VMM worker (or the front
					  * worker), until it has them */
	size_t nr_rpc;
	json_t *isolation; /* its report */
	uint64_t next_id;  /* the last request's id (worker_request) */
};

#define SHARE_WORKER_NONE                                                                          \
	((struct share_worker){ .pid = -1, .chan = -1, .lock = PTHREAD_MUTEX_INITIALIZER })

/* Start it for m's shares and send its configuration; the RPC sockets'
 * near ends stay in w->rpc for the VMM worker's configuration. */
int share_worker_start(struct share_worker *w, struct machine *m, gantry_error_t *err);
/* A worker for one share added while the guest runs, behind front (the
 * one share_worker_start started, which passes the share's requests on:
 * share/routes.h): started for sp under mode, its node ids under route
 * (1..FS_ROUTE_MAX, never one front had), confined to root_fd alone, and
 * attached to front. On error w is the caller's to stop. */
int share_worker_start_behind(struct share_worker *w, struct share_worker *front,
			      const struct share_spec *sp, int root_fd, unsigned int route,
			      enum confine_mode mode, gantry_error_t *err);
/* The VMM worker has them: ours go. */
void share_worker_rpc_given(struct share_worker *w);
/* Wait, bounded, until it is confined; its error is its own line. */
int share_worker_ready(struct share_worker *w, gantry_error_t *err);
/* As fs_server_remove_export (a share behind it: its route closed too)
 * and fs_server_export_handles, in it. */
int share_worker_rm(struct share_worker *w, const char *tag, bool force, gantry_error_t *err);
size_t share_worker_handles(struct share_worker *w, const char *tag);
/* Close our ends and reap it (SIGKILL if it lingers). */
void share_worker_stop(struct share_worker *w);


#endif
