/* envd's process service, as the E2B SDK calls it (e2b.h): Connect RPCs
 * over HTTP/1.1 with JSON messages. Start and Connect answer a stream of
 * envelopes (a flags byte, a 4-byte big-endian length, the JSON): the
 * process's start, its output as it comes (base64), keepalives, its end,
 * and the end-of-stream trailer; List, SendSignal, SendInput, CloseStdin
 * and Update (a terminal's size) are unary.
 *
 * As envd's, a process lives past its streams (envd_proc.c): a client
 * that goes away leaves it running, output nobody follows is dropped, and
 * it ends when it exits, at its deadline (Connect-Timeout-Ms on Start),
 * when its sandbox goes, or when the server stops. A stream that falls
 * behind holds the process's writes back, never the other streams' bytes:
 * nothing is dropped for a stream that follows. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "api/e2b.h"
#include "api/envd_proc.h"
#include "common/json.h"
#include "common/text.h"
#include "common/util.h"
#include "proto/base64.h"

void envd_error(struct api_reply *r, unsigned status, const char *code, const char *fmt, ...)
{
	cleanup_free char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	msg = api_vmessage(fmt, ap);
	va_end(ap);
	api_reply_json(r, status, json_pack("{s:s,s:s}", "code", code, "message", msg));
}

/* A Connect envelope of j (consumed): flags, then the JSON's length
 * (4 bytes, big-endian) and bytes; malloc()ed, its length in *len. */
char *envd_frame(uint8_t flags, json_t *j, size_t *len)
{
	cleanup_free char *text = json_dumps(j, JSON_COMPACT);
	size_t n = strlen(text);
	char *f = xmalloc(5 + n);

	json_decref(j);
	f[0] = (char)flags;
	f[1] = (char)(n >> 24);
	f[2] = (char)(n >> 16);
	f[3] = (char)(n >> 8);
	f[4] = (char)n;
	memcpy(f + 5, text, n);
	*len = 5 + n;
	return f;
}

/* The message of a Connect request: a streaming one's single envelope, or
 * a unary one's JSON. NULL with r filled. */
json_t *envd_message(const struct api_request *req, bool stream, struct api_reply *r)
{
	const unsigned char *b = (const unsigned char *)req->body;
	json_error_t e;
	size_t n;
	json_t *j;

	if (!stream)
		j = json_loadb(req->body ? req->body : "{}", req->len ? req->len : 2, 0, &e);
	else if (req->len < 5 ||
		 (n = (size_t)b[1] << 24 | (size_t)b[2] << 16 | (size_t)b[3] << 8 | b[4]) !=
			 req->len - 5 ||
		 (b[0] & 1))
		return envd_error(r, 400, "invalid_argument", "want one uncompressed envelope"),
		       NULL;
	else
		j = json_loadb(req->body + 5, n, 0, &e);
	if (!json_is_object(j)) {
		json_decref(j);
		envd_error(r, 400, "invalid_argument", "the message is not a JSON object");
		return NULL;
	}
	return j;
}

/* Start's argv. The SDK runs `/bin/bash -l -c CMD`, and `/bin/bash -i -l`
 * for a terminal: where the image has no bash, its arguments go to
 * /bin/sh. */
static char **start_argv(const char *cmd, json_t *args, size_t *argc)
{
	static const char shim[] = "[ -x /bin/bash ] && exec /bin/bash \"$@\"; exec /bin/sh \"$@\"";
	size_t n = json_array_size(args), i, k = 0;
	char **v = xzalloc((n + 5) * sizeof(*v));
	json_t *a;

	if (strcmp(cmd, "/bin/bash") == 0) {
		v[k++] = "/bin/sh";
		v[k++] = "-c";
		v[k++] = (char *)shim;
		v[k++] = "sh";
	} else {
		v[k++] = (char *)cmd;
	}
	json_array_foreach(args, i, a) v[k++] = (char *)json_string_value(a);
	*argc = k;
	return v;
}

/* pty.size's rows and cols, 1 to ENVD_TTY_MAX each; false when it has
 * no such size. */
static bool pty_size(json_t *pty, unsigned *rows, unsigned *cols)
{
	json_t *size = json_object_get(pty, "size"), *r = json_object_get(size, "rows"),
	       *c = json_object_get(size, "cols");

	if (!json_is_integer(r) || !json_is_integer(c) || json_integer_value(r) < 1 ||
	    json_integer_value(r) > ENVD_TTY_MAX || json_integer_value(c) < 1 ||
	    json_integer_value(c) > ENVD_TTY_MAX)
		return false;
	*rows = (unsigned)json_integer_value(r);
	*cols = (unsigned)json_integer_value(c);
	return true;
}

static bool all_strings(json_t *v)
{
	const char *k;
	size_t i;
	json_t *x;

	if (json_is_array(v)) {
		json_array_foreach(v, i, x) if (!json_is_string(x)) return false;
	} else if (json_is_object(v)) {
		json_object_foreach(v, k, x) if (!json_is_string(x)) return false;
	}
	return true;
}

/* A Start that cannot start: a stream of the end-of-stream trailer alone,
 * its error in it (a streaming client reads errors there, not from the
 * status). */
void envd_stream_error(struct api_reply *r, const char *code, const char *msg)
{
	api_reply_json(r, 200, NULL);
	r->owned = envd_frame(2, json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg),
			      &r->len);
	r->bytes = r->owned;
	r->type = "application/connect+json";
}

/* A stream's reply: 200 and the envelopes as they come. */
static void stream_reply(struct api_reply *r, struct e2b_sub *u)
{
	r->status = 200;
	r->type = "application/connect+json";
	r->stream = &u->stream;
}

/* A new process of box from Start's message m; NULL with r filled. */
static struct e2b_proc *proc_new(struct api_server *s, const char *box, json_t *m, const char *tmo,
				 struct api_reply *r)
{
	json_t *proc = json_object_get(m, "process"), *args, *envs, *v,
	       *pty = json_object_get(m, "pty");
	const char *cmd = json_string_value(json_object_get(proc, "cmd")), *k;
	unsigned rows = 0, cols = 0;
	struct e2b_proc *p;
	uint64_t ms = 0;
	size_t i = 0;

	args = json_object_get(proc, "args");
	envs = json_object_get(proc, "envs");
	if (cmd == NULL || (args && !json_is_array(args)) || (envs && !json_is_object(envs)) ||
	    json_array_size(args) > API_ARGV_MAX || !all_strings(args) || !all_strings(envs) ||
	    (pty && !pty_size(pty, &rows, &cols))) {
		envd_stream_error(r, "invalid_argument",
				  pty ? "pty: want size.rows and size.cols, 1 to 1000 each"
				      : "want process.cmd, and args and envs of strings");
		return NULL;
	}
	p = xzalloc(sizeof(*p));
	*p = (struct e2b_proc){ .s = s,
				.out_r = -1,
				.err_r = -1,
				.in_w = -1,
				.sig_w = -1,
				.in_r = -1,
				.out_w = -1,
				.err_w = -1,
				.sig_r = -1,
				.pty = -1,
				.cancel = { .fd = -1 } };
	api_cond_init(&p->cond);
	snprintf(p->box, sizeof(p->box), "%s", box);
	p->config = json_pack("{s:s,s:o,s:o}", "cmd", cmd, "args",
			      args ? json_deep_copy(args) : json_array(), "envs",
			      envs ? json_deep_copy(envs) : json_object());
	if (json_is_string(json_object_get(proc, "cwd")))
		json_object_set(p->config, "cwd", json_object_get(proc, "cwd"));
	if (json_is_string(json_object_get(m, "tag")))
		p->tag = xstrdup(json_string_value(json_object_get(m, "tag")));
	/* Every string the process gets is p->config's, kept as long as it. */
	p->argv = start_argv(json_string_value(json_object_get(p->config, "cmd")),
			     json_object_get(p->config, "args"), &p->x.argc);
	p->x.argv = p->argv;
	p->env = xzalloc((json_object_size(envs) + 1) * sizeof(char *));
	json_object_foreach(envs, k, v) if (json_is_string(v))
		xasprintf(&p->env[i++], "%s=%s", k, json_string_value(v));
	p->x.env = p->env;
	p->x.nr_env = i;
	p->x.cwd = json_string_value(json_object_get(p->config, "cwd"));
	if (tmo && parse_u64(tmo, UINT64_MAX, &ms) < 0)
		ms = 0;
	ms = MIN(ms, 86400000ull); /* a day at most */
	p->deadline = ms ? now_ms() + ms : UINT64_MAX;
	p->x.tty = rows > 0;
	p->x.raw = true; /* envd runs the command itself: no Entrypoint before it */
	if (!envd_pipes(p, rows, cols) || cancel_init(&p->cancel, NULL) < 0) {
		envd_stream_error(r, "internal", "cannot set up the process");
		envd_proc_free(p);
		return NULL;
	}
	if (!json_is_true(json_object_get(m, "stdin")) && rows == 0)
		close_fd(&p->in_w); /* no input: it reads EOF (a terminal's is its own) */
	return p;
}

static void start(struct api_server *s, const struct api_request *req, const char *box,
		  struct api_reply *r)
{
	json_t *m = envd_message(req, true, r);
	struct api_e2b *e = s->e2b;
	struct e2b_proc *p;
	struct e2b_sub *u = NULL;
	size_t slot = E2B_PROCS_MAX;

	if (m == NULL)
		return;
	p = proc_new(s, box, m, req->lookup(req, false, "Connect-Timeout-Ms"), r);
	json_decref(m);
	if (p == NULL)
		return;
	pthread_mutex_lock(&e->lock);
	for (size_t j = 0; j < E2B_PROCS_MAX && slot == E2B_PROCS_MAX; j++)
		if (e->procs[j] == NULL)
			slot = j;
	p->refs = 1; /* the pump's; envd_follow() takes the stream's */
	if (slot < E2B_PROCS_MAX && (u = envd_follow(p, req->conn_fd)) != NULL) {
		e->procs[slot] = p;
		p->pid = e->next_pid++;
	}
	pthread_mutex_unlock(&e->lock);
	if (u == NULL) {
		slot = E2B_PROCS_MAX;
		envd_stream_error(r, "resource_exhausted",
				  "processes or their streams at the limit");
		goto fail;
	}
	if (pthread_create(&p->thread, NULL, envd_proc_thread, p) != 0) {
		envd_stream_error(r, "internal", "cannot start a thread");
		goto fail;
	}
	if (pthread_create(&p->pump, NULL, envd_pump, p) != 0) {
		cancel_fire(&p->cancel);
		close_fd(&p->out_r);
		close_fd(&p->err_r);
		pthread_join(p->thread, NULL);
		envd_stream_error(r, "internal", "cannot start a thread");
		goto fail;
	}
	pthread_detach(p->pump);
	pthread_mutex_lock(&e->lock);
	p->running = true;
	pthread_mutex_unlock(&e->lock);
	stream_reply(r, u);
	return;
fail:
	/* Not running yet: nothing but u follows it. */
	pthread_mutex_lock(&e->lock);
	if (slot < E2B_PROCS_MAX)
		e->procs[slot] = NULL;
	if (u)
		e->streams--;
	pthread_mutex_unlock(&e->lock);
	free(u);
	close_fd(&p->in_r);
	close_fd(&p->out_w);
	close_fd(&p->err_w);
	close_fd(&p->sig_r);
	envd_proc_free(p);
}

/* The process the request's process.pid (or process.tag) names in box;
 * under e->lock. */
static struct e2b_proc *proc_of(struct api_e2b *e, const char *box, json_t *m)
{
	json_t *sel = json_object_get(m, "process"), *pid = json_object_get(sel, "pid");
	const char *tag = json_string_value(json_object_get(sel, "tag"));

	for (size_t i = 0; i < E2B_PROCS_MAX; i++) {
		struct e2b_proc *p = e->procs[i];

		if (p == NULL || !p->running || strcmp(p->box, box) != 0 || p->ended)
			continue;
		if ((json_is_integer(pid) && json_integer_value(pid) == p->pid) ||
		    (tag && p->tag && strcmp(tag, p->tag) == 0))
			return p;
	}
	return NULL;
}

static void list(struct api_server *s, const char *box, struct api_reply *r)
{
	json_t *a = json_array();

	pthread_mutex_lock(&s->e2b->lock);
	for (size_t i = 0; i < E2B_PROCS_MAX; i++) {
		struct e2b_proc *p = s->e2b->procs[i];
		json_t *o;

		if (p == NULL || !p->running || strcmp(p->box, box) != 0 || p->ended)
			continue;
		o = json_pack("{s:I,s:O}", "pid", (json_int_t)p->pid, "config", p->config);
		if (p->tag)
			json_object_set_new(o, "tag", json_string(p->tag));
		json_array_append_new(a, o);
	}
	pthread_mutex_unlock(&s->e2b->lock);
	api_reply_json(r, 200, json_pack("{s:o}", "processes", a));
}

static int signal_of(const char *name)
{
	return name == NULL			     ? 0
	       : strcmp(name, "SIGNAL_SIGKILL") == 0 ? SIGKILL
	       : strcmp(name, "SIGNAL_SIGTERM") == 0 ? SIGTERM
	       : strcmp(name, "9") == 0		     ? SIGKILL
	       : strcmp(name, "15") == 0	     ? SIGTERM
						     : 0;
}

/* SendSignal, SendInput, CloseStdin: to a running process of box. */
static void to_proc(struct api_server *s, const char *box, const char *method, json_t *m,
		    struct api_reply *r)
{
	json_t *sig = json_object_get(m, "signal");
	json_t *input = json_object_get(m, "input");
	const char *in = json_string_value(json_object_get(input, "stdin"))
				 ?: json_string_value(json_object_get(input, "pty"));
	int signo = json_is_integer(sig) ? (int)json_integer_value(sig)
					 : signal_of(json_string_value(sig));
	struct e2b_proc *p;
	unsigned char *buf = NULL;
	long n = 0, done = 0;
	int in_fd = -1;

	if (strcmp(method, "SendSignal") == 0 && signo != SIGKILL && signo != SIGTERM)
		return envd_error(r, 400, "invalid_argument",
				  "signal: SIGNAL_SIGKILL or SIGNAL_SIGTERM");
	if (strcmp(method, "SendInput") == 0) {
		if (in == NULL || strlen(in) > 4 * API_STDIN_MAX / 3 + 4)
			return envd_error(r, 400, "invalid_argument",
					  "input.stdin or input.pty: base64, 1 MiB at most");
		buf = xmalloc(strlen(in) / 4 * 3 + 3);
		n = b64_decode(in, strlen(in), buf, strlen(in) / 4 * 3 + 3, B64_PADDED);
		if (n < 0) {
			free(buf);
			return envd_error(r, 400, "invalid_argument", "input.stdin: not base64");
		}
	}
	pthread_mutex_lock(&s->e2b->lock);
	p = proc_of(s->e2b, box, m);
	if (p && strcmp(method, "SendSignal") == 0) {
		envd_proc_kill(p, signo);
	} else if (p && strcmp(method, "CloseStdin") == 0) {
		close_fd(&p->in_w);
	} else if (p && p->in_w >= 0) {
		/* Written outside the lock, through a descriptor of our own. */
		in_fd = fcntl(p->in_w, F_DUPFD_CLOEXEC, 0);
	}
	pthread_mutex_unlock(&s->e2b->lock);
	if (p == NULL) {
		free(buf);
		return envd_error(r, 404, "not_found", "no such process");
	}
	if (buf) {
		uint64_t until = now_ms() + 5000;

		while (in_fd >= 0 && done < n && now_ms() < until) {
			struct pollfd f = { in_fd, POLLOUT, 0 };
			ssize_t k;

			if (poll(&f, 1, 500) < 0 && errno != EINTR)
				break;
			k = write(in_fd, buf + done, (size_t)(n - done));
			if (k > 0)
				done += k;
			else if (k < 0 && errno != EAGAIN && errno != EINTR)
				break;
		}
		close_fd(&in_fd);
		free(buf);
		if (done < n)
			return envd_error(r, 400, "failed_precondition",
					  "the process's stdin is closed, or took %ld of %ld bytes "
					  "in 5 s",
					  done, n);
	}
	api_reply_json(r, 200, json_object());
}

/* Connect: follow a running process of box from its next event on. */
static void connect_(struct api_server *s, const struct api_request *req, const char *box,
		     struct api_reply *r)
{
	json_t *m = envd_message(req, true, r);
	struct api_e2b *e = s->e2b;
	struct e2b_proc *p;
	struct e2b_sub *u = NULL;

	if (m == NULL)
		return;
	pthread_mutex_lock(&e->lock);
	p = proc_of(e, box, m);
	if (p)
		u = envd_follow(p, req->conn_fd);
	pthread_mutex_unlock(&e->lock);
	json_decref(m);
	if (p == NULL)
		envd_stream_error(r, "not_found", "no such process");
	else if (u == NULL)
		envd_stream_error(r, "resource_exhausted",
				  "the process has its most followers already");
	else
		stream_reply(r, u);
}

/* Update: a new size for a process's terminal, as a terminal's window
 * change: the process gets SIGWINCH. */
static void update(struct api_server *s, const char *box, json_t *m, struct api_reply *r)
{
	const unsigned char winch = SIGWINCH;
	unsigned rows, cols;
	struct e2b_proc *p;
	bool tty = false;

	if (!pty_size(json_object_get(m, "pty"), &rows, &cols))
		return envd_error(r, 400, "invalid_argument",
				  "pty: want size.rows and size.cols, 1 to %d each", ENVD_TTY_MAX);
	pthread_mutex_lock(&s->e2b->lock);
	p = proc_of(s->e2b, box, m);
	if (p && p->pty >= 0) {
		struct winsize ws = { .ws_row = (unsigned short)rows,
				      .ws_col = (unsigned short)cols };

		tty = true;
		if (ioctl(p->pty, TIOCSWINSZ, &ws) == 0 && p->sig_w >= 0)
			(void)!write(p->sig_w, &winch, 1);
	}
	pthread_mutex_unlock(&s->e2b->lock);
	if (p == NULL)
		return envd_error(r, 404, "not_found", "no such process");
	if (!tty)
		return envd_error(r, 400, "invalid_argument", "the process has no terminal");
	api_reply_json(r, 200, json_object());
}

void envd_process(struct api_server *s, const struct api_request *req, const char *box,
		  const char *method, struct api_reply *r)
{
	json_t *m;

	if (strcmp(method, "Start") == 0)
		return start(s, req, box, r);
	if (strcmp(method, "Connect") == 0)
		return connect_(s, req, box, r);
	if (strcmp(method, "StreamInput") == 0)
		return envd_error(r, 501, "unimplemented", "process.%s: not yet", method);
	m = envd_message(req, false, r);
	if (m == NULL)
		return;
	if (strcmp(method, "List") == 0)
		list(s, box, r);
	else if (strcmp(method, "SendSignal") == 0 || strcmp(method, "SendInput") == 0 ||
		 strcmp(method, "CloseStdin") == 0)
		to_proc(s, box, method, m, r);
	else if (strcmp(method, "Update") == 0)
		update(s, box, m, r);
	else
		envd_error(r, 404, "unimplemented", "no method process.%.64s", method);
	json_decref(m);
}
