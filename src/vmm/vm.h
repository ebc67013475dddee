/* One KVM virtual machine: its fds, RAM, vCPU threads, exit buses and the
 * way it ends. vm.c owns VM creation and the end of the VM; vcpu.c owns the
 * vCPUs and their exit loop. */
#ifndef GANTRY_VMM_VM_H
#define GANTRY_VMM_VM_H

#include <linux/kvm.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "vmm/bus.h"
#include "vmm/ioloop.h"
#include "vmm/memory.h"

#define VM_TSS_ADDR	     0xfffbd000ULL
#define VM_IDENTITY_MAP_ADDR 0xfffbc000ULL

/* How the guest ended the VM. */
enum vm_end {
	VM_END_NONE = 0,
	VM_END_EXIT,	 /* the guest wrote its status to the exit port */
	VM_END_RESET,	 /* reset request: i8042 0xfe, 0xcf9, triple fault */
	VM_END_SHUTDOWN, /* KVM system event shutdown */
	VM_END_STOP,	 /* the host asked (vmm_config.stop_fd) */
	VM_END_FAILURE,	 /* the VMM could not go on (KVM error, bad state) */
};

struct vm_stats {
	atomic_ulong exits;
	atomic_ulong io_exits;
	atomic_ulong mmio_exits;
	atomic_ulong unhandled;
};

struct vcpu;
struct state_file;
struct state_writer;

struct vmm_filter_opts;

struct vm {
	int kvm_fd;
	int vm_fd;
	int vcpu_mmap_size;
	struct guest_mem mem;
	struct bus pio;
	struct bus mmio;
	struct ioloop io;
	unsigned int nr_vcpus;
	struct vcpu *vcpus;
	struct kvm_cpuid2 *cpuid;

	/* The end of the VM: first writer wins, then every vCPU is kicked. */
	atomic_int ending;
	enum vm_end end;
	int exit_status;
	/* Last byte written to the status register (0 when none). */
	atomic_int guest_status;
	char end_reason[160];
	int end_fd; /* eventfd the main thread waits on */

	struct vm_stats stats;
	/* GANTRY_GUEST_PROFILE: where vcpus_wait() writes the sampled guest
	 * instruction pointers (see vcpu.c), opened then, or only named in
	 * messages when profile_fd > 0; NULL: no sampling. */
	const char *profile;
	int profile_fd; /* > 0: the profile's file, opened by the caller; not closed */
	double t_start; /* now_ms_frac() when the vCPUs started */
	/* Non-NULL: each thread loads its seccomp filter as its loop starts
	 * (confine/vmm_filter.h); one that cannot ends the VM. */
	const struct vmm_filter_opts *confine;

	/* Snapshots (vmstate.h). save_on_stop, set before the vCPUs start:
	 * an end by VM_END_STOP leaves each vCPU's state read (saving true);
	 * vcpus_save() then has it. restore, set before vcpus_create: the
	 * vCPUs take their state from it instead of the boot state. */
	bool save_on_stop;
	atomic_bool save_asked; /* the stop asked for a save (VMM_STOP_SAVE) */
	atomic_bool saving;
	/* A live save (vm_wait, vcpus_pause): asked by any thread; while
	 * pausing, each vCPU reads its state and parks until let go. */
	atomic_bool checkpoint_asked;
	/* A pause without a save (vm_request_freeze): VM_ASK_FREEZE or
	 * VM_ASK_THAW, the last asked; 0 when none is pending. */
	atomic_int freeze_asked;
	atomic_bool pausing;
	pthread_mutex_t pause_lock; /* parked, pause_round */
	pthread_cond_t pause_cond;
	unsigned int parked;
	uint64_t pause_round; /* one more for each vcpus_pause */
	uint32_t *msr_list;
	uint32_t nr_msr_list;
	const struct state_file *restore;
};

/* Empty VM for nr_vcpus; the caller then sets up vm->mem (guest_mem_init)
 * and loads the guest into it before vm_create. */
void vm_init(struct vm *vm, unsigned int nr_vcpus);
/* /dev/kvm, or $GANTRY_KVM_DEVICE. */
const char *vm_kvm_device(void);
/* Why opening it failed with errnum, said as one line. */
int vm_kvm_open_error(int errnum, gantry_error_t *err);
/* Before opening it: a device this host has that our guests cannot use
 * (PVM) fails, saying so. */
int vm_kvm_usable(gantry_error_t *err);
/* Whether this host's KVM can run a VM of ours: vm_kvm_usable, and the
 * device opens, speaks API 12 and has what vm_create needs. */
int vm_kvm_check(gantry_error_t *err);
/* Open /dev/kvm (or $GANTRY_KVM_DEVICE; kvm_fd > 0: a duplicate of that
 * one), check the capabilities we rely on, create the VM with in-kernel
 * irqchip and PIT, and give it vm->mem. */
int vm_create(struct vm *vm, int kvm_fd, gantry_error_t *err);
void vm_destroy(struct vm *vm);

/* Most vCPUs this host and KVM allow (also capped by the MP table);
 * kvm_fd as for vm_create. */
unsigned int vm_max_vcpus(int kvm_fd);

/* Load the calling thread's seccomp filter of kind t (enum vmm_thread)
 * where vm->confine asks for one; false (the VM's end requested, with
 * why) when it cannot be loaded. */
bool vm_confine_thread(struct vm *vm, int t);
/* An eventfd that raises gsi in the kernel when written (irqfd). */
int vm_irqfd(struct vm *vm, unsigned int gsi, gantry_error_t *err);
/* An eventfd that KVM signals on a 4-byte write of datamatch at addr. */
int vm_ioeventfd(struct vm *vm, uint64_t addr, uint32_t datamatch, gantry_error_t *err);

/* End the VM (any thread): records how and why, kicks every vCPU. */
void vm_request_end(struct vm *vm, enum vm_end how, int status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* What vm_wait gives its main thread to do. */
enum vm_ask {
	VM_ASK_END,	   /* the VM ends */
	VM_ASK_CHECKPOINT, /* a live save */
	VM_ASK_FREEZE,	   /* park the vCPUs until thawed (a pause, no save) */
	VM_ASK_THAW,	   /* let them run on */
};
/* Ask the main thread for a live save (any thread). */
void vm_request_checkpoint(struct vm *vm);
/* Ask the main thread to freeze (or thaw) the vCPUs (any thread). */
void vm_request_freeze(struct vm *vm, bool freeze);
/* The main thread: wait for the VM's end or the next thing asked of it. */
enum vm_ask vm_wait(struct vm *vm);

/* vcpu.c */
int vcpus_create(struct vm *vm, uint64_t entry, gantry_error_t *err);
/* Start a thread per vCPU. When one cannot start, the VM's end is requested
 * and the threads already started are stopped and joined before this
 * returns, so the caller may free guest memory and the devices at once. */
int vcpus_start(struct vm *vm, gantry_error_t *err);
/* Wait for the end, stop every vCPU thread and join it. */
void vcpus_wait(struct vm *vm);
/* Every vCPU out of KVM_RUN (a VM that saves, save_on_stop: its state
 * read for vcpus_save) and parked; -1 when the VM ends meanwhile
 * (the vCPUs are let go again). */
int vcpus_pause(struct vm *vm);
/* The parked vCPUs run on. */
void vcpus_unpause(struct vm *vm);
void vcpus_destroy(struct vm *vm);
/* After vcpus_wait() of a VM that was saving, or vcpus_pause(): the CPUID its vCPUs were
 * given and each vCPU's state, as state-file sections. */
int vcpus_save(struct vm *vm, struct state_writer *w, gantry_error_t *err);

#endif
