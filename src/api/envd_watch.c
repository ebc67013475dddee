/* envd's WatchDir, as the E2B SDK's files.watchDir calls it: a Connect
 * server stream of {"start": {}} once the directory is watched, then a
 * {"filesystem": {"name", "type"}} for each change, keepalives, and the
 * end-of-stream trailer. The watching is gantry-init's helper in the
 * container (`watch`, proto/files.h), a session that lives as long as the
 * stream: its records are read as they come, as a guest's words, and its
 * session is ended when the client goes. Each watch is one of the
 * E2B_STREAMS_MAX streams. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/e2b.h"
#include "common/text.h"
#include "common/util.h"
#include "proto/agent.h"
#include "proto/files.h"

#define WATCH_BUF      (2 * PROTO_FILES_PATH_MAX + 256) /* more than one whole record */
#define WATCH_WHY      400				/* bytes of the helper's complaint */
#define WATCH_START_MS 60000				/* for the helper to say it watches */

struct e2b_watch {
	struct api_stream stream; /* first: the reply's stream is this */
	struct api_server *s;
	char box[65];
	char *argv[7], rec[2], *path;
	struct api_exec x;
	int out_r, err_r, sig_w;       /* ours */
	int in_r, out_w, err_w, sig_r; /* the session's, closed when it returns */
	pthread_t thread;
	bool thread_started;
	struct gantry_cancel cancel;
	int ret;
	struct api_exec_result res;
	gantry_error_t err;
	int conn_fd;
	uint64_t keepalive, start_by; /* start_by: its 'y' record, or it fails */
	bool started, trailed;
	char buf[WATCH_BUF];
	size_t len;
	char *pending; /* an envelope not sent whole yet */
	size_t pending_len, pending_off;
};

static void *watch_thread(void *arg)
{
	struct e2b_watch *w = arg;

	w->ret = w->s->b->exec(w->box, &w->x, w->in_r, w->out_w, w->err_w, w->sig_r, &w->cancel,
			       &w->res, &w->err);
	close_fd(&w->in_r);
	close_fd(&w->out_w);
	close_fd(&w->err_w);
	close_fd(&w->sig_r);
	return NULL;
}

static void envelope(struct e2b_watch *w, uint8_t flags, json_t *j)
{
	free(w->pending);
	w->pending = envd_frame(flags, j, &w->pending_len);
	w->pending_off = 0;
}

/* The helper's end: a trailer with why it ended, once its session is
 * over (joined here). */
static void trailer(struct e2b_watch *w, const char *code, const char *msg)
{
	char why[WATCH_WHY + 1] = "";
	unsigned http;
	ssize_t n;

	w->trailed = true;
	if (code == NULL && w->thread_started) {
		pthread_join(w->thread, NULL);
		w->thread_started = false;
		n = read(w->err_r, why, WATCH_WHY);
		why[n > 0 ? n : 0] = '\0';
		why[strcspn(why, "\n")] = '\0';
		if (w->ret < 0) {
			code = "unavailable";
			msg = gantry_error_str(w->err);
		} else if (!w->started) {
			envd_helper_status(w->res.exit_code, &http, &code);
			msg = why[0] ? why : "the directory cannot be watched";
		} else {
			code = "unavailable";
			msg = "the watch ended";
		}
	}
	if (code) {
		cleanup_free char *text = xstrdup(msg);

		envelope(w, 2,
			 json_pack("{s:{s:s,s:s}}", "error", "code", code, "message",
				   text_sanitize(text, WATCH_WHY)));
	} else {
		envelope(w, 2, json_object());
	}
}

static const char *event_type(char t)
{
	return t == 'c'	  ? "EVENT_TYPE_CREATE"
	       : t == 'w' ? "EVENT_TYPE_WRITE"
	       : t == 'r' ? "EVENT_TYPE_REMOVE"
	       : t == 'm' ? "EVENT_TYPE_RENAME"
			  : "EVENT_TYPE_CHMOD";
}

/* The next whole record in buf as an envelope: 1, 0 when none is whole
 * yet, -1 when the helper's words are no records (a trailer then). */
static int next_record(struct e2b_watch *w)
{
	ssize_t rl = files_record_len(w->buf, w->len);
	struct files_record r;
	const char *why = NULL;
	size_t off = 0;
	json_t *j = NULL;

	if (rl == 0)
		return 0;
	if (rl < 0 || files_next(w->buf, (size_t)rl, &off, &r, &why) != 1 ||
	    (r.kind != 'y' && r.kind != 'w') || (r.kind == 'y') == w->started) {
		trailer(w, "internal", "the sandbox's file helper said no watch records");
		return -1;
	}
	if (r.kind == 'y') {
		w->started = true;
		j = json_pack("{s:{}}", "start");
	} else {
		cleanup_free char *name = xstrndup(r.path, r.path_len);

		/* A name JSON cannot carry (not UTF-8) is left out. */
		j = json_pack("{s:{s:s,s:s}}", "filesystem", "name", name, "type",
			      event_type(r.type));
	}
	memmove(w->buf, w->buf + rl, w->len - (size_t)rl);
	w->len -= (size_t)rl;
	if (j == NULL)
		return next_record(w);
	envelope(w, 0, j);
	return 1;
}

static size_t watch_read(struct api_stream *st, char *buf, size_t max)
{
	struct e2b_watch *w = (struct e2b_watch *)st;

	for (;;) {
		struct pollfd f[3] = { { w->out_r, POLLIN, 0 },
				       { w->conn_fd, POLLRDHUP, 0 },
				       { cancel_fd(&w->s->cancel), POLLIN, 0 } };
		uint64_t now;
		ssize_t n;

		if (w->pending_off < w->pending_len) {
			size_t k = MIN(max, w->pending_len - w->pending_off);

			memcpy(buf, w->pending + w->pending_off, k);
			w->pending_off += k;
			return k;
		}
		if (w->trailed)
			return 0;
		if (next_record(w) != 0)
			continue;
		now = now_ms();
		if (!w->started && now >= w->start_by) {
			trailer(w, "deadline_exceeded", "the directory was not watched in time");
			continue;
		}
		if (w->started && now >= w->keepalive) {
			w->keepalive = now + E2B_KEEPALIVE_MS;
			envelope(w, 0, json_pack("{s:{}}", "keepalive"));
			continue;
		}
		if (poll(f, 3,
			 w->started ? (int)MIN(w->keepalive > now ? w->keepalive - now : 0, 1000u)
				    : 1000) < 0 &&
		    errno != EINTR)
			return 0;
		if (f[2].revents) {
			trailer(w, "unavailable", "the server is stopping");
			continue;
		}
		if ((f[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) || api_client_gone(w->conn_fd))
			return 0; /* nobody to tell */
		if (!(f[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		n = read(w->out_r, w->buf + w->len, sizeof(w->buf) - w->len);
		if (n > 0)
			w->len += (size_t)n;
		else if (n == 0 || (errno != EAGAIN && errno != EINTR))
			trailer(w, NULL, NULL); /* its end, or a failure to watch */
		else
			continue;
		if (n > 0 && w->len == sizeof(w->buf) && files_record_len(w->buf, w->len) == 0)
			trailer(w, "internal", "the sandbox's file helper wrote a record too long");
	}
}

/* The stream is over: the helper's session is ended and waited for. */
static void watch_done(struct api_stream *st)
{
	struct e2b_watch *w = (struct e2b_watch *)st;
	struct api_e2b *e = w->s->e2b;
	const unsigned char kill_ = SIGKILL;

	if (w->thread_started) {
		if (w->sig_w >= 0)
			(void)!write(w->sig_w, &kill_, 1);
		cancel_fire(&w->cancel); /* and hang it up: a watch has no output to wait for */
		close_fd(&w->out_r);
		pthread_join(w->thread, NULL);
	}
	pthread_mutex_lock(&e->lock);
	e->streams--;
	pthread_mutex_unlock(&e->lock);
	close_fd(&w->out_r);
	close_fd(&w->err_r);
	close_fd(&w->sig_w);
	close_fd(&w->in_r);
	close_fd(&w->out_w);
	close_fd(&w->err_w);
	close_fd(&w->sig_r);
	cancel_destroy(&w->cancel);
	gantry_error_free(&w->err);
	free(w->path);
	free(w->pending);
	free(w);
}

static bool watch_pipes(struct e2b_watch *w)
{
	int in[2], out[2], err[2], sig[2];

	if (pipe2(in, O_CLOEXEC) < 0)
		return false;
	if (pipe2(out, O_CLOEXEC) < 0) {
		close(in[0]), close(in[1]);
		return false;
	}
	if (pipe2(err, O_CLOEXEC | O_NONBLOCK) < 0) {
		close(in[0]), close(in[1]), close(out[0]), close(out[1]);
		return false;
	}
	if (pipe2(sig, O_CLOEXEC | O_NONBLOCK) < 0) {
		close(in[0]), close(in[1]), close(out[0]), close(out[1]);
		close(err[0]), close(err[1]);
		return false;
	}
	close(in[1]); /* no input: it reads EOF */
	w->in_r = in[0];
	w->out_r = out[0], w->out_w = out[1];
	w->err_r = err[0], w->err_w = err[1];
	w->sig_r = sig[0], w->sig_w = sig[1];
	fcntl(w->out_r, F_SETFL, O_NONBLOCK);
	return true;
}

void envd_watch(struct api_server *s, const struct api_request *req, const char *box,
		struct api_reply *r)
{
	json_t *m = envd_message(req, true, r), *path;
	struct api_e2b *e = s->e2b;
	struct e2b_watch *w;
	bool room;

	if (m == NULL)
		return;
	path = json_object_get(m, "path");
	if (!json_is_string(path) || *json_string_value(path) != '/' ||
	    strlen(json_string_value(path)) != json_string_length(path) ||
	    json_string_length(path) > PROTO_FILES_PATH_MAX) {
		json_decref(m);
		return envd_stream_error(r, "invalid_argument", "path: want an absolute path");
	}
	pthread_mutex_lock(&e->lock);
	room = e->streams < E2B_STREAMS_MAX;
	if (room)
		e->streams++;
	pthread_mutex_unlock(&e->lock);
	if (!room) {
		json_decref(m);
		return envd_stream_error(r, "resource_exhausted", "streams at the limit");
	}
	w = xzalloc(sizeof(*w));
	*w = (struct e2b_watch){ .stream = { watch_read, watch_done },
				 .s = s,
				 .out_r = -1,
				 .err_r = -1,
				 .sig_w = -1,
				 .in_r = -1,
				 .out_w = -1,
				 .err_w = -1,
				 .sig_r = -1,
				 .cancel = { .fd = -1 },
				 .conn_fd = req->conn_fd,
				 .keepalive = now_ms() + E2B_KEEPALIVE_MS,
				 .start_by = now_ms() + WATCH_START_MS };
	snprintf(w->box, sizeof(w->box), "%s", box);
	w->path = xstrdup(json_string_value(path));
	snprintf(w->rec, sizeof(w->rec), "%d", json_is_true(json_object_get(m, "recursive")));
	json_decref(m);
	w->argv[0] = PROTO_HELPER_PATH;
	w->argv[1] = PROTO_FILES_ARG;
	w->argv[2] = PROTO_FILES_VERSION;
	w->argv[3] = "watch";
	w->argv[4] = w->rec;
	w->argv[5] = w->path;
	w->x = (struct api_exec){ .argv = w->argv, .argc = 6, .raw = true };
	if (!watch_pipes(w) || cancel_init(&w->cancel, NULL) < 0 ||
	    pthread_create(&w->thread, NULL, watch_thread, w) != 0) {
		envd_stream_error(r, "internal", "cannot set up the watch");
		watch_done(&w->stream);
		return;
	}
	w->thread_started = true;
	r->status = 200;
	r->type = "application/connect+json";
	r->stream = &w->stream;
}
