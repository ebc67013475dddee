/* A pull's progress on a terminal: one line per layer with its bytes and
 * rate, redrawn at most a few times a second; nothing when stderr is not a
 * terminal. */
#ifndef GANTRY_IMAGE_PROGRESS_H
#define GANTRY_IMAGE_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* Redraws per second. */
#define PROGRESS_HZ 8

struct progress {
	bool on;
	char label[24];
	int64_t total; /* -1 when unknown */
	uint64_t done;
	struct timespec start, drawn;
};

/* on: draw at all (a terminal, and the caller wants it). */
void progress_start(struct progress *p, bool on, const char *label, int64_t total);
void progress_add(struct progress *p, uint64_t n);
/* Last draw and a newline; ok says whether the layer completed. */
void progress_end(struct progress *p, bool ok);

#endif
