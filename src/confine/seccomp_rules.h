/* The rules of every seccomp filter, for libseccomp, used only when
 * gantry is built: mkfilters.c makes each filter with these and writes its
 * BPF into the build, and filters.c loads that (confine/filters.h). Every
 * filter refuses with EPERM what it does not allow. */
#ifndef GANTRY_CONFINE_SECCOMP_RULES_H
#define GANTRY_CONFINE_SECCOMP_RULES_H

#include <seccomp.h>
#include <stdbool.h>
#include <stddef.h>

#include "confine/vmm_filter.h"

/* Allow each syscall of v, whatever its arguments. */
int seccomp_allow_all(scmp_filter_ctx f, const int *v, size_t n);
/* The kill list (but spared, which the caller rules on itself; -1: none),
 * a foreign architecture killed, clone3 ENOSYS, the calls every loop makes
 * (memory but for mmap and mprotect, time, signals, its fds) and fcntl for
 * flags. 0 or a negative errno. */
int seccomp_common_rules(scmp_filter_ctx f, int spared);
/* The network worker's and the share worker's own rules. */
int seccomp_net_rules(scmp_filter_ctx f);
int seccomp_share_rules(scmp_filter_ctx f);
int seccomp_egress_rules(scmp_filter_ctx f);
int seccomp_mcp_rules(scmp_filter_ctx f);
/* A whole filter for one process: the common rules and role's. NULL when
 * libseccomp refuses a rule. */
scmp_filter_ctx seccomp_make(int (*role)(scmp_filter_ctx f));
/* VMM thread kind t's filter for a VM with o (o->log aside). Whether it is
 * loaded with TSYNC (the base one) or not is the loader's. */
scmp_filter_ctx seccomp_vmm_make(enum vmm_thread t, const struct vmm_filter_opts *o);

#endif
