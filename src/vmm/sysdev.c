/* Reset and exit ports, status register (see sysdev.h). */
#include <string.h>

#include "vmm/sysdev.h"
#include "vmm/vm.h"

static void i8042_access(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write)
{
	struct vm *vm = opaque;

	if (!is_write) {
		/* No keyboard: empty buffers, so the kernel's kb_wait() returns. */
		memset(data, 0, len);
		return;
	}
	if (off == I8042_COMMAND_PORT - I8042_DATA_PORT && data[0] == I8042_CMD_RESET)
		vm_request_end(vm, VM_END_RESET, 0, "guest reset (i8042)");
}

static void reset_control_access(void *opaque, uint64_t off, uint8_t *data, uint32_t len,
				 bool is_write)
{
	struct vm *vm = opaque;

	(void)off;
	if (!is_write) {
		memset(data, 0, len);
		return;
	}
	if (data[0] & RESET_CONTROL_RST)
		vm_request_end(vm, VM_END_RESET, 0, "guest reset (0xcf9)");
}

static void exit_port_access(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write)
{
	struct vm *vm = opaque;

	(void)off;
	if (!is_write) {
		memset(data, 0, len);
		return;
	}
	vm_request_end(vm, VM_END_EXIT, data[0], "guest exited with status %u", data[0]);
}

static void status_mmio_access(void *opaque, uint64_t off, uint8_t *data, uint32_t len,
			       bool is_write)
{
	struct vm *vm = opaque;

	if (off != 0) {
		if (!is_write)
			memset(data, 0, len);
		return;
	}
	if (is_write)
		atomic_store(&vm->guest_status, data[0]);
	else {
		memset(data, 0, len);
		data[0] = (uint8_t)atomic_load(&vm->guest_status);
	}
}

static void io_delay_access(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write)
{
	(void)opaque;
	(void)off;
	if (!is_write)
		memset(data, 0xff, len);
}

int sysdev_attach(struct vm *vm, gantry_error_t *err)
{
	if (bus_register(&vm->pio, I8042_DATA_PORT, 5, i8042_access, vm, "i8042", err) < 0)
		return -1;
	if (bus_register(&vm->pio, RESET_CONTROL_PORT, 1, reset_control_access, vm, "reset-control",
			 err) < 0)
		return -1;
	if (bus_register(&vm->pio, IO_DELAY_PORT, 1, io_delay_access, vm, "io-delay", err) < 0)
		return -1;
	if (bus_register(&vm->mmio, GANTRY_STATUS_MMIO, GANTRY_STATUS_MMIO_SIZE, status_mmio_access, vm,
			 "status", err) < 0)
		return -1;
	return bus_register(&vm->pio, GANTRY_EXIT_PORT, 4, exit_port_access, vm, "exit-port", err);
}
