/* The host side of the agent protocol (proto/agent.h): listen where the
 * guest's vsock dials land, wait for gantry-init's HELLO, run a process in
 * the guest with its stdio relayed to host fds, and shut the guest down.
 * The link (listening, the guest's dials, HELLO/READY, shutdown) is
 * agent/link.c; one session's relay is agent/session.c.
 *
 * It owns no more of the process than one call needs: no global main loop,
 * no threads. The VMM may run in the same process on its own threads (it
 * connects the guest's dials to our Unix sockets); agent_cancel, from any
 * thread, makes a waiting call return, and so does the caller's own cancel
 * token (agent_watch_cancel) while it waits for the guest. Signals reach a
 * session as the caller reads them (agent_process's signal_fd): no handler
 * is installed here.
 *
 * The host never waits on the guest: every socket is non-blocking, and what
 * the host sends on the control connection waits in a bounded queue. A peer
 * (the guest, or for agent_attach the sandbox's supervisor) that leaves more
 * than AGENT_SEND_QUEUE_MAX bytes unread, or takes nothing for
 * AGENT_SEND_STALL_MS while bytes wait, is cut off: the call fails with
 * "... stopped reading its control connection".
 *
 * One session at a time per struct agent. */
#ifndef GANTRY_AGENT_SESSION_H
#define GANTRY_AGENT_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "proto/agent.h"

/* After EXIT, for a stdio stream never accepted, or one that goes quiet
 * without its EOFs. */
#define AGENT_STREAM_GRACE_MS	 5000
#define AGENT_STREAM_ID_MS	 5000	      /* for a stdio dial to name its session (STREAM) */
#define AGENT_SEND_QUEUE_MAX	 (256 * 1024) /* control bytes waiting for the peer */
#define AGENT_SEND_STALL_MS	 10000	      /* waiting control bytes with none taken */
#define AGENT_INTERRUPTS_TO_KILL 3	      /* SIGINTs without a terminal before SIGKILL */

struct agent;

struct agent_process {
	char *const *argv; /* NULL-terminated, at least one entry */
	char *const *env;  /* NULL-terminated, or NULL */
	const char *cwd;   /* NULL: "/" */
	uint32_t uid, gid;
	const uint32_t *gids;
	size_t ngids;
	/* An OCI process's own resource limits and capability sets (NULL:
	 * the guest's defaults). */
	const struct proto_rlimit *rlimits;
	size_t nrlimits;
	bool has_rlimits;
	const uint64_t *caps; /* PROTO_CAPS_SETS masks */
	bool init;	      /* PROTO_EXEC_INIT: its end ends the container */
	bool tty; /* one pty in the guest; raw mode here when in_fd is a terminal */
	/* Host ends: stdin (-1: empty), stdout and stderr (-1: dropped). In
	 * tty mode everything comes out on out_fd. */
	int in_fd, out_fd, err_fd;
	/* The caller's signals to forward, one byte (the number) each as it
	 * catches them (0 or -1: none): SIGINT, SIGTERM, SIGHUP and SIGQUIT become
	 * SIGNAL (in tty mode Ctrl-C is a byte of input instead); SIGWINCH
	 * becomes RESIZE. The session reads it; catching the signals is the
	 * caller's (a CLI's, src/cli/signals.c), as handlers are the
	 * process's. */
	int signal_fd;
	/* Called once the guest says the process runs (STARTED); may be NULL. */
	void (*started)(void *opaque);
	void *started_opaque;
};

struct agent_result {
	bool error;    /* the process never ran: code is ERROR's code */
	bool signaled; /* killed by signal number `code` */
	int code;      /* exit status, signal number or ERROR code */
	uint32_t pid;  /* in the guest, once STARTED */
	char *message; /* ERROR's message */
};

/* Create <dir>/1025.sock and <dir>/1026.sock (replacing stale ones); call
 * it before the guest boots so its first dial lands. */
int agent_listen(const char *dir, struct agent **out, gantry_error_t *err);
/* The same through doors of d (common/door.h) for ports 1025 and 1026:
 * a sandbox's machine, whose guest's dials reach us with no socket in
 * the filesystem. */
struct doors;
int agent_open_doors(struct doors *d, struct agent **out, gantry_error_t *err);
/* A session link to a sandbox supervisor (src/sandbox) on fd, which it
 * takes (and makes non-blocking) when it succeeds: agent_run as above, the
 * supervisor relaying control frames and passing each stdio stream along
 * (SCM_RIGHTS with its STREAM frame). */
int agent_attach(int fd, struct agent **out, gantry_error_t *err);
/* After HELLO: hand the control connection and the stdio listener to a
 * caller that serves many sessions itself (the supervisor). The control
 * connection comes back in blocking mode, as accept() made it; the
 * listener is non-blocking, a door where agent_open_doors made it. */
int agent_take_link(struct agent *a, int *control, int *stdio_listen, gantry_error_t *err);
/* The same on this host's own vsock (ports 1025 and 1026, any CID), for a
 * guest whose VMM has an in-kernel vsock device (vhost-vsock): bench/exec's
 * QEMU side. */
int agent_listen_vsock(struct agent **out, gantry_error_t *err);
/* Wait up to timeout_ms (-1: forever) for gantry-init to dial, say HELLO and
 * then READY; *hello (optional) gets a copy of HELLO, its kernel string owned
 * by the agent. A READY with a message (the container root or a sandbox's
 * container could not be set up) fails with that message. */
int agent_wait_ready(struct agent *a, int timeout_ms, struct proto_hello *hello,
		     gantry_error_t *err);
/* The same for a VM restored from a snapshot, whose guest dials again
 * once its vsock reset: HELLO, then RENEW (fresh entropy, the wall clock,
 * a clone's new hostname or NULL, its shares as `gantry.share=` values,
 * its egress worker's CA as `gantry.ca=` has it or NULL) and RENEWED,
 * which must say the entropy and clock (and the identity, shares and CA,
 * when asked) were renewed. A guest that answers anything else is
 * refused. */
int agent_wait_renewed(struct agent *a, int timeout_ms, const char *hostname, char **shares,
		       size_t nr_shares, const char *ca, gantry_error_t *err);
/* A template's boot (gantry.template=1), cold or restored from the
 * template: HELLO, then hello(opaque) (NULL: none; the cold boot saves
 * the template there, the guest waiting), then RENEW with fresh entropy,
 * the clock and config (the rest of its parameters), RENEWED saying it
 * took them (*renewed: it did), and READY. */
int agent_wait_configured(struct agent *a, int timeout_ms, const char *config,
			  int (*hello)(void *opaque, gantry_error_t *err), void *opaque,
			  bool *renewed, gantry_error_t *err);
/* Run one process and relay its stdio until it ends. 0 with *res filled
 * (a non-zero exit, a signal or an ERROR are results, not failures); -1
 * when the guest link failed or was cut off, or the call was cancelled.
 * Once EXIT is in, a forwarded SIGINT, SIGTERM, SIGHUP or SIGQUIT stops
 * waiting for output the host fds will not take. */
int agent_run(struct agent *a, const struct agent_process *p, struct agent_result *res,
	      gantry_error_t *err);
/* Thread-safe: send signo to the process agent_run is running now (a no-op
 * between sessions), e.g. from a timeout on another thread. It queues the
 * frame and never blocks; -1 once the link is cut off. */
int agent_signal(struct agent *a, int signo, gantry_error_t *err);
/* Ask the guest to sync, unmount and power off with status; wait up to
 * timeout_ms (0: not at all) for it to close the control connection. The
 * request itself goes out within timeout_ms, or with 0 within the
 * AGENT_SEND_STALL_MS bound. */
int agent_shutdown(struct agent *a, int status, int timeout_ms, gantry_error_t *err);
/* Thread-safe and async-signal-safe: make the current and later waits fail. */
void agent_cancel(struct agent *a);
/* Also give up waiting for the guest (accept, HELLO, READY, shutdown)
 * once fd is readable: a caller's cancel token (common/cancel.h), or a
 * supervisor's signalfd. -1: none. Set it before the waits. */
void agent_watch_cancel(struct agent *a, int fd);
/* Close everything and remove the two sockets. */
void agent_free(struct agent *a);

/* What a shell would report: code, 128 + signal, or ERROR's code. */
int agent_result_status(const struct agent_result *r);
void agent_result_free(struct agent_result *r);

#endif
