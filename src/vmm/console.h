/* Where the guest's serial console goes (serial.c writes each line or
 * batch through here): a caller's fd as it is, or a log file the VMM opens,
 * kept under a size cap by rotation. Past VMM_CONSOLE_MAX bytes the log is
 * renamed to "<path>.1", replacing the one before, and a fresh log starts,
 * so a guest that prints without end holds at most twice the cap on disk.
 * Only a regular file rotates; a FIFO or a device given as the path is
 * written as it is. */
#ifndef GANTRY_VMM_CONSOLE_H
#define GANTRY_VMM_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define VMM_CONSOLE_MAX (8 * 1024 * 1024) /* bytes in one console log file */
#define CONSOLE_ROTATED ".1"		  /* the older half's suffix */

struct console {
	int fd;		/* -1: output dropped */
	char *path;	/* a log of our own that rotates, or NULL */
	char *old_path; /* path + CONSOLE_ROTATED */
	uint64_t size;	/* bytes in the current file */
	uint64_t cap;
	bool owned; /* fd is ours to close */
};

/* Write to fd (the caller's, or -1) with no cap. */
void console_init_fd(struct console *c, int fd);
/* Start the log at path afresh (truncated, its stale rotation removed),
 * rotating past cap bytes. */
int console_open(struct console *c, const char *path, uint64_t cap, gantry_error_t *err);
/* Best effort, as a UART's output is: a full disk loses console text. */
void console_write(struct console *c, const void *buf, size_t len);
void console_close(struct console *c);

#endif
