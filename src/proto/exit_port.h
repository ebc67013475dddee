/* The one piece of host/guest contract below the agent protocol: how the
 * guest hands its exit status to the VMM and ends the VM. There is no ACPI in
 * our machine, so Linux's poweroff only halts; gantry-init writes its status
 * byte to this I/O port instead, and the VMM ends the VM with that status. */
#ifndef GANTRY_PROTO_EXIT_PORT_H
#define GANTRY_PROTO_EXIT_PORT_H

/* Outside every legacy PC device range (PIC, PIT, i8042, CMOS, DMA, COM,
 * LPT, VGA, PCI config). A 1-, 2- or 4-byte write ends the VM with the low
 * byte as its status. */
#define GANTRY_EXIT_PORT 0x0501

#endif
