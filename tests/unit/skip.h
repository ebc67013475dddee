/* cmocka's skip() with the reason printed first ("SKIP: <why>"), so a test
 * that cannot run on this machine says why instead of passing silently.
 * Include after <cmocka.h>. */
#ifndef GANTRY_TESTS_UNIT_SKIP_H
#define GANTRY_TESTS_UNIT_SKIP_H

#define skip_because(fmt, ...)                                                                     \
	do {                                                                                       \
		print_message("SKIP: " fmt "\n", ##__VA_ARGS__);                                   \
		skip();                                                                            \
	} while (0)

#endif
