/* Host logging (see log.h): one write(2) per line, so lines from threads
 * and from the processes sharing a log file never interleave. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/settings.h"
#include "common/text.h"
#include "common/util.h"

static const char *log_role;
static int log_fd = -1;
static _Atomic int log_level = -1; /* read from the environment once */

void log_init(const char *role, int fd)
{
	log_role = role;
	log_fd = fd;
}

static int level_from_env(void)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	const char *v = gantry_setting("GANTRY_LOG");

	for (size_t i = 0; v && i < ARRAY_SIZE(names); i++)
		if (strcmp(v, names[i]) == 0)
			return LOG_ERROR + (int)i;
	return LOG_INFO;
}

bool log_enabled(enum log_level level)
{
	if (log_level < 0)
		log_level = level_from_env();
	return (int)level <= log_level;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	cleanup_free char *msg = NULL, *line = NULL;
	char prefix[96];
	va_list ap;
	int n;

	if (!log_enabled(level))
		return;
	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	text_sanitize_lines(msg, LOG_MSG_MAX);
	if (log_role) {
		char stamp[32];
		struct timespec ts;
		struct tm tm;

		clock_gettime(CLOCK_REALTIME, &ts);
		strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", gmtime_r(&ts.tv_sec, &tm));
		snprintf(prefix, sizeof(prefix), "%s.%03ldZ %s[%d]: ", stamp, ts.tv_nsec / 1000000,
			 log_role, (int)getpid());
	} else {
		snprintf(prefix, sizeof(prefix), "gantry: ");
	}
	n = xasprintf(&line, "%s%s\n", prefix, msg);
	(void)!write(log_fd >= 0 ? log_fd : STDERR_FILENO, line, (size_t)n);
}
