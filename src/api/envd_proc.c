/* envd's processes and the streams following them (envd_proc.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "api/envd_proc.h"
#include "common/json.h"
#include "common/log.h"
#include "common/text.h"
#include "common/util.h"
#include "proto/base64.h"

/* The next envelope for the stream to send. */
static void envelope(struct e2b_sub *u, uint8_t flags, json_t *j)
{
	free(u->pending);
	u->pending = envd_frame(flags, j, &u->pending_len);
	u->pending_off = 0;
}

static void event(struct e2b_sub *u, const char *kind, json_t *body)
{
	envelope(u, 0, json_pack("{s:{s:o}}", "event", kind, body));
}

static void data_event(struct e2b_sub *u, const struct e2b_event *ev)
{
	char *b64 = xmalloc(b64_encoded_len(ev->len, B64_PADDED) + 1);

	b64_encode(ev->data, ev->len, b64, B64_PADDED);
	event(u, "data", json_pack("{s:s}", ev->key, b64));
	free(b64);
}

void *envd_proc_thread(void *arg)
{
	struct e2b_proc *p = arg;

	p->ret = p->s->b->exec(p->box, &p->x, p->in_r, p->out_w, p->err_w, p->sig_r, &p->cancel,
			       &p->res, &p->err);
	close_fd(&p->in_r);
	close_fd(&p->out_w);
	close_fd(&p->err_w);
	close_fd(&p->sig_r);
	return NULL;
}

/* A signal through its session; hung up at once if that cannot go. */
void envd_proc_kill(struct e2b_proc *p, int signo)
{
	const unsigned char b = (unsigned char)signo;

	if (p->sig_w < 0 || write(p->sig_w, &b, 1) != 1)
		cancel_fire(&p->cancel);
	if (signo == SIGKILL && !p->killed) {
		p->killed = true;
		/* A session that lives on past the signal is hung up. */
		p->hangup_at = now_ms() + API_KILL_GRACE_MS;
	}
}

void envd_proc_free(struct e2b_proc *p)
{
	int *fds[] = { &p->out_r, &p->err_r, &p->in_w,	&p->sig_w, &p->pty,
		       &p->in_r,  &p->out_w, &p->err_w, &p->sig_r };

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		close_fd(fds[i]);
	cancel_destroy(&p->cancel);
	gantry_error_free(&p->err);
	for (uint64_t i = p->first; i < p->next; i++)
		free(p->events[i % ENVD_EVENTS].data);
	pthread_cond_destroy(&p->cond);
	json_decref(p->config);
	json_decref(p->end);
	free(p->tag);
	free(p->argv);
	strv_free(p->env);
	free(p);
}

/* Drop one reference, under e->lock; the last one takes the process out
 * of the table and frees it. */
static void proc_unref(struct api_e2b *e, struct e2b_proc *p)
{
	if (--p->refs > 0)
		return;
	for (size_t i = 0; i < E2B_PROCS_MAX; i++)
		if (e->procs[i] == p)
			e->procs[i] = NULL;
	pthread_cond_broadcast(&e->gone);
	envd_proc_free(p);
}

/* Free the events every stream has sent, under e->lock. */
static void trim(struct e2b_proc *p)
{
	uint64_t low = p->next;

	for (size_t i = 0; i < ENVD_FOLLOW; i++)
		if (p->subs[i] && p->subs[i]->next < low)
			low = p->subs[i]->next;
	for (; p->first < low; p->first++) {
		free(p->events[p->first % ENVD_EVENTS].data);
		p->events[p->first % ENVD_EVENTS].data = NULL;
	}
}

/* Its deadline, its hang-up after a kill, the server's end, under
 * e->lock; when to look again. */
static uint64_t pump_watch(struct e2b_proc *p)
{
	uint64_t now = now_ms();

	if (now >= p->deadline) {
		p->timed_out = true;
		p->deadline = UINT64_MAX; /* once */
		envd_proc_kill(p, SIGKILL);
	}
	if (cancel_fired(&p->s->cancel) && !p->killed)
		envd_proc_kill(p, SIGKILL);
	if (p->killed && !p->hung_up && now >= p->hangup_at) {
		p->hung_up = true;
		cancel_fire(&p->cancel);
	}
	return MIN(p->deadline, p->killed && !p->hung_up ? p->hangup_at : UINT64_MAX);
}

/* One chunk of output to every stream following, once each has room:
 * one behind by ENVD_EVENTS holds the pump (and so the process) back,
 * until the process, killed, is hung up (then the chunk is dropped). */
static void publish(struct e2b_proc *p, const char *key, const char *buf, size_t n)
{
	struct api_e2b *e = p->s->e2b;
	bool any = false;

	pthread_mutex_lock(&e->lock);
	for (;;) {
		any = false;
		for (size_t i = 0; i < ENVD_FOLLOW; i++)
			any |= p->subs[i] != NULL;
		if (!any || p->next - p->first < ENVD_EVENTS || p->hung_up)
			break;
		api_cond_wait_ms(&p->cond, &e->lock, ENVD_WAIT_MS);
		pump_watch(p);
	}
	if (any && p->next - p->first < ENVD_EVENTS) {
		struct e2b_event *ev = &p->events[p->next % ENVD_EVENTS];

		ev->key = key;
		ev->data = xmalloc(n);
		memcpy(ev->data, buf, n);
		ev->len = n;
		p->next++;
		pthread_cond_broadcast(&p->cond);
	}
	pthread_mutex_unlock(&e->lock);
}

/* The end event's body, once its exec returned. */
static json_t *end_body(struct e2b_proc *p)
{
	cleanup_free char *status = NULL;

	if (p->ret < 0)
		return json_pack("{s:i,s:b,s:s,s:s}", "exitCode", -1, "exited", 0, "status",
				 "failed", "error",
				 text_sanitize_utf8(xstrdup(gantry_error_str(p->err))));
	if (p->res.signal)
		xasprintf(&status, "signal: %s",
			  p->res.signal == SIGKILL   ? "killed"
			  : p->res.signal == SIGTERM ? "terminated"
						     : "signaled");
	else
		xasprintf(&status, "exit status %d", p->res.exit_code);
	return json_pack("{s:i,s:b,s:s}", "exitCode", p->res.signal ? -1 : p->res.exit_code,
			 "exited", !p->res.signal, "status", status);
}

/* Read its output to the end, then wait for its exec and say how it
 * ended. */
void *envd_pump(void *arg)
{
	struct e2b_proc *p = arg;
	struct api_e2b *e = p->s->e2b;
	char *chunk = xmalloc(ENVD_CHUNK);

	while (p->out_r >= 0 || p->err_r >= 0) {
		struct pollfd f[3] = { { p->out_r, POLLIN, 0 },
				       { p->err_r, POLLIN, 0 },
				       { cancel_fd(&p->s->cancel), POLLIN, 0 } };
		uint64_t now, wake;
		bool killed;

		pthread_mutex_lock(&e->lock);
		wake = pump_watch(p);
		killed = p->killed;
		pthread_mutex_unlock(&e->lock);
		now = now_ms();
		if (killed) /* the server's end matters no more */
			f[2].fd = -1;
		if (poll(f, 3, (int)MIN(wake > now ? wake - now : 0, 1000u)) < 0 && errno != EINTR)
			cancel_fire(&p->cancel);
		for (int i = 0; i < 2; i++) {
			int *fd = i ? &p->err_r : &p->out_r;
			ssize_t n;

			if (*fd < 0 || !(f[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			n = read(*fd, chunk, ENVD_CHUNK);
			if (n > 0)
				publish(p,
					p->pty >= 0 ? "pty"
					: i == 1    ? "stderr"
						    : "stdout",
					chunk, (size_t)n);
			else if (n == 0 || (errno != EAGAIN && errno != EINTR))
				close_fd(fd);
		}
	}
	free(chunk);
	pthread_join(p->thread, NULL);
	pthread_mutex_lock(&e->lock);
	p->end = end_body(p);
	p->ended = true;
	close_fd(&p->in_w);
	pthread_cond_broadcast(&p->cond);
	proc_unref(e, p);
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

/* The stream's next envelope into u->pending, under e->lock; false when
 * there is none for now (it waited a while). */
static bool next_envelope(struct e2b_sub *u)
{
	struct e2b_proc *p = u->p;

	if (!u->started) {
		u->started = true;
		event(u, "start", json_pack("{s:I}", "pid", (json_int_t)p->pid));
	} else if (u->next < p->next) {
		data_event(u, &p->events[u->next++ % ENVD_EVENTS]);
		trim(p);
		pthread_cond_broadcast(&p->cond);
	} else if (p->ended && !u->ended) {
		u->ended = true;
		event(u, "end", json_incref(p->end));
	} else if (p->ended) {
		u->trailed = true;
		if (p->timed_out)
			envelope(u, 2,
				 json_pack("{s:{s:s,s:s}}", "error", "code", "deadline_exceeded",
					   "message", "the command ran past its deadline"));
		else
			envelope(u, 2, json_object());
	} else if (now_ms() >= u->keepalive) {
		u->keepalive = now_ms() + E2B_KEEPALIVE_MS;
		event(u, "keepalive", json_object());
	} else {
		api_cond_wait_ms(&p->cond, &p->s->e2b->lock,
				 (unsigned)MIN(u->keepalive - now_ms(), ENVD_WAIT_MS));
		return false;
	}
	return true;
}

static size_t sub_read(struct api_stream *st, char *buf, size_t max)
{
	struct e2b_sub *u = (struct e2b_sub *)st;
	struct api_e2b *e = u->p->s->e2b;

	for (;;) {
		bool got;

		if (u->pending_off < u->pending_len) {
			size_t n = MIN(max, u->pending_len - u->pending_off);

			memcpy(buf, u->pending + u->pending_off, n);
			u->pending_off += n;
			return n;
		}
		if (u->trailed)
			return 0;
		pthread_mutex_lock(&e->lock);
		got = next_envelope(u);
		pthread_mutex_unlock(&e->lock);
		/* A client gone ends its stream, not the process. */
		if (!got && api_client_gone(u->conn_fd))
			return 0;
	}
}

/* The stream is over, or its client gone: it follows no more. */
static void sub_done(struct api_stream *st)
{
	struct e2b_sub *u = (struct e2b_sub *)st;
	struct e2b_proc *p = u->p;
	struct api_e2b *e = p->s->e2b;

	pthread_mutex_lock(&e->lock);
	for (size_t i = 0; i < ENVD_FOLLOW; i++)
		if (p->subs[i] == u)
			p->subs[i] = NULL;
	e->streams--;
	trim(p);
	pthread_cond_broadcast(&p->cond);
	proc_unref(e, p);
	pthread_mutex_unlock(&e->lock);
	free(u->pending);
	free(u);
}

/* A stream following p from its next event, under e->lock; NULL when p
 * has ENVD_FOLLOW already, or the server E2B_STREAMS_MAX. */
struct e2b_sub *envd_follow(struct e2b_proc *p, int conn_fd)
{
	struct api_e2b *e = p->s->e2b;
	struct e2b_sub *u;

	for (size_t i = 0; i < ENVD_FOLLOW && e->streams < E2B_STREAMS_MAX; i++) {
		if (p->subs[i])
			continue;
		u = xzalloc(sizeof(*u));
		*u = (struct e2b_sub){ .stream = { sub_read, sub_done },
				       .p = p,
				       .next = p->next,
				       .keepalive = now_ms() + E2B_KEEPALIVE_MS,
				       .conn_fd = conn_fd };
		p->subs[i] = u;
		p->refs++;
		e->streams++;
		return u;
	}
	return NULL;
}

void envd_init(struct api_e2b *e)
{
	api_cond_init(&e->gone);
}

void envd_procs_free(struct api_server *s)
{
	struct api_e2b *e = s->e2b;
	uint64_t warn = now_ms() + 2 * API_KILL_GRACE_MS;
	bool left = true;

	/* Every stream has ended before the server's end; the processes that
	 * outlived theirs saw the server's cancel, were killed and hung up,
	 * and go: their pumps use e and s to the last. */
	pthread_mutex_lock(&e->lock);
	while (left) {
		left = false;
		for (size_t i = 0; i < E2B_PROCS_MAX; i++)
			left |= e->procs[i] != NULL;
		if (left && now_ms() >= warn) {
			log_warn("e2b: waiting for processes killed at the end");
			warn = UINT64_MAX;
		}
		if (left)
			api_cond_wait_ms(&e->gone, &e->lock, 200);
	}
	pthread_mutex_unlock(&e->lock);
}

/* A terminal for the process: its master ours (output, input, its size),
 * its other end the process's stdin, stdout and stderr. */
static bool terminal(struct e2b_proc *p, unsigned rows, unsigned cols)
{
	struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
	struct termios tio;
	char name[64];
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC), t = -1;

	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0 || ptsname_r(m, name, sizeof(name)) != 0 ||
	    ioctl(m, TIOCSWINSZ, &ws) < 0 || (t = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
		close_fd(&m);
		return false;
	}
	/* Raw from the start, as the session will make it: input sent
	 * before then is not echoed or edited here. */
	if (tcgetattr(t, &tio) == 0) {
		cfmakeraw(&tio);
		tcsetattr(t, TCSANOW, &tio);
	}
	p->in_r = t;
	p->out_w = fcntl(t, F_DUPFD_CLOEXEC, 0);
	p->err_w = fcntl(t, F_DUPFD_CLOEXEC, 0);
	p->out_r = m;
	p->in_w = fcntl(m, F_DUPFD_CLOEXEC, 0);
	p->pty = fcntl(m, F_DUPFD_CLOEXEC, 0);
	fcntl(p->out_r, F_SETFL, O_NONBLOCK);
	fcntl(p->in_w, F_SETFL, O_NONBLOCK);
	return p->out_w >= 0 && p->err_w >= 0 && p->in_w >= 0 && p->pty >= 0;
}

/* Pipes for stdin, stdout and stderr, or a terminal (rows > 0); and the
 * signals' pipe. */
bool envd_pipes(struct e2b_proc *p, unsigned rows, unsigned cols)
{
	int in[2], out[2], err[2], sig[2];

	if (pipe2(sig, O_CLOEXEC | O_NONBLOCK) < 0)
		return false;
	p->sig_r = sig[0], p->sig_w = sig[1];
	if (rows)
		return terminal(p, rows, cols);
	if (pipe2(in, O_CLOEXEC) < 0)
		return false;
	if (pipe2(out, O_CLOEXEC) < 0) {
		close(in[0]), close(in[1]);
		return false;
	}
	if (pipe2(err, O_CLOEXEC) < 0) {
		close(in[0]), close(in[1]), close(out[0]), close(out[1]);
		return false;
	}
	p->in_r = in[0], p->in_w = in[1];
	p->out_r = out[0], p->out_w = out[1];
	p->err_r = err[0], p->err_w = err[1];
	fcntl(p->out_r, F_SETFL, O_NONBLOCK);
	fcntl(p->err_r, F_SETFL, O_NONBLOCK);
	fcntl(p->in_w, F_SETFL, O_NONBLOCK);
	return true;
}
