/* What the fuzz targets share: an invariant that aborts (a crash libFuzzer
 * reports, with the input) when it does not hold, also in release builds. */
#ifndef GANTRY_TESTS_FUZZ_CHECK_H
#define GANTRY_TESTS_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define check(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "check failed: %s (line %d)\n", #cond, __LINE__);          \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

#endif
