/* How the guest ends its VM (see src/proto/exit_port.h): drain the console,
 * sync, leave the exit status in Gantry's status register and reset. Under
 * another VMM the status is lost and the reset still ends the VM. */
#ifndef GANTRY_GUEST_POWEROFF_H
#define GANTRY_GUEST_POWEROFF_H

__attribute__((noreturn)) void guest_poweroff(int status);

#endif
