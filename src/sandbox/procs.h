/* `gantry top NAME` and the API's process list: the processes of a
 * running sandbox's container, as gantry-init's helper reads them in the
 * container's PID namespace (proto/files.h, op ps), so the image needs no
 * ps of its own. */
#ifndef GANTRY_SANDBOX_PROCS_H
#define GANTRY_SANDBOX_PROCS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cancel.h"
#include "common/error.h"

#define SANDBOX_PROCS_OUT_MAX (4u << 20) /* bytes of the helper's records */

struct sandbox_proc {
	uint32_t pid, ppid; /* in the container's PID namespace */
	uint32_t uid;
	char state; /* as /proc says: R, S, D, Z, T... */
	uint64_t rss_kib;
	char *command; /* its arguments, space-separated, sanitised for a terminal */
};

/* The processes of running sandbox name's container, in the order the
 * guest's /proc gives them. Fails for a stopped sandbox, one whose guest
 * has no helper (started by an older Gantry), and when the guest's answer
 * is malformed or larger than SANDBOX_PROCS_OUT_MAX. */
int sandbox_processes(const char *name, const struct gantry_cancel *cancel,
		      struct sandbox_proc **out, size_t *n, gantry_error_t *err);
void sandbox_processes_free(struct sandbox_proc *v, size_t n);
/* The same as {"processes": [{"pid", "ppid", "uid", "state", "rssKiB",
 * "command"}...]}: what `gantry top --json` prints and the API answers. */
int sandbox_processes_json(const char *name, const struct gantry_cancel *cancel, json_t **out,
			   gantry_error_t *err);

#endif
