/* What the unit tests of guest-facing code share: little-endian accessors
 * for guest structures, and a fixture of GUEST_SIZE bytes of guest RAM
 * filled with GARBAGE (define GUEST_SIZE before including this). */
#ifndef GANTRY_TESTS_UNIT_GUEST_H
#define GANTRY_TESTS_UNIT_GUEST_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "vmm/memory.h"

#define GARBAGE 0xcc

static inline uint16_t rd16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void wr16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, sizeof(v));
}

#ifdef GUEST_SIZE
struct guest {
	uint8_t *buf;
	struct guest_mem mem;
};

/* Not zero, so zero-fill and table clearing are visible. */
static inline int guest_setup(void **state)
{
	struct guest *g = xzalloc(sizeof(*g));

	g->buf = xmalloc(GUEST_SIZE);
	memset(g->buf, GARBAGE, GUEST_SIZE);
	guest_mem_init_buffer(&g->mem, g->buf, GUEST_SIZE);
	*state = g;
	return 0;
}

static inline int guest_teardown(void **state)
{
	struct guest *g = *state;

	free(g->buf);
	free(g);
	return 0;
}
#endif

#endif
