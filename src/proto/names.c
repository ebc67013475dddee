/* The resource limits and capabilities EXEC carries by number (agent.h),
 * by the names an OCI config.json gives them: the host reads names, the
 * guest writes them into crun's config. Linux's numbers, which are ABI. */
#include <string.h>
#include <strings.h>

#include "proto/agent.h"

static const char *const rlimit_names[PROTO_MAX_RLIMITS] = {
	"RLIMIT_CPU",	   "RLIMIT_FSIZE", "RLIMIT_DATA",   "RLIMIT_STACK",
	"RLIMIT_CORE",	   "RLIMIT_RSS",   "RLIMIT_NPROC",  "RLIMIT_NOFILE",
	"RLIMIT_MEMLOCK",  "RLIMIT_AS",	   "RLIMIT_LOCKS",  "RLIMIT_SIGPENDING",
	"RLIMIT_MSGQUEUE", "RLIMIT_NICE",  "RLIMIT_RTPRIO", "RLIMIT_RTTIME",
};

static const char *const cap_names[] = {
	"CAP_CHOWN",
	"CAP_DAC_OVERRIDE",
	"CAP_DAC_READ_SEARCH",
	"CAP_FOWNER",
	"CAP_FSETID",
	"CAP_KILL",
	"CAP_SETGID",
	"CAP_SETUID",
	"CAP_SETPCAP",
	"CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST",
	"CAP_NET_ADMIN",
	"CAP_NET_RAW",
	"CAP_IPC_LOCK",
	"CAP_IPC_OWNER",
	"CAP_SYS_MODULE",
	"CAP_SYS_RAWIO",
	"CAP_SYS_CHROOT",
	"CAP_SYS_PTRACE",
	"CAP_SYS_PACCT",
	"CAP_SYS_ADMIN",
	"CAP_SYS_BOOT",
	"CAP_SYS_NICE",
	"CAP_SYS_RESOURCE",
	"CAP_SYS_TIME",
	"CAP_SYS_TTY_CONFIG",
	"CAP_MKNOD",
	"CAP_LEASE",
	"CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL",
	"CAP_SETFCAP",
	"CAP_MAC_OVERRIDE",
	"CAP_MAC_ADMIN",
	"CAP_SYSLOG",
	"CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND",
	"CAP_AUDIT_READ",
	"CAP_PERFMON",
	"CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
};

const char *proto_rlimit_name(unsigned int resource)
{
	return resource < PROTO_MAX_RLIMITS ? rlimit_names[resource] : NULL;
}

const char *proto_cap_name(unsigned int cap)
{
	return cap < sizeof(cap_names) / sizeof(cap_names[0]) ? cap_names[cap] : NULL;
}

static int lookup(const char *const *names, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcasecmp(names[i], name) == 0)
			return i;
	return -1;
}

int proto_rlimit_number(const char *name)
{
	return lookup(rlimit_names, PROTO_MAX_RLIMITS, name);
}

int proto_cap_number(const char *name)
{
	return lookup(cap_names, (int)(sizeof(cap_names) / sizeof(cap_names[0])), name);
}
