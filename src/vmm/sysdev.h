/* The few legacy ports through which a guest ends the VM: the i8042 reset
 * line (0xfe to port 0x64), the PCI reset control register (0xcf9), and
 * Gantry's exit port; and Gantry's status register, where our inits leave
 * their exit status before they reset (see proto/exit_port.h). */
#ifndef GANTRY_VMM_SYSDEV_H
#define GANTRY_VMM_SYSDEV_H

#include "common/error.h"
#include "proto/exit_port.h"

#define I8042_DATA_PORT	   0x60
#define I8042_COMMAND_PORT 0x64
#define I8042_CMD_RESET	   0xfe
#define RESET_CONTROL_PORT 0xcf9
#define RESET_CONTROL_RST  0x04
#define IO_DELAY_PORT	   0x80

struct vm;

int sysdev_attach(struct vm *vm, gantry_error_t *err);

#endif
