/* The supervisor: one process per running sandbox, the gantry binary
 * executed in a hidden role (`gantry __supervisor NAME`, by the command
 * that starts the sandbox: spawn.c), detached from any terminal and logging
 * to daemon.log. It holds the sandbox's lifetime lock, runs the VMM
 * on its own threads (the guest console goes to console.log), owns the
 * guest agent's control connection and serves ctl.sock: sessions of `gantry
 * exec NAME`, status and stop. It records in sandbox.json how the sandbox
 * ended. */
#ifndef GANTRY_SANDBOX_SUPERVISOR_H
#define GANTRY_SANDBOX_SUPERVISOR_H

#include "common/error.h"

#define SUPERVISOR_ROLE	    "__supervisor"
#define SUPERVISOR_READY_FD 3 /* "pid N\n", then "ok\n" once ready, else "error: ...\n" */

/* The role's entry point: argv = { NAME }. Exits when the sandbox ends. */
int supervisor_main(int argc, char **argv);
/* Start a detached supervisor for the sandbox in dir and wait until its
 * guest agent and ctl.sock accept work, or say why it could not. */
int supervisor_spawn(const char *name, const char *dir, gantry_error_t *err);

#endif
