/* A worker's channel: JSON messages with descriptors, requests matched
 * to answers by id, the ready handshake (see worker.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/child.h"
#include "common/json.h"
#include "common/text.h"
#include "common/util.h"
#include "worker/worker.h"

#define WORKER_ERR 512

json_t *worker_recv_json_fds(int fd, int ms, int *fds, size_t max_fds, size_t *nr_fds, bool *eof)
{
	cleanup_free char *buf = xmalloc(WORKER_MSG_MAX + 1);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	json_t *j;
	ssize_t n;
	int r;

	*eof = false;
	*nr_fds = 0;
	while ((r = poll(&p, 1, ms)) < 0 && errno == EINTR)
		;
	if (r <= 0)
		return NULL;
	n = unix_recv_fds(fd, buf, WORKER_MSG_MAX, fds, max_fds, nr_fds, MSG_DONTWAIT);
	if (n <= 0) {
		*eof = n == 0 || (errno != EAGAIN && errno != EINTR && errno != EMSGSIZE);
		return NULL;
	}
	j = json_loadb(buf, (size_t)n, 0, NULL);
	if (!json_is_object(j)) {
		json_decref(j);
		for (size_t i = 0; i < *nr_fds; i++)
			close(fds[i]);
		*nr_fds = 0;
		return NULL;
	}
	return j;
}

json_t *worker_recv_json(int fd, int ms, bool *eof)
{
	int fds[UNIX_FDS_MAX];
	size_t n;
	json_t *j = worker_recv_json_fds(fd, ms, fds, ARRAY_SIZE(fds), &n, eof);

	for (size_t i = 0; i < n; i++)
		close(fds[i]); /* a worker sends us none */
	return j;
}

int worker_send_json(int fd, json_t *j, const int *fds, size_t nr_fds)
{
	cleanup_free char *text = json_dumps(j, JSON_COMPACT);

	json_decref(j);
	if (text == NULL) {
		errno = ENOMEM;
		return -1;
	}
	return unix_send_fds(fd, text, strlen(text), fds, nr_fds, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

json_t *worker_request_fds(int chan, uint64_t *next_id, json_t *req, const int *fds, size_t nr_fds,
			   int ms, int *got, size_t max_got, size_t *nr_got, bool *eof)
{
	uint64_t deadline = ms < 0 ? UINT64_MAX : now_ms() + (uint64_t)ms;
	json_int_t id = (json_int_t)(++*next_id & INT32_MAX) ?: 1;

	*eof = false;
	*nr_got = 0;
	json_object_set_new(req, "id", json_integer(id));
	if (worker_send_json(chan, req, fds, nr_fds) < 0) {
		*eof = errno == EPIPE || errno == ECONNRESET;
		return NULL;
	}
	for (;;) {
		uint64_t now = now_ms();
		json_t *a;

		if (now >= deadline)
			return NULL;
		a = worker_recv_json_fds(
			chan, ms < 0 ? -1 : (int)MIN(deadline - now, (uint64_t)INT32_MAX), got,
			max_got, nr_got, eof);
		if (a == NULL && *eof)
			return NULL;
		if (json_integer_value(json_object_get(a, "id")) == id)
			return a;
		/* an earlier request's, too late, or a bad one */
		json_decref(a);
		for (size_t i = 0; i < *nr_got; i++)
			close(got[i]);
		*nr_got = 0;
	}
}

json_t *worker_request(int chan, uint64_t *next_id, json_t *req, const int *fds, size_t nr_fds,
		       int ms, bool *eof)
{
	int got[UNIX_FDS_MAX];
	size_t n;
	json_t *a = worker_request_fds(chan, next_id, req, fds, nr_fds, ms, got, ARRAY_SIZE(got),
				       &n, eof);

	for (size_t i = 0; i < n; i++)
		close(got[i]); /* a worker sends us none */
	return a;
}

json_t *worker_answer_to(const json_t *req, json_t *answer)
{
	json_t *id = json_object_get(req, "id");

	if (answer && json_is_integer(id))
		json_object_set(answer, "id", id);
	return answer;
}

json_t *worker_ready_msg(const char *error, json_t *isolation)
{
	json_t *j = error ? json_pack("{s:s,s:b,s:s}", "op", "error", "ok", 0, "error", error)
			  : json_pack("{s:s,s:b}", "op", "ready", "ok", 1);

	if (isolation)
		json_object_set(j, "isolation", isolation);
	return j;
}

char *worker_line(json_t *j, const char *key, const char *dflt)
{
	const char *e = json_string_value(json_object_get(j, key));

	if (e == NULL)
		e = dflt;
	return text_sanitized(e, strlen(e), WORKER_ERR);
}

int worker_wait_ready(pid_t *pid, int chan, int ms, const char *what, json_t **isolation,
		      gantry_error_t *err)
{
	int status;
	char why[64];
	bool eof;
	json_t *j = worker_recv_json(chan, ms, &eof);
	const char *op = json_string_value(json_object_get(j, "op"));

	if (op && strcmp(op, "ready") == 0) {
		*isolation = json_incref(json_object_get(j, "isolation"));
		json_decref(j);
		return 0;
	}
	if (op && strcmp(op, "error") == 0) {
		cleanup_free char *line = worker_line(j, "error", "it could not set itself up");

		json_decref(j);
		return gantry_error(err, 0, "%s", line);
	}
	json_decref(j);
	if (!eof)
		return gantry_error(err, ETIMEDOUT, "the %s was not ready in %d s", what, ms / 1000);
	worker_reap(pid, &status);
	child_describe_status(status, why, sizeof(why));
	return gantry_error(err, 0, "the %s exited (%s) before it was ready", what, why);
}
