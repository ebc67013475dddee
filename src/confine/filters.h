/* The seccomp filters as BPF programs, made from the rules of seccomp.c
 * and seccomp_vmm.c when gantry is built (mkfilters.c writes them into the
 * build), and loaded from there by filters.c: no worker compiles a filter
 * at its start. */
#ifndef GANTRY_CONFINE_FILTERS_H
#define GANTRY_CONFINE_FILTERS_H

#include <linux/filter.h>
#include <stddef.h>

#include "confine/vmm_filter.h"

/* What a VM has, as the index of its VMM filters (struct vmm_filter_opts
 * but for log, which the loader applies). */
enum {
	FILTER_OPT_CONSOLE_FILE = 1 << 0,
	FILTER_OPT_FS = 1 << 1,
	FILTER_OPT_FS_REMOTE = 1 << 2,
	FILTER_OPT_PROFILE = 1 << 3,
	FILTER_OPT_DIALS = 1 << 4,
	FILTER_OPT_SAVE = 1 << 5,
	FILTER_OPT_COMBOS = 1 << 6,
};

/* opts' index into filter_vmm[kind]. */
static inline unsigned int filter_opts_index(const struct vmm_filter_opts *o)
{
	return (o->console_file ? FILTER_OPT_CONSOLE_FILE : 0) | (o->fs ? FILTER_OPT_FS : 0) |
	       (o->fs_remote ? FILTER_OPT_FS_REMOTE : 0) | (o->profile ? FILTER_OPT_PROFILE : 0) |
	       (o->dials ? FILTER_OPT_DIALS : 0) | (o->save ? FILTER_OPT_SAVE : 0);
}

struct filter_prog {
	const struct sock_filter *insns;
	size_t len;
};

/* In the build's seccomp_filters.c. */
extern const struct filter_prog filter_net, filter_share, filter_egress, filter_mcp;
extern const struct filter_prog filter_vmm[VMM_THREAD_KINDS][FILTER_OPT_COMBOS];

#endif
