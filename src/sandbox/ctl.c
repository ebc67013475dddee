/* The control socket's wire format and its client side (see ctl.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/unixsock.h"
#include "common/util.h"
#include "sandbox/ctl.h"
#include "sandbox/state.h"

int ctl_listen(const char *path, gantry_error_t *err)
{
	return unix_listen(path, 64, err);
}

int ctl_connect(const char *dir, int *out, gantry_error_t *err)
{
	cleanup_close int dfd = -1;

	/* Through the directory's fd: sun_path holds only 108 bytes. */
	dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return gantry_error_errno(err, "open `%s`", dir);
	*out = unix_connect_at(dfd, SANDBOX_CTL, 0);
	if (*out < 0)
		return gantry_error_errno(err, "connect `%s/%s`", dir, SANDBOX_CTL);
	return 0;
}

int ctl_send_json(int fd, json_t *j, gantry_error_t *err)
{
	cleanup_free char *text = json_dumps(j, JSON_COMPACT);
	cleanup_free char *line = NULL;

	if (text == NULL)
		return gantry_error(err, ENOMEM, "encode a control message");
	xasprintf(&line, "%s\n", text);
	if (send(fd, line, strlen(line), MSG_NOSIGNAL) != (ssize_t)strlen(line))
		return gantry_error_errno(err, "send on the control socket");
	return 0;
}

int ctl_read_line(int fd, char *buf, size_t cap, int timeout_ms, gantry_error_t *err)
{
	size_t n = 0;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t k;
		int r = poll(&p, 1, timeout_ms);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return gantry_error_errno(err, "poll");
		if (r == 0)
			return gantry_error(err, ETIMEDOUT, "no answer on the control socket");
		k = read(fd, buf + n, 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return gantry_error_errno(err, "read the control socket");
		if (k == 0)
			return gantry_error(err, ECONNRESET,
					    "the supervisor closed the connection");
		if (buf[n] == '\n') {
			buf[n] = '\0';
			return 0;
		}
		if (++n == cap)
			return gantry_error(err, EMSGSIZE, "control answer too long");
	}
}

int ctl_request(int fd, json_t *req, int timeout_ms, json_t **reply, gantry_error_t *err)
{
	return ctl_request_data(fd, req, NULL, 0, timeout_ms, reply, err);
}

int ctl_request_data(int fd, json_t *req, const void *data, size_t len, int timeout_ms,
		     json_t **reply, gantry_error_t *err)
{
	cleanup_free char *line = xmalloc(CTL_LINE_MAX);
	json_error_t jerr;
	json_t *j;

	if (reply)
		*reply = NULL;
	if (ctl_send_json(fd, req, err) < 0)
		return -1;
	for (size_t done = 0; done < len;) {
		ssize_t n = send(fd, (const char *)data + done, len - done, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return gantry_error_errno(err, "send on the control socket");
		done += (size_t)n;
	}
	if (ctl_read_line(fd, line, CTL_LINE_MAX, timeout_ms, err) < 0)
		return -1;
	j = json_loads(line, 0, &jerr);
	if (!json_is_object(j)) {
		json_decref(j);
		return gantry_error(err, EPROTO, "bad answer on the control socket");
	}
	if (!json_is_true(json_object_get(j, "ok"))) {
		const char *e = json_string_value(json_object_get(j, "error"));

		gantry_error(err, 0, "%s", e ? e : "refused");
		json_decref(j);
		return -1;
	}
	if (reply)
		*reply = j;
	else
		json_decref(j);
	return 0;
}

int ctl_call(int fd, const char *op, int timeout_ms, json_t **reply, gantry_error_t *err)
{
	json_t *req = json_pack("{s:s}", "op", op);
	int r = ctl_request(fd, req, timeout_ms, reply, err);

	json_decref(req);
	return r;
}
