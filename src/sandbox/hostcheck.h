/* What this host offers Gantry, checked one item at a time (`gantry
 * doctor`, and any front end that wants to say why a boot cannot work):
 * the CPU architecture, KVM and its kind, user namespaces, Landlock,
 * seccomp, the cgroup version, free disk where sandboxes and images live,
 * the guest assets, the libraries loaded on first use and mke2fs. Each
 * check says what it found and, when that is not enough, what to change. */
#ifndef GANTRY_SANDBOX_HOSTCHECK_H
#define GANTRY_SANDBOX_HOSTCHECK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

enum host_status {
	HOST_OK,
	HOST_WARN, /* works, with less: say so */
	HOST_FAIL, /* Gantry cannot boot a sandbox here until it is fixed */
};

#define HOST_TEXT_MAX 256

struct host_check {
	const char *name; /* "kvm", "landlock", ... */
	enum host_status status;
	char detail[HOST_TEXT_MAX]; /* what was found */
	char fix[HOST_TEXT_MAX]; /* what to change; "" when nothing */
};

/* Runs every check into out (at most max of them); returns how many. */
size_t host_checks(struct host_check *out, size_t max);
/* Whether one of the n checks failed. */
bool host_checks_failed(const struct host_check *c, size_t n);
const char *host_status_name(enum host_status s);
/* {"ok": no check failed, "checks": [{name, status, detail, fix|null}]} */
json_t *host_checks_json(const struct host_check *c, size_t n);

#define HOST_CHECKS_MAX 16

#endif
