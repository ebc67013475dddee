/* The few legacy ports through which a guest ends the VM: the i8042 reset
 * line (0xfe to port 0x64), the PCI reset control register (0xcf9), and
 * Gantry's exit port, where gantry-init reports its exit status. */
#ifndef GANTRY_VMM_SYSDEV_H
#define GANTRY_VMM_SYSDEV_H

#include "common/error.h"

/* A write of a status byte (or a 16/32-bit value whose low byte is the
 * status) ends the VM with that status. Chosen outside every legacy PC
 * device range; see src/guest/poweroff.c for the guest side. */
#define GANTRY_EXIT_PORT 0x0501

#define I8042_DATA_PORT    0x60
#define I8042_COMMAND_PORT 0x64
#define I8042_CMD_RESET    0xfe
#define RESET_CONTROL_PORT 0xcf9
#define RESET_CONTROL_RST  0x04
#define IO_DELAY_PORT      0x80

struct vm;

int sysdev_attach(struct vm *vm, gantry_error_t *err);

#endif
