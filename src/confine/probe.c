/* `gantry __seccomp-probe ROLE CALL`: one call under a role's real
 * seccomp filter, for the tests: a call on the kill list ends the process
 * with SIGSYS; any other refused one prints its errno. The arguments are
 * harmless (a bad fd, a NULL path): what is tested is the filter, which
 * decides before the kernel looks at them. The VMM's roles (vmm-vcpu,
 * vmm-io, vmm-fs, vmm-main) load the base filter and then the thread's,
 * stacked as in a VM with a virtio-fs device served in its process
 * (`gantry run -share`); vmm-base the base alone; vmm-fs-remote a
 * virtio-fs worker's of a VMM worker, whose server is the share worker's;
 * share the share worker's one filter. */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include "common/util.h"
#include "confine/confine.h"
#include "confine/vmm_filter.h"

struct probe {
	const char *name;
	long (*call)(void);
};

static long p_execve(void)
{
	char *argv[] = { "/nonexistent", NULL };

	return execve("/nonexistent", argv, argv + 1);
}
static long p_ptrace(void)
{
	return syscall(SYS_ptrace, 0 /* TRACEME */, 0, 0, 0);
}
static long p_mount(void)
{
	return syscall(SYS_mount, NULL, NULL, NULL, 0, NULL);
}
static long p_unshare(void)
{
	return syscall(SYS_unshare, 0);
}
static long p_setns(void)
{
	return syscall(SYS_setns, -1, 0);
}
static long p_bpf(void)
{
	return syscall(SYS_bpf, -1, NULL, 0);
}
static long p_keyctl(void)
{
	return syscall(SYS_keyctl, -1, 0, 0, 0, 0);
}
static long p_io_uring(void)
{
	return syscall(SYS_io_uring_setup, 0, NULL);
}
static long p_by_handle(void)
{
	return syscall(SYS_open_by_handle_at, -1, NULL, 0);
}
static long p_process_vm(void)
{
	return syscall(SYS_process_vm_readv, 0, NULL, 0, NULL, 0, 0);
}
static long p_init_module(void)
{
	return syscall(SYS_init_module, NULL, 0, "");
}
static long p_getppid(void)
{
	return syscall(SYS_getppid);
}
static long p_openat(void)
{
	return syscall(SYS_openat, AT_FDCWD, "/", O_RDONLY);
}
static long p_fork(void)
{
	return syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
}
static long p_clone3(void)
{
	return syscall(SYS_clone3, NULL, 0);
}
static long p_kill(void)
{
	return syscall(SYS_kill, 1, 0);
}
static long p_packet(void)
{
	return syscall(SYS_socket, AF_PACKET, SOCK_RAW, 0);
}
static long p_mmap_exec(void)
{
	return (long)syscall(SYS_mmap, NULL, 4096, PROT_READ | PROT_EXEC,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}
static long p_inet(void)
{
	return syscall(SYS_socket, AF_INET, SOCK_DGRAM, 0);
}
static long p_inet_raw(void)
{
	return syscall(SYS_socket, AF_INET, SOCK_RAW, IPPROTO_ICMP);
}
static long p_unix(void)
{
	return syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0);
}
static long p_execveat(void)
{
	return syscall(SYS_execveat, -1, "", NULL, NULL, 0);
}
static long p_mprotect_exec(void)
{
	return syscall(SYS_mprotect, NULL, 0, PROT_READ | PROT_EXEC);
}
static long p_create_vm(void)
{
	return syscall(SYS_ioctl, -1, KVM_CREATE_VM, 0);
}
static long p_create_vcpu(void)
{
	return syscall(SYS_ioctl, -1, KVM_CREATE_VCPU, 0);
}
static long p_set_memory(void)
{
	return syscall(SYS_ioctl, -1, KVM_SET_USER_MEMORY_REGION, NULL);
}
static long p_check_extension(void)
{
	return syscall(SYS_ioctl, -1, KVM_CHECK_EXTENSION, 0);
}
static long p_kvm_run(void)
{
	return syscall(SYS_ioctl, -1, KVM_RUN, 0);
}
static long p_irq_line(void)
{
	return syscall(SYS_ioctl, -1, KVM_IRQ_LINE, NULL);
}
static long p_winsize(void)
{
	return syscall(SYS_ioctl, -1, TIOCGWINSZ, NULL);
}
static long p_epoll_wait(void)
{
	return syscall(SYS_epoll_wait, -1, NULL, 1, 0);
}
static long p_mkdirat(void)
{
	return syscall(SYS_mkdirat, -1, "", 0);
}

static const struct probe probes[] = {
	{ "execve", p_execve },
	{ "ptrace", p_ptrace },
	{ "mount", p_mount },
	{ "unshare", p_unshare },
	{ "setns", p_setns },
	{ "bpf", p_bpf },
	{ "keyctl", p_keyctl },
	{ "io_uring_setup", p_io_uring },
	{ "open_by_handle_at", p_by_handle },
	{ "process_vm_readv", p_process_vm },
	{ "init_module", p_init_module },
	{ "getppid", p_getppid },
	{ "openat", p_openat },
	{ "fork", p_fork },
	{ "clone3", p_clone3 },
	{ "kill", p_kill },
	{ "socket_packet", p_packet },
	{ "mmap_exec", p_mmap_exec },
	{ "socket_inet", p_inet },
	{ "socket_inet_raw", p_inet_raw },
	{ "socket_unix", p_unix },
	{ "execveat", p_execveat },
	{ "mprotect_exec", p_mprotect_exec },
	{ "kvm_create_vm", p_create_vm },
	{ "kvm_create_vcpu", p_create_vcpu },
	{ "kvm_set_user_memory_region", p_set_memory },
	{ "kvm_check_extension", p_check_extension },
	{ "kvm_run", p_kvm_run },
	{ "kvm_irq_line", p_irq_line },
	{ "tiocgwinsz", p_winsize },
	{ "epoll_wait", p_epoll_wait },
	{ "mkdirat", p_mkdirat },
};

/* The role's filters, as its process or thread has them. */
static int probe_load(const char *role, gantry_error_t *err)
{
	static const struct vmm_filter_opts vm = { .fs = true };
	static const struct vmm_filter_opts remote = { .fs = true, .fs_remote = true };

	if (strcmp(role, "net") == 0)
		return confine_filter_net(false, err);
	if (strcmp(role, "share") == 0)
		return confine_filter_share(false, err);
	if (strcmp(role, "egress") == 0)
		return confine_filter_egress(false, err);
	if (strcmp(role, "mcp") == 0)
		return confine_filter_mcp(false, err);
	if (strcmp(role, "vmm-fs-remote") == 0)
		return confine_filter_vmm(VMM_THREAD_BASE, &remote, err) < 0 ?
			       -1 :
			       confine_filter_vmm(VMM_THREAD_FS, &remote, err);
	for (int t = VMM_THREAD_BASE; t < VMM_THREAD_KINDS; t++) {
		char name[16];

		snprintf(name, sizeof(name), "vmm-%s", vmm_thread_name(t));
		if (strcmp(role, name) != 0)
			continue;
		if (confine_filter_vmm(VMM_THREAD_BASE, &vm, err) < 0)
			return -1;
		return t == VMM_THREAD_BASE ? 0 : confine_filter_vmm(t, &vm, err);
	}
	gantry_error(err, EINVAL, "__seccomp-probe: no role `%s`", role);
	return -2;
}

int confine_probe_main(int argc, char **argv)
{
	gantry_error_t err = NULL;
	long r;
	int l;

	if (argc != 2) {
		fprintf(stderr, "gantry: __seccomp-probe is for Gantry's tests: "
				"net|share|vmm-base|vmm-vcpu|vmm-io|vmm-fs|vmm-fs-remote|vmm-main CALL\n");
		return 2;
	}
	for (size_t i = 0; i < ARRAY_SIZE(probes); i++) {
		if (strcmp(probes[i].name, argv[1]) != 0)
			continue;
		l = probe_load(argv[0], &err);
		if (l < 0) {
			fprintf(stderr, "gantry: %s\n", gantry_error_str(err));
			gantry_error_free(&err);
			return l == -2 ? 2 : 1;
		}
		r = probes[i].call();
		/* A child of the fork probe, should there be one, says nothing. */
		if (r == 0 && strcmp(argv[1], "fork") == 0)
			_exit(0);
		printf("%s: %s\n", argv[1], r >= 0 ? "allowed" : strerrorname_np(errno));
		return 0;
	}
	fprintf(stderr, "gantry: __seccomp-probe: no probe `%s`\n", argv[1]);
	return 2;
}
