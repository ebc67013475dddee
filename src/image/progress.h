/* A pull's progress on the caller's terminal: one line per layer with its
 * bytes and rate, redrawn at most a few times a second; nothing when the
 * caller gave no terminal. */
#ifndef GANTRY_IMAGE_PROGRESS_H
#define GANTRY_IMAGE_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* Redraws per second. */
#define PROGRESS_HZ 8

struct progress {
	bool on;
	int fd; /* the terminal drawn on */
	char label[24];
	int64_t total; /* -1 when unknown */
	uint64_t done;
	struct timespec start, drawn;
};

/* fd: the caller's terminal to draw on (0, or not a terminal: nothing
 * is drawn). */
void progress_start(struct progress *p, int fd, const char *label, int64_t total);
void progress_add(struct progress *p, uint64_t n);
/* Last draw and a newline; ok says whether the layer completed. */
void progress_end(struct progress *p, bool ok);

#endif
