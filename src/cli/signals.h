/* The CLI's signals, forwarded to a session's process: while a session
 * runs, SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGWINCH are caught and each
 * written as one byte (its number) to a pipe whose read end is the
 * session's signal_fd (agent/session.h). Signal handlers belong to the
 * whole process, so this lives with the CLI, not in the library: one
 * session at a time forwards them. Outside a session they may instead
 * cancel the call that is booting a VM. */
#ifndef GANTRY_CLI_SIGNALS_H
#define GANTRY_CLI_SIGNALS_H

#include <stdbool.h>

#include "common/cancel.h"
#include "common/error.h"

/* The fd to read them from (ours: do not close it). */
int cli_signals_fd(gantry_error_t *err);
/* Catch them (on) or put back what was there before (off): a session's
 * catch_signals (sandbox/process.h). */
int cli_signals_catch(bool on, gantry_error_t *err);
/* Until the process ends, SIGINT, SIGTERM and SIGHUP fire c (a start or
 * a boot then stops and undoes itself) instead of ending the process; a
 * session's forwarding takes them over while it runs and then puts this
 * back. c must live as long as the process. */
int cli_signals_cancel(struct gantry_cancel *c, gantry_error_t *err);

/* This process's stdio and terminal for a session (gantry exec, wrap),
 * and its signals forwarded while the session runs. */
struct sandbox_stdio;
int cli_session_stdio(struct sandbox_stdio *io, gantry_error_t *err);

#endif
