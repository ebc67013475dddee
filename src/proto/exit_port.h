/* The one piece of host/guest contract below the agent protocol: how the
 * guest hands its exit status to the VMM and ends the VM. There is no ACPI in
 * our machine, so Linux's poweroff only halts. Our inits write their status
 * to the status register (through /dev/mem) and then reboot: the kernel's
 * own reset (i8042, reboot=k) ends the VM, and the VMM returns the status
 * that was written last. */
#ifndef GANTRY_PROTO_EXIT_PORT_H
#define GANTRY_PROTO_EXIT_PORT_H

/* One page of MMIO above the virtio-mmio slots, inside the 3-4 GiB hole:
 * never RAM, so STRICT_DEVMEM lets PID 1 map it. A 1-, 2- or 4-byte write
 * records the low byte as the guest's exit status; a read returns the
 * recorded status (0 when none). */
#define GANTRY_STATUS_MMIO	0xd0ff0000u
#define GANTRY_STATUS_MMIO_SIZE 0x1000u

/* Outside every legacy PC device range (PIC, PIT, i8042, CMOS, DMA, COM,
 * LPT, VGA, PCI config). A 1-, 2- or 4-byte write ends the VM at once with
 * the low byte as its status. For guests that do port I/O from the kernel;
 * our inits do not use it (port I/O from guest userspace, through ioperm,
 * froze QEMU-TCG's emulated SVM in nested test hosts). */
#define GANTRY_EXIT_PORT 0x0501

#endif
