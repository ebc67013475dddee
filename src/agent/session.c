/* One session (see session.h): agent_run sends EXEC and relays the
 * process's stdio, forwarded signals and window sizes until it ends. It is
 * one poll loop over our own fds: the control connection (its outbound
 * queue in link.c), the stdio listener, the session's stdio stream, the
 * caller's stdio fds, a self-pipe for forwarded signals, the link's wake
 * pipe and the cancel pipe. Nothing in it blocks:
 *  - control frames wait in the link's bounded queue (link.h);
 *  - host stdin is read only when the last STDIN frame has gone out on the
 *    stream. A process that does not read its stdin holds that one frame,
 *    and the loop goes on;
 *  - output frames go to the host fds through hostout.c, and the stream is
 *    read again only once the last one went, so a slow reader here stalls
 *    the pipe in the guest, never our memory nor the loop;
 *  - a stdio dial that does not name its session within AGENT_STREAM_ID_MS
 *    is dropped, and after EXIT a stream that goes quiet without its EOFs
 *    for AGENT_STREAM_GRACE_MS ends the session. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "agent/hostout.h"
#include "agent/link.h"
#include "common/log.h"
#include "common/util.h"

/* --- one session ------------------------------------------------------------------------ */

struct run {
	struct agent *a;
	const struct agent_process *p;
	struct agent_result *res;
	uint32_t id;
	int stream;
	uint64_t stream_at;	 /* accepted, for AGENT_STREAM_ID_MS */
	bool stream_ok;		 /* its STREAM frame named our session */
	bool stream_eof;	 /* the guest closed it; frames may still wait in sdec */
	bool stream_closed;	 /* ours, and it ended */
	uint64_t stream_busy_at; /* bytes last came, or our side last stopped holding it */
	struct proto_decoder *sdec;
	bool out_eof, err_eof, in_done;
	bool done;	/* EXIT or ERROR arrived */
	bool abandoned; /* a signal after EXIT: stop waiting for output */
	uint64_t done_at;
	unsigned int interrupts; /* SIGINTs forwarded without a terminal */
	bool signals_eof;	 /* the caller's signal_fd closed */
	struct hostout out, errout;
	/* The part of an output frame its host fd has not taken yet. */
	struct hostout *held_to;
	uint8_t held[PROTO_MAX_DATA];
	size_t held_len, held_off;
	/* Frames for the stream: one STDIN and a few EOFs. */
	uint8_t obuf[PROTO_HDR_SIZE + PROTO_MAX_DATA + 4 * (PROTO_HDR_SIZE + 4)];
	size_t olen, ooff;
};

int agent_signal(struct agent *a, int signo, gantry_error_t *err)
{
	struct proto_msg m = { .type = PROTO_SIGNAL };

	if (signo <= 0 || signo > PROTO_MAX_SIGNAL)
		return gantry_error(err, EINVAL, "signal %d out of range", signo);
	m.u.signal.id = atomic_load(&a->running);
	m.u.signal.signo = (uint32_t)signo;
	if (m.u.signal.id == 0)
		return 0;
	return link_send(a, &m, err);
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

static int send_exec(struct run *run, gantry_error_t *err)
{
	static char *const no_env[] = { NULL };
	const struct agent_process *p = run->p;
	struct proto_msg m = { .type = PROTO_EXEC };
	struct proto_exec *e = &m.u.exec;
	uint8_t *buf = xmalloc(PROTO_MAX_FRAME);
	int r;

	e->id = run->id;
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
	if (p->has_rlimits) {
		e->flags |= PROTO_EXEC_RLIMITS;
		e->rlimits = (struct proto_rlimit *)p->rlimits;
		e->nrlimits = (uint32_t)MIN(p->nrlimits, (size_t)UINT32_MAX);
	}
	if (p->caps) {
		e->flags |= PROTO_EXEC_CAPS;
		memcpy(e->caps, p->caps, sizeof(e->caps));
	}
	if (p->init)
		e->flags |= PROTO_EXEC_INIT;
	if (p->tty) {
		e->flags |= PROTO_EXEC_TTY;
		get_winsize(p, &e->rows, &e->cols);
	}
	if (e->argc == 0)
		r = gantry_error(err, EINVAL, "no command to run");
	else if (p->ngids > PROTO_MAX_GIDS)
		r = gantry_error(err, E2BIG, "too many groups (at most %d)", PROTO_MAX_GIDS);
	else if (p->nrlimits > PROTO_MAX_RLIMITS)
		r = gantry_error(err, E2BIG, "too many resource limits (at most %d)",
				 PROTO_MAX_RLIMITS);
	/* Say what is too big here, rather than a bare EMSGSIZE. */
	else if (proto_encode(&m, buf, PROTO_MAX_FRAME) < 0)
		r = gantry_error(err, E2BIG,
				 "command, environment and directory too large for one "
				 "request (at most %d KiB, %d strings of at most %d KiB)",
				 PROTO_MAX_CONTROL / 1024, PROTO_MAX_STRV, PROTO_MAX_STRING / 1024);
	else
		r = link_send(run->a, &m, err);
	/* The environment may hold secrets: no copy of it outlives the send. */
	explicit_bzero(buf, PROTO_MAX_FRAME);
	free(buf);
	return r;
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
	r->stream_ok = r->stream_eof = false;
	proto_decoder_init(r->sdec);
}

/* The stream names our session: stdin may start. */
static void stream_claimed(struct run *r)
{
	r->stream_ok = true;
	r->stream_busy_at = now_ms();
	if (r->p->in_fd < 0) {
		queue_eof(r, 0);
		r->in_done = true;
	}
}

static void flush_stream(struct run *r)
{
	int sent;

	if (r->olen == 0 || r->stream < 0)
		return;
	sent = proto_send_pending(r->stream, r->obuf, r->olen, &r->ooff);
	if (sent != 0)
		r->olen = r->ooff = 0;
	/* The guest takes no more stdin, but its output may still be coming:
	 * the stream ends when it is read to its end. */
	if (sent < 0)
		r->in_done = true;
}

static void accept_stream(struct run *r)
{
	int fd = link_accept(r->a, r->a->stdio_listen);

	if (fd < 0 && errno == EPIPE)
		close_fd(&r->a->stdio_listen); /* its door is shut: no dial comes */
	if (fd < 0)
		return;
	if (r->stream >= 0) {
		close(fd); /* one at a time: the next waits in the backlog */
		return;
	}
	r->stream = fd;
	r->stream_at = now_ms();
	r->stream_ok = r->stream_eof = false;
	proto_decoder_init(r->sdec);
}

/* A host fd refused output: like a closed pipe in the guest, whose writer
 * then gets EPIPE. */
static void host_refused(struct run *r, struct hostout *o)
{
	if (!r->p->tty)
		queue_eof(r, o == &r->errout ? 2 : 1);
}

/* One output frame to its host fd; what it does not take now is held. */
static void deliver(struct run *r, int type, const uint8_t *data, size_t len)
{
	struct hostout *o = type == PROTO_STDERR && !r->p->tty ? &r->errout : &r->out;
	ssize_t n;

	if (!hostout_live(o))
		return;
	n = hostout_write(o, data, len);
	if (n < 0) {
		host_refused(r, o);
	} else if ((size_t)n < len) {
		memcpy(r->held, data + n, len - (size_t)n);
		r->held_len = len - (size_t)n;
		r->held_off = 0;
		r->held_to = o;
	}
}

/* More of the held output, on POLLOUT. */
static void deliver_held(struct run *r)
{
	ssize_t n = hostout_write(r->held_to, r->held + r->held_off, r->held_len - r->held_off);

	if (n < 0)
		host_refused(r, r->held_to);
	else
		r->held_off += (size_t)n;
	if (n < 0 || r->held_off == r->held_len) {
		r->held_len = r->held_off = 0;
		r->held_to = NULL;
		r->stream_busy_at = now_ms(); /* the quiet clock restarts: we held it */
	}
}

/* The frames sdec holds, while the host fds take them. */
static int stream_frames(struct run *r, gantry_error_t *err)
{
	struct proto_msg m;
	const char *why = NULL;
	int k = 0;

	while (r->held_len == 0 && (k = proto_decoder_next(r->sdec, &m, &why)) > 0) {
		if (!r->stream_ok) {
			bool ours = m.type == PROTO_STREAM && m.u.stream.id == r->id;

			proto_msg_free(&m);
			if (!ours) { /* a leftover of an earlier session */
				stream_end(r);
				return 0;
			}
			stream_claimed(r);
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
	if (r->held_len == 0 && k < 0)
		return gantry_error(err, EPROTO, "stdio stream: %s", why);
	/* Frames that arrived with the close still count: end it after them. */
	if (r->held_len == 0 && r->stream_eof)
		stream_end(r);
	return 0;
}

static int read_stream(struct run *r, gantry_error_t *err)
{
	ssize_t n = proto_decoder_fill(r->sdec, r->stream);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n < 0 && errno != ECONNRESET)
		return gantry_error_errno(err, "stdio stream");
	if (n <= 0)
		r->stream_eof = true;
	else
		r->stream_busy_at = now_ms();
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
	r->stream_at = now_ms();
	r->stream_eof = false;
	proto_decoder_init(r->sdec);
	stream_claimed(r);
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
			if (r->p->started)
				r->p->started(r->p->started_opaque);
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

static int read_control(struct run *r, gantry_error_t *err)
{
	ssize_t n = link_fill(r->a);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n < 0)
		return gantry_error_errno(err, "guest control connection");
	if (n == 0) {
		if (control_frames(r, err) < 0)
			return -1;
		link_close(r->a);
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
	ssize_t n = read(r->p->signal_fd, sigs, sizeof(sigs));

	if (n == 0)
		r->signals_eof = true; /* the caller closed it: no more to come */

	for (ssize_t i = 0; i < n; i++) {
		struct proto_msg m = { 0 };

		if (r->done) {
			/* Nobody left to signal: the user wants out of waiting
			 * for output the host side does not take. */
			if (sigs[i] != SIGWINCH)
				r->abandoned = true;
			continue;
		}
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
				log_warn("interrupted %u times: killing the process",
					 r->interrupts);
				m.u.signal.signo = SIGKILL;
			}
		}
		if (link_send(r->a, &m, err) < 0)
			return -1;
	}
	return 0;
}

/* When the stream counts as gone after EXIT, had it stayed quiet. */
static uint64_t quiet_deadline(const struct run *r)
{
	if (r->stream_ok)
		return MAX(r->stream_busy_at, r->done_at) + AGENT_STREAM_GRACE_MS;
	/* Not accepted (or not named) yet: give it a moment. */
	return r->done_at + AGENT_STREAM_GRACE_MS;
}

static bool run_finished(struct run *r)
{
	if (r->abandoned)
		return true;
	if (!r->done)
		return false;
	if (r->res->error && !r->stream_ok)
		return true; /* it never ran: no output to wait for */
	if (r->stream_closed && r->held_len == 0)
		return true;
	if (r->held_len)
		return false; /* our side holds it: not the guest's silence */
	if (r->stream_ok && r->out_eof && (r->p->tty || r->err_eof))
		return true;
	return now_ms() >= quiet_deadline(r);
}

/* The poll timeout: the nearest of the bounds that apply now. */
static int relay_timeout(struct run *r)
{
	int t = link_timeout_ms(r->a);
	int u;

	if (r->stream >= 0 && !r->stream_ok) {
		u = link_left_ms(r->stream_at + AGENT_STREAM_ID_MS);
		t = t < 0 ? u : MIN(t, u);
	}
	if (r->done && r->held_len == 0) {
		u = link_left_ms(quiet_deadline(r));
		t = t < 0 ? u : MIN(t, u);
	}
	return t;
}

enum {
	P_CANCEL,
	P_CANCEL_EXT,
	P_WAKE,
	P_CONTROL,
	P_LISTEN,
	P_STREAM,
	P_STDIN,
	P_SIGNAL,
	P_HOST,
	P_N
};

static void relay_fds(struct run *r, struct pollfd *fds)
{
	const struct agent_process *p = r->p;
	short stream_events = (short)((r->olen ? POLLOUT : 0) |
				      (r->held_len == 0 && !r->stream_eof ? POLLIN : 0));

	for (int i = 0; i < P_N; i++)
		fds[i] = (struct pollfd){ .fd = -1 };
	fds[P_CANCEL] = (struct pollfd){ .fd = r->a->cancel[0], .events = POLLIN };
	fds[P_CANCEL_EXT] = (struct pollfd){ .fd = r->a->cancel_ext, .events = POLLIN };
	fds[P_WAKE] = (struct pollfd){ .fd = r->a->wake[0], .events = POLLIN };
	if (r->a->control >= 0)
		fds[P_CONTROL] =
			(struct pollfd){ .fd = r->a->control,
					 .events = POLLIN | (link_pending(r->a) ? POLLOUT : 0) };
	if (r->stream < 0 && !r->stream_closed && r->a->stdio_listen >= 0)
		fds[P_LISTEN] = (struct pollfd){ .fd = r->a->stdio_listen, .events = POLLIN };
	/* No events, no fd: a hung-up stream would otherwise wake us for ever. */
	if (r->stream >= 0 && stream_events)
		fds[P_STREAM] = (struct pollfd){ .fd = r->stream, .events = stream_events };
	if (r->stream_ok && !r->in_done && r->olen == 0 && !r->done)
		fds[P_STDIN] = (struct pollfd){ .fd = p->in_fd, .events = POLLIN };
	if (p->signal_fd > 0 && !r->signals_eof)
		fds[P_SIGNAL] = (struct pollfd){ .fd = p->signal_fd, .events = POLLIN };
	if (r->held_len)
		fds[P_HOST] = (struct pollfd){ .fd = hostout_fd(r->held_to), .events = POLLOUT };
}

/* The control connection's side of one turn: what waits goes out, what
 * came in is read, the peer's silence is bounded. */
static int relay_control(struct run *r, const struct pollfd *fds, gantry_error_t *err)
{
	/* Once EXIT is in, a peer that stopped reading no longer matters. */
	gantry_error_t moot = NULL;
	gantry_error_t *e = r->done ? &moot : err;
	bool bad = false;

	if (fds[P_CONTROL].revents & (POLLOUT | POLLERR | POLLHUP))
		bad = link_flush(r->a, e) < 0;
	if (!bad)
		bad = link_check(r->a, e) < 0;
	gantry_error_free(&moot);
	if (bad && !r->done)
		return -1;
	if ((fds[P_CONTROL].revents & (POLLIN | POLLHUP | POLLERR)) && r->a->control >= 0 &&
	    read_control(r, err) < 0)
		return -1;
	if (r->a->control < 0 && !r->done)
		return gantry_error(err, ECONNRESET, "lost the guest control connection");
	return 0;
}

static int relay(struct run *r, gantry_error_t *err)
{
	while (!run_finished(r)) {
		struct pollfd fds[P_N];
		int n;

		relay_fds(r, fds);
		n = poll(fds, P_N, relay_timeout(r));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return gantry_error_errno(err, "poll");
		if (fds[P_CANCEL].revents || fds[P_CANCEL_EXT].revents)
			return gantry_error(err, ECANCELED, "cancelled");
		if (fds[P_WAKE].revents)
			link_woken(r->a);
		if (fds[P_HOST].revents && r->held_len) {
			deliver_held(r);
			if (r->stream >= 0 && stream_frames(r, err) < 0)
				return -1;
		}
		if (fds[P_STREAM].revents & POLLOUT)
			flush_stream(r);
		if (fds[P_STREAM].revents & (POLLIN | POLLHUP | POLLERR) && r->stream >= 0 &&
		    r->held_len == 0 && read_stream(r, err) < 0)
			return -1;
		if (r->stream >= 0 && !r->stream_ok &&
		    now_ms() - r->stream_at >= AGENT_STREAM_ID_MS) {
			log_debug("a stdio stream did not name its session: dropped");
			stream_end(r);
		}
		if (fds[P_LISTEN].revents)
			accept_stream(r);
		if (fds[P_STDIN].revents && r->stream_ok)
			read_stdin(r);
		if (r->olen && r->stream >= 0)
			flush_stream(r);
		if (relay_control(r, fds, err) < 0)
			return -1;
		/* After the control connection: a signal that came with the
		 * EXIT is one after it (the guest wrote EXIT first). */
		if (fds[P_SIGNAL].revents && handle_signals(r, err) < 0)
			return -1;
	}
	return 0;
}

int agent_run(struct agent *a, const struct agent_process *p, struct agent_result *res,
	      gantry_error_t *err)
{
	struct termios saved_tio;
	bool raw = false;
	struct run *r;
	int ret = -1;

	memset(res, 0, sizeof(*res));
	if (a->control < 0)
		return gantry_error(err, ENOTCONN, "the guest agent is not connected");
	if (link_cancelled(a))
		return gantry_error(err, ECANCELED, "cancelled");
	if (link_check(a, err) < 0)
		return -1;
	r = xzalloc(sizeof(*r));
	r->a = a;
	r->p = p;
	r->res = res;
	r->stream = -1;
	r->sdec = xmalloc(sizeof(*r->sdec));
	proto_decoder_init(r->sdec);
	r->id = ++a->next_id ? a->next_id : ++a->next_id;
	hostout_open(&r->out, p->out_fd);
	hostout_open(&r->errout, p->tty ? -1 : p->err_fd);

	if (p->tty && p->in_fd >= 0 && isatty(p->in_fd) && tcgetattr(p->in_fd, &saved_tio) == 0) {
		struct termios t = saved_tio;

		cfmakeraw(&t);
		raw = tcsetattr(p->in_fd, TCSANOW, &t) == 0;
	}
	if (send_exec(r, err) == 0) { /* which marks r->id running */
		ret = relay(r, err);
		atomic_store(&a->running, 0);
	}
	/* Cut off: the peer hears of it as a hang-up, now. */
	if (ret < 0 && link_check(a, NULL) < 0)
		link_close(a);
	if (raw)
		tcsetattr(p->in_fd, TCSANOW, &saved_tio);
	close_fd(&r->stream);
	hostout_close(&r->out);
	hostout_close(&r->errout);
	free(r->sdec);
	free(r);
	if (ret < 0)
		agent_result_free(res);
	return ret;
}

int agent_result_status(const struct agent_result *r)
{
	if (r->error)
		return r->code;
	return r->signaled ? 128 + r->code : r->code;
}

void agent_result_free(struct agent_result *r)
{
	if (r == NULL)
		return;
	free(r->message);
	r->message = NULL;
}
