/* The share worker: a sandbox's share server (share/server.h) in a process
 * of its own, the gantry binary executed afresh as `gantry __share-worker`
 * and confined (confine.h) like the VMM and network workers, started by
 * the supervisor (or the CLI for a one-shot exec) where the VM has the
 * virtio-fs device and process isolation is not off. The VMM worker then
 * holds no share directory: its virtio-fs device carries each request to
 * this worker over one of the RPC sockets (share/rpc.h), guest RAM a
 * memfd the VMM worker sends it once.
 *
 * Its fds: 0 and 1 /dev/null, 2 the caller's stderr, 3 the channel
 * (worker/worker.h).
 *   caller -> worker  {"op":"config","live":B,"route":R,"exports":[{"tag",
 *                     "ro","map","uid","gid"}...],"rpc":N} with each
 *                     export's root, then the N RPC sockets' far ends
 *   worker -> caller  {"op":"ready","isolation":REPORT} once confined, or
 *                     {"op":"error","error":LINE}
 * then the share requests, one at a time: {"op":"attach","tag":T,
 * "route":R} with the N sockets of a share's worker behind this one
 * (live only), {"op":"rm","tag":T,"force":B}, {"op":"handles","tag":T},
 * each answered {"ok":B[,"error":LINE][,"handles":N]}. A hang-up of the
 * channel or of any RPC socket ends it.
 *
 * Landlock confines it to the exports it is configured with, and a
 * ruleset cannot be widened: a share added while the guest runs is served
 * by a worker of its own ("route" R > 0, that one export), behind the
 * sandbox's first worker ("live"), which passes its requests on
 * (routes.h) and sends it guest RAM. */
#ifndef GANTRY_SHARE_WORKER_H
#define GANTRY_SHARE_WORKER_H

#define SHARE_WORKER_ROLE   "__share-worker"
#define SHARE_WORKER_NOFILE 256 /* its sockets; the server adds its nodes */

/* `gantry __share-worker`: the worker's side (worker_main.c); the
 * caller's is src/sandbox/shareworker.c. */
int share_worker_main(int argc, char **argv);

#endif
