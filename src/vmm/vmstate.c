/* A stopped VM's KVM state (see vmstate.h). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "common/util.h"
#include "vmm/vmstate.h"

/* struct kvm_msrs with room for every entry we keep. */
union msr_buf {
	struct kvm_msrs hdr;
	uint8_t bytes[sizeof(struct kvm_msrs) + VCPU_MSRS_MAX * sizeof(struct kvm_msr_entry)];
};

int vmstate_msr_list(int kvm_fd, uint32_t **list, uint32_t *nr, gantry_error_t *err)
{
	union {
		struct kvm_msr_list hdr;
		uint8_t bytes[sizeof(struct kvm_msr_list) + VCPU_MSRS_MAX * sizeof(uint32_t)];
	} l;

	memset(&l, 0, sizeof(l));
	l.hdr.nmsrs = VCPU_MSRS_MAX;
	if (ioctl(kvm_fd, KVM_GET_MSR_INDEX_LIST, &l) < 0)
		return gantry_error_errno(err, "KVM_GET_MSR_INDEX_LIST");
	if (l.hdr.nmsrs > VCPU_MSRS_MAX)
		return gantry_error(err, 0, "KVM saves %u MSRs, more than %u", l.hdr.nmsrs,
				    VCPU_MSRS_MAX);
	*nr = l.hdr.nmsrs;
	*list = xmalloc(l.hdr.nmsrs * sizeof(uint32_t) + 1);
	memcpy(*list, l.hdr.indices, l.hdr.nmsrs * sizeof(uint32_t));
	return 0;
}

/* KVM_GET_MSRS stops at the first MSR it cannot read and says how many it
 * read: that one is left out and the rest asked again. */
static int msrs_get(int fd, const uint32_t *list, uint32_t nr, struct vcpu_state *s,
		    gantry_error_t *err)
{
	union msr_buf b;
	uint32_t at = 0;

	s->nr_msrs = 0;
	while (at < nr) {
		int got;

		memset(&b.hdr, 0, sizeof(b.hdr));
		b.hdr.nmsrs = nr - at;
		for (uint32_t i = 0; i < nr - at; i++)
			b.hdr.entries[i] = (struct kvm_msr_entry){ .index = list[at + i] };
		got = ioctl(fd, KVM_GET_MSRS, &b);
		if (got < 0)
			return gantry_error_errno(err, "KVM_GET_MSRS");
		memcpy(&s->msrs[s->nr_msrs], b.hdr.entries, (size_t)got * sizeof(b.hdr.entries[0]));
		s->nr_msrs += (uint32_t)got;
		at += (uint32_t)got + 1;
	}
	return 0;
}

int vcpu_state_get(int fd, const uint32_t *list, uint32_t nr, struct vcpu_state *s,
		   gantry_error_t *err)
{
	const char *what = NULL;

	memset(s, 0, sizeof(*s));
	s->xcrs.nr_xcrs = KVM_MAX_XCRS;
	if (ioctl(fd, KVM_GET_MP_STATE, &s->mp) < 0)
		what = "KVM_GET_MP_STATE";
	else if (ioctl(fd, KVM_GET_REGS, &s->regs) < 0)
		what = "KVM_GET_REGS";
	else if (ioctl(fd, KVM_GET_SREGS, &s->sregs) < 0)
		what = "KVM_GET_SREGS";
	else if (ioctl(fd, KVM_GET_XSAVE, &s->xsave) < 0)
		what = "KVM_GET_XSAVE";
	else if (ioctl(fd, KVM_GET_XCRS, &s->xcrs) < 0)
		what = "KVM_GET_XCRS";
	else if (ioctl(fd, KVM_GET_DEBUGREGS, &s->debug) < 0)
		what = "KVM_GET_DEBUGREGS";
	else if (ioctl(fd, KVM_GET_LAPIC, &s->lapic) < 0)
		what = "KVM_GET_LAPIC";
	else if (ioctl(fd, KVM_GET_VCPU_EVENTS, &s->events) < 0)
		what = "KVM_GET_VCPU_EVENTS";
	if (what)
		return gantry_error_errno(err, "%s", what);
	return msrs_get(fd, list, nr, s, err);
}

/* Firecracker's order: the LAPIC before the MSRs (its TSC deadline is an
 * MSR, armed against the restored timer mode), the pending events last. */
int vcpu_state_set(int fd, const struct vcpu_state *s, gantry_error_t *err)
{
	const char *what = NULL;
	union msr_buf b;
	int n;

	if (s->nr_msrs > VCPU_MSRS_MAX)
		return gantry_error(err, 0, "%u MSRs, more than %u", s->nr_msrs, VCPU_MSRS_MAX);
	if (ioctl(fd, KVM_SET_MP_STATE, &s->mp) < 0)
		what = "KVM_SET_MP_STATE";
	else if (ioctl(fd, KVM_SET_REGS, &s->regs) < 0)
		what = "KVM_SET_REGS";
	else if (ioctl(fd, KVM_SET_SREGS, &s->sregs) < 0)
		what = "KVM_SET_SREGS";
	else if (ioctl(fd, KVM_SET_XSAVE, &s->xsave) < 0)
		what = "KVM_SET_XSAVE";
	else if (ioctl(fd, KVM_SET_XCRS, &s->xcrs) < 0)
		what = "KVM_SET_XCRS";
	else if (ioctl(fd, KVM_SET_DEBUGREGS, &s->debug) < 0)
		what = "KVM_SET_DEBUGREGS";
	else if (ioctl(fd, KVM_SET_LAPIC, &s->lapic) < 0)
		what = "KVM_SET_LAPIC";
	if (what)
		return gantry_error_errno(err, "%s", what);
	memset(&b.hdr, 0, sizeof(b.hdr));
	b.hdr.nmsrs = s->nr_msrs;
	memcpy(b.hdr.entries, s->msrs, s->nr_msrs * sizeof(s->msrs[0]));
	n = ioctl(fd, KVM_SET_MSRS, &b);
	if (n < 0)
		return gantry_error_errno(err, "KVM_SET_MSRS");
	if ((uint32_t)n < s->nr_msrs)
		return gantry_error(err, 0, "KVM_SET_MSRS: MSR %#x (%#llx) refused",
				    s->msrs[n].index, (unsigned long long)s->msrs[n].data);
	if (ioctl(fd, KVM_SET_VCPU_EVENTS, &s->events) < 0)
		return gantry_error_errno(err, "KVM_SET_VCPU_EVENTS");
	return 0;
}

void vcpu_state_put(struct state_writer *w, const struct vcpu_state *s)
{
	state_put(w, VMSTATE_TAG_MP, &s->mp, sizeof(s->mp));
	state_put(w, VMSTATE_TAG_REGS, &s->regs, sizeof(s->regs));
	state_put(w, VMSTATE_TAG_SREGS, &s->sregs, sizeof(s->sregs));
	state_put(w, VMSTATE_TAG_XSAVE, &s->xsave, sizeof(s->xsave));
	state_put(w, VMSTATE_TAG_XCRS, &s->xcrs, sizeof(s->xcrs));
	state_put(w, VMSTATE_TAG_DEBUG, &s->debug, sizeof(s->debug));
	state_put(w, VMSTATE_TAG_LAPIC, &s->lapic, sizeof(s->lapic));
	state_put(w, VMSTATE_TAG_EVENTS, &s->events, sizeof(s->events));
	state_put(w, VMSTATE_TAG_MSRS, s->msrs, s->nr_msrs * sizeof(s->msrs[0]));
}

int vcpu_state_read(const struct state_file *sf, unsigned int index, struct vcpu_state *s,
		    gantry_error_t *err)
{
	const struct state_section *m;

	memset(s, 0, sizeof(*s));
	if (state_get(sf, VMSTATE_TAG_MP, index, &s->mp, sizeof(s->mp), err) < 0 ||
	    state_get(sf, VMSTATE_TAG_REGS, index, &s->regs, sizeof(s->regs), err) < 0 ||
	    state_get(sf, VMSTATE_TAG_SREGS, index, &s->sregs, sizeof(s->sregs), err) < 0 ||
	    state_get(sf, VMSTATE_TAG_XSAVE, index, &s->xsave, sizeof(s->xsave), err) < 0 ||
	    state_get(sf, VMSTATE_TAG_XCRS, index, &s->xcrs, sizeof(s->xcrs), err) < 0 ||
	    state_get(sf, VMSTATE_TAG_DEBUG, index, &s->debug, sizeof(s->debug), err) < 0 ||
	    state_get(sf, VMSTATE_TAG_LAPIC, index, &s->lapic, sizeof(s->lapic), err) < 0 ||
	    state_get(sf, VMSTATE_TAG_EVENTS, index, &s->events, sizeof(s->events), err) < 0)
		return gantry_error_prefix(err, "vCPU %u", index);
	m = state_find(sf, VMSTATE_TAG_MSRS, index);
	if (m == NULL || m->len % sizeof(s->msrs[0]) != 0 ||
	    m->len / sizeof(s->msrs[0]) > VCPU_MSRS_MAX)
		return gantry_error(err, 0, "vCPU %u: %s MSR section", index,
				    m ? "a malformed" : "no");
	s->nr_msrs = (uint32_t)(m->len / sizeof(s->msrs[0]));
	memcpy(s->msrs, m->data, m->len);
	if (s->xcrs.nr_xcrs > KVM_MAX_XCRS)
		return gantry_error(err, 0, "vCPU %u: %u XCRs, at most %u", index, s->xcrs.nr_xcrs,
				    KVM_MAX_XCRS);
	return 0;
}

static const struct {
	uint32_t tag;
	uint32_t chip;
	const char *name;
} chips[] = {
	{ VMSTATE_TAG_PIC0, KVM_IRQCHIP_PIC_MASTER, "PIC master" },
	{ VMSTATE_TAG_PIC1, KVM_IRQCHIP_PIC_SLAVE, "PIC slave" },
	{ VMSTATE_TAG_IOAPIC, KVM_IRQCHIP_IOAPIC, "IOAPIC" },
};

int vm_chips_save(int vm_fd, struct state_writer *w, gantry_error_t *err)
{
	struct kvm_pit_state2 pit;

	for (size_t i = 0; i < ARRAY_SIZE(chips); i++) {
		struct kvm_irqchip c = { .chip_id = chips[i].chip };

		if (ioctl(vm_fd, KVM_GET_IRQCHIP, &c) < 0)
			return gantry_error_errno(err, "KVM_GET_IRQCHIP (%s)", chips[i].name);
		state_put(w, chips[i].tag, &c, sizeof(c));
	}
	memset(&pit, 0, sizeof(pit));
	if (ioctl(vm_fd, KVM_GET_PIT2, &pit) < 0)
		return gantry_error_errno(err, "KVM_GET_PIT2");
	state_put(w, VMSTATE_TAG_PIT, &pit, sizeof(pit));
	return 0;
}

int vm_chips_restore(int vm_fd, const struct state_file *sf, gantry_error_t *err)
{
	struct kvm_pit_state2 pit;

	for (size_t i = 0; i < ARRAY_SIZE(chips); i++) {
		struct kvm_irqchip c;

		if (state_get(sf, chips[i].tag, 0, &c, sizeof(c), err) < 0)
			return -1;
		if (c.chip_id != chips[i].chip)
			return gantry_error(err, 0, "the %s section holds chip %u", chips[i].name,
					    c.chip_id);
		if (ioctl(vm_fd, KVM_SET_IRQCHIP, &c) < 0)
			return gantry_error_errno(err, "KVM_SET_IRQCHIP (%s)", chips[i].name);
	}
	if (state_get(sf, VMSTATE_TAG_PIT, 0, &pit, sizeof(pit), err) < 0)
		return -1;
	if (ioctl(vm_fd, KVM_SET_PIT2, &pit) < 0)
		return gantry_error_errno(err, "KVM_SET_PIT2");
	return 0;
}

int vm_clock_save(int vm_fd, struct state_writer *w, gantry_error_t *err)
{
	struct kvm_clock_data c;

	memset(&c, 0, sizeof(c));
	if (ioctl(vm_fd, KVM_GET_CLOCK, &c) < 0)
		return gantry_error_errno(err, "KVM_GET_CLOCK");
	state_put(w, VMSTATE_TAG_CLOCK, &c, sizeof(c));
	return 0;
}

int vm_clock_restore(int vm_fd, const struct state_file *sf, gantry_error_t *err)
{
	struct kvm_clock_data c;

	if (state_get(sf, VMSTATE_TAG_CLOCK, 0, &c, sizeof(c), err) < 0)
		return -1;
	/* The clock goes on from where it stopped; its other fields are
	 * KVM's to say, not ours to set. */
	c = (struct kvm_clock_data){ .clock = c.clock };
	if (ioctl(vm_fd, KVM_SET_CLOCK, &c) < 0)
		return gantry_error_errno(err, "KVM_SET_CLOCK");
	return 0;
}
