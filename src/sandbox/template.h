/* Template snapshots for one-shot runs (gantry wrap): a VM saved once at
 * gantry-init's first HELLO, before it has read any of its run's
 * parameters, and each later run of the same machine restored from that
 * save instead of booting a kernel. The run's own parameters (shares,
 * root, network, CA, sockets...) go with the RENEW that wakes the saved
 * guest (agent_wait_configured), which then builds its container as a
 * cold boot would.
 *
 * A template is $GANTRY_HOME/templates/KEY/{state,memory}; KEY hashes what
 * makes the saved VM: Gantry's build and binary, the kernel and disks
 * (path, inode, size, mtime), vCPUs, memory, the device set, the kernel's
 * own command line. The first run of a KEY writes it (into a directory
 * aside, renamed into place whole); runs restore it copy-on-write, sharing
 * its pages. A template the VM refuses (a corrupt file, another CPU) is
 * removed and the run boots cold. At most TEMPLATES_MAX are kept, the
 * least recently used removed first. */
#ifndef GANTRY_SANDBOX_TEMPLATE_H
#define GANTRY_SANDBOX_TEMPLATE_H

#include <stdbool.h>

#include "common/error.h"

#define TEMPLATES_SUBDIR "templates"
#define TEMPLATES_MAX	 8
#define TEMPLATE_SAVE_MS 30000

struct machine;

struct sandbox_template {
	char *dir;	      /* $GANTRY_HOME/templates/KEY */
	char *tmp;	      /* being written (a cold run): renamed to dir once saved */
	bool restore;	      /* found: m restores from it */
	int state_fd, mem_fd; /* its files, m's restore or save files (ours to close) */
};

#define TEMPLATE_NONE ((struct sandbox_template){ .state_fd = -1, .mem_fd = -1 })

/* For m (machine_config'd, not started): its template found (its files
 * become m's restore files) or, where there is none, made ready to be
 * written by this boot (m's save files). Either way m boots as a
 * template's (m->template). Nothing is an error a run cannot do
 * without: a template that cannot be had is a cold boot, logged. */
void template_prepare(struct machine *m, struct sandbox_template *t);
/* The boot writing t saved it (m's save files): put it in place. */
void template_commit(struct sandbox_template *t);
/* Restoring t failed: it goes, so the next run writes it anew. */
void template_discard(struct sandbox_template *t);
void template_free(struct sandbox_template *t);

/* The part of m's command line that is the kernel's (its own
 * parameters, gantry.debug=1 and gantry.template=1) into m->append, and
 * the gantry.* parameters into *config (allocated): what a template's
 * boot is given with RENEW. */
int template_split_append(struct machine *m, char **config, gantry_error_t *err);

#endif
