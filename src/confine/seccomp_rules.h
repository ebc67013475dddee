/* What every filter of seccomp.c and seccomp_vmm.c starts from. */
#ifndef GANTRY_CONFINE_SECCOMP_RULES_H
#define GANTRY_CONFINE_SECCOMP_RULES_H

#include <seccomp.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* Allow each syscall of v, whatever its arguments. */
int seccomp_allow_all(scmp_filter_ctx f, const int *v, size_t n);
/* The kill list (but spared, which the caller rules on itself; -1: none),
 * a foreign architecture killed, clone3 ENOSYS, the calls every loop makes
 * (memory but for mmap and mprotect, time, signals, its fds) and fcntl for
 * flags. 0 or a negative errno. */
int seccomp_common_rules(scmp_filter_ctx f, int spared);
/* A whole filter for one process, loaded: EPERM (or, log, logged) for what
 * neither the common rules nor role allow. 0, or -1 and why (naming what). */
int seccomp_build(bool log, const char *what, int (*role)(scmp_filter_ctx f), gantry_error_t *err);

#endif
