/* Unit tests for vmm/bus.c: the sorted range registry that routes vCPU exits
 * to devices by address. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/util.h"
#include "vmm/bus.h"

/* What the last dispatched access looked like, per device. */
struct dev {
	unsigned int hits;
	uint64_t off;
	uint32_t len;
	bool is_write;
	uint8_t first;
};

static void dev_access(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write)
{
	struct dev *d = opaque;

	d->hits++;
	d->off = off;
	d->len = len;
	d->is_write = is_write;
	d->first = data[0];
	if (!is_write)
		memset(data, 0xd0, len);
}

static int reg(struct bus *b, uint64_t base, uint64_t len, struct dev *d, const char *name)
{
	gantry_error_t err = NULL;
	int r = bus_register(b, base, len, dev_access, d, name, &err);

	if (r < 0) {
		assert_non_null(err);
		assert_non_null(gantry_error_str(err));
		gantry_error_free(&err);
	} else {
		assert_null(err);
	}
	return r;
}

static void assert_sorted(const struct bus *b)
{
	for (unsigned int i = 1; i < b->nr; i++)
		assert_true(b->ranges[i - 1].base + b->ranges[i - 1].len <= b->ranges[i].base);
}

static int bus_setup(void **state)
{
	*state = xzalloc(sizeof(struct bus));
	return 0;
}

static int bus_teardown(void **state)
{
	bus_free(*state);
	free(*state);
	return 0;
}

static void test_sorted(void **state)
{
	struct bus *b = *state;
	struct dev d[5] = { 0 };
	const uint64_t bases[] = { 0x3f8, 0x60, 0xd0000000, 0x70, 0x10 };

	for (unsigned int i = 0; i < ARRAY_SIZE(bases); i++) {
		assert_int_equal(reg(b, bases[i], 8, &d[i], "dev"), 0);
		assert_sorted(b);
	}
	assert_int_equal(b->nr, 5);
	assert_int_equal(b->ranges[0].base, 0x10);
	assert_int_equal(b->ranges[1].base, 0x60);
	assert_int_equal(b->ranges[2].base, 0x70);
	assert_int_equal(b->ranges[3].base, 0x3f8);
	assert_int_equal(b->ranges[4].base, 0xd0000000);
	assert_ptr_equal(b->ranges[3].opaque, &d[0]);
	bus_free(b);
	assert_int_equal(b->nr, 0);
	assert_null(b->ranges);
}

static void test_overlap(void **state)
{
	struct bus *b = *state;
	struct dev d = { 0 };

	assert_int_equal(reg(b, 0x1000, 0x100, &d, "a"), 0);
	assert_int_equal(reg(b, 0x2000, 0x100, &d, "b"), 0);
	/* Same range, head, tail, inside, around, and across two. */
	assert_int_equal(reg(b, 0x1000, 0x100, &d, "x"), -1);
	assert_int_equal(reg(b, 0xf00, 0x101, &d, "x"), -1);
	assert_int_equal(reg(b, 0x10ff, 0x10, &d, "x"), -1);
	assert_int_equal(reg(b, 0x1010, 0x10, &d, "x"), -1);
	assert_int_equal(reg(b, 0x800, 0x1000, &d, "x"), -1);
	assert_int_equal(reg(b, 0x10f0, 0x1000, &d, "x"), -1);
	assert_int_equal(reg(b, 0, UINT64_MAX, &d, "x"), -1);
	assert_int_equal(b->nr, 2);
	/* Touching is not overlapping. */
	assert_int_equal(reg(b, 0xf00, 0x100, &d, "c"), 0);
	assert_int_equal(reg(b, 0x1100, 0xf00, &d, "d"), 0);
	assert_int_equal(reg(b, 0x2100, 0x10, &d, "e"), 0);
	assert_int_equal(b->nr, 5);
	assert_sorted(b);
}

static void test_empty_range(void **state)
{
	struct bus *b = *state;
	struct dev d = { 0 };

	assert_int_equal(reg(b, 0x1000, 0, &d, "empty"), -1);
	assert_int_equal(reg(b, UINT64_MAX, 2, &d, "wraps"), -1);
	assert_int_equal(reg(b, 0xfffffffffffff000ULL, 0x2000, &d, "wraps"), -1);
	assert_int_equal(b->nr, 0);
	assert_int_equal(reg(b, UINT64_MAX - 1, 1, &d, "top"), 0);
}

static void test_dispatch(void **state)
{
	struct bus *b = *state;
	struct dev d[3] = { 0 };
	uint8_t data[8] = { 0x42 };

	assert_int_equal(reg(b, 0x3f8, 8, &d[0], "serial"), 0);
	assert_int_equal(reg(b, 0xd0000000, 0x1000, &d[1], "virtio0"), 0);
	assert_int_equal(reg(b, 0xd0001000, 0x1000, &d[2], "virtio1"), 0);

	assert_true(bus_dispatch(b, 0x3fd, data, 1, false));
	assert_int_equal(d[0].hits, 1);
	assert_int_equal(d[0].off, 5);
	assert_int_equal(d[0].len, 1);
	assert_false(d[0].is_write);

	data[0] = 0x42;
	assert_true(bus_dispatch(b, 0xd0001070, data, 4, true));
	assert_int_equal(d[2].hits, 1);
	assert_int_equal(d[2].off, 0x70);
	assert_int_equal(d[2].len, 4);
	assert_true(d[2].is_write);
	assert_int_equal(d[2].first, 0x42);
	assert_int_equal(d[1].hits, 0);

	/* First and last byte of a range. */
	assert_true(bus_dispatch(b, 0xd0000000, data, 4, false));
	assert_int_equal(d[1].off, 0);
	assert_true(bus_dispatch(b, 0xd0000fff, data, 1, false));
	assert_int_equal(d[1].off, 0xfff);
	assert_true(bus_dispatch(b, 0xd0000ff8, data, 8, false));
	assert_int_equal(d[1].off, 0xff8);
	assert_int_equal(d[1].hits, 3);
}

static void test_miss(void **state)
{
	struct bus *b = *state;
	struct dev d[2] = { 0 };
	uint8_t data[8];
	const uint64_t misses[] = { 0, 0x3f7, 0x400, 0x1000, 0x10ff, 0xd0000000, UINT64_MAX };

	for (unsigned int i = 0; i < ARRAY_SIZE(misses); i++)
		assert_false(bus_dispatch(b, misses[i], data, 1, false));
	assert_int_equal(reg(b, 0x3f8, 8, &d[0], "serial"), 0);
	assert_int_equal(reg(b, 0x1100, 0x100, &d[1], "other"), 0);
	for (unsigned int i = 0; i < ARRAY_SIZE(misses); i++)
		assert_false(bus_dispatch(b, misses[i], data, 1, false));
	assert_int_equal(d[0].hits + d[1].hits, 0);
}

static void test_straddle(void **state)
{
	struct bus *b = *state;
	struct dev d[2] = { 0 };
	uint8_t data[8] = { 0 };

	assert_int_equal(reg(b, 0x1000, 0x10, &d[0], "a"), 0);
	assert_int_equal(reg(b, 0x1010, 0x10, &d[1], "b"), 0);
	/* Crossing from a into b, or off the end of b into nothing. */
	assert_false(bus_dispatch(b, 0x100e, data, 4, true));
	assert_false(bus_dispatch(b, 0x100f, data, 2, false));
	assert_false(bus_dispatch(b, 0x101c, data, 8, false));
	assert_false(bus_dispatch(b, 0x101f, data, 2, false));
	/* Starting before a range. */
	assert_false(bus_dispatch(b, 0xffe, data, 4, false));
	assert_int_equal(d[0].hits + d[1].hits, 0);
	/* Flush against the end is fine. */
	assert_true(bus_dispatch(b, 0x100c, data, 4, false));
	assert_true(bus_dispatch(b, 0x1018, data, 8, false));
	assert_int_equal(d[0].hits, 1);
	assert_int_equal(d[1].hits, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_sorted, bus_setup, bus_teardown),
		cmocka_unit_test_setup_teardown(test_overlap, bus_setup, bus_teardown),
		cmocka_unit_test_setup_teardown(test_empty_range, bus_setup, bus_teardown),
		cmocka_unit_test_setup_teardown(test_dispatch, bus_setup, bus_teardown),
		cmocka_unit_test_setup_teardown(test_miss, bus_setup, bus_teardown),
		cmocka_unit_test_setup_teardown(test_straddle, bus_setup, bus_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
