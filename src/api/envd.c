/* envd's process service, as the E2B SDK calls it (e2b.h): Connect RPCs
 * over HTTP/1.1 with JSON messages. Start answers a stream of envelopes
 * (a flags byte, a 4-byte big-endian length, the JSON): the process's
 * start, its output as it comes (base64), keepalives, its end, and the
 * end-of-stream trailer; List, SendSignal, SendInput and CloseStdin are
 * unary. Each process runs through the backend's exec on a thread of its
 * own and lives as long as its Start stream: a client that goes away has
 * it killed (the real envd keeps it until its deadline). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/e2b.h"
#include "common/json.h"
#include "common/log.h"
#include "common/text.h"
#include "common/util.h"
#include "proto/base64.h"

#define ENVD_CHUNK 49152 /* output bytes in one data event */

struct e2b_proc {
	struct api_stream stream; /* first: the Start stream is this */
	struct api_server *s;
	uint32_t pid;
	char box[65];
	json_t *config; /* {cmd, args, envs, cwd}, as List shows it */
	char *tag;
	char **argv, **env;
	struct api_exec x;
	/* Ours: its output, its stdin, its signals. */
	int out_r, err_r, in_w, sig_w;
	/* Its own, closed by its thread when the exec returns. */
	int in_r, out_w, err_w, sig_r;
	pthread_t thread;
	struct gantry_cancel cancel;
	int ret;
	struct api_exec_result res;
	gantry_error_t err;
	uint64_t deadline, keepalive, hangup_at;
	int conn_fd; /* its client's connection */
	bool started, ended, trailed, killed, timed_out;
	char *pending; /* an envelope not sent whole yet */
	size_t pending_len, pending_off;
};

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
static char *frame(uint8_t flags, json_t *j, size_t *len)
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

/* The next envelope for the stream to send. */
static void envelope(struct e2b_proc *p, uint8_t flags, json_t *j)
{
	free(p->pending);
	p->pending = frame(flags, j, &p->pending_len);
	p->pending_off = 0;
}

static void event(struct e2b_proc *p, const char *kind, json_t *body)
{
	envelope(p, 0, json_pack("{s:{s:o}}", "event", kind, body));
}

static void data_event(struct e2b_proc *p, const char *stream, const char *buf, size_t n)
{
	char *b64 = xmalloc(b64_encoded_len(n, B64_PADDED) + 1);

	b64_encode(buf, n, b64, B64_PADDED);
	event(p, "data", json_pack("{s:s}", stream, b64));
	free(b64);
}

static void *proc_thread(void *arg)
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

/* SIGKILL through its session; hung up at once if that cannot go. */
static void proc_kill(struct e2b_proc *p, int signo)
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

/* The end, once its output is drained and its exec returned. */
static void end_event(struct e2b_proc *p)
{
	cleanup_free char *status = NULL;
	json_t *end;

	pthread_join(p->thread, NULL);
	if (p->ret < 0) {
		event(p, "end",
		      json_pack("{s:i,s:b,s:s,s:s}", "exitCode", -1, "exited", 0, "status",
				"failed", "error",
				text_sanitize_utf8(xstrdup(gantry_error_str(p->err)))));
		return;
	}
	if (p->res.signal)
		xasprintf(&status, "signal: %s",
			  p->res.signal == SIGKILL   ? "killed"
			  : p->res.signal == SIGTERM ? "terminated"
						     : "signaled");
	else
		xasprintf(&status, "exit status %d", p->res.exit_code);
	end = json_pack("{s:i,s:b,s:s}", "exitCode", p->res.signal ? -1 : p->res.exit_code,
			"exited", !p->res.signal, "status", status);
	event(p, "end", end);
}

static size_t proc_read(struct api_stream *st, char *buf, size_t max)
{
	struct e2b_proc *p = (struct e2b_proc *)st;
	char chunk[ENVD_CHUNK];

	for (;;) {
		if (p->pending_off < p->pending_len) {
			size_t n = MIN(max, p->pending_len - p->pending_off);

			memcpy(buf, p->pending + p->pending_off, n);
			p->pending_off += n;
			return n;
		}
		if (p->trailed)
			return 0;
		if (!p->started) {
			p->started = true;
			event(p, "start", json_pack("{s:I}", "pid", (json_int_t)p->pid));
			continue;
		}
		if (p->ended) {
			p->trailed = true;
			if (p->timed_out)
				envelope(p, 2,
					 json_pack("{s:{s:s,s:s}}", "error", "code",
						   "deadline_exceeded", "message",
						   "the command ran past its deadline"));
			else
				envelope(p, 2, json_object());
			continue;
		}
		if (p->out_r < 0 && p->err_r < 0) {
			p->ended = true;
			end_event(p);
			continue;
		}
		{
			struct pollfd f[4] = { { p->out_r, POLLIN, 0 },
					       { p->err_r, POLLIN, 0 },
					       { p->conn_fd, POLLRDHUP, 0 },
					       { cancel_fd(&p->s->cancel), POLLIN, 0 } };
			uint64_t now = now_ms(), wake;
			ssize_t n;

			if (p->hangup_at && now >= p->hangup_at)
				cancel_fire(&p->cancel);
			if (p->killed) /* the client and the server's end matter no more */
				f[2].fd = f[3].fd = -1;

			if (now >= p->deadline) {
				p->timed_out = true;
				p->deadline = UINT64_MAX; /* once */
				proc_kill(p, SIGKILL);
			}
			wake = MIN(MIN(p->keepalive, p->deadline),
				   p->hangup_at ? p->hangup_at : UINT64_MAX);
			if (now >= p->keepalive) {
				p->keepalive = now + E2B_KEEPALIVE_MS;
				event(p, "keepalive", json_object());
				continue;
			}
			if (poll(f, 4, (int)MIN(wake > now ? wake - now : 0, 1000u)) < 0 &&
			    errno != EINTR)
				cancel_fire(&p->cancel);
			if ((f[2].revents & (POLLRDHUP | POLLHUP | POLLERR)) || f[3].revents) {
				proc_kill(p, SIGKILL);
				continue;
			}
			for (int i = 0; i < 2; i++) {
				int *fd = i ? &p->err_r : &p->out_r;

				if (*fd < 0 || !(f[i].revents & (POLLIN | POLLHUP | POLLERR)))
					continue;
				n = read(*fd, chunk, sizeof(chunk));
				if (n > 0) {
					data_event(p, i ? "stderr" : "stdout", chunk, (size_t)n);
					break;
				}
				if (n == 0 || (errno != EAGAIN && errno != EINTR))
					close_fd(fd);
			}
		}
	}
}

static void proc_free(struct e2b_proc *p)
{
	close_fd(&p->out_r);
	close_fd(&p->err_r);
	close_fd(&p->in_w);
	close_fd(&p->sig_w);
	cancel_destroy(&p->cancel);
	gantry_error_free(&p->err);
	json_decref(p->config);
	free(p->tag);
	free(p->argv);
	strv_free(p->env);
	free(p->pending);
	free(p);
}

/* The stream is over (or its client gone): the process, if it still
 * runs, is killed and waited for, and leaves the table. */
static void proc_done(struct api_stream *st)
{
	struct e2b_proc *p = (struct e2b_proc *)st;
	struct api_e2b *e = p->s->e2b;

	if (!p->ended) {
		proc_kill(p, SIGKILL);
		cancel_fire(&p->cancel);
		close_fd(&p->out_r);
		close_fd(&p->err_r);
		pthread_join(p->thread, NULL);
	}
	pthread_mutex_lock(&e->lock);
	for (size_t i = 0; i < E2B_PROCS_MAX; i++)
		if (e->procs[i] == p)
			e->procs[i] = NULL;
	pthread_mutex_unlock(&e->lock);
	proc_free(p);
}

void envd_procs_free(struct api_server *s)
{
	/* Every stream has ended before the server's end: nothing to do but
	 * check. */
	for (size_t i = 0; i < E2B_PROCS_MAX; i++)
		if (s->e2b->procs[i])
			log_warn("e2b: process %u still listed at the end",
				 (unsigned)s->e2b->procs[i]->pid);
}

/* The message of a Connect request: a streaming one's single envelope, or
 * a unary one's JSON. NULL with r filled. */
static json_t *message(const struct api_request *req, bool stream, struct api_reply *r)
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

/* Start's argv: `/bin/bash -l -c CMD`, the SDK's way, runs under /bin/sh
 * where the image has no bash. */
static char **start_argv(const char *cmd, json_t *args, size_t *argc)
{
	static const char shim[] = "[ -x /bin/bash ] && exec /bin/bash -l -c \"$1\"; "
				   "exec /bin/sh -c \"$1\"";
	size_t n = json_array_size(args), i;
	char **v = xzalloc((n + 5) * sizeof(*v));
	json_t *a;

	if (strcmp(cmd, "/bin/bash") == 0 && n == 3 &&
	    strcmp(json_string_value(json_array_get(args, 0)) ?: "", "-l") == 0 &&
	    strcmp(json_string_value(json_array_get(args, 1)) ?: "", "-c") == 0 &&
	    json_is_string(json_array_get(args, 2))) {
		v[0] = "/bin/sh";
		v[1] = "-c";
		v[2] = (char *)shim;
		v[3] = "sh";
		v[4] = (char *)json_string_value(json_array_get(args, 2));
		*argc = 5;
		return v;
	}
	v[0] = (char *)cmd;
	json_array_foreach(args, i, a) v[i + 1] = (char *)json_string_value(a);
	*argc = n + 1;
	return v;
}

static bool pipes(struct e2b_proc *p)
{
	int in[2], out[2], err[2], sig[2];

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
	if (pipe2(sig, O_CLOEXEC | O_NONBLOCK) < 0) {
		close(in[0]), close(in[1]), close(out[0]), close(out[1]);
		close(err[0]), close(err[1]);
		return false;
	}
	p->in_r = in[0], p->in_w = in[1];
	p->out_r = out[0], p->out_w = out[1];
	p->err_r = err[0], p->err_w = err[1];
	p->sig_r = sig[0], p->sig_w = sig[1];
	fcntl(p->out_r, F_SETFL, O_NONBLOCK);
	fcntl(p->err_r, F_SETFL, O_NONBLOCK);
	fcntl(p->in_w, F_SETFL, O_NONBLOCK);
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
static void start_error(struct api_reply *r, const char *code, const char *msg)
{
	api_reply_json(r, 200, NULL);
	r->owned = frame(2, json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg),
			 &r->len);
	r->bytes = r->owned;
	r->type = "application/connect+json";
}

static void start(struct api_server *s, const struct api_request *req, const char *box,
		  struct api_reply *r)
{
	json_t *m = message(req, true, r), *proc, *args, *envs, *v;
	const char *cmd, *tmo = req->lookup(req, false, "Connect-Timeout-Ms"), *k;
	struct api_e2b *e = s->e2b;
	struct e2b_proc *p;
	size_t slot = E2B_PROCS_MAX, i = 0;
	uint64_t ms = 0;

	if (m == NULL)
		return;
	proc = json_object_get(m, "process");
	cmd = json_string_value(json_object_get(proc, "cmd"));
	args = json_object_get(proc, "args");
	envs = json_object_get(proc, "envs");
	if (cmd == NULL || (args && !json_is_array(args)) || (envs && !json_is_object(envs)) ||
	    json_array_size(args) > API_ARGV_MAX || !all_strings(args) || !all_strings(envs) ||
	    json_object_get(m, "pty")) {
		start_error(r, "invalid_argument",
			    json_object_get(m, "pty")
				    ? "no terminal (pty) here yet"
				    : "want process.cmd, and args and envs of strings");
		json_decref(m);
		return;
	}
	p = xzalloc(sizeof(*p));
	*p = (struct e2b_proc){ .stream = { proc_read, proc_done },
				.s = s,
				.out_r = -1,
				.err_r = -1,
				.in_w = -1,
				.sig_w = -1,
				.in_r = -1,
				.out_w = -1,
				.err_w = -1,
				.sig_r = -1,
				.cancel = { .fd = -1 } };
	snprintf(p->box, sizeof(p->box), "%s", box);
	p->conn_fd = req->conn_fd;
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
	p->keepalive = now_ms() + E2B_KEEPALIVE_MS;
	if (!pipes(p) || cancel_init(&p->cancel, NULL) < 0) {
		start_error(r, "internal", "cannot set up the process");
		goto fail;
	}
	if (!json_is_true(json_object_get(m, "stdin")))
		close_fd(&p->in_w); /* no input: it reads EOF */
	pthread_mutex_lock(&e->lock);
	for (size_t j = 0; j < E2B_PROCS_MAX && slot == E2B_PROCS_MAX; j++)
		if (e->procs[j] == NULL)
			slot = j;
	if (slot < E2B_PROCS_MAX) {
		e->procs[slot] = p;
		p->pid = e->next_pid++;
	}
	pthread_mutex_unlock(&e->lock);
	if (slot == E2B_PROCS_MAX) {
		start_error(r, "resource_exhausted", "processes already at the limit");
		goto fail;
	}
	if (pthread_create(&p->thread, NULL, proc_thread, p) != 0) {
		pthread_mutex_lock(&e->lock);
		e->procs[slot] = NULL;
		pthread_mutex_unlock(&e->lock);
		start_error(r, "internal", "cannot start a thread");
		goto fail;
	}
	r->status = 200;
	r->type = "application/connect+json";
	r->stream = &p->stream;
	json_decref(m);
	return;
fail:
	close_fd(&p->in_r);
	close_fd(&p->out_w);
	close_fd(&p->err_w);
	close_fd(&p->sig_r);
	proc_free(p);
	json_decref(m);
}

/* The process the request's process.pid (or process.tag) names in box;
 * under e->lock. */
static struct e2b_proc *proc_of(struct api_e2b *e, const char *box, json_t *m)
{
	json_t *sel = json_object_get(m, "process"), *pid = json_object_get(sel, "pid");
	const char *tag = json_string_value(json_object_get(sel, "tag"));

	for (size_t i = 0; i < E2B_PROCS_MAX; i++) {
		struct e2b_proc *p = e->procs[i];

		if (p == NULL || strcmp(p->box, box) != 0 || p->ended)
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

		if (p == NULL || strcmp(p->box, box) != 0 || p->ended)
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
	const char *in = json_string_value(json_object_get(json_object_get(m, "input"), "stdin"));
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
					  "input.stdin: base64, 1 MiB at most");
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
		proc_kill(p, signo);
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

void envd_process(struct api_server *s, const struct api_request *req, const char *box,
		  const char *method, struct api_reply *r)
{
	json_t *m;

	if (strcmp(method, "Start") == 0)
		return start(s, req, box, r);
	if (strcmp(method, "Connect") == 0 || strcmp(method, "StreamInput") == 0 ||
	    strcmp(method, "Update") == 0)
		return envd_error(r, 501, "unimplemented", "process.%s: not yet", method);
	m = message(req, false, r);
	if (m == NULL)
		return;
	if (strcmp(method, "List") == 0)
		list(s, box, r);
	else if (strcmp(method, "SendSignal") == 0 || strcmp(method, "SendInput") == 0 ||
		 strcmp(method, "CloseStdin") == 0)
		to_proc(s, box, method, m, r);
	else
		envd_error(r, 404, "unimplemented", "no method process.%.64s", method);
	json_decref(m);
}
