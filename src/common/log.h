/* Host logging, one facility for every role: the CLI prints "gantry: msg"
 * on stderr; a supervisor (and later each worker) writes timestamped lines
 * "2026-01-02T03:04:05.678Z supervisor[PID]: msg" to its sandbox's log.
 * Every message is sanitised (common/text.h) before it is written, so text
 * that came from a guest can be logged as it is. GANTRY_LOG=error|warn|
 * info|debug sets the level (default info). */
#ifndef GANTRY_COMMON_LOG_H
#define GANTRY_COMMON_LOG_H

#include <stdbool.h>

/* LOG_ALWAYS: output the user asked for (GANTRY_BOOT_TIMING), whatever the level. */
enum log_level { LOG_ALWAYS, LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

#define LOG_MSG_MAX (64 * 1024) /* longer messages are cut, with "..." */

/* Set the role (NULL: the CLI's plain "gantry: " lines) and where lines go
 * (fd; -1: stderr). Call before any thread logs. */
void log_init(const char *role, int fd);
bool log_enabled(enum log_level level);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_always(...) log_msg(LOG_ALWAYS, __VA_ARGS__)
#define log_error(...)	log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)	log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)	log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...)	log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
