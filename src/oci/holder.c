/* The processes gantry-oci leaves behind (oci.h): a container's holder,
 * which boots its sandbox at create, runs config.json's process at start
 * and lives exactly as long as that process; and an exec's, which runs
 * one more process in it. Both stand for their process on the host: its
 * stdio (create's or exec's fds 0-2, or a terminal whose master went over
 * --console-socket), the signals sent to them forwarded, its status their
 * exit status. */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "common/unixsock.h"
#include "common/util.h"
#include "oci/oci.h"
#include "sandbox/lifecycle.h"

#define HOLDER_ANSWER_S	 5
#define HOLDER_STARTED_S 120 /* start waits this long for the process to run */

static int sig_pipe[2] = { -1, -1 };

static void on_signal(int sig)
{
	unsigned char b = (unsigned char)sig;
	int e = errno;

	if (write(sig_pipe[1], &b, 1) < 0) {
		/* full: the signal is dropped, as a pending one would be */
	}
	errno = e;
}

/* Every signal a process can be sent and catch goes to the container's
 * process (`kill ID SIG` reaches the holder); SIGKILL ends the holder,
 * and `kill` then powers the VM off. */
static int catch_all(void)
{
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };

	if (sig_pipe[0] < 0 && pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	sigemptyset(&sa.sa_mask);
	for (int sig = 1; sig < 32; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP || sig == SIGCHLD || sig == SIGSEGV ||
		    sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGABRT ||
		    sig == SIGTTIN || sig == SIGTTOU || sig == SIGTSTP)
			continue;
		if (sig == SIGPIPE) {
			signal(SIGPIPE, SIG_IGN);
			continue;
		}
		sigaction(sig, &sa, NULL);
	}
	return 0;
}

/* --- the terminal ------------------------------------------------------ */

int oci_console_make(const char *socket_path, int *slave, gantry_error_t *err)
{
	cleanup_close int master = -1, sock = -1;
	char name[64];
	int fd;

	if (socket_path == NULL)
		return gantry_error(err, 0, "process.terminal is set: --console-socket is needed");
	if (!unix_path_fits(socket_path))
		return gantry_error(err, 0, "--console-socket `%.64s...`: path too long",
				    socket_path);
	master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0 ||
	    ptsname_r(master, name, sizeof(name)) != 0)
		return gantry_error_errno(err, "a terminal");
	fd = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return gantry_error_errno(err, "open %s", name);
	sock = unix_connect(socket_path, 0);
	if (sock < 0 || unix_send_fd(sock, name, strlen(name), master, 0) < 0) {
		gantry_error_errno(err, "--console-socket `%s`", socket_path);
		close(fd);
		return -1;
	}
	*slave = fd;
	return 0;
}

/* The terminal becomes this process's controlling one and its stdio: a
 * resize of its master (conmon's TIOCSWINSZ) then arrives as SIGWINCH,
 * which the session turns into the guest's RESIZE. */
static int console_take(int slave)
{
	if (setsid() < 0 || ioctl(slave, TIOCSCTTY, 0) < 0)
		return -1;
	for (int i = 0; i < 3; i++)
		if (dup2(slave, i) < 0)
			return -1;
	if (slave > 2)
		close(slave);
	return 0;
}

/* --- a process in the container ------------------------------------------ */

/* `start` waits on its connection until the process runs: "ok" then. */
static void tell_started(void *opaque)
{
	int *fd = opaque;

	if (*fd >= 0) {
		(void)!write(*fd, "ok\n", 3);
		close_fd(fd);
	}
}

int oci_run_process(const char *id, const struct oci_spec *s, int start_fd, bool init)
{
	struct sandbox_stdio io = { .in = STDIN_FILENO,
				    .out = STDOUT_FILENO,
				    .err = STDERR_FILENO,
				    .tty = s->terminal,
				    .signal_fd = sig_pipe[0],
				    .started = tell_started,
				    .started_opaque = &start_fd };
	struct agent_result res = { 0 };
	gantry_error_t err = NULL;
	char user[32];
	int status;

	snprintf(user, sizeof(user), "%u:%u", s->uid, s->gid);
	struct sandbox_process_opts po = { .args = s->args,
					   .nargs = s->nargs,
					   .env = s->env,
					   .nr_env = s->nr_env,
					   .workdir = s->cwd,
					   .user = user,
					   .groups = s->gids,
					   .ngroups = s->ngids,
					   .has_groups = s->has_gids,
					   .rlimits = s->rlimits,
					   .nrlimits = s->nrlimits,
					   .has_rlimits = s->has_rlimits,
					   .caps = s->has_caps ? s->caps : NULL,
					   .container_init = init };

	if (catch_all() < 0) {
		gantry_error_errno(&err, "signals");
		status = 255;
	} else if (sandbox_exec(id, &po, &io, NULL, &res, &err) < 0) {
		status = 255;
	} else {
		if (res.error)
			gantry_error(&err, 0, "%s", res.message ? res.message : "cannot run it");
		status = agent_result_status(&res);
		agent_result_free(&res);
	}
	/* It never ran: start says why, and so does this process. */
	if (err) {
		if (start_fd >= 0)
			dprintf(start_fd, "error: %s\n", gantry_error_str(err));
		oci_fail("the process: %s", gantry_error_str(err));
		gantry_error_free(&err);
	}
	close_fd(&start_fd);
	return status;
}

pid_t oci_exec_spawn(const char *id, const struct oci_spec *s, int slave)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid != 0)
		return pid;
	if (slave >= 0 && console_take(slave) < 0) {
		oci_fail("exec: the terminal: %s", strerror(errno));
		_exit(255);
	}
	_exit(oci_run_process(id, s, -1, false));
}

/* --- the holder ------------------------------------------------------- */

/* Join the network namespace at path (config.json's): 0, or -1 with err.
 * O_NONBLOCK: a FIFO there would block the open, and with it the create. */
static int join_netns(const char *path, gantry_error_t *err)
{
	cleanup_close int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct statfs fs;
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0 || fstatfs(fd, &fs) < 0)
		return gantry_error_errno(err, "the network namespace %s", path);
	if (!S_ISREG(st.st_mode) || fs.f_type != NSFS_MAGIC)
		return gantry_error(err, 0, "the network namespace %s: not a namespace file", path);
	if (setns(fd, CLONE_NEWNET) < 0)
		return gantry_error_errno(err, "the network namespace %s", path);
	return 0;
}

/* Wait for `start` on ls (or a signal, which ends the container before
 * it ran: 128+n): 0 with *conn the start's connection, answered once the
 * process runs; "none" when there is no process (then the container
 * ends: 255). */
static int wait_start(int ls, bool have_process, int *conn)
{
	for (;;) {
		struct pollfd pf[2] = { { .fd = ls, .events = POLLIN },
					{ .fd = sig_pipe[0], .events = POLLIN } };
		struct timeval tv = { .tv_sec = HOLDER_ANSWER_S };
		unsigned char sig;
		char line[16];
		ssize_t n;
		int c;

		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 255;
		}
		if ((pf[1].revents & POLLIN) && read(sig_pipe[0], &sig, 1) == 1) {
			if (sig == SIGWINCH || sig == SIGURG || sig == SIGCONT)
				continue;
			return 128 + sig;
		}
		if (!(pf[0].revents & POLLIN))
			continue;
		c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		n = read(c, line, sizeof(line) - 1);
		if (n <= 0 || strncmp(line, "start\n", 6) != 0) {
			close(c);
			continue;
		}
		if (!have_process) {
			(void)!write(c, "none\n", 5);
			close(c);
			return 255;
		}
		*conn = c;
		return 0;
	}
}

/* The holder: boot the sandbox, say so on ready_fd ("ok\n" or the
 * error), wait for start, run the process, power off, exit with its
 * status. */
static __attribute__((noreturn)) void holder(const struct oci_container *c,
					      const struct sandbox_opts *o, int slave, int ready_fd)
{
	char sock[128];
	gantry_error_t err = NULL;
	int ls = -1, status, dfd, conn = -1;

	if (slave >= 0 && console_take(slave) < 0) {
		dprintf(ready_fd, "error: the terminal: %s\n", strerror(errno));
		_exit(1);
	}
	/* The pod's network namespace: the VM's network worker, which the
	 * sandbox's supervisor starts from here, makes its connections there,
	 * through what podman or a CNI plugin set up. */
	if (c->spec.netns_path && join_netns(c->spec.netns_path, &err) < 0) {
		dprintf(ready_fd, "error: %s\n", gantry_error_str(err));
		_exit(1);
	}
	if (catch_all() < 0 || sandbox_create(o, NULL, &err) < 0) {
		if (err == NULL)
			gantry_error_errno(&err, "pipe");
		dprintf(ready_fd, "error: %s\n", gantry_error_str(err));
		_exit(1);
	}
	/* Through the directory's fd: sun_path holds only 108 bytes. */
	dfd = open(c->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	snprintf(sock, sizeof(sock), "/proc/self/fd/%d/%s", dfd, OCI_HOLDER_SOCK);
	if ((ls = unix_listen(sock, 4, &err)) < 0) {
		dprintf(ready_fd, "error: %s\n", gantry_error_str(err));
		sandbox_delete(c->id, true, NULL);
		_exit(1);
	}
	(void)!write(ready_fd, "ok\n", 3);
	close(ready_fd);
	status = wait_start(ls, c->spec.nargs > 0, &conn);
	close(ls);
	unlinkat(dfd, OCI_HOLDER_SOCK, 0);
	close(dfd);
	if (status == 0)
		status = oci_run_process(c->id, &c->spec, conn, true);
	sandbox_stop(c->id, NULL);
	_exit(status);
}

int oci_holder_spawn(const struct oci_container *c, const struct sandbox_opts *o, int slave,
		     pid_t *out, gantry_error_t *err)
{
	char buf[4096];
	size_t got = 0;
	ssize_t n;
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return gantry_error_errno(err, "pipe");
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return gantry_error_errno(err, "fork");
	}
	if (pid == 0) {
		close(p[0]);
		holder(c, o, slave, p[1]);
	}
	close(p[1]);
	while (got < sizeof(buf) - 1 && (n = read(p[0], buf + got, sizeof(buf) - 1 - got)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		got += (size_t)n;
		if (memchr(buf, '\n', got))
			break;
	}
	close(p[0]);
	buf[got] = '\0';
	if (strncmp(buf, "ok\n", 3) == 0) {
		*out = pid;
		return 0;
	}
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	buf[strcspn(buf, "\n")] = '\0';
	return gantry_error(err, 0, "%s",
			    strncmp(buf, "error: ", 7) == 0 ? buf + 7 : "the container's holder died");
}

int oci_holder_start(const char *dir, bool *none, char **why)
{
	struct timeval tv = { .tv_sec = HOLDER_STARTED_S };
	cleanup_close int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC), fd = -1;
	char line[512] = "";

	if (dfd < 0)
		return -1;
	fd = unix_connect_at(dfd, OCI_HOLDER_SOCK, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	*none = false;
	*why = NULL;
	if (write_full(fd, "start\n", 6) < 0 || read(fd, line, sizeof(line) - 1) <= 0) {
		errno = ETIMEDOUT;
		return -1;
	}
	line[strcspn(line, "\n")] = '\0';
	*none = strcmp(line, "none") == 0;
	if (strcmp(line, "ok") != 0 && !*none) {
		*why = xstrdup(strncmp(line, "error: ", 7) == 0 ? line + 7 : "no answer");
		errno = EPROTO;
		return -1;
	}
	return 0;
}
