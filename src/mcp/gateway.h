/* The MCP gateway: the guest's MCP client speaks to `gantry-guest
 * mcp-proxy`, which carries its newline-delimited JSON-RPC over vsock port
 * PROTO_MCP_PORT to here. The gateway is one MCP server to the guest: it
 * lists the tools of the remotes it was given (-mcp-remote), each as
 * ID__TOOL and only those the remote's allow and deny let through, and
 * calls them on the remote with the credential added on this side. What
 * comes back has every secret value of that remote redacted. Bounds: a
 * message of MCP_FRAME_MAX, MCP_SESSIONS_MAX sessions at once, one call in
 * flight per session, MCP_IDLE_S of silence ends a session. */
#ifndef GANTRY_MCP_GATEWAY_H
#define GANTRY_MCP_GATEWAY_H

#include <jansson.h>
#include <stdint.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/acceptor.h"
#include "common/error.h"
#include "confine/confine.h"
#include "mcp/frame.h"
#include "mcp/remote.h"

#define MCP_SESSIONS_MAX 16
#define MCP_IDLE_S	 300
#define MCP_REMOTES_MAX	 16

#define MCP_WORKER_ROLE	    "__mcp-worker"
#define MCP_WORKER_LOG	    "worker-mcp.log"
#define MCP_WORKER_READY_MS 10000

/* The built-in fs server's name: its tools are fs__read_file and
 * fs__list_directory, done in the guest (proto/agent.h, guest/mcpfs.c). */
#define MCP_FS_ID      "fs"
#define MCP_FS_PENDING 16 /* a session's fs calls under way */

/* Where a host client (`gantry mcp tools`) reaches the gateway of a run,
 * in its run directory: each connection is joined to a dial of the
 * gateway's port, as the guest's proxy makes one. */
#define MCP_HOST_SOCK  "mcp.sock"
#define MCP_HOST_CONNS 2

struct mcp_gateway {
	struct acceptor acc;	      /* in this process (isolation off): a thread a session */
	struct acceptor host;	      /* MCP_HOST_SOCK's */
	struct doors *doors;	      /* where its port's door is (borrowed) */
	bool fs;		      /* -mcp: the fs server's tools */
	char *fs_root;		      /* its root in the sandbox */
	uint32_t fs_uid, fs_gid;      /* its user there (never root) */
	char *specs[MCP_REMOTES_MAX]; /* as given: a confined gateway's arguments */
	pid_t pid;		      /* the confined gateway; -1: none */
	int chan;
	struct mcp_remote remotes[MCP_REMOTES_MAX];
	size_t n;
	/* auth=custody remotes: custody (borrowed), each token's expiry and
	 * when it was last renewed (Unix seconds), and the thread that
	 * renews them (custody.c). */
	struct oauth_custody *custody;
	int64_t expires[MCP_REMOTES_MAX], renewed[MCP_REMOTES_MAX];
	unsigned int renew_fails[MCP_REMOTES_MAX]; /* refusals in a row */
	pthread_t keeper;
	int keeper_stop; /* an eventfd; -1: no keeper */
};

void mcp_gateway_init(struct mcp_gateway *g);
/* -mcp-remote SPEC: parsed, and its secrets taken from the environment
 * (each variable unset once read, so that nothing started later has it). */
int mcp_gateway_add(struct mcp_gateway *g, const char *spec, gantry_error_t *err);
struct oauth_custody;
/* The access token OAuth custody holds for each auth=custody:PROVIDER
 * remote, taken now (refreshed first when it is about to expire): the
 * token the run starts with. Without custody, such a remote is an
 * error. While the gateway runs, each token is renewed
 * OAUTH_REFRESH_MARGIN_S before it expires and handed to the gateway
 * (custody.c), so a run outlives its first token. */
int mcp_gateway_custody(struct mcp_gateway *g, struct oauth_custody *custody, gantry_error_t *err);
/* Open the door of the guest's PROTO_MCP_PORT in doors (common/door.h),
 * and MCP_HOST_SOCK in dir (the run directory); nothing without remotes.
 * Unless mode is off, the gateway runs confined in a worker of its own
 * (`gantry __mcp-worker`, its stderr on log_fd), handed the door's end
 * and then the remotes' secrets; this process keeps none of them after. */
struct doors;
int mcp_gateway_open(struct mcp_gateway *g, struct doors *doors, const char *dir,
		     enum confine_mode mode, int log_fd, gantry_error_t *err);
/* Serve MCP_HOST_SOCK, and with mode off the guest's sessions, on threads
 * of this process (once the VM's workers are spawned). */
int mcp_gateway_run(struct mcp_gateway *g, gantry_error_t *err);
/* End the sessions and the threads, and stop listening. */
void mcp_gateway_stop(struct mcp_gateway *g);
/* ... and forget the remotes and their secrets. */
void mcp_gateway_free(struct mcp_gateway *g);

/* -mcp, -mcp-fs-root ROOT (NULL: "/"), -mcp-fs-user nobody|UID|UID:GID
 * (NULL: nobody; root refused): the fs server on. */
int mcp_gateway_fs(struct mcp_gateway *g, const char *root, const char *user,
		   gantry_error_t *err);

struct mcp_fs_pending {
	unsigned long long seq;
	json_t *id; /* the client's request's; NULL: a free slot */
	char *path;
};

/* One guest connection: its bytes read as they come, each whole message
 * answered in turn; an fs call answered when the guest's fs server has. */
struct mcp_session {
	int fd;
	struct mcp_reader rd;
	struct mcp_fs_pending fs_pending[MCP_FS_PENDING];
	unsigned long long fs_seq;
};

void mcp_session_init(struct mcp_session *s, int fd);
/* Read what fd has (it is readable) and answer every whole message; false
 * once the session is over (the guest hung up, a broken stream, an answer
 * it would not take). */
bool mcp_session_step(struct mcp_gateway *g, struct mcp_session *s);
void mcp_session_end(struct mcp_session *s);

/* fs.c: the fs server's tools, into tools; a tools/call of one: NULL with
 * *line the request to send the guest (the call then waits in s), or the
 * call's answer (a bad call); the guest's answer line: the reply to the
 * call it answers, or NULL (no such call). */
void mcp_fs_tools(json_t *tools);
json_t *mcp_fs_request(struct mcp_session *s, json_t *id, json_t *params, char **line);
json_t *mcp_fs_answer(struct mcp_session *s, const char *line, size_t len);
void mcp_fs_forget(struct mcp_fs_pending *p);

/* custody.c: the renewing thread, started (when a remote needs it) and
 * ended; a confined gateway gets each renewal as {"op":"auth","remote":I,
 * "auth":V} on its channel, which it hands to mcp_gateway_auth. */
int mcp_custody_keep(struct mcp_gateway *g, gantry_error_t *err);
void mcp_custody_stop(struct mcp_gateway *g);
void mcp_gateway_auth(struct mcp_gateway *g, json_t *msg);

/* The confined gateway's main (mcp/worker.c). */
int mcp_worker_main(int argc, char **argv);

/* One JSON-RPC message from the guest, answered (NULL: a notification,
 * nothing to send back). The gateway's whole MCP side, for the tests. */
json_t *mcp_gateway_handle(struct mcp_gateway *g, json_t *msg);

#endif
