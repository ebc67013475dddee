/* A session's stdio relayed over its own vsock stream: STDOUT and STDERR
 * frames from the process's pipes (or, with a tty, its pty master), STDIN
 * frames into it, and an EOF frame for each end.
 *
 * Backpressure: each direction holds at most one frame. Output is read from
 * a pipe only when the previous frame has gone out on the stream; the stream
 * is read only when the previous STDIN bytes have gone into the pipe. */
#include <errno.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "guest/session.h"

static void close_stdin(struct session *s);

void relay_stream_gone(struct session *s)
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
	int sent = s->stream < 0
			   ? 1
			   : proto_send_pending(s->stream, s->out_buf, s->out_len, &s->out_off);

	if (sent < 0)
		relay_stream_gone(s);
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

void relay_pump_stdin(struct session *s)
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

void relay_take_frames(struct session *s)
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
			relay_stream_gone(s);
			return;
		}
		if (m.type == PROTO_STDIN) {
			if ((s->in_w >= 0 || (s->tty && s->crun > 0)) && !s->in_eof) {
				memcpy(s->in_buf, m.u.data.data, m.u.data.len);
				s->in_len = m.u.data.len;
				s->in_off = 0;
				relay_pump_stdin(s);
			}
		} else if (m.u.eof.fd == 0) {
			s->in_eof = true;
			relay_pump_stdin(s);
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
		relay_stream_gone(s);
		return;
	}
	relay_take_frames(s);
}

enum { PFD_STREAM, PFD_IN, PFD_OUT, PFD_ERR, PFD_CONSOLE, PFD_N };

size_t relay_pollfds(struct session *s, struct pollfd *fds, size_t room)
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

void relay_events(struct session *s, const struct pollfd *fds, size_t n)
{
	if (n < PFD_N)
		return;
	if (fds[PFD_STREAM].revents & POLLOUT)
		flush_out(s);
	if (fds[PFD_STREAM].revents & (POLLIN | POLLHUP | POLLERR) && s->stream >= 0)
		read_stream(s);
	if (fds[PFD_IN].revents) {
		relay_pump_stdin(s);
		relay_take_frames(s);
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
