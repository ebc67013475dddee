/* Starting a worker (see worker.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/child.h"
#include "common/json.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "worker/worker.h"

#define WORKER_LOWEST 16 /* the parent's fds sit above this before the dup2s */
#define WORKER_ARGS   64
#define REAP_MS	      5000

void worker_give(struct worker_handover *h, int fd, bool ours)
{
	h->ours[h->n] = ours;
	h->fds[h->n++] = fd;
}

void worker_handover_close(struct worker_handover *h)
{
	for (size_t i = 0; i < h->n; i++)
		if (h->ours[i] && h->fds[i] >= 0)
			close(h->fds[i]);
	h->n = 0;
}

/* What the child gets, all made before the fork: nothing may allocate
 * between fork and exec. */
struct birth {
	char *argv[WORKER_ARGS];
	char **envp; /* NULL: ours */
	int null, log, chan;
	int fds[UNIX_FDS_MAX];
	size_t nr_fds;
};

static void birth_close(struct birth *b)
{
	close_fd(&b->null);
	close_fd(&b->log);
	close_fd(&b->chan);
	for (size_t i = 0; i < b->nr_fds; i++)
		close_fd(&b->fds[i]);
	b->nr_fds = 0;
	strv_free(b->envp);
	b->envp = NULL;
}

/* Only async-signal-safe calls between fork and exec. */
static __attribute__((noreturn)) void worker_child(const struct birth *b, const char *what)
{
	/* A Ctrl-C meant for the guest's process is not the worker's. */
	setsid();
	if (dup2(b->null, 0) < 0 || dup2(b->null, 1) < 0 ||
	    (b->log >= 0 && dup2(b->log, 2) < 0) || dup2(b->chan, WORKER_CHAN) < 0)
		child_fail(what, "dup2 failed");
	for (size_t i = 0; i < b->nr_fds; i++)
		if (dup2(b->fds[i], WORKER_FIRST_FD + (int)i) < 0)
			child_fail(what, "dup2 failed");
	close_range(WORKER_FIRST_FD + (unsigned int)b->nr_fds, ~0U, 0);
	if (b->envp)
		child_exec_self_env(b->argv, b->envp, what);
	child_exec_self(b->argv, what);
}

static int fd_above(int fd)
{
	return fd < 0 ? -1 : child_fd_above(fcntl(fd, F_DUPFD_CLOEXEC, WORKER_LOWEST), WORKER_LOWEST);
}

int worker_spawn(const struct worker_spawn *ws, pid_t *pid, int *chan, gantry_error_t *err)
{
	struct birth b = { .null = -1, .log = -1, .chan = -1 };
	char ns[24] = "", userns[24] = "";
	struct confine_spawn sp;
	size_t n = 0;
	int p[2];

	*chan = -1;
	*pid = -1;
	if (ws->nr_fds > ARRAY_SIZE(b.fds))
		return gantry_error(err, EINVAL, "%s: %zu descriptors to give", ws->what,
				    ws->nr_fds);
	b.argv[n++] = "gantry";
	b.argv[n++] = (char *)ws->role;
	for (size_t i = 0; ws->args && ws->args[i]; i++) {
		if (n + 7 > ARRAY_SIZE(b.argv))
			return gantry_error(err, E2BIG, "%s: too many arguments", ws->what);
		b.argv[n++] = (char *)ws->args[i];
	}
	b.argv[n++] = "--isolation";
	b.argv[n++] = (char *)confine_mode_name(ws->mode);
	b.argv[n++] = "--ns";
	b.argv[n++] = ns;
	b.argv[n++] = "--userns-errno";
	b.argv[n++] = userns;
	b.argv[n] = NULL;
	b.null = child_fd_above(open("/dev/null", O_RDWR | O_CLOEXEC), WORKER_LOWEST);
	if (b.null < 0) {
		gantry_error_errno(err, "%s: /dev/null", ws->what);
		goto fail;
	}
	if (ws->log_fd >= 0 && (b.log = fd_above(ws->log_fd)) < 0) {
		gantry_error_errno(err, "%s: its log", ws->what);
		goto fail;
	}
	for (; b.nr_fds < ws->nr_fds; b.nr_fds++)
		if ((b.fds[b.nr_fds] = fd_above(ws->fds[b.nr_fds])) < 0) {
			gantry_error_errno(err, "%s: a descriptor to give", ws->what);
			goto fail;
		}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p) < 0) {
		gantry_error_errno(err, "%s: socketpair", ws->what);
		goto fail;
	}
	*chan = child_fd_above(p[0], WORKER_LOWEST);
	b.chan = child_fd_above(p[1], WORKER_LOWEST);
	if (*chan < 0 || b.chan < 0) {
		gantry_error_errno(err, "%s: fcntl", ws->what);
		goto fail;
	}
	if (ws->env)
		b.envp = child_env_only(ws->env);
	*pid = confine_fork(ws->mode, ws->extra_ns, &sp);
	if (*pid < 0) {
		gantry_error_errno(err, "%s: fork", ws->what);
		goto fail;
	}
	/* Both sides: the child says on its command line what it was given. */
	confine_spawn_format(&sp, ns, userns);
	if (*pid == 0)
		worker_child(&b, ws->what);
	/* Only the worker holds its ends: its exit reads as EOF here. */
	birth_close(&b);
	return 0;
fail:
	birth_close(&b);
	close_fd(chan);
	*pid = -1;
	return -1;
}

static void reap_within(pid_t *pid, int sig, int ms, int *status)
{
	*status = 0;
	if (*pid <= 0)
		return;
	if (sig)
		kill(*pid, sig);
	if (!child_reap_within(*pid, ms, status)) {
		kill(*pid, SIGKILL);
		child_reap_within(*pid, ms, status);
	}
	*pid = -1;
}

void worker_reap(pid_t *pid, int *status)
{
	reap_within(pid, 0, REAP_MS, status);
}

void worker_stop(pid_t *pid, int *status)
{
	reap_within(pid, SIGTERM, WORKER_STOP_MS, status);
}

