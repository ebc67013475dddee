/* Text that came from a guest, an image or a registry, made safe to show:
 * the one place that decides what may reach a terminal or a log. */
#ifndef GANTRY_COMMON_TEXT_H
#define GANTRY_COMMON_TEXT_H

#include <stddef.h>

/* In place: every C0 control (newline and tab too), DEL, C1 control
 * (U+0080..U+009F, which some terminals obey like ESC sequences) and byte
 * that is not valid UTF-8 becomes '?'; then a string longer than max bytes
 * (0: no limit) is cut to max with "..." at its end. Returns s. */
char *text_sanitize(char *s, size_t max);
/* The same, but newlines stay: a message of several lines, each safe. */
char *text_sanitize_lines(char *s, size_t max);
/* In place: only the bytes that are not valid UTF-8 become '?'; controls
 * stay. For text that is stored rather than shown, such as an image's
 * /etc/passwd kept as a JSON string (jansson takes valid UTF-8 only). */
char *text_sanitize_utf8(char *s);
/* A copy of len bytes of buf with each byte that is not valid UTF-8 made
 * U+FFFD (NULs and controls stay): output kept as a JSON string. *out_len
 * gets its length; it is NUL-terminated too. */
char *text_utf8_replaced(const void *buf, size_t len, size_t *out_len);
/* A sanitised copy of the first len bytes of buf (NULs become '?'). */
char *text_sanitized(const void *buf, size_t len, size_t max);

#endif
