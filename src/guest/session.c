/* One EXEC: a crun container on the shared root, its stdio relayed over its
 * own vsock stream, its exit reported on the control connection.
 *
 * The container is started with `crun run --detach`, so crun exits once the
 * process runs and the process becomes our child (PID 1, or a subreaper in
 * test mode): its wait status, and so "exited 3" versus "killed by signal 9",
 * comes from the kernel, not from crun's 128+N. Pipes (stdout and stderr
 * apart) or, with a tty, the pty master crun hands over --console-socket.
 *
 * Backpressure: each direction holds at most one frame. Output is read from
 * a pipe only when the previous frame has gone out on the stream; the stream
 * is read only when the previous STDIN bytes have gone into the pipe. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "guest/guest.h"

#define SESSION_LOG_MAX 2048 /* bytes of crun's log quoted in an ERROR */

struct session {
	uint32_t id;
	bool tty;
	pid_t crun;  /* `crun run -d` while it runs */
	pid_t pid;   /* the container's process, once crun said */
	bool exited; /* and status holds its wait status */
	int status;
	uint32_t pending_signal;
	uint32_t rows, cols;
	char bundle[GUEST_PATH_MAX];
	char name[32];

	int stream; /* -1 once the host side is gone */
	struct proto_decoder *dec;
	int console; /* tty: listening socket crun sends the pty master to */
	int master;  /* tty: the pty master, which is also in_w and out_r */
	int in_w;    /* container stdin; -1 once closed */
	int out_r, err_r;
	bool in_eof; /* close in_w once in_buf is written */
	uint8_t in_buf[PROTO_MAX_DATA];
	size_t in_len, in_off;
	uint8_t out_buf[PROTO_HDR_SIZE + PROTO_MAX_DATA];
	size_t out_len, out_off;
	bool next_err; /* read stderr first next time, for fairness */
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static struct session *session_find(struct guest *g, uint32_t id)
{
	for (size_t i = 0; i < GUEST_MAX_SESSIONS; i++)
		if (g->sessions[i] && g->sessions[i]->id == id)
			return g->sessions[i];
	return NULL;
}

static void set_nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void rm_bundle(struct session *s)
{
	static const char *const files[] = { "config.json", "process.json", "pid", "crun.log",
					     "console.sock" };
	char path[GUEST_PATH_MAX + 32];

	if (s->bundle[0] == '\0')
		return;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		guest_pathf(path, sizeof(path), "%s/%s", s->bundle, files[i]);
		unlink(path);
	}
	rmdir(s->bundle);
}

static void session_free(struct guest *g, struct session *s)
{
	for (size_t i = 0; i < GUEST_MAX_SESSIONS; i++)
		if (g->sessions[i] == s)
			g->sessions[i] = NULL;
	if (s->master >= 0) {
		/* in_w and out_r alias the master in tty mode. */
		if (s->in_w == s->master)
			s->in_w = -1;
		if (s->out_r == s->master)
			s->out_r = -1;
	}
	close_fd(&s->master);
	close_fd(&s->in_w);
	close_fd(&s->out_r);
	close_fd(&s->err_r);
	close_fd(&s->console);
	close_fd(&s->stream);
	rm_bundle(s);
	free(s->dec);
	free(s);
}

/* --- starting --------------------------------------------------------------- */

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

static int start_crun(struct guest *g, struct session *s, char **why)
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

static void pump_stdin(struct session *s);
static void take_frames(struct session *s);
static void stream_gone(struct session *s);

void session_exec(struct guest *g, struct proto_exec *e)
{
	struct session *s = NULL;
	struct proto_msg hello = { .type = PROTO_STREAM };
	char *why = NULL, root[32];
	size_t slot;
	int code;

	guest_debug(g, "session %u: exec %s", e->id, e->argv[0]);
	if (session_find(g, e->id)) {
		guest_send_error(g, e->id, PROTO_ERR_RUNTIME, "session %u already exists", e->id);
		return;
	}
	for (slot = 0; slot < GUEST_MAX_SESSIONS && g->sessions[slot]; slot++)
		;
	if (slot == GUEST_MAX_SESSIONS) {
		guest_send_error(g, e->id, PROTO_ERR_RUNTIME, "too many sessions (at most %d)",
				 GUEST_MAX_SESSIONS);
		return;
	}
	if (g->rootfs_error) {
		guest_send_error(g, e->id, PROTO_ERR_RUNTIME, "container root: %s",
				 g->rootfs_error);
		return;
	}
	if (g->cfg.persist && g->container <= 0) {
		/* It started (else rootfs_error says why) and has died since. */
		guest_send_error(g, e->id, PROTO_ERR_RUNTIME,
				 "the sandbox's container is gone; stop and resume it");
		return;
	}
	/* Look the command up as the container sees its files: in a sandbox
	 * that is its long-lived container's root and mounts (a file it made
	 * on a tmpfs of its own included), through /proc/PID/root. */
	if (g->cfg.persist)
		snprintf(root, sizeof(root), "/proc/%d/root", (int)g->container);
	code = rootfs_find_command(g->cfg.persist ? root : g->cfg.rootfs, e->argv[0], e->env,
				   e->cwd, &why);
	if (code) {
		guest_send_error(g, e->id, (uint32_t)code, "%s", why ? why : "cannot run");
		free(why);
		return;
	}

	s = calloc(1, sizeof(*s));
	if (s == NULL || (s->dec = malloc(sizeof(*s->dec))) == NULL) {
		free(s);
		guest_send_error(g, e->id, PROTO_ERR_RUNTIME, "out of memory");
		return;
	}
	proto_decoder_init(s->dec);
	s->id = e->id;
	s->tty = e->flags & PROTO_EXEC_TTY;
	s->rows = e->rows;
	s->cols = e->cols;
	s->stream = s->console = s->master = s->in_w = s->out_r = s->err_r = -1;
	snprintf(s->name, sizeof(s->name), "gantry-%u", e->id);
	g->sessions[slot] = s;

	if (guest_pathf(s->bundle, sizeof(s->bundle), "%s/bundles/%u", g->cfg.state_dir, e->id) <
		    0 ||
	    mkdir(s->bundle, 0700) < 0) {
		if (asprintf(&why, "mkdir %s: %s", s->bundle, strerror(errno)) < 0)
			why = NULL;
		s->bundle[0] = '\0';
		goto fail;
	}
	if (g->cfg.persist) {
		char process[GUEST_PATH_MAX + 16];

		guest_pathf(process, sizeof(process), "%s/process.json", s->bundle);
		if (spec_write_process(&g->cfg, process, e, &why) < 0)
			goto fail;
	} else if (spec_write(&g->cfg, s->bundle, e, false, &why) < 0) {
		goto fail;
	}
	/* The stream first, so no output can be lost to a missing peer. */
	s->stream = guest_dial(&g->cfg, PROTO_STDIO_PORT);
	if (s->stream < 0) {
		if (asprintf(&why, "connect to the host's stdio port %d: %s", PROTO_STDIO_PORT,
			     strerror(errno)) < 0)
			why = NULL;
		goto fail;
	}
	hello.u.stream.id = s->id;
	if (proto_write_msg(s->stream, &hello) < 0) {
		if (asprintf(&why, "stdio stream: %s", strerror(errno)) < 0)
			why = NULL;
		goto fail;
	}
	set_nonblock(s->stream);
	if (start_crun(g, s, &why) < 0)
		goto fail;
	guest_debug(g, "session %u: crun pid %d", s->id, (int)s->crun);
	return;
fail:
	guest_send_error(g, e->id, PROTO_ERR_RUNTIME, "%s", why ? why : "cannot start");
	free(why);
	session_free(g, s);
}

/* --- crun finished, the container runs ------------------------------------------ */

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

/* crun's last log line, which says why it failed. */
static char *crun_reason(const struct session *s)
{
	char path[GUEST_PATH_MAX + 16];
	char *log, *line, *end;

	guest_pathf(path, sizeof(path), "%s/crun.log", s->bundle);
	log = read_small(path, SESSION_LOG_MAX);
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

/* The pty master arrives as SCM_RIGHTS on the console socket. */
static int receive_master(struct session *s)
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

static void apply_winsize(struct session *s)
{
	struct winsize ws = { .ws_row = (unsigned short)s->rows,
			      .ws_col = (unsigned short)s->cols };

	if (s->master >= 0 && s->rows && s->cols)
		ioctl(s->master, TIOCSWINSZ, &ws);
}

static void crun_exited(struct guest *g, struct session *s, int status)
{
	char path[GUEST_PATH_MAX + 8];
	struct proto_msg m = { .type = PROTO_STARTED };
	char *pid, *why;
	long v;

	s->crun = 0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		why = crun_reason(s);
		guest_send_error(g, s->id, PROTO_ERR_RUNTIME, "crun: %s",
				 why && *why ? why : "failed to start the container");
		free(why);
		goto fail;
	}
	guest_pathf(path, sizeof(path), "%s/pid", s->bundle);
	pid = read_small(path, 32);
	v = pid ? strtol(pid, NULL, 10) : 0;
	free(pid);
	if (v <= 0) {
		guest_send_error(g, s->id, PROTO_ERR_RUNTIME, "crun wrote no pid file");
		goto fail;
	}
	s->pid = (pid_t)v;
	if (s->tty) {
		s->master = receive_master(s);
		close_fd(&s->console);
		if (s->master < 0) {
			guest_send_error(g, s->id, PROTO_ERR_RUNTIME,
					 "no terminal from crun's console socket: %s",
					 strerror(errno));
			kill(s->pid, SIGKILL);
			goto fail;
		}
		set_nonblock(s->master);
		s->in_w = s->out_r = s->master;
		apply_winsize(s);
	}
	if (guest_take_orphan(g, s->pid, &s->status))
		s->exited = true;
	if (s->pending_signal && !s->exited)
		kill(s->pid, (int)s->pending_signal);
	m.u.started.id = s->id;
	m.u.started.pid = (uint32_t)s->pid;
	guest_send(g, &m);
	if (s->tty) {
		pump_stdin(s);
		take_frames(s);
	}
	guest_debug(g, "session %u: pid %d", s->id, (int)s->pid);
	return;
fail:
	/* No EXIT follows an ERROR: the session is over for the host. */
	if (s->pid > 0 && !s->exited)
		kill(s->pid, SIGKILL);
	close_fd(&s->out_r);
	close_fd(&s->err_r);
	stream_gone(s);
	s->pid = -1;
	s->exited = true;
	s->status = -1;
}

bool session_reaped(struct guest *g, pid_t pid, int status)
{
	for (size_t i = 0; i < GUEST_MAX_SESSIONS; i++) {
		struct session *s = g->sessions[i];

		if (s == NULL)
			continue;
		if (s->crun == pid) {
			crun_exited(g, s, status);
			return true;
		}
		if (s->pid == pid) {
			s->exited = true;
			s->status = status;
			return true;
		}
	}
	return false;
}

void session_signal(struct guest *g, uint32_t id, uint32_t signo)
{
	struct session *s = session_find(g, id);

	if (s == NULL || s->exited)
		return;
	if (s->pid > 0)
		kill(s->pid, (int)signo);
	else
		s->pending_signal = signo;
}

void session_resize(struct guest *g, uint32_t id, uint32_t rows, uint32_t cols)
{
	struct session *s = session_find(g, id);

	if (s == NULL || rows > 0xffff || cols > 0xffff)
		return;
	s->rows = rows;
	s->cols = cols;
	apply_winsize(s);
}

/* --- relaying ---------------------------------------------------------------------- */

static void close_stdin(struct session *s);

static void stream_gone(struct session *s)
{
	close_fd(&s->stream);
	s->out_len = s->out_off = 0;
	/* Nobody will write stdin any more. */
	s->in_len = s->in_off = 0;
	s->in_eof = true;
	if (s->in_w >= 0)
		close_stdin(s);
}

static void queue_frame(struct session *s, uint16_t type, const void *body, size_t len)
{
	struct proto_writer w;

	proto_writer_init(&w, s->out_buf + s->out_len, sizeof(s->out_buf) - s->out_len);
	proto_put_bytes(&w, body, len);
	if (proto_writer_finish(&w, type) > 0)
		s->out_len += w.len;
}

static void send_eof_marker(struct session *s, uint32_t fd)
{
	uint8_t body[4] = { (uint8_t)fd, 0, 0, 0 };

	if (s->stream >= 0)
		queue_frame(s, PROTO_EOF, body, sizeof(body));
}

static void flush_out(struct session *s)
{
	int sent = s->stream < 0 ? 1
				 : proto_send_pending(s->stream, s->out_buf, s->out_len, &s->out_off);

	if (sent < 0)
		stream_gone(s);
	else if (sent > 0)
		s->out_len = s->out_off = 0;
}

static void close_output(struct session *s, int *fd, uint32_t which)
{
	if (s->tty) {
		/* The master is stdin too; closing it ends the terminal. */
		if (s->in_w == s->master)
			s->in_w = -1;
		s->out_r = -1;
		close_fd(&s->master);
	} else {
		close_fd(fd);
	}
	send_eof_marker(s, which);
}

/* Read one frame's worth from an output; only when nothing is queued. */
static void pump_output(struct session *s, int *fd, uint16_t type, uint32_t which)
{
	ssize_t n;

	if (*fd < 0 || s->out_len)
		return;
	n = read(*fd, s->out_buf + PROTO_HDR_SIZE, PROTO_MAX_DATA);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) { /* EOF, or EIO from a master whose terminal closed */
		close_output(s, fd, which);
		return;
	}
	if (s->stream < 0)
		return; /* the host is gone: drain and drop */
	{
		struct proto_writer w;

		proto_writer_init(&w, s->out_buf, sizeof(s->out_buf));
		w.len += (size_t)n;
		if (proto_writer_finish(&w, type) > 0)
			s->out_len = w.len;
	}
	flush_out(s);
}

static void close_stdin(struct session *s)
{
	if (s->tty) {
		/* A terminal has no EOF of its own: send the EOF character. */
		if (s->master >= 0) {
			struct termios t;
			char c = 4;

			if (tcgetattr(s->master, &t) == 0)
				c = (char)t.c_cc[VEOF];
			(void)!write(s->master, &c, 1);
		}
		s->in_w = -1;
		return;
	}
	close_fd(&s->in_w);
}

static void pump_stdin(struct session *s)
{
	/* A terminal's master comes from crun once the container runs: keep
	 * what the host typed until then. */
	if (s->in_w < 0 && s->tty && s->crun > 0)
		return;
	while (s->in_off < s->in_len && s->in_w >= 0) {
		ssize_t n = write(s->in_w, s->in_buf + s->in_off, s->in_len - s->in_off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0) { /* EPIPE: the process closed its stdin */
			close_stdin(s);
			break;
		}
		s->in_off += (size_t)n;
	}
	s->in_len = s->in_off = 0;
	if (s->in_eof && s->in_w >= 0)
		close_stdin(s);
}

/* Frames from the host, as long as stdin can take them. */
static void take_frames(struct session *s)
{
	struct proto_msg m;
	const char *why;
	int r;

	while (s->stream >= 0 && s->in_len == 0) {
		r = proto_decoder_next(s->dec, &m, &why);
		if (r == 0)
			return;
		if (r < 0 || (m.type != PROTO_STDIN && m.type != PROTO_EOF)) {
			guest_log("session %u: bad stdio frame: %s", s->id,
				  r < 0 ? why : proto_type_name(m.type));
			if (r > 0)
				proto_msg_free(&m);
			stream_gone(s);
			return;
		}
		if (m.type == PROTO_STDIN) {
			if ((s->in_w >= 0 || (s->tty && s->crun > 0)) && !s->in_eof) {
				memcpy(s->in_buf, m.u.data.data, m.u.data.len);
				s->in_len = m.u.data.len;
				s->in_off = 0;
				pump_stdin(s);
			}
		} else if (m.u.eof.fd == 0) {
			s->in_eof = true;
			pump_stdin(s);
		} else if (!s->tty) {
			/* The host stopped reading this output: the writer gets EPIPE. */
			close_fd(m.u.eof.fd == 1 ? &s->out_r : &s->err_r);
		}
		proto_msg_free(&m);
	}
}

static void read_stream(struct session *s)
{
	ssize_t n = proto_decoder_fill(s->dec, s->stream);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		stream_gone(s);
		return;
	}
	take_frames(s);
}

enum { PFD_STREAM, PFD_IN, PFD_OUT, PFD_ERR, PFD_CONSOLE, PFD_N };

size_t session_pollfds(struct session *s, struct pollfd *fds, size_t room)
{
	if (room < PFD_N)
		return 0;
	for (size_t i = 0; i < PFD_N; i++)
		fds[i] = (struct pollfd){ .fd = -1 };
	if (s->stream >= 0) {
		fds[PFD_STREAM].fd = s->stream;
		fds[PFD_STREAM].events = (s->in_len == 0 ? POLLIN : 0) | (s->out_len ? POLLOUT : 0);
	}
	if (s->in_w >= 0 && s->in_len) {
		fds[PFD_IN].fd = s->in_w;
		fds[PFD_IN].events = POLLOUT;
	}
	/* Until crun is done, what the pipes hold may be crun's own errors
	 * (it hands its stdio to the container): ERROR reports those. */
	if (s->pid <= 0)
		return PFD_N;
	if (s->out_r >= 0 && s->out_len == 0) {
		fds[PFD_OUT].fd = s->out_r;
		fds[PFD_OUT].events = POLLIN;
	}
	if (s->err_r >= 0 && s->out_len == 0) {
		fds[PFD_ERR].fd = s->err_r;
		fds[PFD_ERR].events = POLLIN;
	}
	return PFD_N;
}

void session_events(struct guest *g, struct session *s, const struct pollfd *fds, size_t n)
{
	(void)g;
	if (n < PFD_N)
		return;
	if (fds[PFD_STREAM].revents & POLLOUT)
		flush_out(s);
	if (fds[PFD_STREAM].revents & (POLLIN | POLLHUP | POLLERR) && s->stream >= 0)
		read_stream(s);
	if (fds[PFD_IN].revents) {
		pump_stdin(s);
		take_frames(s);
	}
	/* Alternate which output goes first so neither starves the other. */
	if (s->next_err) {
		if (fds[PFD_ERR].revents)
			pump_output(s, &s->err_r, PROTO_STDERR, 2);
		if (fds[PFD_OUT].revents)
			pump_output(s, &s->out_r, PROTO_STDOUT, 1);
	} else {
		if (fds[PFD_OUT].revents)
			pump_output(s, &s->out_r, PROTO_STDOUT, 1);
		if (fds[PFD_ERR].revents)
			pump_output(s, &s->err_r, PROTO_STDERR, 2);
	}
	s->next_err = !s->next_err;
}

/* --- ending ---------------------------------------------------------------------------- */

static void report_exit(struct guest *g, struct session *s)
{
	struct proto_msg m = { .type = PROTO_EXIT };

	if (s->status < 0)
		return; /* it never ran, and ERROR said so */
	m.u.exit.id = s->id;
	if (WIFSIGNALED(s->status)) {
		m.u.exit.signaled = true;
		m.u.exit.code = (uint32_t)WTERMSIG(s->status);
	} else {
		m.u.exit.code = (uint32_t)WEXITSTATUS(s->status);
	}
	guest_send(g, &m);
	guest_debug(g, "session %u: exit %s %u", s->id, m.u.exit.signaled ? "signal" : "code",
		    m.u.exit.code);
}

/* crun's state for the container (/run/crun/<name>) is removed in the
 * background; nobody waits for it. */
static void crun_delete(struct guest *g, struct session *s)
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

bool session_reap_finished(struct guest *g)
{
	bool live = false;

	for (size_t i = 0; i < GUEST_MAX_SESSIONS; i++) {
		struct session *s = g->sessions[i];

		if (s == NULL)
			continue;
		/* Done: the process is gone, both outputs hit EOF (the pid
		 * namespace died with its init, so every writer is gone) and
		 * the last frames left. */
		if (!s->exited || s->crun > 0 || s->out_r >= 0 || s->err_r >= 0 ||
		    (s->stream >= 0 && s->out_len)) {
			live = true;
			continue;
		}
		report_exit(g, s);
		if (s->pid > 0 && !g->cfg.persist)
			crun_delete(g, s);
		session_free(g, s);
	}
	return live;
}

void session_kill_all(struct guest *g)
{
	for (size_t i = 0; i < GUEST_MAX_SESSIONS; i++) {
		struct session *s = g->sessions[i];

		if (s && s->pid > 0 && !s->exited)
			kill(s->pid, SIGKILL);
	}
	/* Its init's death takes every process in its namespace along. */
	if (g->container > 0)
		kill(g->container, SIGKILL);
}

/* --- the long-lived container ------------------------------------------------------------ */

static void container_failed(struct guest *g, const char *fmt, const char *arg)
{
	free(g->rootfs_error);
	if (asprintf(&g->rootfs_error, fmt, arg) < 0)
		g->rootfs_error = NULL;
	if (g->rootfs_error == NULL)
		g->rootfs_error = strdup("cannot start the container");
	guest_log("container: %s", g->rootfs_error ? g->rootfs_error : "?");
}

void session_container_start(struct guest *g)
{
	static char *pause_argv[] = { GUEST_PAUSE_PATH, GUEST_PAUSE_ARG, NULL };
	static char *no_env[] = { NULL };
	struct proto_exec e = { .argv = pause_argv, .argc = 2, .env = no_env, .cwd = "/" };
	struct session s = { .name = GUEST_CONTAINER };
	struct crun_cmd c;
	const char **argv = c.argv;
	char *why = NULL, *pid;
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
	pid = read_small(c.pidfile, 32);
	g->container = pid ? (pid_t)strtol(pid, NULL, 10) : 0;
	free(pid);
	if (g->container <= 0)
		return container_failed(g, "%s", "crun wrote no pid file for the container");
	guest_debug(g, "container: init pid %d", (int)g->container);
}
