/* How the guest ends its VM (see src/proto/exit_port.h): sync, report the
 * exit status on Gantry's exit port, and fall back to a reset, which also
 * ends the VM, if the port cannot be reached. */
#ifndef GANTRY_GUEST_POWEROFF_H
#define GANTRY_GUEST_POWEROFF_H

__attribute__((noreturn)) void guest_poweroff(int status);

#endif
