/* vCPUs: CPUID, 64-bit boot register state for the BSP, LAPIC LINT setup,
 * one thread per vCPU and the exit loop that routes port I/O and MMIO to the
 * buses. Application processors wait for INIT/SIPI in the in-kernel LAPIC. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "confine/vmm_filter.h"
#include "vmm/boot_x86.h"
#include "vmm/vm.h"
#include "vmm/vmstate.h"

#define VCPU_KICK_SIGNAL SIGUSR1

/* The guest profile: every PROFILE_PERIOD_US a timer interrupts the vCPU's
 * KVM_RUN and its instruction pointer is noted, at most PROFILE_MAX_SAMPLES
 * per vCPU (some 17 minutes). */
#define PROFILE_PERIOD_US   2000
#define PROFILE_MAX_SAMPLES (512U * 1024)

#define CPUID_1_ECX_TSC_DEADLINE (1U << 24)
#define CPUID_1_ECX_HYPERVISOR	 (1U << 31)
#define XCR0_X87		 1ULL
#define MSR_IA32_MISC_ENABLE	 0x1a0
#define MISC_ENABLE_FAST_STRING	 1ULL

#define X86_CR0_PE  0x1ULL
#define X86_CR0_ET  0x10ULL
#define X86_CR0_NE  0x20ULL
#define X86_CR0_PG  0x80000000ULL
#define X86_CR4_PAE 0x20ULL
#define EFER_LME    0x100ULL
#define EFER_LMA    0x400ULL

#define APIC_LVT0	 0x350
#define APIC_LVT1	 0x360
#define APIC_MODE_NMI	 0x4
#define APIC_MODE_EXTINT 0x7

struct vcpu {
	struct vm *vm;
	unsigned int index;
	int fd;
	struct kvm_run *run;
	pthread_t thread;
	bool started;
	/* The profile: ms since the vCPUs started, and the guest's RIP. */
	struct profile_sample {
		float ms;
		uint64_t rip;
	} * samples;
	size_t nr_samples, max_samples;
	/* vm->save_on_stop: where the thread reads its state as it ends,
	 * or parks for a live save, and why it could not. */
	struct vcpu_state *saved;
	gantry_error_t save_err;
	bool parked;	      /* under vm->pause_lock */
	uint64_t saved_round; /* the vm->pause_round saved was read for, under it too */
};

static void vcpu_kick_handler(int sig)
{
	(void)sig;
}

static int cpuid_fetch(struct vm *vm, gantry_error_t *err)
{
	unsigned int nent = 128;

	for (;;) {
		struct kvm_cpuid2 *c = xzalloc(sizeof(*c) + nent * sizeof(c->entries[0]));

		c->nent = nent;
		if (ioctl(vm->kvm_fd, KVM_GET_SUPPORTED_CPUID, c) == 0) {
			vm->cpuid = c;
			return 0;
		}
		free(c);
		if (errno != E2BIG || nent >= 4096)
			return gantry_error_errno(err, "KVM_GET_SUPPORTED_CPUID");
		nent *= 2;
	}
}

/* Set XCR0 to the user state components CPUID 0xD.0 lists (true when it
 * changed). Not an error when KVM refuses: the guest then sets XCR0 itself. */
static bool xcr0_enable_all(struct vcpu *v, const struct kvm_cpuid2 *c)
{
	struct kvm_xcrs xcrs = { .nr_xcrs = 1 };

	if (ioctl(v->vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_XCRS) <= 0)
		return false;
	for (unsigned int i = 0; i < c->nent; i++) {
		const struct kvm_cpuid_entry2 *e = &c->entries[i];

		if (e->function == 0xd && e->index == 0) {
			xcrs.xcrs[0].value = e->eax | (uint64_t)e->edx << 32;
			break;
		}
	}
	/* x87 alone is reset's XCR0: nothing to change. */
	if ((xcrs.xcrs[0].value & ~XCR0_X87) == 0)
		return false;
	return ioctl(v->fd, KVM_SET_XCRS, &xcrs) == 0;
}

/* KVM's supported set, plus this vCPU's APIC ID and the hypervisor bit. */
static int vcpu_set_cpuid(struct vcpu *v, gantry_error_t *err)
{
	const struct kvm_cpuid2 *src = v->vm->cpuid;
	/* KVM emulates the TSC-deadline timer but leaves its bit out of the
	 * supported set; without it Linux falls back to a calibrated one-shot
	 * LAPIC timer, which nested hosts measure badly enough to stall sleeps. */
	bool tsc_deadline =
		ioctl(v->vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_TSC_DEADLINE_TIMER) > 0;
	size_t size = sizeof(*src) + src->nent * sizeof(src->entries[0]);
	cleanup_free struct kvm_cpuid2 *c = xmalloc(size);

	memcpy(c, src, size);
	for (unsigned int i = 0; i < c->nent; i++) {
		struct kvm_cpuid_entry2 *e = &c->entries[i];

		switch (e->function) {
		case 1:
			e->ebx = (e->ebx & 0x00ffffffU) | (v->index << 24);
			e->ecx |= CPUID_1_ECX_HYPERVISOR;
			if (tsc_deadline)
				e->ecx |= CPUID_1_ECX_TSC_DEADLINE;
			break;
		case 0xb:
		case 0x1f:
			e->edx = v->index; /* x2APIC ID */
			break;
		}
	}
	if (ioctl(v->fd, KVM_SET_CPUID2, c) < 0)
		return gantry_error_errno(err, "vCPU %u: KVM_SET_CPUID2", v->index);
	/* KVM sizes the XSAVE area that CPUID 0xD.0 EBX reports for the vCPU's
	 * XCR0 when the CPUID is set, and afterwards only when XCR0 changes
	 * beyond x87, SSE and AVX. From reset's XCR0 (x87 alone) that is 576
	 * bytes; Linux then enables x87|SSE|AVX, computes 832, and warns of an
	 * inconsistent CPU at every boot (and falls back to FXSAVE). So the
	 * vCPU starts with every user feature it has enabled in XCR0, and the
	 * CPUID is set again to be sized for that. */
	if (xcr0_enable_all(v, c) && ioctl(v->fd, KVM_SET_CPUID2, c) < 0)
		return gantry_error_errno(err, "vCPU %u: KVM_SET_CPUID2", v->index);
	return 0;
}

static int vcpu_set_lint(struct vcpu *v, gantry_error_t *err)
{
	struct kvm_lapic_state lapic;
	uint32_t *lvt0, *lvt1;

	if (ioctl(v->fd, KVM_GET_LAPIC, &lapic) < 0)
		return gantry_error_errno(err, "vCPU %u: KVM_GET_LAPIC", v->index);
	lvt0 = (uint32_t *)&lapic.regs[APIC_LVT0];
	lvt1 = (uint32_t *)&lapic.regs[APIC_LVT1];
	*lvt0 = (*lvt0 & ~0x700U) | (APIC_MODE_EXTINT << 8);
	*lvt1 = (*lvt1 & ~0x700U) | (APIC_MODE_NMI << 8);
	if (ioctl(v->fd, KVM_SET_LAPIC, &lapic) < 0)
		return gantry_error_errno(err, "vCPU %u: KVM_SET_LAPIC", v->index);
	return 0;
}

static void segment(struct kvm_segment *s, uint16_t sel, uint8_t type, bool code)
{
	*s = (struct kvm_segment){
		.base = 0,
		.limit = 0xffffffff,
		.selector = sel,
		.type = type,
		.present = 1,
		.s = 1,
		.l = code,
		.db = !code,
		.g = 1,
	};
}

/* Long mode, flat segments, identity paging: the state the 64-bit boot
 * protocol asks for, with rsi pointing at the zero page. */
static int vcpu_set_boot_state(struct vcpu *v, uint64_t entry, gantry_error_t *err)
{
	struct kvm_sregs sregs;
	struct kvm_regs regs = { 0 };
	struct kvm_fpu fpu = { 0 };
	union {
		struct kvm_msrs hdr;
		uint8_t bytes[sizeof(struct kvm_msrs) + sizeof(struct kvm_msr_entry)];
	} msrs;

	if (ioctl(v->fd, KVM_GET_SREGS, &sregs) < 0)
		return gantry_error_errno(err, "KVM_GET_SREGS");
	segment(&sregs.cs, BOOT_GDT_CODE, 0xb, true);
	segment(&sregs.ds, BOOT_GDT_DATA, 0x3, false);
	sregs.es = sregs.fs = sregs.gs = sregs.ss = sregs.ds;
	sregs.tr = (struct kvm_segment){
		.selector = BOOT_GDT_TSS, .limit = 0xfffff, .type = 0xb, .present = 1
	};
	sregs.gdt.base = BOOT_GDT_ADDR;
	sregs.gdt.limit = 5 * 8 - 1;
	sregs.idt.base = 0;
	sregs.idt.limit = 0;
	sregs.cr0 = X86_CR0_PE | X86_CR0_ET | X86_CR0_NE | X86_CR0_PG;
	sregs.cr3 = BOOT_PML4_ADDR;
	sregs.cr4 = X86_CR4_PAE;
	sregs.efer = EFER_LME | EFER_LMA;
	if (ioctl(v->fd, KVM_SET_SREGS, &sregs) < 0)
		return gantry_error_errno(err, "KVM_SET_SREGS");

	regs.rflags = 0x2;
	regs.rip = entry;
	regs.rsi = BOOT_ZERO_PAGE;
	regs.rsp = regs.rbp = BOOT_STACK_TOP;
	if (ioctl(v->fd, KVM_SET_REGS, &regs) < 0)
		return gantry_error_errno(err, "KVM_SET_REGS");

	fpu.fcw = 0x37f;
	fpu.mxcsr = 0x1f80;
	if (ioctl(v->fd, KVM_SET_FPU, &fpu) < 0)
		return gantry_error_errno(err, "KVM_SET_FPU");
	memset(&msrs, 0, sizeof(msrs));
	msrs.hdr.nmsrs = 1;
	msrs.hdr.entries[0].index = MSR_IA32_MISC_ENABLE;
	msrs.hdr.entries[0].data = MISC_ENABLE_FAST_STRING;
	if (ioctl(v->fd, KVM_SET_MSRS, &msrs) != 1)
		return gantry_error_errno(err, "KVM_SET_MSRS");
	return 0;
}

/* KVM's supported CPUID as a snapshot keeps it: without the fields that
 * name the host CPU the caller happened to run on (the initial APIC ID in
 * leaf 1, the x2APIC ID in leaves 0xb and 0x1f), which each vCPU gets
 * its own of anyway. The caller frees it. */
static struct kvm_cpuid_entry2 *cpuid_portable(const struct kvm_cpuid2 *src, size_t *len)
{
	struct kvm_cpuid_entry2 *e;

	*len = src->nent * sizeof(src->entries[0]);
	e = xmalloc(*len + 1);
	memcpy(e, src->entries, *len);
	for (unsigned int i = 0; i < src->nent; i++) {
		if (e[i].function == 1)
			e[i].ebx &= 0x00ffffffU;
		else if (e[i].function == 0xb || e[i].function == 0x1f)
			e[i].edx = 0;
	}
	return e;
}

/* The snapshot's vCPUs ran with this host's CPUID, or the guest may find
 * a feature gone that it uses. */
static int cpuid_matches(struct vm *vm, gantry_error_t *err)
{
	const struct state_section *c = state_find(vm->restore, VMSTATE_TAG_CPUID, 0);
	size_t len;
	cleanup_free struct kvm_cpuid_entry2 *mine = cpuid_portable(vm->cpuid, &len);

	if (c == NULL)
		return gantry_error(err, 0, "no CPUID section");
	if (c->len != len || memcmp(c->data, mine, len) != 0)
		return gantry_error(err, 0,
				    "it was made on a CPU whose features differ from this host's");
	return 0;
}

static int vcpu_restore(struct vcpu *v, gantry_error_t *err)
{
	cleanup_free struct vcpu_state *s = xmalloc(sizeof(*s));

	if (vcpu_state_read(v->vm->restore, v->index, s, err) < 0 ||
	    vcpu_state_set(v->fd, s, err) < 0)
		return gantry_error_prefix(err, "vCPU %u", v->index);
	return 0;
}

/* The VM is being saved: the last exit completed (KVM finishes an I/O
 * instruction only on the next KVM_RUN, which immediate_exit makes
 * return at once), then the state read. */
static void vcpu_save(struct vcpu *v)
{
	v->run->immediate_exit = 1;
	(void)ioctl(v->fd, KVM_RUN, 0);
	gantry_error_free(&v->save_err);
	if (vcpu_state_get(v->fd, v->vm->msr_list, v->vm->nr_msr_list, v->saved, &v->save_err) < 0)
		gantry_error_prefix(&v->save_err, "vCPU %u", v->index);
}

/* A live save: parked until vcpus_unpause or the VM's end, the state read
 * for each pause round that comes meanwhile (a frozen VM saved, or saved
 * twice). */
static void vcpu_park(struct vcpu *v)
{
	struct vm *vm = v->vm;

	pthread_mutex_lock(&vm->pause_lock);
	v->parked = true;
	vm->parked++;
	pthread_cond_broadcast(&vm->pause_cond);
	while (atomic_load(&vm->pausing) && atomic_load(&vm->ending) == 0) {
		uint64_t round = vm->pause_round;

		if (v->saved && v->saved_round != round) {
			pthread_mutex_unlock(&vm->pause_lock);
			vcpu_save(v);
			pthread_mutex_lock(&vm->pause_lock);
			v->saved_round = round;
			pthread_cond_broadcast(&vm->pause_cond);
			continue;
		}
		pthread_cond_wait(&vm->pause_cond, &vm->pause_lock);
	}
	v->parked = false;
	vm->parked--;
	pthread_cond_broadcast(&vm->pause_cond); /* a pause waiting for us to leave */
	pthread_mutex_unlock(&vm->pause_lock);
	v->run->immediate_exit = 0;
	/* The guest's watchdogs are told the stall was ours (a guest that
	 * has no kvmclock refuses: nothing to tell). */
	if (atomic_load(&vm->ending) == 0)
		(void)ioctl(v->fd, KVM_KVMCLOCK_CTRL, 0);
}

/* Locked: the vCPUs parked with their state read for this round. */
static unsigned int vcpus_ready(struct vm *vm)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < vm->nr_vcpus; i++) {
		const struct vcpu *c = &vm->vcpus[i];

		n += c->started && c->parked && (!c->saved || c->saved_round == vm->pause_round);
	}
	return n;
}

int vcpus_pause(struct vm *vm)
{
	unsigned int started = 0;

	for (unsigned int i = 0; i < vm->nr_vcpus; i++)
		started += vm->vcpus[i].started;
	pthread_mutex_lock(&vm->pause_lock);
	/* vCPUs the last unpause let go of may not have left their park
	 * yet: taken as parked for this round, they would read no state for
	 * it. Already pausing (frozen), the parked read theirs again. */
	while (!atomic_load(&vm->pausing) && vm->parked && atomic_load(&vm->ending) == 0)
		pthread_cond_wait(&vm->pause_cond, &vm->pause_lock);
	vm->pause_round++;
	atomic_store(&vm->pausing, true);
	pthread_cond_broadcast(&vm->pause_cond);
	while (vcpus_ready(vm) < started && atomic_load(&vm->ending) == 0) {
		struct timespec until;

		/* Kicked until parked: one may have been between its check
		 * and KVM_RUN. */
		for (unsigned int i = 0; i < vm->nr_vcpus; i++) {
			struct vcpu *c = &vm->vcpus[i];

			if (!c->started || c->parked)
				continue;
			c->run->immediate_exit = 1;
			pthread_kill(c->thread, VCPU_KICK_SIGNAL);
		}
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&vm->pause_cond, &vm->pause_lock, &until);
	}
	pthread_mutex_unlock(&vm->pause_lock);
	if (atomic_load(&vm->ending) == 0)
		return 0;
	vcpus_unpause(vm);
	return -1;
}

void vcpus_unpause(struct vm *vm)
{
	pthread_mutex_lock(&vm->pause_lock);
	atomic_store(&vm->pausing, false);
	pthread_cond_broadcast(&vm->pause_cond);
	pthread_mutex_unlock(&vm->pause_lock);
}

int vcpus_save(struct vm *vm, struct state_writer *w, gantry_error_t *err)
{
	size_t len;
	cleanup_free struct kvm_cpuid_entry2 *cpuid = cpuid_portable(vm->cpuid, &len);

	state_put(w, VMSTATE_TAG_CPUID, cpuid, len);
	for (unsigned int i = 0; i < vm->nr_vcpus; i++) {
		struct vcpu *v = &vm->vcpus[i];

		if (v->save_err) {
			*err = v->save_err;
			v->save_err = NULL;
			return -1;
		}
		if (v->saved == NULL)
			return gantry_error(err, 0, "vCPU %u: its state was not read", i);
		vcpu_state_put(w, v->saved);
	}
	return 0;
}

int vcpus_create(struct vm *vm, uint64_t entry, gantry_error_t *err)
{
	struct sigaction sa = { .sa_handler = vcpu_kick_handler };

	sigemptyset(&sa.sa_mask);
	if (sigaction(VCPU_KICK_SIGNAL, &sa, NULL) < 0)
		return gantry_error_errno(err, "sigaction");
	if (cpuid_fetch(vm, err) < 0)
		return -1;
	if (vm->restore && cpuid_matches(vm, err) < 0)
		return -1;
	if (vm->save_on_stop &&
	    vmstate_msr_list(vm->kvm_fd, &vm->msr_list, &vm->nr_msr_list, err) < 0)
		return -1;

	vm->vcpus = xzalloc(vm->nr_vcpus * sizeof(*vm->vcpus));
	for (unsigned int i = 0; i < vm->nr_vcpus; i++)
		vm->vcpus[i].fd = -1;
	for (unsigned int i = 0; i < vm->nr_vcpus; i++) {
		struct vcpu *v = &vm->vcpus[i];
		void *run;

		v->vm = vm;
		v->index = i;
		v->fd = ioctl(vm->vm_fd, KVM_CREATE_VCPU, (unsigned long)i);
		if (v->fd < 0)
			return gantry_error_errno(err, "KVM_CREATE_VCPU %u", i);
		run = mmap(NULL, (size_t)vm->vcpu_mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED,
			   v->fd, 0);
		if (run == MAP_FAILED)
			return gantry_error_errno(err, "mmap vCPU %u", i);
		v->run = run;
		if (vcpu_set_cpuid(v, err) < 0)
			return -1;
		if (vm->save_on_stop)
			v->saved = xmalloc(sizeof(*v->saved));
		if (vm->restore) {
			if (vcpu_restore(v, err) < 0)
				return -1;
			continue;
		}
		if (vcpu_set_lint(v, err) < 0)
			return -1;
		if (i == 0 && vcpu_set_boot_state(v, entry, err) < 0)
			return gantry_error_prefix(err, "boot vCPU");
	}
	return 0;
}

static void vcpu_handle_io(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	uint8_t *data = (uint8_t *)run + run->io.data_offset;
	bool out = run->io.direction == KVM_EXIT_IO_OUT;

	atomic_fetch_add(&v->vm->stats.io_exits, 1);
	for (uint32_t i = 0; i < run->io.count; i++, data += run->io.size) {
		if (!bus_dispatch(&v->vm->pio, run->io.port, data, run->io.size, out)) {
			/* Nothing there: reads float high, writes vanish. */
			atomic_fetch_add(&v->vm->stats.unhandled, 1);
			if (!out)
				memset(data, 0xff, run->io.size);
		}
	}
}

static void vcpu_handle_mmio(struct vcpu *v)
{
	struct kvm_run *run = v->run;

	atomic_fetch_add(&v->vm->stats.mmio_exits, 1);
	if (run->mmio.len > sizeof(run->mmio.data))
		return;
	if (!bus_dispatch(&v->vm->mmio, run->mmio.phys_addr, run->mmio.data, run->mmio.len,
			  run->mmio.is_write)) {
		atomic_fetch_add(&v->vm->stats.unhandled, 1);
		if (!run->mmio.is_write)
			memset(run->mmio.data, 0xff, run->mmio.len);
	}
}

static void vcpu_handle_system_event(struct vcpu *v)
{
	switch (v->run->system_event.type) {
	case KVM_SYSTEM_EVENT_SHUTDOWN:
		vm_request_end(v->vm, VM_END_SHUTDOWN, 0, "guest shut down");
		break;
	case KVM_SYSTEM_EVENT_RESET:
		vm_request_end(v->vm, VM_END_RESET, 0, "guest reset");
		break;
	default:
		vm_request_end(v->vm, VM_END_FAILURE, -1, "guest crashed (system event %u)",
			       v->run->system_event.type);
	}
}

/* A timer that kicks this thread out of KVM_RUN every PROFILE_PERIOD_US. */
static bool profile_timer(timer_t *t)
{
	struct sigevent sev = { .sigev_notify = SIGEV_THREAD_ID, .sigev_signo = VCPU_KICK_SIGNAL };
	struct itimerspec its = {
		.it_interval = { 0, PROFILE_PERIOD_US * 1000L },
		.it_value = { 0, PROFILE_PERIOD_US * 1000L },
	};

	sev._sigev_un._tid = gettid();
	if (timer_create(CLOCK_MONOTONIC, &sev, t) < 0)
		return false;
	if (timer_settime(*t, 0, &its, NULL) < 0) {
		timer_delete(*t);
		return false;
	}
	return true;
}

static void profile_sample(struct vcpu *v)
{
	struct kvm_regs regs;

	if (v->nr_samples == PROFILE_MAX_SAMPLES || ioctl(v->fd, KVM_GET_REGS, &regs) < 0)
		return;
	if (v->nr_samples == v->max_samples) {
		v->max_samples = v->max_samples ? 2 * v->max_samples : 4096;
		v->samples = xrealloc(v->samples, v->max_samples * sizeof(*v->samples));
	}
	v->samples[v->nr_samples++] = (struct profile_sample){
		.ms = (float)(now_ms_frac() - v->vm->t_start),
		.rip = regs.rip,
	};
}

/* Buffered output to the profile's fd; false once a write failed. */
struct profile_out {
	int fd;
	size_t len;
	bool ok;
	char buf[16384];
};

static void profile_flush(struct profile_out *o)
{
	if (o->ok && o->len > 0 && write_full(o->fd, o->buf, o->len) < 0)
		o->ok = false;
	o->len = 0;
}

static void profile_line(struct profile_out *o, double ms, unsigned int vcpu, uint64_t rip)
{
	if (sizeof(o->buf) - o->len < 64)
		profile_flush(o);
	o->len += (size_t)snprintf(o->buf + o->len, sizeof(o->buf) - o->len, "%.1f %u %#llx\n", ms,
				   vcpu, (unsigned long long)rip);
}

/* "ms vcpu rip" lines, vCPU by vCPU; scripts/guest-profile reads them. */
static void profile_write(struct vm *vm)
{
	struct profile_out o;
	int fd = vm->profile_fd;

	if (fd <= 0 && (fd = open(vm->profile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
		log_warn("guest profile `%s`: %s", vm->profile, strerror(errno));
		return;
	}
	o.fd = fd;
	o.ok = true;
	o.len = (size_t)snprintf(o.buf, sizeof(o.buf),
				 "# gantry guest profile: ms since the vCPUs started, vCPU, "
				 "instruction pointer; one sample every %d us\n",
				 PROFILE_PERIOD_US);
	for (unsigned int i = 0; i < vm->nr_vcpus; i++) {
		const struct vcpu *v = &vm->vcpus[i];

		for (size_t j = 0; j < v->nr_samples; j++)
			profile_line(&o, v->samples[j].ms, i, v->samples[j].rip);
	}
	profile_flush(&o);
	if (!o.ok)
		log_warn("guest profile `%s`: %s", vm->profile, strerror(errno));
	if (fd != vm->profile_fd)
		close(fd);
}

static void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;
	struct vm *vm = v->vm;
	bool profiling = false;
	char name[16];
	timer_t timer;

	snprintf(name, sizeof(name), "vcpu%u", v->index);
	pthread_setname_np(pthread_self(), name);
	if (vm->profile) {
		profiling = profile_timer(&timer);
		if (!profiling)
			log_warn("guest profile: vCPU %u: no timer: %s", v->index, strerror(errno));
	}
	/* Its timer made, the vCPU narrows to its run loop. */
	if (!vm_confine_thread(vm, VMM_THREAD_VCPU))
		goto out;

	while (atomic_load(&vm->ending) == 0) {
		if (atomic_load(&vm->pausing)) {
			vcpu_park(v);
			continue;
		}
		if (ioctl(v->fd, KVM_RUN, 0) < 0) {
			int e = errno;

			if (e == EINTR && profiling)
				profile_sample(v);
			if (e == EINTR || e == EAGAIN)
				continue;
			vm_request_end(vm, VM_END_FAILURE, -1, "vCPU %u: KVM_RUN: %s", v->index,
				       strerror(e));
			break;
		}
		atomic_fetch_add(&vm->stats.exits, 1);
		switch (v->run->exit_reason) {
		case KVM_EXIT_IO:
			vcpu_handle_io(v);
			break;
		case KVM_EXIT_MMIO:
			vcpu_handle_mmio(v);
			break;
		case KVM_EXIT_INTR:
			break;
		case KVM_EXIT_SHUTDOWN:
			/* A triple fault: how x86 resets when all else fails. */
			vm_request_end(vm, VM_END_RESET, 0, "guest triple fault (reset)");
			break;
		case KVM_EXIT_SYSTEM_EVENT:
			vcpu_handle_system_event(v);
			break;
		case KVM_EXIT_HLT:
			vm_request_end(vm, VM_END_SHUTDOWN, 0, "guest halted");
			break;
		case KVM_EXIT_FAIL_ENTRY:
			vm_request_end(vm, VM_END_FAILURE, -1,
				       "vCPU %u: entry failed (hardware reason %#llx)", v->index,
				       (unsigned long long)
					       v->run->fail_entry.hardware_entry_failure_reason);
			break;
		case KVM_EXIT_INTERNAL_ERROR:
			vm_request_end(vm, VM_END_FAILURE, -1, "vCPU %u: KVM internal error %u",
				       v->index, v->run->internal.suberror);
			break;
		default:
			vm_request_end(vm, VM_END_FAILURE, -1, "vCPU %u: unexpected exit %u",
				       v->index, v->run->exit_reason);
		}
	}
	/* The end's kind is written before ending turns 2. */
	while (vm->save_on_stop && atomic_load(&vm->ending) != 2)
		__builtin_ia32_pause();
	if (atomic_load(&vm->saving))
		vcpu_save(v);
out:
	if (profiling)
		timer_delete(timer);
	return NULL;
}

/* Kick every started vCPU thread out of KVM_RUN and join it; the VM's end
 * has been requested, so none goes back in. */
static void vcpus_join(struct vm *vm)
{
	for (unsigned int i = 0; i < vm->nr_vcpus; i++) {
		struct vcpu *c = &vm->vcpus[i];

		if (!c->started)
			continue;
		c->run->immediate_exit = 1;
		pthread_kill(c->thread, VCPU_KICK_SIGNAL);
	}
	for (unsigned int i = 0; i < vm->nr_vcpus; i++) {
		struct vcpu *c = &vm->vcpus[i];

		if (!c->started)
			continue;
		/* A vCPU may have been between its check and KVM_RUN: kick until joined. */
		while (pthread_tryjoin_np(c->thread, NULL) == EBUSY) {
			pthread_kill(c->thread, VCPU_KICK_SIGNAL);
			usleep(1000);
		}
		c->started = false;
	}
}

int vcpus_start(struct vm *vm, gantry_error_t *err)
{
	vm->t_start = now_ms_frac();
	for (unsigned int i = 0; i < vm->nr_vcpus; i++) {
		struct vcpu *v = &vm->vcpus[i];
		int r = pthread_create(&v->thread, NULL, vcpu_thread, v);

		if (r != 0) {
			vm_request_end(vm, VM_END_FAILURE, -1, "cannot start vCPU thread");
			/* Those already started run in guest memory and call the
			 * devices, both of which the caller is about to free. */
			vcpus_join(vm);
			return gantry_error(err, r, "cannot start vCPU %u", i);
		}
		v->started = true;
	}
	return 0;
}

void vcpus_wait(struct vm *vm)
{
	while (vm_wait(vm) != VM_ASK_END)
		; /* a live save or a pause asked of a VM that runs none */
	vcpus_join(vm);
	if (vm->profile)
		profile_write(vm);
}

void vcpus_destroy(struct vm *vm)
{
	if (vm->vcpus == NULL)
		return;
	for (unsigned int i = 0; i < vm->nr_vcpus; i++) {
		struct vcpu *v = &vm->vcpus[i];

		if (v->run)
			munmap(v->run, (size_t)vm->vcpu_mmap_size);
		if (v->fd >= 0)
			close(v->fd);
		free(v->samples);
		free(v->saved);
		gantry_error_free(&v->save_err);
	}
	free(vm->vcpus);
	vm->vcpus = NULL;
}
