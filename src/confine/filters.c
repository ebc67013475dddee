/* Loading the seccomp filters made when gantry was built (filters.h). */
#include <errno.h>
#include <linux/seccomp.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util.h"
#include "confine/confine.h"
#include "confine/filters.h"

/* The only refusal the rules make besides clone3's ENOSYS: with log,
 * what would be refused is allowed and logged by the kernel instead. */
#define REFUSED (SECCOMP_RET_ERRNO | EPERM)

/* Load p on the calling thread (with tsync, on every thread of the
 * process), after no_new_privs where nnp (a thread under a filter already
 * has it, and its filter may not allow prctl). */
static int load(const struct filter_prog *p, bool log, bool tsync, bool nnp, const char *what,
		gantry_error_t *err)
{
	struct sock_filter copy[BPF_MAXINSNS];
	struct sock_fprog prog = { .len = (unsigned short)p->len,
				   .filter = (struct sock_filter *)p->insns };
	long r;

	if (p->len == 0 || p->len > BPF_MAXINSNS)
		return gantry_error(err, EINVAL, "seccomp (%s): no program", what);
	if (log) {
		memcpy(copy, p->insns, p->len * sizeof(copy[0]));
		for (size_t i = 0; i < p->len; i++)
			if (copy[i].code == (BPF_RET | BPF_K) && copy[i].k == REFUSED)
				copy[i].k = SECCOMP_RET_LOG;
		prog.filter = copy;
	}
	if (nnp && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return gantry_error_errno(err, "seccomp (%s): no_new_privs", what);
	r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, tsync ? SECCOMP_FILTER_FLAG_TSYNC : 0,
		    &prog);
	if (r > 0) /* TSYNC: this thread could not take it */
		return gantry_error(err, EAGAIN, "seccomp (%s): thread %ld cannot take the filter",
				    what, r);
	if (r < 0)
		return gantry_error_errno(err, "seccomp (%s)", what);
	return 0;
}

int confine_filter_net(bool log, gantry_error_t *err)
{
	return load(&filter_net, log, false, true, "net", err);
}

int confine_filter_egress(bool log, gantry_error_t *err)
{
	return load(&filter_egress, log, false, true, "egress", err);
}

int confine_filter_mcp(bool log, gantry_error_t *err)
{
	return load(&filter_mcp, log, false, true, "mcp", err);
}

int confine_filter_share(bool log, gantry_error_t *err)
{
	return load(&filter_share, log, false, true, "share", err);
}

static const char *const names[VMM_THREAD_KINDS] = { "base", "vcpu", "io", "fs", "main" };

const char *vmm_thread_name(enum vmm_thread t)
{
	return (unsigned int)t < VMM_THREAD_KINDS ? names[t] : "?";
}

int confine_filter_vmm(enum vmm_thread t, const struct vmm_filter_opts *o, gantry_error_t *err)
{
	unsigned int bits = filter_opts_index(o);
	bool base = t == VMM_THREAD_BASE;

	if ((unsigned int)t >= VMM_THREAD_KINDS)
		return gantry_error(err, EINVAL, "seccomp: no VMM thread kind %d", (int)t);
	/* The base one goes onto every thread there is, or fails; it sets
	 * no_new_privs, which the threads have from then on. */
	return load(&filter_vmm[t][bits], o->log, base, base, vmm_thread_name(t), err);
}
