/* Unit tests for vmm/mptable.c: the table is parsed back from guest memory
 * by byte offsets from the MP spec 1.4, independent of the writer's structs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/util.h"
#include "vmm/boot_x86.h"
#include "vmm/mptable.h"

#define GUEST_SIZE (2 * MiB)
#include "guest.h"

/* Spec 1.4 sizes and entry types. */
#define FP_SIZE	     16
#define CFG_HDR_SIZE 44
#define CPU_SIZE     20
#define ENTRY_SIZE   8

static uint8_t byte_sum(const uint8_t *p, size_t len)
{
	uint8_t sum = 0;

	while (len--)
		sum += *p++;
	return sum;
}

static void check_table(struct guest *g, uint64_t gpa, unsigned int ncpus)
{
	const uint8_t *fp = g->buf + gpa, *cfg = fp + FP_SIZE, *e;
	size_t size = mptable_size(ncpus);
	gantry_error_t err = NULL;
	unsigned int i, nentries = ncpus + 2 + 16 + 2;
	size_t cfg_len = CFG_HDR_SIZE + ncpus * CPU_SIZE + (nentries - ncpus) * ENTRY_SIZE;

	memset(g->buf, GARBAGE, GUEST_SIZE);
	assert_int_equal(mptable_write(&g->mem, gpa, ncpus, &err), 0);
	assert_null(err);

	/* mptable_size is exactly what was written. */
	assert_int_equal(size, FP_SIZE + cfg_len);
	assert_int_equal(g->buf[gpa - 1], GARBAGE);
	if (gpa + size < GUEST_SIZE)
		assert_int_equal(g->buf[gpa + size], GARBAGE);
	assert_int_not_equal(g->buf[gpa + size - 1], GARBAGE);

	/* Floating pointer. */
	assert_memory_equal(fp, "_MP_", 4);
	assert_int_equal(rd32(fp + 4), gpa + FP_SIZE);
	assert_int_equal(fp[8], 1); /* length in 16-byte units */
	assert_int_equal(fp[9], 4);
	for (i = 11; i < 16; i++)
		assert_int_equal(fp[i], 0);
	assert_int_equal(byte_sum(fp, FP_SIZE), 0);

	/* Configuration table header. */
	assert_memory_equal(cfg, "PCMP", 4);
	assert_int_equal(rd16(cfg + 4), cfg_len);
	assert_int_equal(cfg[6], 4);
	assert_memory_equal(cfg + 8, "GANTRY  ", 8);
	assert_memory_equal(cfg + 16, "MICROVM     ", 12);
	assert_int_equal(rd32(cfg + 28), 0);
	assert_int_equal(rd16(cfg + 32), 0);
	assert_int_equal(rd16(cfg + 34), nentries);
	assert_int_equal(rd32(cfg + 36), MPTABLE_LAPIC_ADDR);
	assert_int_equal(rd16(cfg + 40), 0);
	assert_int_equal(byte_sum(cfg, cfg_len), 0);

	e = cfg + CFG_HDR_SIZE;
	for (i = 0; i < ncpus; i++, e += CPU_SIZE) {
		assert_int_equal(e[0], 0);
		assert_int_equal(e[1], i);
		assert_int_equal(e[2], 0x14);
		assert_int_equal(e[3], i == 0 ? 0x3 : 0x1);
		assert_int_equal(rd32(e + 4), 0x600);
		assert_int_equal(rd32(e + 8), 0x201);
		assert_int_equal(rd32(e + 12), 0);
		assert_int_equal(rd32(e + 16), 0);
	}

	/* ISA bus. */
	assert_int_equal(e[0], 1);
	assert_int_equal(e[1], 0);
	assert_memory_equal(e + 2, "ISA   ", 6);
	e += ENTRY_SIZE;

	/* IO-APIC. */
	assert_int_equal(e[0], 2);
	assert_int_equal(e[1], ncpus);
	assert_int_equal(e[2], 0x11);
	assert_int_equal(e[3], 1);
	assert_int_equal(rd32(e + 4), MPTABLE_IOAPIC_ADDR);
	e += ENTRY_SIZE;

	/* ISA IRQs: identity, except the timer on pin 2. */
	for (i = 0; i < MPTABLE_ISA_IRQS; i++, e += ENTRY_SIZE) {
		assert_int_equal(e[0], 3);
		assert_int_equal(e[1], 0); /* INT */
		assert_int_equal(rd16(e + 2), 0);
		assert_int_equal(e[4], 0);
		assert_int_equal(e[5], i);
		assert_int_equal(e[6], ncpus);
		assert_int_equal(e[7], i == 0 ? 2 : i);
	}

	/* ExtINT on LINT0, NMI on LINT1, to every LAPIC. */
	assert_int_equal(e[0], 4);
	assert_int_equal(e[1], 3);
	assert_int_equal(e[6], 0xff);
	assert_int_equal(e[7], 0);
	e += ENTRY_SIZE;
	assert_int_equal(e[0], 4);
	assert_int_equal(e[1], 1);
	assert_int_equal(e[6], 0xff);
	assert_int_equal(e[7], 1);
	e += ENTRY_SIZE;
	assert_ptr_equal(e, fp + size);
}

static void test_one_cpu(void **state)
{
	check_table(*state, BOOT_MPTABLE_ADDR, 1);
}

static void test_two_cpus(void **state)
{
	check_table(*state, BOOT_MPTABLE_ADDR, 2);
}

static void test_eight_cpus(void **state)
{
	check_table(*state, BOOT_MPTABLE_ADDR, 8);
}

static void test_max_cpus(void **state)
{
	/* The largest table still fits below 1 MiB. */
	assert_true(BOOT_MPTABLE_ADDR + mptable_size(MPTABLE_MAX_CPUS) <= BOOT_HIGH_RAM);
	check_table(*state, BOOT_MPTABLE_ADDR, MPTABLE_MAX_CPUS);
}

static void test_bad_cpu_count(void **state)
{
	struct guest *g = *state;
	gantry_error_t err = NULL;

	assert_int_equal(mptable_write(&g->mem, BOOT_MPTABLE_ADDR, 0, &err), -1);
	assert_non_null(err);
	assert_non_null(strstr(err->msg, "0 vCPUs"));
	gantry_error_free(&err);

	assert_int_equal(mptable_write(&g->mem, BOOT_MPTABLE_ADDR, MPTABLE_MAX_CPUS + 1, &err), -1);
	assert_non_null(err);
	assert_non_null(strstr(err->msg, "255 vCPUs"));
	gantry_error_free(&err);
	assert_int_equal(g->buf[BOOT_MPTABLE_ADDR], GARBAGE);
}

static void test_does_not_fit(void **state)
{
	struct guest *g = *state;
	gantry_error_t err = NULL;
	uint64_t gpa = GUEST_SIZE - mptable_size(4) + 1;

	assert_int_equal(mptable_write(&g->mem, gpa, 4, &err), -1);
	assert_non_null(err);
	assert_non_null(strstr(err->msg, "do not fit"));
	gantry_error_free(&err);
	assert_int_equal(g->buf[gpa], GARBAGE);

	assert_int_equal(mptable_write(&g->mem, UINT64_MAX - 8, 1, &err), -1);
	gantry_error_free(&err);

	/* Exactly at the end is fine. */
	check_table(g, gpa - 1, 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_one_cpu, guest_setup, guest_teardown),
		cmocka_unit_test_setup_teardown(test_two_cpus, guest_setup, guest_teardown),
		cmocka_unit_test_setup_teardown(test_eight_cpus, guest_setup, guest_teardown),
		cmocka_unit_test_setup_teardown(test_max_cpus, guest_setup, guest_teardown),
		cmocka_unit_test_setup_teardown(test_bad_cpu_count, guest_setup, guest_teardown),
		cmocka_unit_test_setup_teardown(test_does_not_fit, guest_setup, guest_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
