/* The supervisor: one process per running sandbox, the gantry binary
 * executed in a hidden role (SUPERVISOR_ROLE, by the call that boots the
 * sandbox: sandbox/spawn.h), detached from any terminal and logging to
 * daemon.log. It holds the sandbox's lifetime lock, runs the VM through
 * the machine layer (sandbox/machine.h: its VMM, network and share
 * workers), owns the guest agent's control connection and serves ctl.sock
 * (sandbox/ctl.h): sessions of `gantry exec NAME`, the network's and the
 * shares' live changes, status and stop. It records in sandbox.json how
 * the sandbox ended. It sits above the lifecycle library (src/sandbox/),
 * which never includes it. */
#ifndef GANTRY_SUPERVISOR_SUPERVISOR_H
#define GANTRY_SUPERVISOR_SUPERVISOR_H

/* The role's entry point: argv = { NAME }. Exits when the sandbox ends. */
int supervisor_main(int argc, char **argv);

#endif
