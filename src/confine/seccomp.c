/* The rules of the workers' seccomp filters, for libseccomp. They are
 * compiled into BPF when gantry is built (mkfilters.c), not at each start:
 * filters.c loads the result.
 *
 * Each is an allowlist: what the role's loop calls after its set-up.
 * Anything else fails with EPERM (libc and libslirp then take their
 * error paths), except what no worker may ever do, which kills the
 * process: starting programs, tracing or reading other processes, mounts
 * and namespaces, loading code into the kernel, io_uring (which bypasses
 * the filter). A foreign architecture is killed too. With log set, what
 * would be refused is allowed and logged by the kernel instead, for
 * finding what a list lacks; the kill list stays. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "common/util.h"
#include "confine/seccomp_rules.h"

/* libseccomp's SCMP_A*_32() initialise the comparison without its second
 * datum (zero, unused by SCMP_CMP_EQ). */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#ifndef AF_NETLINK
#define AF_NETLINK 16
#endif

static const int kill_list[] = {
	SCMP_SYS(execve),
	SCMP_SYS(execveat),
	SCMP_SYS(ptrace),
	SCMP_SYS(process_vm_readv),
	SCMP_SYS(process_vm_writev),
	SCMP_SYS(mount),
	SCMP_SYS(umount2),
	SCMP_SYS(pivot_root),
	SCMP_SYS(unshare),
	SCMP_SYS(setns),
	SCMP_SYS(bpf),
	SCMP_SYS(perf_event_open),
	SCMP_SYS(userfaultfd),
	SCMP_SYS(keyctl),
	SCMP_SYS(add_key),
	SCMP_SYS(request_key),
	SCMP_SYS(kexec_load),
	SCMP_SYS(kexec_file_load),
	SCMP_SYS(init_module),
	SCMP_SYS(finit_module),
	SCMP_SYS(delete_module),
	SCMP_SYS(open_by_handle_at),
	SCMP_SYS(io_uring_setup),
	SCMP_SYS(io_uring_enter),
	SCMP_SYS(io_uring_register),
	SCMP_SYS(fsopen),
	SCMP_SYS(fsmount),
	SCMP_SYS(move_mount),
	SCMP_SYS(open_tree),
	SCMP_SYS(chroot),
	SCMP_SYS(swapon),
	SCMP_SYS(swapoff),
	SCMP_SYS(reboot),
};

/* What every worker's loop may call: memory, time, signals, its fds. */
static const int core[] = {
	SCMP_SYS(read),
	SCMP_SYS(write),
	SCMP_SYS(readv),
	SCMP_SYS(writev),
	SCMP_SYS(close),
	SCMP_SYS(poll),
	SCMP_SYS(ppoll),
	SCMP_SYS(brk),
	SCMP_SYS(munmap),
	SCMP_SYS(mremap),
	SCMP_SYS(madvise),
	SCMP_SYS(futex),
	SCMP_SYS(rt_sigaction),
	SCMP_SYS(rt_sigprocmask),
	SCMP_SYS(rt_sigreturn),
	SCMP_SYS(sigaltstack),
	SCMP_SYS(restart_syscall),
	SCMP_SYS(clock_gettime),
	SCMP_SYS(clock_nanosleep),
	SCMP_SYS(nanosleep),
	SCMP_SYS(gettimeofday),
	SCMP_SYS(getrandom),
	SCMP_SYS(getpid),
	SCMP_SYS(gettid),
	SCMP_SYS(exit),
	SCMP_SYS(exit_group),
	SCMP_SYS(fstat),
	SCMP_SYS(newfstatat),
	SCMP_SYS(lseek),
	SCMP_SYS(sched_yield),
	SCMP_SYS(uname),
	SCMP_SYS(getuid),
	SCMP_SYS(geteuid),
	SCMP_SYS(getgid),
	SCMP_SYS(getegid),
};

/* The network worker's: libslirp's sockets to the world, the published
 * ports' listeners (bound live too, or handed over bound and put in place
 * of libslirp's own by dup3), the DNS forwarder's sockets, and the netlink
 * dump getifaddrs makes when a policy is swapped in. */
static const int net[] = {
	SCMP_SYS(recvfrom),   SCMP_SYS(sendto),	    SCMP_SYS(recvmsg),	   SCMP_SYS(sendmsg),
	SCMP_SYS(recvmmsg),   SCMP_SYS(sendmmsg),   SCMP_SYS(connect),	   SCMP_SYS(bind),
	SCMP_SYS(listen),     SCMP_SYS(accept),	    SCMP_SYS(accept4),	   SCMP_SYS(shutdown),
	SCMP_SYS(getsockopt), SCMP_SYS(setsockopt), SCMP_SYS(getsockname), SCMP_SYS(getpeername),
	SCMP_SYS(dup3),
};

int seccomp_allow_all(scmp_filter_ctx f, const int *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r = seccomp_rule_add(f, SCMP_ACT_ALLOW, v[i], 0);

		if (r < 0)
			return r;
	}
	return 0;
}

/* mmap and mprotect, never with PROT_EXEC: no new code after set-up. */
static int no_exec_maps(scmp_filter_ctx f)
{
	int r = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
				 SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));

	if (r == 0)
		r = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
				     SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	return r;
}

/* fcntl for flags and descriptor flags only. */
static int fcntl_flags(scmp_filter_ctx f)
{
	static const int cmds[] = { F_GETFL, F_SETFL, F_GETFD, F_SETFD };
	int r = 0;

	for (size_t i = 0; i < ARRAY_SIZE(cmds) && r == 0; i++)
		r = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(fcntl), 1,
				     SCMP_A1_32(SCMP_CMP_EQ, (uint32_t)cmds[i]));
	return r;
}

int seccomp_net_rules(scmp_filter_ctx f)
{
	/* AF_UNIX: libslirp dials the DNS forwarder's socket for each TCP
	 * query, by a path only the worker's own root holds. */
	static const int families[] = { AF_INET, AF_INET6, AF_NETLINK, AF_UNIX };
	static const unsigned long ioctls[] = { FIONREAD, FIONBIO, SIOCOUTQ };
	int r = no_exec_maps(f);

	if (r == 0)
		r = seccomp_allow_all(f, net, ARRAY_SIZE(net));

	for (size_t i = 0; i < ARRAY_SIZE(families) && r == 0; i++)
		r = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
				     SCMP_A0_32(SCMP_CMP_EQ, (uint32_t)families[i]));
	for (size_t i = 0; i < ARRAY_SIZE(ioctls) && r == 0; i++)
		r = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				     SCMP_A1_32(SCMP_CMP_EQ, (uint32_t)ioctls[i]));
	return r;
}

/* The egress worker's: TCP to the bound hosts and UDP to the nameservers
 * (AF_INET stream and datagram sockets only, no raw one), the connections
 * the network worker hands over (recvmsg), its channel; one thread, no
 * listener, no file. */
int seccomp_egress_rules(scmp_filter_ctx f)
{
	static const int types[] = { SOCK_STREAM, SOCK_DGRAM };
	static const int egress[] = {
		SCMP_SYS(recvfrom), SCMP_SYS(sendto),	  SCMP_SYS(recvmsg),	SCMP_SYS(sendmsg),
		SCMP_SYS(connect),  SCMP_SYS(getsockopt), SCMP_SYS(setsockopt),
	};
	int r = no_exec_maps(f);

	if (r == 0)
		r = seccomp_allow_all(f, egress, ARRAY_SIZE(egress));
	/* The type's low bits; SOCK_NONBLOCK and SOCK_CLOEXEC may ride above. */
	for (size_t i = 0; i < ARRAY_SIZE(types) && r == 0; i++)
		r = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(socket), 3,
				     SCMP_A0_32(SCMP_CMP_EQ, (uint32_t)AF_INET),
				     SCMP_A1_32(SCMP_CMP_MASKED_EQ, 0xf, (uint32_t)types[i]),
				     SCMP_A2_32(SCMP_CMP_EQ, 0));
	return r;
}

/* The MCP gateway's: HTTPS and DNS to the world (IPv4 and IPv6 stream and
 * datagram sockets, no raw one), the guest's sessions taken from the door
 * it was handed (recvmsg), libcurl's wake-up pair; one thread, no file. */
int seccomp_mcp_rules(scmp_filter_ctx f)
{
	static const int families[] = { AF_INET, AF_INET6 };
	static const int types[] = { SOCK_STREAM, SOCK_DGRAM };
	static const int mcp[] = {
		SCMP_SYS(recvfrom),    SCMP_SYS(sendto),      SCMP_SYS(recvmsg),
		SCMP_SYS(sendmsg),     SCMP_SYS(connect),     SCMP_SYS(getsockopt),
		SCMP_SYS(setsockopt),  SCMP_SYS(getsockname), SCMP_SYS(getpeername),
		SCMP_SYS(shutdown),    SCMP_SYS(pipe2),	      SCMP_SYS(eventfd2),
	};
	int r = no_exec_maps(f);

	if (r == 0)
		r = seccomp_allow_all(f, mcp, ARRAY_SIZE(mcp));
	for (size_t i = 0; i < ARRAY_SIZE(families) && r == 0; i++)
		for (size_t k = 0; k < ARRAY_SIZE(types) && r == 0; k++)
			r = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(socket), 3,
					     SCMP_A0_32(SCMP_CMP_EQ, (uint32_t)families[i]),
					     SCMP_A1_32(SCMP_CMP_MASKED_EQ, 0xf, (uint32_t)types[k]),
					     SCMP_A2_32(SCMP_CMP_EQ, 0));
	if (r == 0)
		r = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1,
				     SCMP_A0_32(SCMP_CMP_EQ, (uint32_t)AF_UNIX));
	return r;
}

int seccomp_common_rules(scmp_filter_ctx f, int spared)
{
	int r = seccomp_attr_set(f, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);

	for (size_t i = 0; i < ARRAY_SIZE(kill_list) && r == 0; i++)
		if (kill_list[i] != spared)
			r = seccomp_rule_add(f, SCMP_ACT_KILL_PROCESS, kill_list[i], 0);
	/* clone3's flags are out of a filter's reach: callers fall back. */
	if (r == 0)
		r = seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (r == 0)
		r = seccomp_allow_all(f, core, ARRAY_SIZE(core));
	if (r == 0)
		r = fcntl_flags(f);
	return r;
}

scmp_filter_ctx seccomp_make(int (*role)(scmp_filter_ctx f))
{
	scmp_filter_ctx f = seccomp_init(SCMP_ACT_ERRNO(EPERM));

	if (f && (seccomp_common_rules(f, -1) < 0 || role(f) < 0)) {
		seccomp_release(f);
		f = NULL;
	}
	return f;
}
