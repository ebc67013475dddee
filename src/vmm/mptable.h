/* Intel MultiProcessor Specification 1.4 table: how a guest without ACPI
 * learns its CPUs, the IO-APIC and the ISA interrupt routing. */
#ifndef GANTRY_VMM_MPTABLE_H
#define GANTRY_VMM_MPTABLE_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "vmm/memory.h"

#define MPTABLE_MAX_CPUS    254 /* 8-bit APIC IDs; the IO-APIC takes the next one */
#define MPTABLE_IOAPIC_ADDR 0xfec00000U
#define MPTABLE_LAPIC_ADDR  0xfee00000U
#define MPTABLE_ISA_IRQS    16

/* Bytes the table for ncpus occupies (floating pointer + config table). */
size_t mptable_size(unsigned int ncpus);

/* Write the floating pointer at gpa and the configuration table right after
 * it: one processor entry per vCPU (APIC ID = index, CPU 0 the BSP), the ISA
 * bus, one IO-APIC (ID ncpus), ISA IRQ 0..15 routed to IO-APIC pins (IRQ 0 to
 * pin 2, as KVM's default routing does) and LINT0 ExtINT / LINT1 NMI.
 * Both checksums are filled in. */
int mptable_write(struct guest_mem *m, uint64_t gpa, unsigned int ncpus, gantry_error_t *err);

#endif
