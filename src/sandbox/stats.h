/* What a sandbox uses now (`gantry stats`): the CPU time and memory of
 * its supervisor and every worker under it (the VM's RAM as the host
 * holds it), its writable layer's disk, and its network's bytes each way.
 * Read from the host's side only: nothing is asked of the guest. */
#ifndef GANTRY_SANDBOX_STATS_H
#define GANTRY_SANDBOX_STATS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "sandbox/state.h"

struct sandbox_stats {
	char name[SANDBOX_NAME_MAX + 1];
	bool running;
	uint64_t cpu_ns;     /* user and system time of its processes so far */
	uint64_t mem_bytes;  /* their proportional set size (RSS where it cannot be read) */
	uint64_t mem_limit;  /* the guest's memory */
	unsigned int pids;   /* the supervisor and its workers */
	bool disk;	     /* it has a writable layer */
	uint64_t disk_bytes; /* the layer's blocks on the host's disk */
	uint64_t disk_limit; /* and its size */
	bool net;	     /* it has a network */
	uint64_t net_rx, net_tx; /* bytes to and from the guest, this boot */
};

/* name's figures now; the processes' only while it runs. */
int sandbox_stats(const char *name, struct sandbox_stats *st, gantry_error_t *err);
/* Only running and cpu_ns (no memory, disk or network asked for): the
 * reading a CPU share starts from. */
int sandbox_stats_cpu(const char *name, struct sandbox_stats *st, gantry_error_t *err);
/* st as JSON, with cpu_percent from the CPU time since prev (the same
 * sandbox's, wall_ns earlier; NULL: null). */
json_t *sandbox_stats_json(const struct sandbox_stats *st, const struct sandbox_stats *prev,
			   uint64_t wall_ns);
/* The CPU share between two readings wall_ns apart, in percent of one CPU
 * (200: two CPUs busy); -1 when it cannot be said. */
double sandbox_stats_cpu_percent(const struct sandbox_stats *st, const struct sandbox_stats *prev,
				 uint64_t wall_ns);

#endif
