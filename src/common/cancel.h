/* A cancel token for the lifecycle's long calls (a start, a resume, a
 * one-shot boot): the caller fires it from any thread or from a signal
 * handler, the call stops at its next wait, undoes what it made and fails
 * with ECANCELED. It is an eventfd that stays readable once fired, so any
 * number of waits, in any process that holds it, see it at once. */
#ifndef GANTRY_COMMON_CANCEL_H
#define GANTRY_COMMON_CANCEL_H

#include <stdbool.h>

#include "common/error.h"

struct gantry_cancel {
	int fd;
};

int cancel_init(struct gantry_cancel *c, gantry_error_t *err);
void cancel_destroy(struct gantry_cancel *c);
/* Async-signal-safe; firing twice is firing once. */
void cancel_fire(struct gantry_cancel *c);
/* What a wait polls for POLLIN beside its own fds; -1 (poll skips it)
 * for no token. */
int cancel_fd(const struct gantry_cancel *c);
bool cancel_fired(const struct gantry_cancel *c);
/* 0, or -1 with "cancelled" (ECANCELED) once fired. */
int cancel_check(const struct gantry_cancel *c, gantry_error_t *err);

#endif
