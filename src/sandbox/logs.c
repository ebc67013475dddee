/* Reading and following a sandbox's logs (see logs.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/text.h"
#include "common/util.h"
#include "net/net.h"
#include "sandbox/logs.h"
#include "sandbox/state.h"

#define LOG_BLOCK (64u << 10)

struct reader {
	int fd;
	ino_t ino;
	dev_t dev;
	off_t at; /* how far fd was read */
	char line[SANDBOX_LOG_LINE_MAX + 1];
	size_t len; /* of the line so far */
	bool cut; /* the line went past the max: the rest of it is skipped */
	void (*out)(void *opaque, const char *text, size_t len);
	void *opaque;
};

static void emit(struct reader *r)
{
	size_t len;

	/* A serial console ends its lines with CR LF: the CR is no text. */
	if (r->len && r->line[r->len - 1] == '\r' && !r->cut)
		r->len--;
	/* A NUL would end the text before its end: shown as any control. */
	for (size_t i = 0; i < r->len; i++)
		if (r->line[i] == '\0')
			r->line[i] = '\x01';
	r->line[r->len] = '\0';
	text_sanitize(r->line, 0);
	len = strlen(r->line); /* sanitising may shorten it */
	if (r->cut && len >= 3)
		memcpy(r->line + len - 3, "...", 3);
	r->out(r->opaque, r->line, len);
	r->len = 0;
	r->cut = false;
}

static void take(struct reader *r, const char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (buf[i] == '\n') {
			emit(r);
		} else if (r->len < SANDBOX_LOG_LINE_MAX) {
			r->line[r->len++] = buf[i];
		} else {
			r->cut = true;
		}
	}
}

/* Read fd from r->at to its end, lines out. */
static int drain(struct reader *r, gantry_error_t *err)
{
	char buf[LOG_BLOCK];
	ssize_t n;

	while ((n = pread(r->fd, buf, sizeof(buf), r->at)) > 0) {
		take(r, buf, (size_t)n);
		r->at += n;
	}
	if (n < 0)
		return gantry_error_errno(err, "read the log");
	return 0;
}

/* Where the last n lines of fd (size bytes) start: just past the n-th
 * newline from its end, a newline that ends the file not counted. */
static off_t tail_start(int fd, off_t size, long n)
{
	char buf[LOG_BLOCK];
	off_t end = size;
	long seen = 0;

	if (n == 0)
		return size;
	while (end > 0) {
		size_t len = end < (off_t)sizeof(buf) ? (size_t)end : sizeof(buf);
		off_t base = end - (off_t)len;

		if (pread(fd, buf, len, base) != (ssize_t)len)
			return 0;
		for (size_t i = len; i-- > 0;)
			if (buf[i] == '\n' && base + (off_t)i != size - 1 && ++seen == n)
				return base + (off_t)i + 1;
		end = base;
	}
	return 0;
}

/* Open path into r from offset 0; false when it does not exist. */
static bool reopen(struct reader *r, const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return false;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return false;
	}
	if (r->fd >= 0)
		close(r->fd);
	r->fd = fd;
	r->ino = st.st_ino;
	r->dev = st.st_dev;
	r->at = 0;
	return true;
}

/* Whether path is now another file than the one r reads, or r's shrank. */
static bool replaced(struct reader *r, const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return false; /* gone for a moment (a rename): keep the old */
	if (r->fd < 0)
		return true;
	if (st.st_ino != r->ino || st.st_dev != r->dev)
		return true;
	if (st.st_size < r->at) {
		r->at = 0; /* truncated: from its start */
		r->len = 0;
	}
	return false;
}

static const char *log_name(enum sandbox_log which)
{
	switch (which) {
	case SANDBOX_LOG_CONSOLE:
		return SANDBOX_CONSOLE;
	case SANDBOX_LOG_NET:
		return NET_WORKER_LOG;
	case SANDBOX_LOG_DAEMON:
		break;
	}
	return SANDBOX_LOG;
}

int sandbox_logs(const char *name, const struct sandbox_logs_opts *o,
		 void (*line)(void *opaque, const char *text, size_t len), void *opaque,
		 const struct gantry_cancel *cancel, gantry_error_t *err)
{
	cleanup_free char *dir = NULL, *path = NULL;
	cleanup_free struct reader *r = NULL;
	struct stat st;
	int rc = -1;

	if (sandbox_name_check(name, err) < 0 || sandbox_dir(name, &dir, err) < 0)
		return -1;
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return gantry_error(err, 0, "no sandbox named `%s` (see gantry ls)", name);
	xasprintf(&path, "%s/%s%s", dir, log_name(o->which), o->previous ? ".previous" : "");
	r = xzalloc(sizeof(*r));
	r->fd = -1;
	r->out = line;
	r->opaque = opaque;
	if (reopen(r, path) && o->tail >= 0 && fstat(r->fd, &st) == 0)
		r->at = tail_start(r->fd, st.st_size, o->tail);
	for (;;) {
		/* Looked at before reading: what a supervisor wrote before it
		 * ended is read before the loop ends. */
		bool running = o->follow && sandbox_is_running(dir);

		if (r->fd >= 0 && drain(r, err) < 0)
			goto out;
		/* The last boot's log never grows: nothing to follow. */
		if (!o->follow || o->previous)
			break;
		if (replaced(r, path)) {
			/* Rotated or a new boot: what the old one got last, then the new. */
			if (r->fd >= 0 && drain(r, err) < 0)
				goto out;
			if (r->len)
				emit(r);
			/* One that cannot be opened is looked at again next round. */
			if (reopen(r, path))
				continue;
		}
		if (!running)
			break;
		if (poll(&(struct pollfd){ .fd = cancel_fd(cancel), .events = POLLIN }, 1,
			 SANDBOX_LOG_POLL_MS) > 0 ||
		    cancel_fired(cancel))
			break;
	}
	if (r->len)
		emit(r); /* a last line without its newline */
	rc = 0;
out:
	if (r->fd >= 0)
		close(r->fd);
	return rc;
}
