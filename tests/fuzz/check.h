/* What the fuzz targets share: an invariant that aborts (a crash libFuzzer
 * reports, with the input) when it does not hold, also in release builds;
 * and a reader of the input as a stream of little-endian numbers that
 * reads zeros once it runs out. */
#ifndef GANTRY_TESTS_FUZZ_CHECK_H
#define GANTRY_TESTS_FUZZ_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define check(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "check failed: %s (line %d)\n", #cond, __LINE__);          \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

struct fuzz_in {
	const uint8_t *in;
	size_t left;
};

static inline uint8_t fuzz_take8(struct fuzz_in *f)
{
	if (f->left == 0)
		return 0;
	f->left--;
	return *f->in++;
}

/* bytes (at most 4) of the input as a little-endian number. */
static inline uint32_t fuzz_take(struct fuzz_in *f, unsigned int bytes)
{
	uint32_t v = 0;

	for (unsigned int i = 0; i < bytes; i++)
		v |= (uint32_t)fuzz_take8(f) << (8 * i);
	return v;
}

#endif
