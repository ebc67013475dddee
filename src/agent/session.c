/* Host side of the agent protocol (see session.h). Everything here is one
 * poll loop per call over our own fds: the two listeners, the control
 * connection, the session's stdio stream, the caller's stdio fds, a
 * self-pipe for forwarded signals and a cancel pipe.
 *
 * Backpressure mirrors the guest's: host stdin is read only when the last
 * STDIN frame has gone out on the stream; output frames are written to the
 * host fds before the next is read, so a slow reader here stalls the pipe in
 * the guest, never our memory. */
#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "agent/session.h"
#include "common/unixsock.h"
#include "common/util.h"

#define AGENT_BACKLOG 16
#define AGENT_PASSED  8 /* stdio streams handed over but not yet claimed */

struct agent {
	char *ctl_path, *stdio_path; /* what errors name */
	bool unix_paths;	     /* sockets to remove at the end */
	int ctl_listen, stdio_listen;
	int control;
	struct proto_decoder *dec;
	int cancel[2];
	uint32_t next_id;
	_Atomic uint32_t running;  /* the session agent_run serves, or 0 */
	pthread_mutex_t send_lock; /* control writes: agent_signal may come from any thread */
	char *kernel;
	/* Attached to a sandbox supervisor: streams arrive on the control
	 * connection as passed fds, in the order of their STREAM frames. */
	bool remote;
	int passed[AGENT_PASSED];
	size_t npassed;
};

static uint64_t deadline_of(int timeout_ms)
{
	return timeout_ms < 0 ? UINT64_MAX : now_ms() + (uint64_t)timeout_ms;
}

static int left_ms(uint64_t deadline)
{
	uint64_t now = now_ms();

	if (deadline == UINT64_MAX)
		return -1;
	return now >= deadline ? 0 : (int)MIN(deadline - now, (uint64_t)INT32_MAX);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int listen_unix(const char *path, gantry_error_t *err)
{
	return unix_listen(path, AGENT_BACKLOG, err);
}

static int listen_vsock(unsigned int port, gantry_error_t *err)
{
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK,
				  .svm_cid = VMADDR_CID_ANY,
				  .svm_port = port };
	cleanup_close int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return gantry_error_errno(err, "vsock socket (is vhost_vsock loaded?)");
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return gantry_error_errno(err, "bind vsock port %u", port);
	if (listen(fd, AGENT_BACKLOG) < 0)
		return gantry_error_errno(err, "listen on vsock port %u", port);
	return steal_fd(&fd);
}

static struct agent *agent_new(gantry_error_t *err)
{
	struct agent *a = xzalloc(sizeof(*a));

	a->ctl_listen = a->stdio_listen = a->control = -1;
	a->cancel[0] = a->cancel[1] = -1;
	pthread_mutex_init(&a->send_lock, NULL);
	a->dec = xmalloc(sizeof(*a->dec));
	proto_decoder_init(a->dec);
	if (pipe2(a->cancel, O_CLOEXEC | O_NONBLOCK) < 0) {
		gantry_error_errno(err, "pipe");
		agent_free(a);
		return NULL;
	}
	return a;
}

/* Both listeners opened (a's paths name them), or a freed. */
static int agent_listening(struct agent *a, struct agent **out)
{
	if (a->ctl_listen < 0 || a->stdio_listen < 0) {
		agent_free(a);
		return -1;
	}
	*out = a;
	return 0;
}

int agent_listen(const char *dir, struct agent **out, gantry_error_t *err)
{
	struct agent *a = agent_new(err);

	if (a == NULL)
		return -1;
	a->unix_paths = true;
	xasprintf(&a->ctl_path, "%s/%d.sock", dir, PROTO_CONTROL_PORT);
	xasprintf(&a->stdio_path, "%s/%d.sock", dir, PROTO_STDIO_PORT);
	a->ctl_listen = listen_unix(a->ctl_path, err);
	if (a->ctl_listen >= 0)
		a->stdio_listen = listen_unix(a->stdio_path, err);
	return agent_listening(a, out);
}

int agent_attach(int fd, struct agent **out, gantry_error_t *err)
{
	struct agent *a = agent_new(err);

	if (a == NULL)
		return -1;
	a->remote = true;
	a->control = fd;
	*out = a;
	return 0;
}

int agent_take_link(struct agent *a, int *control, int *stdio_listen, gantry_error_t *err)
{
	if (a->control < 0)
		return gantry_error(err, ENOTCONN, "the guest agent is not connected");
	if (proto_decoder_pending(a->dec))
		return gantry_error(err, EPROTO, "the guest sent more than HELLO unasked");
	*control = steal_fd(&a->control);
	*stdio_listen = steal_fd(&a->stdio_listen);
	return 0;
}

int agent_listen_vsock(struct agent **out, gantry_error_t *err)
{
	struct agent *a = agent_new(err);

	if (a == NULL)
		return -1;
	xasprintf(&a->ctl_path, "vsock port %d", PROTO_CONTROL_PORT);
	xasprintf(&a->stdio_path, "vsock port %d", PROTO_STDIO_PORT);
	a->ctl_listen = listen_vsock(PROTO_CONTROL_PORT, err);
	if (a->ctl_listen >= 0)
		a->stdio_listen = listen_vsock(PROTO_STDIO_PORT, err);
	return agent_listening(a, out);
}

void agent_cancel(struct agent *a)
{
	char c = 1;

	(void)!write(a->cancel[1], &c, 1);
}

void agent_free(struct agent *a)
{
	if (a == NULL)
		return;
	if (a->unix_paths && a->ctl_listen >= 0)
		unlink(a->ctl_path);
	if (a->unix_paths && a->stdio_listen >= 0)
		unlink(a->stdio_path);
	close_fd(&a->ctl_listen);
	close_fd(&a->stdio_listen);
	close_fd(&a->control);
	close_fd(&a->cancel[0]);
	close_fd(&a->cancel[1]);
	for (size_t i = 0; i < a->npassed; i++)
		close(a->passed[i]);
	free(a->ctl_path);
	free(a->stdio_path);
	free(a->kernel);
	free(a->dec);
	pthread_mutex_destroy(&a->send_lock);
	free(a);
}

static bool cancelled(struct agent *a)
{
	struct pollfd p = { .fd = a->cancel[0], .events = POLLIN };

	return poll(&p, 1, 0) > 0;
}

/* Wait for fd (or cancel); 1 ready, 0 timed out, -1 cancelled or failed. */
static int wait_fd(struct agent *a, int fd, uint64_t deadline, gantry_error_t *err)
{
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN },
				       { .fd = a->cancel[0], .events = POLLIN } };
		int r = poll(p, 2, left_ms(deadline));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return gantry_error_errno(err, "poll");
		if (p[1].revents)
			return gantry_error(err, ECANCELED, "cancelled");
		return r > 0;
	}
}

/* The next control frame, waiting until deadline. */
static int control_next(struct agent *a, struct proto_msg *m, uint64_t deadline,
			gantry_error_t *err)
{
	const char *why;
	ssize_t n;
	int r;

	for (;;) {
		r = proto_decoder_next(a->dec, m, &why);
		if (r > 0)
			return 0;
		if (r < 0)
			return gantry_error(err, EPROTO, "guest control connection: %s", why);
		r = wait_fd(a, a->control, deadline, err);
		if (r < 0)
			return -1;
		if (r == 0)
			return gantry_error(err, ETIMEDOUT, "guest control connection: timed out");
		n = proto_decoder_fill(a->dec, a->control);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return gantry_error_errno(err, "guest control connection");
		if (n == 0)
			return gantry_error(err, ECONNRESET,
					    "the guest closed the control connection");
	}
}

int agent_wait_ready(struct agent *a, int timeout_ms, struct proto_hello *hello,
		     gantry_error_t *err)
{
	uint64_t deadline = deadline_of(timeout_ms);
	struct proto_msg m;
	int r;

	if (a->control < 0) {
		for (;;) {
			r = wait_fd(a, a->ctl_listen, deadline, err);
			if (r < 0)
				return -1;
			if (r == 0)
				return gantry_error(err, ETIMEDOUT,
						    "the guest agent did not connect within %d ms",
						    timeout_ms);
			a->control = accept4(a->ctl_listen, NULL, NULL, SOCK_CLOEXEC);
			if (a->control >= 0)
				break;
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				return gantry_error_errno(err, "accept `%s`", a->ctl_path);
		}
		proto_decoder_init(a->dec);
	}
	if (control_next(a, &m, deadline, err) < 0)
		return gantry_error_prefix(err, "waiting for the guest's HELLO");
	if (m.type != PROTO_HELLO) {
		gantry_error(err, EPROTO, "the guest sent %s before HELLO",
			     proto_type_name(m.type));
		proto_msg_free(&m);
		return -1;
	}
	if (m.u.hello.version != PROTO_VERSION) {
		gantry_error(err, EPROTO, "the guest agent speaks protocol version %u, we speak %u",
			     m.u.hello.version, PROTO_VERSION);
		proto_msg_free(&m);
		return -1;
	}
	free(a->kernel);
	a->kernel = steal_pointer(&m.u.hello.kernel);
	if (hello) {
		*hello = m.u.hello;
		hello->kernel = a->kernel;
	}
	proto_msg_free(&m);

	if (control_next(a, &m, deadline, err) < 0)
		return gantry_error_prefix(err, "waiting for the guest to be ready");
	if (m.type != PROTO_READY) {
		gantry_error(err, EPROTO, "the guest sent %s before READY",
			     proto_type_name(m.type));
	} else if (m.u.ready.message && *m.u.ready.message) {
		gantry_error(err, 0, "the guest cannot run processes: %s", m.u.ready.message);
	} else {
		proto_msg_free(&m);
		return 0;
	}
	proto_msg_free(&m);
	return -1;
}

/* --- signals -------------------------------------------------------------------------- */

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH };
static int sig_pipe[2] = { -1, -1 };
static pthread_once_t sig_once = PTHREAD_ONCE_INIT;
static atomic_bool sig_taken;

static void sig_pipe_open(void)
{
	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		sig_pipe[0] = sig_pipe[1] = -1;
}

static void sig_handler(int signo)
{
	int saved = errno;
	unsigned char b = (unsigned char)signo;

	(void)!write(sig_pipe[1], &b, 1);
	errno = saved;
}

struct sig_state {
	bool on;
	struct sigaction old[ARRAY_SIZE(forwarded)];
};

static int signals_take(struct sig_state *s, gantry_error_t *err)
{
	struct sigaction sa = { .sa_handler = sig_handler, .sa_flags = SA_RESTART };
	unsigned char drain[64];

	pthread_once(&sig_once, sig_pipe_open);
	if (sig_pipe[0] < 0)
		return gantry_error(err, 0, "cannot create the signal pipe");
	if (atomic_exchange(&sig_taken, true))
		return gantry_error(err, EBUSY, "another session already forwards signals");
	while (read(sig_pipe[0], drain, sizeof(drain)) > 0)
		;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < ARRAY_SIZE(forwarded); i++)
		sigaction(forwarded[i], &sa, &s->old[i]);
	s->on = true;
	return 0;
}

static void signals_give_back(struct sig_state *s)
{
	if (!s->on)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(forwarded); i++)
		sigaction(forwarded[i], &s->old[i], NULL);
	s->on = false;
	atomic_store(&sig_taken, false);
}

/* Write all of buf to a host fd without dying of SIGPIPE: blocked on this
 * thread for the write, and a SIGPIPE it raised is taken back. */
static int write_host(int fd, const void *buf, size_t len)
{
	sigset_t pipe_set, old;
	int r, saved;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	r = write_full(fd, buf, len);
	saved = errno;
	if (r < 0 && saved == EPIPE && !sigismember(&old, SIGPIPE)) {
		struct timespec zero = { 0 };

		sigtimedwait(&pipe_set, NULL, &zero);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved;
	return r;
}

/* --- one session ------------------------------------------------------------------------ */

struct run {
	struct agent *a;
	const struct agent_process *p;
	struct agent_result *res;
	uint32_t id;
	int stream;
	bool stream_ok;	    /* its STREAM frame named our session */
	bool stream_closed; /* ours, and it ended */
	struct proto_decoder *sdec;
	bool out_eof, err_eof, in_done;
	bool out_dead, err_dead; /* the host fd refused a write */
	bool done;		 /* EXIT or ERROR arrived */
	uint64_t done_at;
	unsigned int interrupts; /* SIGINTs forwarded without a terminal */
	uint8_t obuf[PROTO_HDR_SIZE + PROTO_MAX_DATA + 4 * (PROTO_HDR_SIZE + 4)];
	size_t olen, ooff;
};

static int send_control(struct agent *a, const struct proto_msg *m, gantry_error_t *err)
{
	int r = 0;

	pthread_mutex_lock(&a->send_lock);
	if (a->control < 0)
		r = gantry_error(err, ENOTCONN, "no guest control connection");
	else if (proto_write_msg(a->control, m) < 0)
		r = gantry_error_errno(err, "send %s to the guest", proto_type_name(m->type));
	pthread_mutex_unlock(&a->send_lock);
	return r;
}

static void control_close(struct agent *a)
{
	pthread_mutex_lock(&a->send_lock);
	close_fd(&a->control);
	pthread_mutex_unlock(&a->send_lock);
}

int agent_signal(struct agent *a, int signo, gantry_error_t *err)
{
	struct proto_msg m = { .type = PROTO_SIGNAL };

	if (signo <= 0 || signo > PROTO_MAX_SIGNAL)
		return gantry_error(err, EINVAL, "signal %d out of range", signo);
	m.u.signal.id = atomic_load(&a->running);
	m.u.signal.signo = (uint32_t)signo;
	if (m.u.signal.id == 0)
		return 0;
	return send_control(a, &m, err);
}

static void get_winsize(const struct agent_process *p, uint32_t *rows, uint32_t *cols)
{
	struct winsize ws = { 0 };

	if ((p->out_fd >= 0 && ioctl(p->out_fd, TIOCGWINSZ, &ws) == 0) ||
	    (p->in_fd >= 0 && ioctl(p->in_fd, TIOCGWINSZ, &ws) == 0)) {
		*rows = ws.ws_row;
		*cols = ws.ws_col;
	} else {
		*rows = *cols = 0;
	}
}

static int send_exec(struct run *r, gantry_error_t *err)
{
	static char *const no_env[] = { NULL };
	const struct agent_process *p = r->p;
	struct proto_msg m = { .type = PROTO_EXEC };
	struct proto_exec *e = &m.u.exec;
	cleanup_free uint8_t *buf = xmalloc(PROTO_MAX_FRAME);

	e->id = r->id;
	e->argv = (char **)p->argv;
	while (p->argv[e->argc])
		e->argc++;
	e->env = (char **)(p->env ? p->env : no_env);
	while (e->env[e->envc])
		e->envc++;
	e->cwd = (char *)(p->cwd ? p->cwd : "/");
	e->uid = p->uid;
	e->gid = p->gid;
	e->gids = (uint32_t *)p->gids;
	e->ngids = (uint32_t)p->ngids;
	if (p->tty) {
		e->flags |= PROTO_EXEC_TTY;
		get_winsize(p, &e->rows, &e->cols);
	}
	if (e->argc == 0)
		return gantry_error(err, EINVAL, "no command to run");
	if (p->ngids > PROTO_MAX_GIDS)
		return gantry_error(err, E2BIG, "too many groups (at most %d)", PROTO_MAX_GIDS);
	/* Say what is too big here, rather than a bare EMSGSIZE. */
	if (proto_encode(&m, buf, PROTO_MAX_FRAME) < 0)
		return gantry_error(err, E2BIG,
				    "command, environment and directory too large for one "
				    "request (at most %d KiB, %d strings of at most %d KiB)",
				    PROTO_MAX_CONTROL / 1024, PROTO_MAX_STRV,
				    PROTO_MAX_STRING / 1024);
	return send_control(r->a, &m, err);
}

static void queue(struct run *r, uint16_t type, const void *body, size_t len)
{
	struct proto_writer w;

	proto_writer_init(&w, r->obuf + r->olen, sizeof(r->obuf) - r->olen);
	proto_put_bytes(&w, body, len);
	if (proto_writer_finish(&w, type) > 0)
		r->olen += w.len;
}

static void queue_eof(struct run *r, uint32_t fd)
{
	uint8_t body[4] = { (uint8_t)fd, 0, 0, 0 };

	queue(r, PROTO_EOF, body, sizeof(body));
}

static void stream_end(struct run *r)
{
	close_fd(&r->stream);
	r->olen = r->ooff = 0;
	if (r->stream_ok)
		r->stream_closed = true;
	r->stream_ok = false;
	proto_decoder_init(r->sdec);
}

static void flush_stream(struct run *r)
{
	int sent = r->stream < 0 ? 1 : proto_send_pending(r->stream, r->obuf, r->olen, &r->ooff);

	if (sent < 0)
		stream_end(r);
	else if (sent > 0)
		r->olen = r->ooff = 0;
}

static void accept_stream(struct run *r)
{
	int fd = accept4(r->a->stdio_listen, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	if (r->stream >= 0) {
		close(fd); /* one at a time: the next waits in the backlog */
		return;
	}
	r->stream = fd;
	r->stream_ok = false;
	proto_decoder_init(r->sdec);
}

/* One output frame to its host fd. */
static void deliver(struct run *r, int type, const uint8_t *data, size_t len)
{
	bool err_stream = type == PROTO_STDERR && !r->p->tty;
	int fd = err_stream ? r->p->err_fd : r->p->out_fd;
	bool *dead = err_stream ? &r->err_dead : &r->out_dead;

	if (fd < 0 || *dead)
		return;
	if (write_host(fd, data, len) < 0) {
		*dead = true;
		/* Like a closed pipe in the guest: its writer gets EPIPE. */
		if (!r->p->tty)
			queue_eof(r, err_stream ? 2 : 1);
	}
}

static int stream_frames(struct run *r, gantry_error_t *err)
{
	struct proto_msg m;
	const char *why;
	int k;

	while ((k = proto_decoder_next(r->sdec, &m, &why)) > 0) {
		if (!r->stream_ok) {
			bool ours = m.type == PROTO_STREAM && m.u.stream.id == r->id;

			proto_msg_free(&m);
			if (!ours) { /* a leftover of an earlier session */
				stream_end(r);
				return 0;
			}
			r->stream_ok = true;
			if (r->p->in_fd < 0) {
				queue_eof(r, 0);
				r->in_done = true;
			}
			continue;
		}
		switch (m.type) {
		case PROTO_STDOUT:
		case PROTO_STDERR:
			deliver(r, m.type, m.u.data.data, m.u.data.len);
			break;
		case PROTO_EOF:
			if (m.u.eof.fd == 1)
				r->out_eof = true;
			else if (m.u.eof.fd == 2)
				r->err_eof = true;
			break;
		default:
			proto_msg_free(&m);
			return gantry_error(err, EPROTO, "unexpected %s on the stdio stream",
					    proto_type_name(m.type));
		}
		proto_msg_free(&m);
	}
	if (k < 0)
		return gantry_error(err, EPROTO, "stdio stream: %s", why);
	return 0;
}

static int read_stream(struct run *r, gantry_error_t *err)
{
	ssize_t n = proto_decoder_fill(r->sdec, r->stream);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n < 0 && errno != ECONNRESET)
		return gantry_error_errno(err, "stdio stream");
	if (n <= 0) {
		/* Frames that arrived with the close still count. */
		if (stream_frames(r, err) < 0)
			return -1;
		stream_end(r);
		return 0;
	}
	return stream_frames(r, err);
}

static void read_stdin(struct run *r)
{
	ssize_t n = read(r->p->in_fd, r->obuf + PROTO_HDR_SIZE, PROTO_MAX_DATA);
	struct proto_writer w;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) { /* EOF, or a terminal that went away */
		queue_eof(r, 0);
		r->in_done = true;
		return;
	}
	proto_writer_init(&w, r->obuf, sizeof(r->obuf));
	w.len += (size_t)n;
	r->olen = (size_t)proto_writer_finish(&w, PROTO_STDIN);
	r->ooff = 0;
}

/* A supervisor's STREAM frame: the guest's stdio stream for session id
 * came with it, its own STREAM frame already read. */
static int stream_passed(struct run *r, uint32_t id)
{
	int fd;

	if (r->a->npassed == 0)
		return -1;
	fd = r->a->passed[0];
	memmove(r->a->passed, r->a->passed + 1, --r->a->npassed * sizeof(int));
	if (id != r->id || r->stream >= 0 || r->stream_closed) {
		close(fd);
		return 0;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	r->stream = fd;
	r->stream_ok = true;
	proto_decoder_init(r->sdec);
	if (r->p->in_fd < 0) {
		queue_eof(r, 0);
		r->in_done = true;
	}
	return 0;
}

static int control_frames(struct run *r, gantry_error_t *err)
{
	struct proto_msg m;
	const char *why;
	int k;

	while ((k = proto_decoder_next(r->a->dec, &m, &why)) > 0) {
		if (m.type == PROTO_STREAM && r->a->remote) {
			if (stream_passed(r, m.u.stream.id) < 0) {
				proto_msg_free(&m);
				return gantry_error(err, EPROTO,
						    "STREAM without its stream from the sandbox");
			}
		} else if (m.type == PROTO_STARTED && m.u.started.id == r->id) {
			r->res->pid = m.u.started.pid;
		} else if (m.type == PROTO_EXIT && m.u.exit.id == r->id && !r->done) {
			r->res->signaled = m.u.exit.signaled;
			r->res->code = (int)m.u.exit.code;
			r->done = true;
		} else if (m.type == PROTO_ERROR && (m.u.error.id == r->id || m.u.error.id == 0) &&
			   !r->done) {
			r->res->error = true;
			r->res->code = (int)m.u.error.code;
			r->res->message = steal_pointer(&m.u.error.message);
			r->done = true;
		}
		/* Anything else belongs to no one we know. */
		proto_msg_free(&m);
		if (r->done && r->done_at == 0)
			r->done_at = now_ms();
	}
	if (k < 0)
		return gantry_error(err, EPROTO, "guest control connection: %s", why);
	return 0;
}

/* Like proto_decoder_fill, but keeping the fds a supervisor passes along. */
static ssize_t control_fill(struct agent *a)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(AGENT_PASSED * sizeof(int))];
	} ctl;
	struct iovec iov;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	uint8_t *p;
	ssize_t n;

	if (!a->remote)
		return proto_decoder_fill(a->dec, a->control);
	iov.iov_len = proto_decoder_space(a->dec, &p);
	iov.iov_base = p;
	if (iov.iov_len == 0) {
		errno = EMSGSIZE;
		return -1;
	}
	msg.msg_control = ctl.buf;
	msg.msg_controllen = sizeof(ctl.buf);
	n = recvmsg(a->control, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		size_t nfd;
		int fds[AGENT_PASSED];

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		memcpy(fds, CMSG_DATA(c), MIN(nfd, (size_t)AGENT_PASSED) * sizeof(int));
		for (size_t i = 0; i < nfd && i < AGENT_PASSED; i++) {
			if (a->npassed < AGENT_PASSED)
				a->passed[a->npassed++] = fds[i];
			else
				close(fds[i]);
		}
	}
	proto_decoder_commit(a->dec, (size_t)n);
	return n;
}

static int read_control(struct run *r, gantry_error_t *err)
{
	ssize_t n = control_fill(r->a);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n < 0)
		return gantry_error_errno(err, "guest control connection");
	if (n == 0) {
		if (control_frames(r, err) < 0)
			return -1;
		control_close(r->a);
		if (r->done)
			return 0;
		return gantry_error(err, ECONNRESET,
				    "the guest closed the control connection during the session");
	}
	return control_frames(r, err);
}

static int handle_signals(struct run *r, gantry_error_t *err)
{
	unsigned char sigs[32];
	ssize_t n = read(sig_pipe[0], sigs, sizeof(sigs));

	for (ssize_t i = 0; i < n; i++) {
		struct proto_msg m = { 0 };

		if (r->done)
			return 0;
		if (sigs[i] == SIGWINCH) {
			if (!r->p->tty)
				continue;
			m.type = PROTO_RESIZE;
			m.u.resize.id = r->id;
			get_winsize(r->p, &m.u.resize.rows, &m.u.resize.cols);
		} else {
			m.type = PROTO_SIGNAL;
			m.u.signal.id = r->id;
			m.u.signal.signo = sigs[i];
			/* Without a terminal, Ctrl-C is a forwarded SIGINT, which a
			 * container's PID 1 ignores unless it handles it: the
			 * third one kills the process. */
			if (sigs[i] == SIGINT && !r->p->tty &&
			    ++r->interrupts == AGENT_INTERRUPTS_TO_KILL) {
				fprintf(stderr, "gantry: interrupted %u times: killing the process\n",
					r->interrupts);
				m.u.signal.signo = SIGKILL;
			}
		}
		if (send_control(r->a, &m, err) < 0)
			return -1;
	}
	return 0;
}

static bool run_finished(struct run *r)
{
	if (!r->done)
		return false;
	if (r->res->error && !r->stream_ok)
		return true; /* it never ran: no output to wait for */
	if (r->stream_closed)
		return true;
	if (r->stream_ok)
		return r->out_eof && (r->p->tty || r->err_eof);
	/* EXIT, but the stream has not been accepted yet: give it a moment. */
	return now_ms() - r->done_at >= AGENT_STREAM_GRACE_MS;
}

enum { P_CANCEL, P_CONTROL, P_LISTEN, P_STREAM, P_STDIN, P_SIGNAL, P_N };

static int relay(struct run *r, bool signals, gantry_error_t *err)
{
	const struct agent_process *p = r->p;

	while (!run_finished(r)) {
		struct pollfd fds[P_N];
		int timeout = -1, n;

		for (int i = 0; i < P_N; i++)
			fds[i] = (struct pollfd){ .fd = -1 };
		fds[P_CANCEL] = (struct pollfd){ .fd = r->a->cancel[0], .events = POLLIN };
		if (r->a->control >= 0)
			fds[P_CONTROL] = (struct pollfd){ .fd = r->a->control, .events = POLLIN };
		if (r->stream < 0 && !r->stream_closed && r->a->stdio_listen >= 0)
			fds[P_LISTEN] =
				(struct pollfd){ .fd = r->a->stdio_listen, .events = POLLIN };
		if (r->stream >= 0)
			fds[P_STREAM] =
				(struct pollfd){ .fd = r->stream,
						 .events = POLLIN | (r->olen ? POLLOUT : 0) };
		if (r->stream_ok && !r->in_done && r->olen == 0 && !r->done)
			fds[P_STDIN] = (struct pollfd){ .fd = p->in_fd, .events = POLLIN };
		if (signals)
			fds[P_SIGNAL] = (struct pollfd){ .fd = sig_pipe[0], .events = POLLIN };
		if (r->done && !r->stream_ok)
			timeout =
				(int)(AGENT_STREAM_GRACE_MS -
				      MIN(now_ms() - r->done_at, (uint64_t)AGENT_STREAM_GRACE_MS));
		n = poll(fds, P_N, timeout);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return gantry_error_errno(err, "poll");
		if (fds[P_CANCEL].revents)
			return gantry_error(err, ECANCELED, "cancelled");
		if (fds[P_SIGNAL].revents && handle_signals(r, err) < 0)
			return -1;
		if (fds[P_STREAM].revents & POLLOUT)
			flush_stream(r);
		if (fds[P_STREAM].revents & (POLLIN | POLLHUP | POLLERR) && r->stream >= 0 &&
		    read_stream(r, err) < 0)
			return -1;
		if (fds[P_LISTEN].revents)
			accept_stream(r);
		if (fds[P_STDIN].revents && r->stream_ok) {
			read_stdin(r);
			flush_stream(r);
		}
		if (r->olen && r->stream >= 0)
			flush_stream(r);
		if (fds[P_CONTROL].revents && read_control(r, err) < 0)
			return -1;
		if (r->a->control < 0 && !r->done)
			return gantry_error(err, ECONNRESET, "lost the guest control connection");
	}
	return 0;
}

int agent_run(struct agent *a, const struct agent_process *p, struct agent_result *res,
	      gantry_error_t *err)
{
	struct sig_state sigs = { 0 };
	struct termios saved_tio;
	bool raw = false;
	struct run *r;
	int ret = -1;

	memset(res, 0, sizeof(*res));
	if (a->control < 0)
		return gantry_error(err, ENOTCONN, "the guest agent is not connected");
	if (cancelled(a))
		return gantry_error(err, ECANCELED, "cancelled");
	r = xzalloc(sizeof(*r));
	r->a = a;
	r->p = p;
	r->res = res;
	r->stream = -1;
	r->sdec = xmalloc(sizeof(*r->sdec));
	proto_decoder_init(r->sdec);
	r->id = ++a->next_id ? a->next_id : ++a->next_id;

	if (p->forward_signals && signals_take(&sigs, err) < 0)
		goto out;
	if (p->tty && p->in_fd >= 0 && isatty(p->in_fd) && tcgetattr(p->in_fd, &saved_tio) == 0) {
		struct termios t = saved_tio;

		cfmakeraw(&t);
		raw = tcsetattr(p->in_fd, TCSANOW, &t) == 0;
	}
	if (send_exec(r, err) < 0)
		goto out;
	atomic_store(&a->running, r->id);
	ret = relay(r, sigs.on, err);
	atomic_store(&a->running, 0);
out:
	if (raw)
		tcsetattr(p->in_fd, TCSANOW, &saved_tio);
	signals_give_back(&sigs);
	close_fd(&r->stream);
	free(r->sdec);
	free(r);
	if (ret < 0)
		agent_result_free(res);
	return ret;
}

int agent_shutdown(struct agent *a, int status, int timeout_ms, gantry_error_t *err)
{
	struct proto_msg m = { .type = PROTO_SHUTDOWN };
	uint64_t deadline = deadline_of(timeout_ms);

	if (status < 0 || status > 255)
		return gantry_error(err, EINVAL, "shutdown status %d is not 0-255", status);
	m.u.shutdown.status = (uint32_t)status;
	if (send_control(a, &m, err) < 0)
		return -1;
	if (timeout_ms == 0)
		return 0;
	/* Whatever else the guest says now is moot: wait for it to hang up. */
	for (;;) {
		char buf[4096];
		int r = wait_fd(a, a->control, deadline, err);
		ssize_t n;

		if (r < 0)
			return -1;
		if (r == 0)
			return gantry_error(err, ETIMEDOUT,
					    "the guest did not power off within %d ms", timeout_ms);
		n = read(a->control, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
	}
	control_close(a);
	return 0;
}

int agent_result_status(const struct agent_result *r)
{
	if (r->error)
		return r->code;
	return r->signaled ? 128 + r->code : r->code;
}

void agent_result_free(struct agent_result *r)
{
	free(r->message);
	r->message = NULL;
}
