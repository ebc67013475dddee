/* POST /v1/sandboxes/{name}/exec: a command in a running sandbox, its
 * stdin from the request, its output (stdout and stderr as they came)
 * gathered up to the request's limit, within its timeout. The backend's
 * exec runs on a thread of its own; this one feeds stdin, reads the
 * output and watches the clock, and ends the process (its cancel) on a
 * timeout (408), on output past the limit (413) or at the server's end. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api_priv.h"
#include "api/fields.h"
#include "common/text.h"
#include "common/util.h"

static const struct api_field exec_fields[] = {
	API_REQUIRED("argv", API_STRINGS),
	API_FIELD("cwd", API_STRING),
	API_FIELD("env", API_STRINGS),
	API_FIELD("stdin", API_STRING),
	API_RANGE("timeoutSeconds", 1, API_TIMEOUT_MAX),
	API_RANGE("maxOutputBytes", 1, API_OUTPUT_MAX),
	API_FIELDS_END,
};

struct run {
	struct api_server *s;
	const char *name;
	struct api_exec x;
	int in, out;	/* the process's ends: closed by the thread when it is done */
	int sig, sig_w; /* its signals: the session's end, and ours */
	struct gantry_cancel cancel;
	struct api_exec_result res;
	gantry_error_t err;
	int ret;
};

static void *run_thread(void *arg)
{
	struct run *run = arg;

	run->ret = run->s->b->exec(run->name, &run->x, run->in, run->out, run->out, run->sig,
				   &run->cancel, &run->res, &run->err);
	close_fd(&run->in);
	close_fd(&run->out);
	return NULL;
}

static char **strv_of(json_t *a, size_t *n)
{
	char **v = xzalloc((json_array_size(a) + 1) * sizeof(*v));
	size_t i;
	json_t *e;

	json_array_foreach(a, i, e) v[i] = (char *)json_string_value(e);
	*n = json_array_size(a);
	return v;
}

/* What is not UTF-8 in the output becomes U+FFFD, for a JSON string. */
static json_t *text(const char *p, size_t n)
{
	size_t len;
	cleanup_free char *t = text_utf8_replaced(p, n, &len);
	json_t *j = json_stringn(t, len);

	return j ? j : json_string("");
}

/* The process is to end (its timeout, its output over the limit, its
 * client gone, the server's end): SIGKILL first, through the session's
 * signals; a session that has not ended API_KILL_GRACE_MS later is hung
 * up (its cancel). */
static void end_it(struct run *run, uint64_t *hangup_at)
{
	const unsigned char sig = SIGKILL;

	if (*hangup_at)
		return;
	if (run->sig_w < 0 || write(run->sig_w, &sig, 1) != 1)
		cancel_fire(&run->cancel);
	*hangup_at = now_ms() + API_KILL_GRACE_MS;
}

/* Feed stdin, gather the output, keep the clock and watch the client
 * (conn_fd: it hung up). 0, 408, 413, or 499 for a client gone. */
static unsigned pump(struct run *run, int in_w, int out_r, int conn_fd, const char *stdin_buf,
		     size_t stdin_len, uint64_t deadline, size_t limit, char **out, size_t *out_len)
{
	size_t done = 0, cap = 0;
	char chunk[65536];
	uint64_t now, hangup_at = 0;
	unsigned status = 0;

	*out = NULL;
	*out_len = 0;
	for (;;) {
		struct pollfd p[4] = { { out_r, POLLIN, 0 },
				       { in_w, POLLOUT, 0 },
				       { cancel_fd(&run->s->cancel), POLLIN, 0 },
				       { conn_fd, POLLRDHUP, 0 } };
		uint64_t wake;
		ssize_t n;

		now = now_ms();
		if (status == 0 && now >= deadline) {
			status = 408;
			end_it(run, &hangup_at);
		}
		if (hangup_at && now >= hangup_at)
			cancel_fire(&run->cancel);
		if (in_w >= 0 && done == stdin_len)
			close_fd(&in_w);
		p[1].fd = in_w;
		if (status) /* the server's end and the client matter no more */
			p[2].fd = p[3].fd = -1;
		wake = hangup_at ? hangup_at : deadline;
		if (poll(p, 4, wake > now ? (int)MIN(wake - now, 1000u) : 0) < 0 &&
		    errno != EINTR) {
			cancel_fire(&run->cancel); /* and go on draining until its end */
			continue;
		}
		if (p[2].revents || (p[3].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
			status = p[2].revents ? 503 : 499;
			end_it(run, &hangup_at);
		}
		if (in_w >= 0 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
			n = write(in_w, stdin_buf + done, MIN(stdin_len - done, 65536));
			if (n > 0)
				done += (size_t)n;
			else if (n < 0 && errno != EAGAIN && errno != EINTR)
				close_fd(&in_w);
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			n = read(out_r, chunk, sizeof(chunk));
			if (n == 0)
				break;
			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				cancel_fire(&run->cancel);
				continue;
			}
			if (n > 0 && status == 0 && *out_len + (size_t)n > limit) {
				status = 413;
				end_it(run, &hangup_at);
			}
			if (n > 0 && status == 0) {
				if (*out_len + (size_t)n > cap) {
					cap = MAX(cap * 2, *out_len + (size_t)n);
					*out = xrealloc(*out, cap);
				}
				memcpy(*out + *out_len, chunk, (size_t)n);
				*out_len += (size_t)n;
			}
		}
	}
	close_fd(&in_w);
	return status;
}

static void answer(struct run *run, unsigned status, const char *out, size_t len, uint64_t timeout,
		   size_t limit, struct api_reply *r)
{
	if (status == 408)
		return api_reply_error(r, 408, "the command ran past its %llus timeout",
				       (unsigned long long)timeout);
	if (status == 413)
		return api_reply_error(r, 413, "the command's output went past %zu bytes", limit);
	if (status == 499) /* nobody to tell */
		return api_reply_error(r, 400, "the client went away");
	if (status == 503 || (run->ret < 0 && cancel_fired(&run->s->cancel)))
		return api_reply_error(r, 503, "the server is stopping");
	if (run->ret < 0) {
		return api_reply_failure(r, run->err, 409);
	}
	api_reply_json(r, 200,
		       json_pack("{s:i,s:o,s:o}", "exitCode", run->res.exit_code, "signal",
				 run->res.signal ? json_integer(run->res.signal) : json_null(),
				 "output", text(out ? out : "", len)));
}

void api_exec(struct api_server *s, const char *name, const char *body, size_t len, int conn_fd,
	      struct api_reply *r)
{
	json_t *req = api_body_object(body, len, r), *argv, *env, *in;
	struct run run = { .s = s, .name = name, .in = -1, .out = -1, .sig = -1, .sig_w = -1 };
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, psig[2] = { -1, -1 };
	cleanup_free char *out = NULL;
	uint64_t timeout = API_TIMEOUT_DEFAULT;
	size_t limit = API_OUTPUT_DEFAULT, out_len = 0, stdin_len = 0;
	const char *stdin_buf = "";
	pthread_t t;
	unsigned status;

	if (req == NULL || !api_fields_check(req, exec_fields, r))
		goto out;
	argv = json_object_get(req, "argv");
	env = json_object_get(req, "env");
	in = json_object_get(req, "stdin");
	if (json_array_size(argv) == 0 || json_array_size(argv) > API_ARGV_MAX) {
		api_reply_error(r, 400, "field `argv` must hold 1 to %d strings", API_ARGV_MAX);
		goto out;
	}
	if (in && json_string_length(in) > API_STDIN_MAX) {
		api_reply_error(r, 413, "field `stdin` is over %u bytes", API_STDIN_MAX);
		goto out;
	}
	if (json_object_get(req, "timeoutSeconds"))
		timeout = (uint64_t)json_integer_value(json_object_get(req, "timeoutSeconds"));
	if (json_object_get(req, "maxOutputBytes"))
		limit = (size_t)json_integer_value(json_object_get(req, "maxOutputBytes"));
	if (in) {
		stdin_buf = json_string_value(in);
		stdin_len = json_string_length(in);
	}
	run.x.argv = strv_of(argv, &run.x.argc);
	if (env)
		run.x.env = strv_of(env, &run.x.nr_env);
	run.x.cwd = json_string_value(json_object_get(req, "cwd"));
	if (!api_exec_slot(s, true, r))
		goto out;
	if (pipe2(pin, O_CLOEXEC) < 0 || pipe2(pout, O_CLOEXEC) < 0 ||
	    pipe2(psig, O_CLOEXEC | O_NONBLOCK) < 0 || cancel_init(&run.cancel, NULL) < 0) {
		api_reply_error(r, 500, "exec: %s", strerror(errno));
		goto slot;
	}
	fcntl(pin[1], F_SETFL, O_NONBLOCK);
	fcntl(pout[0], F_SETFL, O_NONBLOCK);
	run.in = pin[0];
	run.out = pout[1];
	run.sig = psig[0];
	run.sig_w = psig[1];
	pin[0] = pout[1] = -1;
	if (pthread_create(&t, NULL, run_thread, &run) != 0) {
		api_reply_error(r, 500, "exec: cannot start a thread");
		close_fd(&run.in);
		close_fd(&run.out);
		goto cancel;
	}
	status = pump(&run, pin[1], pout[0], conn_fd, stdin_buf, stdin_len,
		      now_ms() + timeout * 1000, limit, &out, &out_len);
	pin[1] = -1; /* pump closed it */
	pthread_join(t, NULL);
	answer(&run, status, out, out_len, timeout, limit, r);
	gantry_error_free(&run.err);
cancel:
	cancel_destroy(&run.cancel);
slot:
	api_exec_slot(s, false, NULL);
out:
	for (int i = 0; i < 2; i++) {
		close_fd(&pin[i]);
		close_fd(&pout[i]);
		close_fd(&psig[i]);
	}
	free(run.x.argv);
	free(run.x.env);
	json_decref(req);
}
