/* ctl.sock: how commands reach a running sandbox's supervisor. A Unix
 * socket (mode 0600, in the sandbox's 0700 directory) whose server also
 * refuses any peer whose UID (SO_PEERCRED) is not its own.
 *
 * A connection starts with one request line, JSON, at most CTL_LINE_MAX
 * bytes: {"op":"status"|"stop"|"exec"}; the supervisor answers one line,
 * {"ok":true,...} or {"ok":false,"error":"..."}. After an "exec" answered
 * ok, the connection carries agent frames (proto/agent.h) for one session:
 * EXEC, SIGNAL, RESIZE from the client; STARTED, EXIT, ERROR and STREAM from
 * the supervisor, STREAM with the guest's stdio stream attached as an fd.
 *
 * The network ops, relayed to the sandbox's network worker: {"op":
 * "ports.publish"|"ports.unpublish","spec":S,"ephemeral":B} (S canonical,
 * its host port chosen; ephemeral: not saved in sandbox.json);
 * "ports.ls", answered {"ok":true,"ports":[{"spec":S,"ephemeral":B}...]};
 * "net.traffic", answered once network-traffic.json holds a fresh
 * snapshot.
 *
 * A secret from the caller's environment is set with {"op":"secret.set",
 * "spec":S,"length":N} followed at once by the N bytes of its value (no
 * newline): the value never passes through JSON. */
#ifndef GANTRY_SANDBOX_CTL_H
#define GANTRY_SANDBOX_CTL_H

#include <jansson.h>
#include <stdbool.h>

#include "common/error.h"

#define CTL_LINE_MAX	    (256 * 1024) /* a policy document fits */
#define CTL_OP_STATUS	    "status"
#define CTL_OP_STOP	    "stop"
#define CTL_OP_EXEC	    "exec"
#define CTL_OP_PUBLISH	    "ports.publish"
#define CTL_OP_UNPUBLISH    "ports.unpublish"
#define CTL_OP_PORTS	    "ports.ls"
#define CTL_OP_TRAFFIC	    "net.traffic"
#define CTL_OP_NETPOLICY_SET "netpolicy.set" /* {"policy":P|null,"allowLocal":B} */
#define CTL_OP_NETPOLICY_GET "netpolicy.get"
#define CTL_OP_SHARE_ADD     "share.add" /* {"spec":S,"replace":B,"ephemeral":B} */
#define CTL_OP_SHARE_RM	     "share.rm"	 /* {"tag":T,"force":B,"ephemeral":B} */
#define CTL_OP_SHARE_LS	     "share.ls"
#define CTL_OP_SECRET_SET    "secret.set" /* {"spec":S[,"length":N]} and N bytes of value */
#define CTL_OP_SECRET_RM     "secret.rm"  /* {"name":NAME} */
#define CTL_OP_AUDIT	     "audit.tail" /* answered {"ok":true,"events":[...]} */
#define CTL_OP_SNAPSHOT	     "snapshot"	  /* {"dir":D,"secrets":B}: a live save into D */
#define CTL_OP_FREEZE	     "freeze"	  /* {"frozen":B}: pause (no save) or run on */
#define CTL_STOP_TIMEOUT_MS 60000

/* Listen on path (relative to the supervisor's directory), mode 0600. */
int ctl_listen(const char *path, gantry_error_t *err);
/* Connect to <dir>/ctl.sock however long dir is; ENOENT or ECONNREFUSED
 * in the error when no supervisor listens there. */
int ctl_connect(const char *dir, int *fd, gantry_error_t *err);
/* Send {"op": op}, read the one-line answer (timeout_ms, -1: forever);
 * *reply (optional) gets it. An answer with ok false is an error. */
int ctl_call(int fd, const char *op, int timeout_ms, json_t **reply, gantry_error_t *err);
/* The same with a request of more fields than "op". */
int ctl_request(int fd, json_t *req, int timeout_ms, json_t **reply, gantry_error_t *err);
/* The same with len bytes of data sent right behind the request line. */
int ctl_request_data(int fd, json_t *req, const void *data, size_t len, int timeout_ms,
		     json_t **reply, gantry_error_t *err);
/* Read one line (without the newline, NUL-terminated) byte by byte, so
 * nothing after it is consumed. */
int ctl_read_line(int fd, char *buf, size_t cap, int timeout_ms, gantry_error_t *err);
/* Write one JSON value and a newline. */
int ctl_send_json(int fd, json_t *j, gantry_error_t *err);

#endif
