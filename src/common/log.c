/* Host logging (see log.h): one write(2) per line, so lines from threads
 * and from the processes sharing a log file never interleave. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/text.h"
#include "common/util.h"

static const char *log_role;
static int log_fd = -1;
static int log_level = -1;

void log_init(const char *role, int fd)
{
	log_role = role;
	log_fd = fd;
}

static int level_from_env(void)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	const char *v = getenv("GANTRY_LOG");

	for (size_t i = 0; v && i < ARRAY_SIZE(names); i++)
		if (strcmp(v, names[i]) == 0)
			return (int)i;
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
	char msg[LOG_LINE_MAX], line[LOG_LINE_MAX + 96];
	int n;
	va_list ap;

	if (!log_enabled(level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	text_sanitize_lines(msg, sizeof(msg) - 1);
	if (log_role) {
		char stamp[32];
		struct timespec ts;
		struct tm tm;

		clock_gettime(CLOCK_REALTIME, &ts);
		strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", gmtime_r(&ts.tv_sec, &tm));
		n = snprintf(line, sizeof(line), "%s.%03ldZ %s[%d]: %s\n", stamp,
			     ts.tv_nsec / 1000000, log_role, (int)getpid(), msg);
	} else {
		n = snprintf(line, sizeof(line), "gantry: %s\n", msg);
	}
	if (n > (int)sizeof(line) - 1)
		n = (int)sizeof(line) - 1;
	(void)!write(log_fd >= 0 ? log_fd : STDERR_FILENO, line, (size_t)n);
}
