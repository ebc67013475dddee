/* Starting a sandbox's supervisor (see spawn.h): the gantry binary
 * executed afresh in its hidden role, detached from the caller, its stdio
 * the sandbox's log and fd 3 a pipe that says when it is ready. Executing
 * (not only forking) keeps the caller's address space, threads and locks
 * out of it, so a threaded caller (an API server, the dashboard) may start
 * sandboxes too. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cancel.h"
#include "common/child.h"
#include "common/log.h"
#include "common/util.h"
#include "sandbox/state.h"
#include "sandbox/spawn.h"

#define SUP_READY_TIMEOUT_MS 300000 /* nested test hosts boot slowly */
#define SUP_END_GRACE_MS     10000  /* for a booting supervisor to end its VM */
/* The parent's fds sit at this or above before the child's dup2s. */
#define SPAWN_FD_FLOOR (SUPERVISOR_READY_FD + 1)
#define SUP_LOG_ROTATE (1u << 20)

static void rotate_log(const char *path)
{
	struct stat st;
	cleanup_free char *prev = NULL;

	if (stat(path, &st) < 0 || (uint64_t)st.st_size < SUP_LOG_ROTATE)
		return;
	xasprintf(&prev, "%s.previous", path);
	rename(path, prev);
}

/* The grandchild: a new session with no terminal, stdio to the log, the
 * ready pipe as fd 3, default signals, then the binary in its role. Only
 * async-signal-safe calls between fork and exec (_Fork runs no atfork
 * handlers). */
static __attribute__((noreturn)) void spawn_child(char *const argv[], int null, int logfd,
						  int ready_w, int secrets)
{
	pid_t pid;

	setsid();
	pid = _Fork();
	if (pid != 0)
		_exit(pid < 0);
	if (dup2(null, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0)
		_exit(127);
	if (ready_w != SUPERVISOR_READY_FD && dup2(ready_w, SUPERVISOR_READY_FD) < 0)
		child_fail("supervisor", "dup2 failed");
	if (secrets >= 0 && dup2(secrets, SUPERVISOR_SECRETS_FD) < 0)
		child_fail("supervisor", "dup2 failed");
	close_range(secrets >= 0 ? SUPERVISOR_SECRETS_FD + 1 : SUPERVISOR_READY_FD + 1, ~0U, 0);
	child_exec_self(argv, "supervisor");
}

/* End a supervisor that is not ready yet: SIGTERM first (a boot in
 * progress then ends itself and its VM), SIGKILL if it lingers; returns
 * once its lock is free, so nothing of the sandbox is in use. */
static void end_supervisor(const char *dir, long pid, int fd)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	uint64_t deadline = now_ms() + SUP_END_GRACE_MS;
	char buf[256];

	if (pid <= 0)
		return;
	kill((pid_t)pid, SIGTERM);
	/* The ready pipe's end is its own (close-on-exec): EOF is its exit. */
	while (now_ms() < deadline) {
		int r = poll(&pf, 1, (int)(deadline - now_ms()));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || read(fd, buf, sizeof(buf)) == 0)
			break;
	}
	kill((pid_t)pid, SIGKILL);
	for (int i = 0; i < 500 && sandbox_is_running(dir); i++)
		usleep(10000);
}

/* Read the ready pipe: "pid N" first, then "ok" or "error: ...", one per
 * line; until then EOF, the deadline or the caller's cancel (then the
 * supervisor is ended, so nothing of the sandbox is in use once this
 * returns). */
static int wait_ready(const char *name, const char *dir, const char *log, int fd,
		      const struct gantry_cancel *cancel, gantry_error_t *err)
{
	uint64_t deadline = now_ms() + SUP_READY_TIMEOUT_MS;
	char buf[4096];
	size_t got = 0;
	long pid = 0;
	char *line;

	for (;;) {
		/* The cancel is heard once the pid is known, its first line. */
		struct pollfd pf[2] = { { .fd = fd, .events = POLLIN },
					{ .fd = pid > 0 ? cancel_fd(cancel) : -1,
					  .events = POLLIN } };
		uint64_t now = now_ms();
		ssize_t n;
		int r;

		r = now < deadline ? poll(pf, 2, (int)(deadline - now)) : 0;
		if (r < 0 && errno == EINTR)
			continue;
		if (r > 0 && pf[1].revents && !(pf[0].revents & POLLIN)) {
			end_supervisor(dir, pid, fd);
			return gantry_error(err, ECANCELED, "cancelled");
		}
		if (r == 0) {
			end_supervisor(dir, pid, fd);
			return gantry_error(err, 0, "sandbox `%s` was not ready in %d s (see %s)",
					    name, SUP_READY_TIMEOUT_MS / 1000, log);
		}
		n = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n > 0)
			got += (size_t)n;
		buf[got] = '\0';
		if (pid == 0 && strncmp(buf, "pid ", 4) == 0 && strchr(buf, '\n'))
			pid = strtol(buf + 4, NULL, 10);
		line = pid > 0 ? strchr(buf, '\n') + 1 : buf;
		if (n <= 0 || got == sizeof(buf) - 1 || strchr(line, '\n'))
			break;
	}
	if (strncmp(line, "ok\n", 3) == 0)
		return 0;
	if (strncmp(line, "error: ", 7) == 0) {
		line[strcspn(line, "\n")] = '\0';
		return gantry_error(err, 0, "%s", line + 7);
	}
	return gantry_error(err, 0, "the supervisor of `%s` ended before it was ready (see %s)",
			    name, log);
}

int supervisor_spawn(const char *name, const char *dir, struct secret_store *secrets,
		     const struct gantry_cancel *cancel, gantry_error_t *err)
{
	char *argv[] = { "gantry", SUPERVISOR_ROLE, (char *)name, secrets ? "--secrets" : NULL,
			 NULL };
	cleanup_free char *log = NULL;
	cleanup_close int null = -1, logfd = -1, rd = -1, sec = -1, sec_child = -1;
	int p[2], sv[2], status;
	pid_t pid;

	xasprintf(&log, "%s/%s", dir, SANDBOX_LOG);
	rotate_log(log);
	/* Opened here: between fork and exec nothing may allocate. */
	null = child_fd_above(open("/dev/null", O_RDWR | O_CLOEXEC), SPAWN_FD_FLOOR);
	logfd = child_fd_above(open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600),
			       SPAWN_FD_FLOOR);
	if (null < 0 || logfd < 0)
		return gantry_error_errno(err, "open `%s`", log);
	if (pipe2(p, O_CLOEXEC) < 0)
		return gantry_error_errno(err, "pipe");
	rd = p[0];
	p[1] = child_fd_above(p[1], SPAWN_FD_FLOOR);
	if (secrets) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
			close(p[1]);
			return gantry_error_errno(err, "socketpair");
		}
		sec = sv[0];
		sec_child = child_fd_above(sv[1], SPAWN_FD_FLOOR);
	}
	pid = fork();
	if (pid < 0) {
		close(p[1]);
		return gantry_error_errno(err, "fork");
	}
	if (pid == 0)
		spawn_child(argv, null, logfd, p[1], sec_child);
	close(p[1]);
	close_fd(&sec_child);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return gantry_error(err, 0, "cannot start the supervisor of `%s`: fork failed",
				    name);
	/* It reads them first of all; one that died instead is an EPIPE here,
	 * and wait_ready then says why. */
	if (secrets && secret_store_send(secrets, sec, NULL) < 0)
		log_debug("the supervisor of `%s` did not take its secrets", name);
	close_fd(&sec);
	return wait_ready(name, dir, log, rd, cancel, err);
}
