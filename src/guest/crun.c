/* Running crun for gantry-init: its environment and command lines, the
 * stdio a container starts with (pipes, or a console socket for a tty), its
 * log and pid file read back, deleting what a container leaves behind, and
 * the sandbox's one long-lived container (gantry.persist=1).
 *
 * crun is started with --detach, so it exits once the process runs and the
 * process becomes our child (PID 1, or a subreaper in test mode): its wait
 * status, and so "exited 3" versus "killed by signal 9", comes from the
 * kernel, not from crun's 128+N. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest/session.h"

#define CRUN_LOG_MAX 2048 /* bytes of crun's log quoted in an ERROR */

/* crun's environment (the container's comes from the spec). crun re-execs
 * itself from a sealed copy unless it runs from a read-only filesystem and
 * this variable says it may trust that: the system root is read-only EROFS,
 * so the copy (a second dynamic load of crun, per exec) buys nothing. */
static char *const crun_env[] = {
	"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
	"_LIBCONTAINER_CLONED_BINARY=1",
	NULL,
};

/* The child between fork and exec: the parent's blocked SIGCHLD and ignored
 * SIGPIPE must not reach crun or the container. */
static void child_exec(const char *path, char *const argv[], int in, int out, int err)
{
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		_exit(125);
	execve(path, argv, crun_env);
	_exit(127);
}

static pid_t spawn(const char *path, char *const argv[], int in, int out, int err)
{
	pid_t pid = fork();

	if (pid == 0)
		child_exec(path, argv, in, out, err);
	return pid;
}

/* A listening Unix socket at <bundle>/console.sock for --console-socket. */
static int console_listen(struct session *s, char **why)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (guest_pathf(sa.sun_path, sizeof(sa.sun_path), "%s/console.sock", s->bundle) < 0) {
		*why = strdup("console socket path too long");
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 1) < 0) {
		if (asprintf(why, "console socket: %s", strerror(errno)) < 0)
			*why = NULL;
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Pipes for the container's stdio; our ends non-blocking, theirs not. */
static int make_pipes(struct session *s, int child[3], char **why)
{
	int in[2], out[2], err[2];

	if (pipe2(in, O_CLOEXEC) < 0)
		goto fail;
	if (pipe2(out, O_CLOEXEC) < 0) {
		close(in[0]);
		close(in[1]);
		goto fail;
	}
	if (pipe2(err, O_CLOEXEC) < 0) {
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		goto fail;
	}
	s->in_w = in[1];
	s->out_r = out[0];
	s->err_r = err[0];
	set_nonblock(s->in_w);
	set_nonblock(s->out_r);
	set_nonblock(s->err_r);
	child[0] = in[0];
	child[1] = out[1];
	child[2] = err[1];
	return 0;
fail:
	if (asprintf(why, "pipe: %s", strerror(errno)) < 0)
		*why = NULL;
	return -1;
}

/* A crun command line being built, its global options first. */
struct crun_cmd {
	const char *argv[24];
	size_t n;
	char log[GUEST_PATH_MAX + 16], root[GUEST_PATH_MAX + 8], pidfile[GUEST_PATH_MAX + 8];
};

/* "crun [--log=BUNDLE/crun.log] [--root=ROOT]", and the pid file's path in
 * the bundle; bundle NULL: neither log nor pid file. */
static void crun_cmd_init(struct crun_cmd *c, const struct guest *g, const char *bundle)
{
	c->n = 0;
	c->argv[c->n++] = "crun";
	if (bundle) {
		guest_pathf(c->pidfile, sizeof(c->pidfile), "%s/pid", bundle);
		guest_pathf(c->log, sizeof(c->log), "--log=%s/crun.log", bundle);
		c->argv[c->n++] = c->log;
	}
	if (g->cfg.crun_root) {
		guest_pathf(c->root, sizeof(c->root), "--root=%s", g->cfg.crun_root);
		c->argv[c->n++] = c->root;
	}
}

int crun_start(const struct guest *g, struct session *s, char **why)
{
	char sock[GUEST_PATH_MAX + 32], process[GUEST_PATH_MAX + 24];
	struct crun_cmd c;
	const char **argv = c.argv;
	int child[3] = { -1, -1, -1 }, devnull = -1;
	size_t n;

	crun_cmd_init(&c, g, s->bundle);
	n = c.n;
	/* The VM is the resource boundary: no cgroups of crun's own. */
	argv[n++] = "--cgroup-manager=disabled";
	if (g->cfg.persist) {
		/* A process in the sandbox's one long-lived container. */
		guest_pathf(process, sizeof(process), "--process=%s/process.json", s->bundle);
		argv[n++] = "exec";
		argv[n++] = "--detach";
		argv[n++] = process;
	} else {
		/* One container per session. */
		argv[n++] = "run";
		argv[n++] = "--detach";
		argv[n++] = "--no-new-keyring";
		argv[n++] = "--bundle";
		argv[n++] = s->bundle;
	}
	argv[n++] = "--pid-file";
	argv[n++] = c.pidfile;
	if (s->tty) {
		guest_pathf(sock, sizeof(sock), "--console-socket=%s/console.sock", s->bundle);
		argv[n++] = sock;
	}
	argv[n++] = g->cfg.persist ? GUEST_CONTAINER : s->name;
	argv[n] = NULL;

	if (s->tty) {
		s->console = console_listen(s, why);
		if (s->console < 0)
			return -1;
		devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (devnull < 0) {
			if (asprintf(why, "open /dev/null: %s", strerror(errno)) < 0)
				*why = NULL;
			return -1;
		}
		child[0] = child[1] = child[2] = devnull;
	} else if (make_pipes(s, child, why) < 0) {
		return -1;
	}
	s->crun = spawn(g->cfg.crun, (char *const *)argv, child[0], child[1], child[2]);
	if (s->tty) {
		close(devnull);
	} else {
		close(child[0]);
		close(child[1]);
		close(child[2]);
	}
	if (s->crun < 0) {
		if (asprintf(why, "fork: %s", strerror(errno)) < 0)
			*why = NULL;
		return -1;
	}
	return 0;
}

static char *read_small(const char *path, size_t max)
{
	char *buf = malloc(max + 1);
	ssize_t n;
	int fd;

	if (buf == NULL)
		return NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(buf);
		return NULL;
	}
	n = read(fd, buf, max);
	close(fd);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

char *crun_reason(const struct session *s)
{
	char path[GUEST_PATH_MAX + 16];
	char *log, *line, *end;

	guest_pathf(path, sizeof(path), "%s/crun.log", s->bundle);
	log = read_small(path, CRUN_LOG_MAX);
	if (log == NULL)
		return NULL;
	end = log + strlen(log);
	while (end > log && (end[-1] == '\n' || end[-1] == ' '))
		*--end = '\0';
	line = strrchr(log, '\n');
	line = strdup(line ? line + 1 : log);
	free(log);
	return line;
}

long crun_pid(const char *bundle)
{
	char path[GUEST_PATH_MAX + 8];
	char *pid;
	long v;

	guest_pathf(path, sizeof(path), "%s/pid", bundle);
	pid = read_small(path, 32);
	v = pid ? strtol(pid, NULL, 10) : 0;
	free(pid);
	return v;
}

int crun_receive_master(struct session *s)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	char byte[256];
	struct iovec iov = { .iov_base = byte, .iov_len = sizeof(byte) };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = ctl.buf,
			      .msg_controllen = sizeof(ctl.buf) };
	struct cmsghdr *c;
	int conn, fd = -1;

	conn = accept4(s->console, NULL, NULL, SOCK_CLOEXEC);
	if (conn < 0)
		return -1;
	if (recvmsg(conn, &msg, MSG_CMSG_CLOEXEC) >= 0) {
		c = CMSG_FIRSTHDR(&msg);
		if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
	}
	close(conn);
	if (fd < 0)
		errno = EPROTO;
	return fd;
}

void crun_delete(const struct guest *g, const struct session *s)
{
	struct crun_cmd c;
	const char **argv = c.argv;
	size_t n;
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (devnull < 0)
		return;
	crun_cmd_init(&c, g, NULL);
	n = c.n;
	argv[n++] = "delete";
	argv[n++] = "--force";
	argv[n++] = s->name;
	argv[n] = NULL;
	spawn(g->cfg.crun, (char *const *)argv, devnull, devnull, devnull);
	close(devnull);
}

static void container_failed(struct guest *g, const char *fmt, const char *arg)
{
	free(g->rootfs_error);
	if (asprintf(&g->rootfs_error, fmt, arg) < 0)
		g->rootfs_error = NULL;
	if (g->rootfs_error == NULL)
		g->rootfs_error = strdup("cannot start the container");
	guest_log("container: %s", g->rootfs_error ? g->rootfs_error : "?");
}

void crun_container_start(struct guest *g)
{
	static char *pause_argv[] = { GUEST_PAUSE_PATH, GUEST_PAUSE_ARG, NULL };
	static char *no_env[] = { NULL };
	struct proto_exec e = { .argv = pause_argv, .argc = 2, .env = no_env, .cwd = "/" };
	struct session s = { .name = GUEST_CONTAINER };
	struct crun_cmd c;
	const char **argv = c.argv;
	char *why = NULL;
	size_t n;
	int devnull, status = 0;
	pid_t crun, w;

	if (guest_pathf(s.bundle, sizeof(s.bundle), "%s/bundles/container", g->cfg.state_dir) < 0 ||
	    (mkdir(s.bundle, 0700) < 0 && errno != EEXIST))
		return container_failed(g, "mkdir %s", s.bundle);
	if (spec_write(&g->cfg, s.bundle, &e, true, &why) < 0) {
		container_failed(g, "%s", why ? why : "cannot write its spec");
		free(why);
		return;
	}
	crun_cmd_init(&c, g, s.bundle);
	n = c.n;
	argv[n++] = "--cgroup-manager=disabled";
	argv[n++] = "run";
	argv[n++] = "--detach";
	argv[n++] = "--no-new-keyring";
	argv[n++] = "--bundle";
	argv[n++] = s.bundle;
	argv[n++] = "--pid-file";
	argv[n++] = c.pidfile;
	argv[n++] = GUEST_CONTAINER;
	argv[n] = NULL;
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0)
		return container_failed(g, "open /dev/null: %s", strerror(errno));
	crun = spawn(g->cfg.crun, (char *const *)argv, devnull, devnull, devnull);
	close(devnull);
	if (crun < 0)
		return container_failed(g, "fork: %s", strerror(errno));
	/* SIGCHLD is blocked for the signalfd; a targeted wait still works. */
	while ((w = waitpid(crun, &status, 0)) < 0 && errno == EINTR)
		;
	if (w < 0)
		return container_failed(g, "wait for crun: %s", strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		why = crun_reason(&s);
		container_failed(g, "crun: %s", why && *why ? why : "cannot start the container");
		free(why);
		return;
	}
	g->container = (pid_t)crun_pid(s.bundle);
	if (g->container <= 0)
		return container_failed(g, "%s", "crun wrote no pid file for the container");
	guest_debug(g, "container: init pid %d", (int)g->container);
}
