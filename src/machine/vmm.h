/* Boot one microVM from a kernel, an optional initrd and disks, run it until
 * the guest ends it, and say how it ended. This is `gantry run`, and the
 * engine every sandbox will be built on. */
#ifndef GANTRY_MACHINE_VMM_H
#define GANTRY_MACHINE_VMM_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "virtio/devices.h"

#define VMM_MAX_DISKS	8
#define VMM_MIN_MEM_MIB 32
#define VMM_MAX_MEM_MIB (1024ULL * 1024) /* 1 TiB */
#define VMM_DEFAULT_MEM 512
#define VMM_MMIO_BASE	0xd0000000ULL
#define VMM_GUEST_CID	3

struct vmm_disk {
	const char *path; /* opened here, or only named in messages when fd > 0 */
	int fd;		  /* > 0: the disk, opened by the caller; the VMM takes it */
	bool ro;
};

struct virtio_fs_handler;
struct vmm_filter_opts;

/* A virtio-fs device: the guest mounts tag (mount -t virtiofs TAG DIR) and
 * handler serves its FUSE requests (virtio/devices.h). */
struct vmm_fs {
	const char *tag;
	/* NULL: no virtio-fs device; else called until vmm_run returns. */
	const struct virtio_fs_handler *handler;
	/* The handler is another process's server (share/rpc.h): requests
	 * go to it through a memfd of slots, and the workers make no file
	 * call. */
	bool remote;
	/* For a VMM worker, the sockets to that server's worker (the
	 * caller's; handed over, then the worker's handler is set). */
	const int *rpc;
	size_t nr_rpc;
};

struct vmm_config {
	int kvm_fd;	    /* > 0: /dev/kvm, opened by the caller; not closed */
	const char *kernel; /* opened here, or only named in messages when kernel_fd > 0 */
	int kernel_fd;	    /* > 0: the kernel, opened by the caller; not closed */
	const char *initrd; /* the same, with initrd_fd */
	int initrd_fd;
	const char *append;
	const char *console;   /* file for the serial console, capped (console.h); NULL = stdout */
	int console_fd;	       /* > 0: write the console to this fd instead */
	bool console_input;    /* feed the caller's terminal console_in to the console */
	int console_in;	       /* with console_input: that terminal's descriptor */
	/* The guest profile (VMM_PROFILE_ENV): opened here, or only named in
	 * messages when profile_fd > 0; NULL: the setting's file, if any. */
	const char *profile;
	int profile_fd;
	/* virtio-vsock: guest port P <-> <dir>/P.sock, host clients at
	 * <dir>/vsock.sock; with vsock.connect set the guest's dials go there
	 * instead, and with its listen_fd too dir is not used. */
	const char *vsock_dir;
	struct vmm_vsock_host vsock;
	int net_fd;	       /* > 0: virtio-net, frames over this SEQPACKET socket; not closed */
	struct vmm_fs fs;
	struct vmm_disk disks[VMM_MAX_DISKS];
	unsigned int nr_disks;
	unsigned int cpus;
	uint64_t mem_mib;
	/* Guest RAM in 4 KiB pages only (MADV_NOHUGEPAGE), for a VM that
	 * lives on beside many (a persistent sandbox): a huge page is resident
	 * whole once the guest touches a byte of it. Otherwise RAM takes
	 * transparent huge pages where the host offers them, which a VM that
	 * is soon gone boots faster with. */
	bool small_pages;
	bool timing; /* print boot timing and exit counts on stderr */
	/* > 0: the VM ends, without asking the guest, once this fd turns
	 * readable (an eventfd its owner writes). Only for a guest with nothing
	 * left to lose: no writable disk whose writes are still in its cache. */
	int stop_fd;
	/* Each thread under its seccomp filter once set-up is done: a base
	 * filter on the whole process, then the vCPU, I/O, virtio-fs and main
	 * threads each narrowed to its own (confine/vmm_filter.h,
	 * docs/security.md). With confine_log, what would be refused is
	 * logged by the kernel instead (the kill list still kills). */
	bool confine_threads;
	bool confine_log;
	/* Called once the VM, its memory, vCPUs and devices exist and before
	 * any of them runs: the place to give up what set-up needed (a
	 * confined worker's confine_apply). With confine_threads, filters is
	 * what the base filter is for, and the hook loads it
	 * (confine_filter_vmm(VMM_THREAD_BASE, filters)) as its last layer;
	 * the threads narrow theirs after. Its error ends the run. */
	int (*setup_done)(void *opaque, const struct vmm_filter_opts *filters, gantry_error_t *err);
	void *setup_opaque;
	/* Snapshots (docs/snapshots.md). save_state_fd > 0: a stop that asks
	 * for it (VMM_STOP_SAVE on stop_fd) saves the VM before it ends: its
	 * state file into save_state_fd, its RAM into save_mem_fd (regular
	 * files, the caller's, written from offset 0; the state file stays
	 * empty when the VM ended otherwise). restore_state_fd > 0: the VM
	 * goes on from such files instead of booting a kernel; cpus, mem_mib
	 * and the devices must be the saved VM's, and each disk the file it
	 * was (virtio-blk checks its size and modification time). Its RAM is
	 * the memory file mapped copy-on-write: restores of one save share
	 * its pages. */
	int save_state_fd, save_mem_fd;
	int restore_state_fd, restore_mem_fd;
	/* With save_state_fd and this: a live save (VMM_CHECKPOINT on
	 * stop_fd) pauses the devices' thread and the vCPUs, writes the save
	 * as a stop would, and calls this on the VM's main thread with NULL
	 * or why the save failed; the VM runs on once it returns. It may put
	 * new files in save_state_fd and save_mem_fd, which the next save
	 * writes (the caller took the last one away meanwhile); the old ones
	 * are its to close. */
	void (*checkpointed)(void *opaque, const char *error);
	void *checkpoint_opaque;
	/* After VMM_FREEZE or VMM_THAW on stop_fd, on the VM's main thread:
	 * whether its vCPUs are parked now (a pause without a save: the
	 * devices' thread runs on; a stop ends it). */
	void (*frozen)(void *opaque, bool frozen);
	void *frozen_opaque;
};

/* Added to stop_fd: stop, and save the VM first (save_state_fd). Any
 * other count stops it without a save. */
#define VMM_STOP_SAVE (1ULL << 32)
/* Added to stop_fd: a live save (vmm_config.checkpointed); the VM runs
 * on. Counts of it and of a stop may add up: the stop wins, and the save
 * is told the VM ended. */
#define VMM_CHECKPOINT (1ULL << 48)
/* Added to stop_fd: park the vCPUs (vmm_config.frozen), or let them run
 * on. The caller writes one and waits for its answer before the next. */
#define VMM_FREEZE (1ULL << 40)
#define VMM_THAW   (1ULL << 44)

/* A file to write a profile of the guest to: its instruction pointer,
 * sampled every 2 ms on every vCPU while the VM runs (scripts/guest-profile
 * turns it into function names). For `run`, `exec` and sandboxes alike. */
#define VMM_PROFILE_ENV "GANTRY_GUEST_PROFILE"

/* GANTRY_BOOT_TIMING set, and not to "" or "0": what vmm_config.timing
 * should be for `run`, `exec` and a sandbox's supervisor alike. */
bool vmm_timing_requested(void);

/* Check the config against this host before touching KVM: files exist and
 * are what they claim, CPU and memory sizes are possible. */
int vmm_validate(const struct vmm_config *cfg, gantry_error_t *err);
/* The kernel and initrd as they will be loaded: regular, not empty, and
 * a kernel we know the format of. For a caller that opens /dev/kvm for a
 * VMM worker: bad input is said as such whether or not this host has KVM. */
int vmm_check_images(const struct vmm_config *cfg, gantry_error_t *err);

/* The vCPU count and RAM size of the VM saved in state_fd's state file. */
int vmm_saved_machine(int state_fd, unsigned int *cpus, uint64_t *mem_mib, gantry_error_t *err);

/* Boot and run. On success *status is what `gantry run` exits with: the
 * status the guest reported, or 0 when it reset or shut down. */
int vmm_run(const struct vmm_config *cfg, int *status, gantry_error_t *err);

#endif
