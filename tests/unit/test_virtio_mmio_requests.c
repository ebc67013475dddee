/* Unit tests for virtio/mmio.c and virtio/dev.c with the real devices behind
 * them, second part: requests sent through QueueNotify, well-formed and
 * not. Block reads and writes (scattered, header and data in one buffer, a
 * read-only disk), flushes and GET_ID, requests out of range or of a type
 * not served, chains with no status byte or that loop, a broken ring, and
 * virtio-rng's reads. The rig is virtio_mmio_rig.h; the transport's
 * registers are in test_virtio_mmio.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "virtio_mmio_rig.h"

static void test_blk_in(void **state)
{
	struct fx *f = *state;
	uint32_t len;

	driver_up(f, true);
	memset(f->ram + DATA_GPA, 0, 4 * SECTOR);
	assert_int_equal(blk_req(f, VIRTIO_BLK_T_IN, 2, 3 * SECTOR, true, &len), VIRTIO_BLK_S_OK);
	assert_int_equal(len, 3 * SECTOR + 1);
	for (unsigned int i = 0; i < 3 * SECTOR; i++)
		assert_int_equal(f->ram[DATA_GPA + i], disk_byte(2 * SECTOR + i));
	assert_int_equal(f->ram[DATA_GPA + 3 * SECTOR], 0);

	/* The whole disk, last sector included. */
	assert_int_equal(blk_req(f, VIRTIO_BLK_T_IN, 0, DISK_SECTORS * SECTOR, true, &len),
			 VIRTIO_BLK_S_OK);
	for (unsigned int i = 0; i < DISK_SECTORS * SECTOR; i++)
		assert_int_equal(f->ram[DATA_GPA + i], disk_byte(i));
}

static void test_blk_in_scattered(void **state)
{
	struct fx *f = *state;
	/* Data in three odd-sized pieces; the status byte ends the last one. */
	const struct seg segs[] = {
		{ HDR_GPA, 8, false },
		{ HDR_GPA + 8, 8, false },
		{ DATA_GPA, 100, true },
		{ DATA_GPA + 0x1000, 1000, true },
		{ DATA_GPA + 0x2000, 3 * SECTOR - 1100 + 1, true },
	};
	uint32_t type = VIRTIO_BLK_T_IN;
	uint64_t sector = 5;
	uint8_t *last = f->ram + DATA_GPA + 0x2000;

	driver_up(f, true);
	memcpy(f->ram + HDR_GPA, &type, 4);
	memcpy(f->ram + HDR_GPA + 8, &sector, 8);
	last[3 * SECTOR - 1100] = 0xee;
	assert_int_equal(submit(f, segs, ARRAY_SIZE(segs)), 3 * SECTOR + 1);
	assert_int_equal(last[3 * SECTOR - 1100], VIRTIO_BLK_S_OK);
	for (unsigned int i = 0; i < 100; i++)
		assert_int_equal(f->ram[DATA_GPA + i], disk_byte(5 * SECTOR + i));
	for (unsigned int i = 0; i < 1000; i++)
		assert_int_equal(f->ram[DATA_GPA + 0x1000 + i], disk_byte(5 * SECTOR + 100 + i));
	for (unsigned int i = 0; i < 3 * SECTOR - 1100; i++)
		assert_int_equal(last[i], disk_byte(5 * SECTOR + 1100 + i));
}

static void test_blk_out(void **state)
{
	struct fx *f = *state;
	uint8_t disk[DISK_SECTORS * SECTOR];
	uint32_t len;

	driver_up(f, true);
	memset(f->ram + DATA_GPA, 0xc3, 2 * SECTOR);
	assert_int_equal(blk_req(f, VIRTIO_BLK_T_OUT, 5, 2 * SECTOR, false, &len), VIRTIO_BLK_S_OK);
	assert_int_equal(len, 1);
	read_disk(f, disk);
	for (unsigned int i = 0; i < sizeof(disk); i++) {
		bool hit = i >= 5 * SECTOR && i < 7 * SECTOR;

		assert_int_equal(disk[i], hit ? 0xc3 : disk_byte(i));
	}
	/* Read it back through the device. */
	memset(f->ram + DATA_GPA, 0, 2 * SECTOR);
	assert_int_equal(blk_req(f, VIRTIO_BLK_T_IN, 6, SECTOR, true, NULL), VIRTIO_BLK_S_OK);
	assert_int_equal(f->ram[DATA_GPA], 0xc3);
	assert_int_equal(f->ram[DATA_GPA + SECTOR - 1], 0xc3);
}

static void test_blk_out_header_and_data(void **state)
{
	struct fx *f = *state;
	/* Header and data share one readable buffer. */
	const struct seg segs[] = {
		{ DATA_GPA, 16 + SECTOR, false },
		{ STATUS_GPA, 1, true },
	};
	uint32_t type = VIRTIO_BLK_T_OUT;
	uint64_t sector = 7;
	uint8_t disk[DISK_SECTORS * SECTOR];

	driver_up(f, true);
	memset(f->ram + DATA_GPA, 0, 16);
	memcpy(f->ram + DATA_GPA, &type, 4);
	memcpy(f->ram + DATA_GPA + 8, &sector, 8);
	for (unsigned int i = 0; i < SECTOR; i++)
		f->ram[DATA_GPA + 16 + i] = (uint8_t)(i ^ 0x5a);
	assert_int_equal(submit(f, segs, ARRAY_SIZE(segs)), 1);
	assert_int_equal(f->ram[STATUS_GPA], VIRTIO_BLK_S_OK);
	read_disk(f, disk);
	for (unsigned int i = 0; i < SECTOR; i++)
		assert_int_equal(disk[7 * SECTOR + i], (uint8_t)(i ^ 0x5a));
	assert_int_equal(disk[7 * SECTOR - 1], disk_byte(7 * SECTOR - 1));
}

static void test_blk_out_ro(void **state)
{
	struct fx *f = *state;
	uint32_t len;

	driver_up(f, true);
	memset(f->ram + DATA_GPA, 0xc3, SECTOR);
	assert_int_equal(blk_req(f, VIRTIO_BLK_T_OUT, 1, SECTOR, false, &len), VIRTIO_BLK_S_IOERR);
	assert_int_equal(len, 1);
	assert_disk_pristine(f);
	/* Reads and flushes still work. */
	assert_int_equal(blk_req(f, VIRTIO_BLK_T_IN, 1, SECTOR, true, NULL), VIRTIO_BLK_S_OK);
	assert_int_equal(f->ram[DATA_GPA], disk_byte(SECTOR));
	assert_int_equal(blk_req(f, VIRTIO_BLK_T_FLUSH, 0, 0, false, NULL), VIRTIO_BLK_S_OK);
}

static void test_blk_flush(void **state)
{
	struct fx *f = *state;
	uint32_t len;

	driver_up(f, true);
	assert_int_equal(blk_req(f, VIRTIO_BLK_T_FLUSH, 0, 0, false, &len), VIRTIO_BLK_S_OK);
	assert_int_equal(len, 1);
}

static void test_blk_get_id(void **state)
{
	struct fx *f = *state;
	uint32_t len;

	driver_up(f, true);
	memset(f->ram + DATA_GPA, 0xee, VIRTIO_BLK_ID_BYTES + 4);
	assert_int_equal(blk_req(f, VIRTIO_BLK_T_GET_ID, 0, VIRTIO_BLK_ID_BYTES, true, &len),
			 VIRTIO_BLK_S_OK);
	assert_int_equal(len, VIRTIO_BLK_ID_BYTES + 1);
	assert_memory_equal(f->ram + DATA_GPA, "gantry", 6);
	assert_int_equal(f->ram[DATA_GPA + VIRTIO_BLK_ID_BYTES], 0xee);
	/* A short buffer gets a truncated id, not an overrun. */
	memset(f->ram + DATA_GPA, 0xee, VIRTIO_BLK_ID_BYTES + 4);
	assert_int_equal(blk_req(f, VIRTIO_BLK_T_GET_ID, 0, 4, true, &len), VIRTIO_BLK_S_OK);
	assert_int_equal(len, 5);
	assert_int_equal(f->ram[DATA_GPA + 4], 0xee);
}

static void test_blk_range(void **state)
{
	struct fx *f = *state;
	uint32_t len;

	driver_up(f, true);
	memset(f->ram + DATA_GPA, 0xc3, 2 * SECTOR);
	/* Runs one sector past the end. */
	assert_int_equal(blk_req(f, VIRTIO_BLK_T_IN, DISK_SECTORS - 1, 2 * SECTOR, true, &len),
			 VIRTIO_BLK_S_IOERR);
	assert_int_equal(len, 1);
	assert_int_equal(blk_req(f, VIRTIO_BLK_T_OUT, DISK_SECTORS - 1, 2 * SECTOR, false, NULL),
			 VIRTIO_BLK_S_IOERR);
	assert_int_equal(blk_req(f, VIRTIO_BLK_T_OUT, DISK_SECTORS, SECTOR, false, NULL),
			 VIRTIO_BLK_S_IOERR);
	/* Sector numbers that overflow when turned into bytes. */
	assert_int_equal(blk_req(f, VIRTIO_BLK_T_IN, UINT64_MAX, SECTOR, true, NULL),
			 VIRTIO_BLK_S_IOERR);
	assert_int_equal(blk_req(f, VIRTIO_BLK_T_OUT, UINT64_MAX / SECTOR + 1, SECTOR, false, NULL),
			 VIRTIO_BLK_S_IOERR);
	/* Not a whole number of sectors. */
	assert_int_equal(blk_req(f, VIRTIO_BLK_T_OUT, 0, SECTOR + 3, false, NULL),
			 VIRTIO_BLK_S_IOERR);
	assert_int_equal(blk_req(f, VIRTIO_BLK_T_IN, 0, 100, true, NULL), VIRTIO_BLK_S_IOERR);
	assert_disk_pristine(f);
}

static void test_blk_unsupported(void **state)
{
	struct fx *f = *state;
	uint32_t len;

	driver_up(f, true);
	assert_int_equal(blk_req(f, 0x1234, 0, SECTOR, true, &len), VIRTIO_BLK_S_UNSUPP);
	assert_int_equal(len, 1);
	assert_int_equal(blk_req(f, VIRTIO_BLK_T_DISCARD, 0, 16, false, NULL), VIRTIO_BLK_S_UNSUPP);
	assert_disk_pristine(f);
}

static void test_blk_no_status(void **state)
{
	struct fx *f = *state;
	struct seg segs[] = {
		{ HDR_GPA, 16, false },
		{ DATA_GPA, SECTOR, false },
	};
	uint32_t type = VIRTIO_BLK_T_OUT;

	driver_up(f, true);
	memcpy(f->ram + HDR_GPA, &type, 4);
	memset(f->ram + HDR_GPA + 4, 0, 12);
	memset(f->ram + DATA_GPA, 0xc3, SECTOR);
	/* No writable descriptor: returned untouched. */
	assert_int_equal(submit(f, segs, ARRAY_SIZE(segs)), 0);
	assert_disk_pristine(f);
	/* A header shorter than 16 bytes. */
	segs[0].len = 8;
	segs[1] = (struct seg){ STATUS_GPA, 1, true };
	f->ram[STATUS_GPA] = 0xee;
	assert_int_equal(submit(f, segs, ARRAY_SIZE(segs)), 0);
	assert_int_equal(f->ram[STATUS_GPA], 0xee);
}

static void test_blk_bad_chain_then_good(void **state)
{
	struct fx *f = *state;
	uint16_t before;

	driver_up(f, true);
	/* Descriptor 9 points at itself. */
	vdrv_set_desc(&f->drv, 0, 9, DATA_GPA, 16, VRING_DESC_F_NEXT, 9);
	memcpy(f->ram + HDR_GPA, &(uint32_t){ VIRTIO_BLK_T_IN }, 4);
	memset(f->ram + HDR_GPA + 4, 0, 12);
	make_chain(f, 0,
		   (const struct seg[]){ { HDR_GPA, 16, false },
					 { DATA_GPA, SECTOR, true },
					 { STATUS_GPA, 1, true } },
		   3);
	before = vdrv_used_idx(&f->drv, 0);
	vdrv_offer(&f->drv, 0, 9);
	vdrv_offer(&f->drv, 0, 0);
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	assert_int_equal(vdrv_used_idx(&f->drv, 0), (uint16_t)(before + 2));
	assert_int_equal(used_entry(f, before, 9), 0);
	assert_int_equal(used_entry(f, (uint16_t)(before + 1), 0), SECTOR + 1);
	assert_int_equal(f->ram[STATUS_GPA], VIRTIO_BLK_S_OK);
	assert_int_equal(f->ram[DATA_GPA + 1], disk_byte(1));
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET, 0);
}

static void test_broken_ring(void **state)
{
	struct fx *f = *state;
	uint16_t before;

	driver_up(f, true);
	before = vdrv_used_idx(&f->drv, 0);
	vdrv_offer(&f->drv, 0, QSIZE + 3);
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	assert_int_equal(vdrv_used_idx(&f->drv, 0), before);
	assert_true(vdrv_rd(&f->drv, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET);
	assert_true(vdrv_rd(&f->drv, VIRTIO_MMIO_INTERRUPT_STATUS) & VIRTIO_MMIO_INT_CONFIG);
	/* The device stays quiet until reset. */
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	assert_int_equal(vdrv_used_idx(&f->drv, 0), before);
	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FOK | S_DOK);
	assert_true(vdrv_rd(&f->drv, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET);
	driver_up(f, true);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_STATUS), S_ACK | S_DRV | S_FOK | S_DOK);
	if (f->kind == FX_BLK)
		assert_int_equal(blk_req(f, VIRTIO_BLK_T_FLUSH, 0, 0, false, NULL),
				 VIRTIO_BLK_S_OK);
}

static void test_rng(void **state)
{
	struct fx *f = *state;
	const struct seg one[] = { { DATA_GPA, 64, true } };
	/* More than one request's worth, over two buffers. */
	const struct seg two[] = { { DATA_GPA, 48 * KiB, true },
				   { DATA_GPA + 48 * KiB, 48 * KiB, true } };
	const struct seg ro[] = { { DATA_GPA, 64, false } };
	unsigned int nonzero = 0;

	driver_up(f, true);
	assert_int_equal(submit(f, one, 1), 64);
	for (unsigned int i = 0; i < 64; i++)
		nonzero += f->ram[DATA_GPA + i] != 0;
	assert_true(nonzero > 0);
	assert_int_equal(f->ram[DATA_GPA + 64], 0);

	assert_int_equal(submit(f, two, 2), 64 * KiB);
	assert_int_equal(submit(f, ro, 1), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define BLK(fn)	   cmocka_unit_test_setup_teardown(fn, blk_setup, fx_teardown)
#define BLK_RO(fn) cmocka_unit_test_setup_teardown(fn, blk_ro_setup, fx_teardown)
#define RNG(fn)	   cmocka_unit_test_setup_teardown(fn, rng_setup, fx_teardown)
		BLK(test_blk_in),
		BLK(test_blk_in_scattered),
		BLK(test_blk_out),
		BLK(test_blk_out_header_and_data),
		BLK_RO(test_blk_out_ro),
		BLK(test_blk_flush),
		BLK(test_blk_get_id),
		BLK(test_blk_range),
		BLK(test_blk_unsupported),
		BLK(test_blk_no_status),
		BLK(test_blk_bad_chain_then_good),
		BLK(test_broken_ring),
		RNG(test_broken_ring),
		RNG(test_rng),
#undef BLK
#undef BLK_RO
#undef RNG
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
