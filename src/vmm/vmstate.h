/* A stopped VM's KVM state, as the snapshot state file carries it
 * (snapshot/state.h): each vCPU's registers, MSRs, LAPIC, extended state,
 * pending events and run state, and the VM's interrupt chips, PIT and
 * clock. Saving reads it back from KVM once the vCPUs are out of KVM_RUN
 * with their last exit completed; restoring writes it into a new VM whose
 * vCPUs exist and have their CPUID, before any of them runs.
 *
 * A vCPU's state is read on its own thread (its filter allows the reads),
 * the VM's on the main thread. Restored state comes from a file that may
 * be hostile: KVM checks what it is handed, and a value it refuses fails
 * the restore with the section named. */
#ifndef GANTRY_VMM_VMSTATE_H
#define GANTRY_VMM_VMSTATE_H

#include <linux/kvm.h>
#include <stdint.h>

#include "common/error.h"
#include "snapshot/state.h"

#define VCPU_MSRS_MAX 512

/* Section tags. */
#define VMSTATE_TAG_REGS   STATE_TAG('V', 'R', 'E', 'G')
#define VMSTATE_TAG_SREGS  STATE_TAG('V', 'S', 'R', 'G')
#define VMSTATE_TAG_XSAVE  STATE_TAG('V', 'X', 'S', 'V')
#define VMSTATE_TAG_XCRS   STATE_TAG('V', 'X', 'C', 'R')
#define VMSTATE_TAG_LAPIC  STATE_TAG('V', 'L', 'A', 'P')
#define VMSTATE_TAG_MSRS   STATE_TAG('V', 'M', 'S', 'R')
#define VMSTATE_TAG_EVENTS STATE_TAG('V', 'E', 'V', 'T')
#define VMSTATE_TAG_MP	   STATE_TAG('V', 'M', 'P', 'S')
#define VMSTATE_TAG_DEBUG  STATE_TAG('V', 'D', 'B', 'G')
#define VMSTATE_TAG_PIC0   STATE_TAG('P', 'I', 'C', 'M')
#define VMSTATE_TAG_PIC1   STATE_TAG('P', 'I', 'C', 'S')
#define VMSTATE_TAG_IOAPIC STATE_TAG('I', 'O', 'A', 'P')
#define VMSTATE_TAG_PIT	   STATE_TAG('P', 'I', 'T', '2')
#define VMSTATE_TAG_CLOCK  STATE_TAG('C', 'L', 'C', 'K')
#define VMSTATE_TAG_CPUID  STATE_TAG('C', 'P', 'I', 'D')

struct vcpu_state {
	struct kvm_mp_state mp;
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct kvm_xcrs xcrs;
	struct kvm_debugregs debug;
	struct kvm_lapic_state lapic;
	struct kvm_vcpu_events events;
	uint32_t nr_msrs;
	struct kvm_msr_entry msrs[VCPU_MSRS_MAX];
	/* Last: newer headers end it with a flexible array (AMX's state,
	 * which KVM_GET_XSAVE2 would fill; our vCPUs do not enable it). */
	struct kvm_xsave xsave;
};

/* The MSRs KVM saves and restores (KVM_GET_MSR_INDEX_LIST on kvm_fd), at
 * most VCPU_MSRS_MAX; *nr their count. */
int vmstate_msr_list(int kvm_fd, uint32_t **list, uint32_t *nr, gantry_error_t *err);

/* Read vCPU fd's state. MSRs of list that KVM will not read are left out.
 * 0, or -1 with why. */
int vcpu_state_get(int fd, const uint32_t *list, uint32_t nr, struct vcpu_state *s,
		   gantry_error_t *err);
/* Write it into vCPU fd, in the order KVM needs. */
int vcpu_state_set(int fd, const struct vcpu_state *s, gantry_error_t *err);
/* As sections of a state file; read back as the index'th vCPU's. */
void vcpu_state_put(struct state_writer *w, const struct vcpu_state *s);
int vcpu_state_read(const struct state_file *sf, unsigned int index, struct vcpu_state *s,
		    gantry_error_t *err);

/* The VM's interrupt chips, PIT and clock, saved from and restored into
 * vm_fd. The clock is restored last of all, just before the vCPUs run. */
int vm_chips_save(int vm_fd, struct state_writer *w, gantry_error_t *err);
int vm_chips_restore(int vm_fd, const struct state_file *sf, gantry_error_t *err);
int vm_clock_save(int vm_fd, struct state_writer *w, gantry_error_t *err);
int vm_clock_restore(int vm_fd, const struct state_file *sf, gantry_error_t *err);

#endif
