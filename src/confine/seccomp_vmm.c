/* The rules of the VMM's seccomp filters (see vmm_filter.h), made like
 * the workers' (seccomp.c) when gantry is built: an allowlist per thread kind, EPERM for the rest, the
 * process killed for what the VMM never does after set-up: the workers'
 * kill list, ioctl KVM_CREATE_VM, KVM_CREATE_VCPU and
 * KVM_SET_USER_MEMORY_REGION, and mmap or mprotect with PROT_EXEC.
 *
 * How the filters stack. vmm_run loads the base filter on every thread
 * (TSYNC) once set-up is done; it is the union of the kinds' lists plus
 * what starting a thread takes. Then the main thread starts the I/O and
 * vCPU threads, which inherit only the base and narrow themselves as
 * their loops start; the main thread narrows last, once it has started
 * them all, so it never needs clone. A thread inherits its creator's
 * filters and may only add narrower ones, so a thread started after
 * set-up must be started by one whose filters allow what it needs: the
 * virtio-fs workers are (re)started by the I/O thread at the device's
 * first notification after a reset, so where the VM has a virtio-fs
 * device the I/O thread's filter also holds the workers' file calls and
 * what starting them takes (clone for threads only, unshare(CLONE_FS) and
 * umask of their set-up); each worker then narrows to the file calls
 * alone, without the I/O thread's sockets, epoll or KVM. */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include "common/util.h"
#include "confine/seccomp_rules.h"
#include "confine/vmm_filter.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define ON(k)	  (1U << (k))
#define ALL_KINDS (ON(VMM_THREAD_KINDS) - 1)

/* vmm_filter.h's lists as one table: a request and the kinds that load it. */
static const struct {
	unsigned long req;
	unsigned int kinds;
} ioctls[] = {
#define VCPU_REQ(r)   { r, ON(VMM_THREAD_VCPU) },
#define IO_REQ(r)     { r, ON(VMM_THREAD_IO) },
#define FS_REQ(r)     { r, ON(VMM_THREAD_FS) },
#define MAIN_REQ(r)   { r, ON(VMM_THREAD_MAIN) },
	VMM_KVM_VCPU(VCPU_REQ) VMM_KVM_IO(IO_REQ) VMM_KVM_FS(FS_REQ)
		VMM_KVM_MAIN(MAIN_REQ)
};

#define KILLED_REQ(r) r,
static const unsigned long killed_ioctls[] = { VMM_KVM_KILLED(KILLED_REQ) };

/* A vCPU: its device emulation, a device's reset among it (the pool of
 * virtio-fs joined, vsock's connections closed and unwatched), and the
 * profile's timer deleted as it ends. */
static const int vcpu_sys[] = {
	SCMP_SYS(epoll_ctl),
	SCMP_SYS(shutdown),
	SCMP_SYS(timer_delete),
};

/* The I/O thread: the queues' ioeventfds, virtio-blk's file, vsock's Unix
 * sockets (connected to and accepted) and timer, virtio-net's socket. */
static const int io_sys[] = {
	SCMP_SYS(epoll_wait), SCMP_SYS(epoll_pwait), SCMP_SYS(epoll_ctl), SCMP_SYS(timerfd_settime),
	SCMP_SYS(accept),     SCMP_SYS(accept4),     SCMP_SYS(recvfrom),
	SCMP_SYS(sendto),     SCMP_SYS(recvmsg),     SCMP_SYS(sendmsg),	  SCMP_SYS(shutdown),
	SCMP_SYS(getsockopt), SCMP_SYS(setsockopt),  SCMP_SYS(pread64),	  SCMP_SYS(pwrite64),
	SCMP_SYS(preadv),     SCMP_SYS(pwritev),     SCMP_SYS(fsync),	  SCMP_SYS(fdatasync),
};

/* A virtio-fs worker: the share server's calls on the shared trees, all
 * relative to the directory fds it holds (or their /proc/self/fd links). */
static const int fs_sys[] = {
	SCMP_SYS(openat),	SCMP_SYS(openat2),	SCMP_SYS(statx),      SCMP_SYS(getdents64),
	SCMP_SYS(mkdirat),	SCMP_SYS(mknodat),	SCMP_SYS(symlinkat),  SCMP_SYS(linkat),
	SCMP_SYS(unlinkat),	SCMP_SYS(renameat),	SCMP_SYS(renameat2),  SCMP_SYS(readlinkat),
	SCMP_SYS(fchmodat),	SCMP_SYS(utimensat),	SCMP_SYS(fallocate),  SCMP_SYS(ftruncate),
	SCMP_SYS(fsync),	SCMP_SYS(fdatasync),	SCMP_SYS(pread64),    SCMP_SYS(pwrite64),
	SCMP_SYS(preadv),	SCMP_SYS(pwritev),	SCMP_SYS(getxattr),   SCMP_SYS(lgetxattr),
	SCMP_SYS(fgetxattr),	SCMP_SYS(setxattr),	SCMP_SYS(lsetxattr),  SCMP_SYS(fsetxattr),
	SCMP_SYS(listxattr),	SCMP_SYS(llistxattr),	SCMP_SYS(flistxattr), SCMP_SYS(removexattr),
	SCMP_SYS(lremovexattr), SCMP_SYS(fremovexattr), SCMP_SYS(fstatfs),    SCMP_SYS(statfs),
	SCMP_SYS(syncfs),
};

/* A virtio-fs worker whose server is the share worker's: its request
 * and the answer on one of the RPC sockets (share/rpc.h); a vCPU, for
 * the device's reset, which the guest's status write makes there and the
 * share worker acknowledges; and the main thread saving the VM, for the
 * server's tables. Plain send and receive: no descriptor. */
static const int rpc_sys[] = {
	SCMP_SYS(sendto),
	SCMP_SYS(recvfrom),
};

/* The share worker's: the memfd and the caller's share roots arrive as
 * descriptors, and its answers on the channel go out by sendmsg. */
static const int share_sys[] = {
	SCMP_SYS(sendmsg),
	SCMP_SYS(recvmsg),
};

/* The main thread: it waits for the VM's end, kicks and joins the vCPUs,
 * and tears the devices down (their fds unwatched, vsock's connections
 * shut and its listening socket unlinked). glibc's malloc reads /proc/sys/vm/overcommit_memory
 * the first time it shrinks a thread's heap (the profile's samples
 * freed): refused, it keeps the heap mapped and drops its pages. */
static const int main_sys[] = {
	SCMP_SYS(epoll_ctl),
	SCMP_SYS(shutdown),
	SCMP_SYS(tgkill),
	SCMP_SYS(unlink),
	SCMP_SYS(unlinkat),
	SCMP_SYS(wait4),
};

/* The main thread saving the VM (vmm_filter_opts.save): the state and
 * memory files it was handed, which pages of guest RAM are in use (its
 * pagemap, opened during set-up), and
 * the disks synced and looked at (virtio-blk's part of the save); after a
 * live save, the next save's files from the caller (a VMM worker's
 * channel). */
static const int save_sys[] = {
	SCMP_SYS(recvmsg),
	SCMP_SYS(pwrite64),
	SCMP_SYS(pread64),
	SCMP_SYS(ftruncate),
	SCMP_SYS(fsync),
	SCMP_SYS(fdatasync),
	SCMP_SYS(fstat),
	SCMP_SYS(newfstatat),
};

/* What the thread that starts threads needs, and the new thread before
 * its own filter. */
static const int spawn_sys[] = {
	SCMP_SYS(set_robust_list),
	SCMP_SYS(rseq),
};

static int rule1(scmp_filter_ctx f, uint32_t act, int sys, struct scmp_arg_cmp c)
{
	return seccomp_rule_add(f, act, sys, 1, c);
}

static int allow(scmp_filter_ctx f, const int *v, size_t n, bool on)
{
	return on ? seccomp_allow_all(f, v, n) : 0;
}

/* ioctl by exact request: the kind's own allowed, the killed ones kill. */
static int ioctl_rules(scmp_filter_ctx f, enum vmm_thread t)
{
	unsigned int mine = t == VMM_THREAD_BASE ? ALL_KINDS : ON(t);
	int r = 0;

	for (size_t i = 0; i < ARRAY_SIZE(killed_ioctls) && r == 0; i++)
		r = rule1(f, SCMP_ACT_KILL_PROCESS, SCMP_SYS(ioctl),
			  SCMP_A1_32(SCMP_CMP_EQ, (uint32_t)killed_ioctls[i]));
	for (size_t i = 0; i < ARRAY_SIZE(ioctls) && r == 0; i++)
		if (ioctls[i].kinds & mine)
			r = rule1(f, SCMP_ACT_ALLOW, SCMP_SYS(ioctl),
				  SCMP_A1_32(SCMP_CMP_EQ, (uint32_t)ioctls[i].req));
	return r;
}

/* mmap and mprotect: never executable after set-up. */
static int exec_map_rules(scmp_filter_ctx f)
{
	static const int sys[] = { SCMP_SYS(mmap), SCMP_SYS(mprotect) };
	int r = 0;

	for (size_t i = 0; i < ARRAY_SIZE(sys) && r == 0; i++) {
		r = rule1(f, SCMP_ACT_ALLOW, sys[i], SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
		if (r == 0)
			r = rule1(f, SCMP_ACT_KILL_PROCESS, sys[i],
				  SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC));
	}
	return r;
}

/* The capped console log's rotation (console.c): the file renamed and
 * opened afresh for writing, or emptied. Only where the console is one. */
static int console_rules(scmp_filter_ctx f)
{
	static const int sys[] = { SCMP_SYS(rename), SCMP_SYS(renameat), SCMP_SYS(renameat2),
				   SCMP_SYS(ftruncate) };
	int r = seccomp_allow_all(f, sys, ARRAY_SIZE(sys));

	return r ? r
		 : rule1(f, SCMP_ACT_ALLOW, SCMP_SYS(openat),
			 SCMP_A2(SCMP_CMP_MASKED_EQ, O_ACCMODE | O_CREAT | O_TRUNC,
				 O_WRONLY | O_CREAT | O_TRUNC));
}

/* Starting threads: clone for a thread of this process only (clone3 is
 * ENOSYS: glibc falls back to clone). */
static int spawn_rules(scmp_filter_ctx f, bool names)
{
	int r = seccomp_allow_all(f, spawn_sys, ARRAY_SIZE(spawn_sys));

	if (r == 0)
		r = rule1(f, SCMP_ACT_ALLOW, SCMP_SYS(clone),
			  SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
	/* The new thread stacks its own filter: one more can only narrow. */
	if (r == 0)
		r = rule1(f, SCMP_ACT_ALLOW, SCMP_SYS(seccomp),
			  SCMP_A0_32(SCMP_CMP_EQ, SECCOMP_SET_MODE_FILTER));
	/* The vCPU threads name themselves, and may start a profile timer. */
	if (r == 0 && names)
		r = rule1(f, SCMP_ACT_ALLOW, SCMP_SYS(prctl), SCMP_A0_32(SCMP_CMP_EQ, PR_SET_NAME));
	if (r == 0 && names)
		r = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(timer_create), 0);
	if (r == 0 && names)
		r = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(timer_settime), 0);
	return r;
}

/* A virtio-fs worker's set-up (fs.c): a cwd and umask of its own. Every
 * other unshare still kills. */
static int fs_setup_rules(scmp_filter_ctx f)
{
	int r = rule1(f, SCMP_ACT_ALLOW, SCMP_SYS(unshare), SCMP_A0(SCMP_CMP_EQ, CLONE_FS));

	if (r == 0)
		r = rule1(f, SCMP_ACT_KILL_PROCESS, SCMP_SYS(unshare),
			  SCMP_A0(SCMP_CMP_NE, CLONE_FS));
	if (r == 0)
		r = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(umask), 0);
	return r;
}

/* The main thread stops the network worker `gantry run` started, once the
 * VM is over: SIGTERM, then SIGKILL. */
static int main_rules(scmp_filter_ctx f)
{
	int r = rule1(f, SCMP_ACT_ALLOW, SCMP_SYS(kill), SCMP_A1_32(SCMP_CMP_EQ, SIGTERM));

	return r ? r : rule1(f, SCMP_ACT_ALLOW, SCMP_SYS(kill), SCMP_A1_32(SCMP_CMP_EQ, SIGKILL));
}

/* The share server moves a node's ctime with a chown to -1:-1 (a kept
 * owner changed beside it): that chown only, never an owner. */
static int ctime_rule(scmp_filter_ctx f)
{
	return seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(fchownat), 2,
				SCMP_A2_32(SCMP_CMP_EQ, (uint32_t)-1),
				SCMP_A3_32(SCMP_CMP_EQ, (uint32_t)-1));
}

/* The share server dups the fds it hands out, and a snapshot of its
 * tables reads each open file's flags (share/carry.c). */
static int fcntl_rules(scmp_filter_ctx f)
{
	int r = rule1(f, SCMP_ACT_ALLOW, SCMP_SYS(fcntl),
		      SCMP_A1_32(SCMP_CMP_EQ, (uint32_t)F_DUPFD_CLOEXEC));

	return r ? r
		 : rule1(f, SCMP_ACT_ALLOW, SCMP_SYS(fcntl),
			 SCMP_A1_32(SCMP_CMP_EQ, (uint32_t)F_GETFL));
}

static int kind_rules(scmp_filter_ctx f, enum vmm_thread t, const struct vmm_filter_opts *o)
{
	bool base = t == VMM_THREAD_BASE;
	bool vcpu = base || t == VMM_THREAD_VCPU, io = base || t == VMM_THREAD_IO;
	bool fs = base || t == VMM_THREAD_FS, main = base || t == VMM_THREAD_MAIN;
	/* Who starts virtio-fs workers holds what they need (see the top);
	 * a remote server's workers only send and receive. */
	bool fs_files = o->fs && !o->fs_remote && (fs || io);
	int r = allow(f, vcpu_sys, ARRAY_SIZE(vcpu_sys), vcpu);

	if (r == 0)
		r = allow(f, io_sys, ARRAY_SIZE(io_sys), io);
	if (r == 0)
		r = allow(f, fs_sys, ARRAY_SIZE(fs_sys), fs_files);
	if (r == 0)
		r = allow(f, rpc_sys, ARRAY_SIZE(rpc_sys),
			  o->fs && o->fs_remote && (fs || vcpu || (main && o->save)));
	if (r == 0)
		r = allow(f, main_sys, ARRAY_SIZE(main_sys), main);
	if (r == 0 && main)
		r = main_rules(f);
	if (r == 0)
		r = allow(f, save_sys, ARRAY_SIZE(save_sys), main && o->save);
	if (r == 0 && (base || (io && o->fs)))
		r = spawn_rules(f, base);
	if (r == 0 && (base || io) && o->fs)
		r = fs_setup_rules(f);
	if (r == 0 && fs_files)
		r = fcntl_rules(f);
	if (r == 0 && fs_files)
		r = ctime_rule(f);
	/* The profile is written by the main thread once the vCPUs are joined. */
	if (r == 0 && main && o->profile && !o->console_file)
		r = rule1(f, SCMP_ACT_ALLOW, SCMP_SYS(openat),
			  SCMP_A2(SCMP_CMP_MASKED_EQ, O_ACCMODE | O_CREAT | O_TRUNC,
				  O_WRONLY | O_CREAT | O_TRUNC));
	if (r == 0 && (vcpu || main) && o->console_file)
		r = console_rules(f);
	/* vsock's connections to the host's Unix sockets, from the I/O
	 * thread, where it makes them itself (a VMM worker is handed them). */
	if (r == 0 && io && o->dials)
		r = rule1(f, SCMP_ACT_ALLOW, SCMP_SYS(socket), SCMP_A0_32(SCMP_CMP_EQ, AF_UNIX));
	if (r == 0 && io && o->dials)
		r = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(connect), 0);
	return r;
}

scmp_filter_ctx seccomp_vmm_make(enum vmm_thread t, const struct vmm_filter_opts *o)
{
	bool fs_spawn = o->fs && (t == VMM_THREAD_BASE || t == VMM_THREAD_IO);
	scmp_filter_ctx f = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	int r;

	if (f == NULL)
		return NULL;
	r = seccomp_common_rules(f, fs_spawn ? SCMP_SYS(unshare) : -1);
	if (r == 0)
		r = exec_map_rules(f);
	if (r == 0)
		r = ioctl_rules(f, t);
	if (r == 0)
		r = kind_rules(f, t, o);
	if (r < 0) {
		seccomp_release(f);
		return NULL;
	}
	return f;
}

int seccomp_share_rules(scmp_filter_ctx f)
{
	int r = exec_map_rules(f);

	if (r == 0)
		r = seccomp_allow_all(f, fs_sys, ARRAY_SIZE(fs_sys));
	if (r == 0)
		r = seccomp_allow_all(f, rpc_sys, ARRAY_SIZE(rpc_sys));
	if (r == 0)
		r = seccomp_allow_all(f, share_sys, ARRAY_SIZE(share_sys));
	if (r == 0)
		r = spawn_rules(f, false);
	if (r == 0)
		r = fcntl_rules(f);
	if (r == 0)
		r = ctime_rule(f);
	/* The guest RAM's memfd is checked for its seals before it is mapped. */
	if (r == 0)
		r = rule1(f, SCMP_ACT_ALLOW, SCMP_SYS(fcntl),
			  SCMP_A1_32(SCMP_CMP_EQ, (uint32_t)F_GET_SEALS));
	return r;
}
