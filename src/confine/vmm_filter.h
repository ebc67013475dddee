/* The VMM's seccomp filters (seccomp_vmm.c): one process-wide base filter
 * loaded once set-up is done (the VM, its memory, the vCPU fds and the
 * devices exist), and a narrower one per thread kind stacked on top by each
 * thread as its loop starts.
 *
 * The KVM ioctls each thread kind may issue after set-up are listed here,
 * by name, in one place: the filters allow ioctl only on these exact
 * request numbers (and the base filter kills the process on the ones that
 * would make a VM, a vCPU or guest memory), and tests/unit/test_vmm_filter.c
 * checks the lists against every ioctl(..., KVM_...) in src/vmm and
 * src/virtio: each request is in exactly one list, and the set-up list
 * holds those issued only before the base filter is loaded. */
#ifndef GANTRY_CONFINE_VMM_FILTER_H
#define GANTRY_CONFINE_VMM_FILTER_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* Issued only during set-up (vm.c: vm_create, vm_max_vcpus, the irqfd and
 * ioeventfd wiring; vcpu.c: vcpus_create): refused once it is over. */
#define VMM_KVM_SETUP(X)                                                                           \
	X(KVM_GET_API_VERSION)                                                                     \
	X(KVM_CHECK_EXTENSION)                                                                     \
	X(KVM_GET_VCPU_MMAP_SIZE)                                                                  \
	X(KVM_GET_SUPPORTED_CPUID)                                                                 \
	X(KVM_CREATE_VM)                                                                           \
	X(KVM_SET_TSS_ADDR)                                                                        \
	X(KVM_SET_IDENTITY_MAP_ADDR)                                                               \
	X(KVM_CREATE_IRQCHIP)                                                                      \
	X(KVM_CREATE_PIT2)                                                                         \
	X(KVM_SET_USER_MEMORY_REGION)                                                              \
	X(KVM_IRQFD)                                                                               \
	X(KVM_IOEVENTFD)                                                                           \
	X(KVM_CREATE_VCPU)                                                                         \
	X(KVM_SET_CPUID2)                                                                          \
	X(KVM_SET_XCRS)                                                                            \
	X(KVM_SET_LAPIC)                                                                           \
	X(KVM_SET_SREGS)                                                                           \
	X(KVM_SET_REGS)                                                                            \
	X(KVM_SET_FPU)                                                                             \
	X(KVM_SET_MSRS)                                                                            \
	X(KVM_GET_MSR_INDEX_LIST)                                                                  \
	X(KVM_SET_MP_STATE)                                                                        \
	X(KVM_SET_XSAVE)                                                                           \
	X(KVM_SET_DEBUGREGS)                                                                       \
	X(KVM_SET_VCPU_EVENTS)                                                                     \
	X(KVM_SET_IRQCHIP)                                                                         \
	X(KVM_SET_PIT2)                                                                            \
	X(KVM_SET_CLOCK)

/* Of the set-up ones, those that kill the process after set-up: a second
 * VM, another vCPU, or guest memory remapped. */
#define VMM_KVM_KILLED(X)                                                                          \
	X(KVM_CREATE_VM)                                                                           \
	X(KVM_CREATE_VCPU)                                                                         \
	X(KVM_SET_USER_MEMORY_REGION)

/* A vCPU thread: its run loop, the profile sampler's register read
 * (GANTRY_GUEST_PROFILE, on the vCPU's own thread), the reads of its
 * state as a VM being saved ends (vmstate.h; set-up reads the LAPIC and
 * segment registers too, before any filter), and the word to the guest's
 * clock that it was paused (vcpu_park). */
#define VMM_KVM_VCPU(X)                                                                            \
	X(KVM_RUN)                                                                                 \
	X(KVM_KVMCLOCK_CTRL)                                                                       \
	X(KVM_GET_REGS)                                                                            \
	X(KVM_GET_SREGS)                                                                           \
	X(KVM_GET_LAPIC)                                                                           \
	X(KVM_GET_MP_STATE)                                                                        \
	X(KVM_GET_XSAVE)                                                                           \
	X(KVM_GET_XCRS)                                                                            \
	X(KVM_GET_DEBUGREGS)                                                                       \
	X(KVM_GET_VCPU_EVENTS)                                                                     \
	X(KVM_GET_MSRS)

/* The I/O thread and the virtio-fs workers issue no KVM request of their
 * own: queue notifications arrive on ioeventfds and every interrupt, the
 * serial port's too, leaves on an irqfd, both plain reads and writes. Nor
 * any other ioctl (no FIONREAD, no terminal requests) after set-up. The
 * main thread only reads the VM's chips and clock when it saves it. */
#define VMM_KVM_IO(X)
#define VMM_KVM_FS(X)
#define VMM_KVM_MAIN(X)                                                                            \
	X(KVM_GET_IRQCHIP)                                                                         \
	X(KVM_GET_PIT2)                                                                            \
	X(KVM_GET_CLOCK)

enum vmm_thread {
	VMM_THREAD_BASE, /* the whole process: the union of the others */
	VMM_THREAD_VCPU,
	VMM_THREAD_IO,
	VMM_THREAD_FS, /* a virtio-fs worker (the share server's calls) */
	VMM_THREAD_MAIN,
	VMM_THREAD_KINDS
};

/* What the VM has, which decides what its threads need. */
struct vmm_filter_opts {
	bool log;	   /* GANTRY_SECCOMP=log: what would be refused is logged */
	bool console_file; /* a capped console log: rotation renames and reopens it */
	bool fs;	   /* a virtio-fs device: the I/O thread starts its workers */
	bool fs_remote;	   /* its server is the share worker's: the workers only
			    * send and receive on their sockets, no file call */
	bool profile;	   /* GANTRY_GUEST_PROFILE: the main thread writes the file */
	bool dials;	   /* vsock connects to Unix sockets itself (no vmm_vsock_host) */
	bool save;	   /* a stop saves the VM: the main thread writes its files */
};

/* The share worker's filter for its whole process (`gantry __share-worker`,
 * loaded last by confine_run): VMM_THREAD_FS's file calls, its threads'
 * start, and send and receive on the sockets it was given; the same kill
 * list, and never an executable mapping. */
int confine_filter_share(bool log, gantry_error_t *err);

/* "base", "vcpu", "io", "fs", "main". */
const char *vmm_thread_name(enum vmm_thread t);

/* Load kind t's filter on the calling thread; the base one on every
 * thread of the process (TSYNC), before any has narrowed. 0, or -1 with
 * why filled. */
int confine_filter_vmm(enum vmm_thread t, const struct vmm_filter_opts *o, gantry_error_t *err);

#endif
