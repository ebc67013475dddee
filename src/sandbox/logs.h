/* A sandbox's logs, read for a user (`gantry logs`): the supervisor's
 * daemon.log, the guest's console.log or the network worker's log, whole
 * or their last lines, and followed while the sandbox runs. Every line is
 * sanitised before it is handed on (the console is the guest's own text,
 * and the others quote it): controls and bytes that are not UTF-8 become
 * '?', and a line is cut at SANDBOX_LOG_LINE_MAX bytes. */
#ifndef GANTRY_SANDBOX_LOGS_H
#define GANTRY_SANDBOX_LOGS_H

#include <stdbool.h>
#include <stddef.h>

#include "common/cancel.h"
#include "common/error.h"

#define SANDBOX_LOG_LINE_MAX 8192
#define SANDBOX_LOG_POLL_MS  200 /* how often a follow looks for more */

enum sandbox_log {
	SANDBOX_LOG_DAEMON, /* daemon.log: the supervisor and its VMM and share workers */
	SANDBOX_LOG_CONSOLE, /* console.log: the guest's serial console */
	SANDBOX_LOG_NET, /* worker-net.log: the network worker */
};

struct sandbox_logs_opts {
	enum sandbox_log which;
	bool previous; /* the last boot's (<file>.previous) */
	bool follow; /* then wait for more until the sandbox is not running */
	long tail; /* only the last lines; < 0: all */
};

/* Calls line(opaque, text, len) for each line (without its newline, NUL
 * terminated, sanitised) of the log o names; with o->follow, goes on as
 * the file grows or is replaced (rotated, a new boot) until the sandbox
 * is not running and all was read, or cancel fires (then it returns 0).
 * A log that does not exist (yet) is empty. */
int sandbox_logs(const char *name, const struct sandbox_logs_opts *o,
		 void (*line)(void *opaque, const char *text, size_t len), void *opaque,
		 const struct gantry_cancel *cancel, gantry_error_t *err);

#endif
