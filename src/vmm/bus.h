/* Address-space dispatch for vCPU exits: a sorted registry of port-I/O or
 * MMIO ranges, looked up by binary search. Devices register before the vCPUs
 * start, so lookups take no lock; each device serialises itself. */
#ifndef GANTRY_VMM_BUS_H
#define GANTRY_VMM_BUS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

/* off is relative to the range's base; data holds len bytes (little-endian). */
typedef void (*bus_access_fn)(void *opaque, uint64_t off, uint8_t *data, uint32_t len,
			      bool is_write);

struct bus_range {
	uint64_t base;
	uint64_t len;
	bus_access_fn fn;
	void *opaque;
	const char *name;
};

struct bus {
	struct bus_range *ranges;
	unsigned int nr;
};

int bus_register(struct bus *b, uint64_t base, uint64_t len, bus_access_fn fn, void *opaque,
		 const char *name, gantry_error_t *err);
/* Route one access; false when no device claims addr..addr+len-1. */
bool bus_dispatch(const struct bus *b, uint64_t addr, uint8_t *data, uint32_t len, bool is_write);
void bus_free(struct bus *b);

#endif
