/* Unit tests for virtio/mmio.c and virtio/dev.c with the real devices behind
 * them, first part: the transport. IDs, feature negotiation, the queue
 * registers and selectors past the last queue, interrupts, notifies before
 * DRIVER_OK, a reset, register widths and the config space, on virtio-blk
 * and virtio-rng. The driver, the devices and the fixture are in
 * virtio_mmio_rig.h; requests, well-formed and not, are in
 * test_virtio_mmio_requests.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

/* The devices' test rig; not every helper of it is used here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "virtio_mmio_rig.h"
#pragma GCC diagnostic pop

static void test_ids(void **state)
{
	struct fx *f = *state;

	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_MAGIC_VALUE), 0x74726976);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_VERSION), 2);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_DEVICE_ID), f->kind == FX_RNG ? 4 : 2);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_VENDOR_ID), GANTRY_VIRTIO_VENDOR);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_STATUS), 0);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_NUM_MAX), VIRTQ_MAX_SIZE);
	/* Read-only registers ignore writes. */
	vdrv_wr(&f->drv, VIRTIO_MMIO_MAGIC_VALUE, 0);
	vdrv_wr(&f->drv, VIRTIO_MMIO_DEVICE_ID, 99);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_MAGIC_VALUE), 0x74726976);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_DEVICE_ID), f->kind == FX_RNG ? 4 : 2);
}

static void test_blk_features(void **state)
{
	struct fx *f = *state;
	uint64_t feat = vdrv_dev_features(&f->drv);

	assert_true(feat & (1ULL << VIRTIO_F_VERSION_1_BIT));
	assert_true(feat & (1ULL << VIRTIO_BLK_F_FLUSH));
	assert_true(feat & (1ULL << VIRTIO_BLK_F_SEG_MAX));
	assert_true(feat & (1ULL << VIRTIO_BLK_F_BLK_SIZE));
	assert_true(feat & (1ULL << VIRTIO_BLK_F_TOPOLOGY));
	assert_false(feat & (1ULL << VIRTIO_BLK_F_RO));
	assert_false(feat & (1ULL << VIRTIO_RING_F_INDIRECT_DESC));
	assert_true(feat & (1ULL << VIRTIO_RING_F_EVENT_IDX));
	vdrv_wr(&f->drv, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 2);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_DEVICE_FEATURES), 0);
	vdrv_wr(&f->drv, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0xffffffff);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_DEVICE_FEATURES), 0);

	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, S_ACK | S_DRV);
	/* No VERSION_1: a legacy driver, which we do not serve. */
	vdrv_drv_features(&f->drv, feat & 0xffffffffULL);
	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FOK);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_STATUS), S_ACK | S_DRV);
	/* Bits we did not offer, in either half. */
	vdrv_drv_features(&f->drv, feat | (1ULL << VIRTIO_BLK_F_MQ));
	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FOK);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_STATUS), S_ACK | S_DRV);
	vdrv_drv_features(&f->drv, feat | (1ULL << VIRTIO_F_RING_PACKED));
	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FOK);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_STATUS), S_ACK | S_DRV);
	/* Out-of-range selector writes go nowhere. */
	vdrv_wr(&f->drv, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 2);
	vdrv_wr(&f->drv, VIRTIO_MMIO_DRIVER_FEATURES, 0xffffffff);
	/* A subset with VERSION_1 is accepted. */
	vdrv_drv_features(&f->drv, (1ULL << VIRTIO_F_VERSION_1_BIT) | (1ULL << VIRTIO_BLK_F_FLUSH));
	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FOK);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_STATUS), S_ACK | S_DRV | S_FOK);
	assert_int_equal(f->d->driver_features,
			 (1ULL << VIRTIO_F_VERSION_1_BIT) | (1ULL << VIRTIO_BLK_F_FLUSH));
	/* Once FEATURES_OK is set the choice is fixed. */
	vdrv_drv_features(&f->drv, feat | (1ULL << VIRTIO_BLK_F_MQ));
	assert_int_equal(f->d->driver_features,
			 (1ULL << VIRTIO_F_VERSION_1_BIT) | (1ULL << VIRTIO_BLK_F_FLUSH));
	/* NEEDS_RESET is the device's to set. */
	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FOK | VIRTIO_CONFIG_S_NEEDS_RESET);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_STATUS), S_ACK | S_DRV | S_FOK);
	/* Only a reset clears bits: FEATURES_OK cannot be dropped to choose
	 * again, under a device that runs. */
	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | VIRTIO_CONFIG_S_DRIVER_OK);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_STATUS),
			 S_ACK | S_DRV | S_FOK | VIRTIO_CONFIG_S_DRIVER_OK);
	vdrv_drv_features(&f->drv, 1ULL << VIRTIO_F_VERSION_1_BIT);
	assert_int_equal(f->d->driver_features,
			 (1ULL << VIRTIO_F_VERSION_1_BIT) | (1ULL << VIRTIO_BLK_F_FLUSH));
	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, S_ACK);
	assert_true(vdrv_rd(&f->drv, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_DRIVER_OK);
	/* No DRIVER_OK without FEATURES_OK: the features would stay open. */
	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, 0);
	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | VIRTIO_CONFIG_S_DRIVER_OK);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_STATUS), S_ACK | S_DRV);
	/* Nor with a FEATURES_OK refused in the same write. */
	vdrv_drv_features(&f->drv, 1ULL << VIRTIO_BLK_F_FLUSH);
	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FOK | VIRTIO_CONFIG_S_DRIVER_OK);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_STATUS), S_ACK | S_DRV);
}

static void test_blk_ro_features(void **state)
{
	struct fx *f = *state;

	assert_true(vdrv_dev_features(&f->drv) & (1ULL << VIRTIO_BLK_F_RO));
}

static void test_rng_features(void **state)
{
	struct fx *f = *state;

	assert_int_equal(vdrv_dev_features(&f->drv),
			 (1ULL << VIRTIO_F_VERSION_1_BIT) | (1ULL << VIRTIO_RING_F_EVENT_IDX));
	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, S_ACK | S_DRV);
	vdrv_drv_features(&f->drv, 1ULL << VIRTIO_F_VERSION_1_BIT);
	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FOK);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_STATUS), S_ACK | S_DRV | S_FOK);
}

static void test_queue_regs(void **state)
{
	struct fx *f = *state;

	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, S_ACK | S_DRV);
	vdrv_queue_set(&f->drv, 0, QSIZE, 0x12345670ULL, 0x2000, 0x3000);
	/* desc lies outside the 1 MiB of RAM: refused, and still writable. */
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_READY), 0);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_DESC_LOW), 0x12345670);
	vdrv_queue_set(&f->drv, 0, QSIZE, 0x100000000ULL + DESC_GPA, AVAIL_GPA, USED_GPA);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_READY), 0);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_DESC_HIGH), 1);
	vdrv_queue_set(&f->drv, 0, QSIZE, DESC_GPA, AVAIL_GPA, RAM_SIZE - 8);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_READY), 0);
	vdrv_queue_set(&f->drv, 0, QSIZE, DESC_GPA, RAM_SIZE, USED_GPA);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_READY), 0);
	/* Bad sizes. */
	vdrv_queue_set(&f->drv, 0, 0, DESC_GPA, AVAIL_GPA, USED_GPA);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_READY), 0);
	vdrv_queue_set(&f->drv, 0, 12, DESC_GPA, AVAIL_GPA, USED_GPA);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_READY), 0);
	vdrv_queue_set(&f->drv, 0, 2 * VIRTQ_MAX_SIZE, DESC_GPA, AVAIL_GPA, USED_GPA);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_READY), 0);
	vdrv_queue_set(&f->drv, 0, 0x10010, DESC_GPA, AVAIL_GPA, USED_GPA);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_READY), 0);
	/* Misaligned desc. */
	vdrv_queue_set(&f->drv, 0, QSIZE, DESC_GPA + 8, AVAIL_GPA, USED_GPA);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_READY), 0);

	vdrv_queue_set(&f->drv, 0, QSIZE, DESC_GPA, AVAIL_GPA, USED_GPA);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_READY), 1);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_DESC_LOW), DESC_GPA);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_DESC_HIGH), 0);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_AVAIL_LOW), AVAIL_GPA);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_USED_LOW), USED_GPA);
	assert_int_equal(f->d->vqs[0].num, QSIZE);
	/* A live queue's layout cannot change under the device. */
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_DESC_LOW, 0x5000);
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NUM, 4);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_DESC_LOW), DESC_GPA);
	assert_int_equal(f->d->vqs[0].num, QSIZE);
	/* Until the driver takes it down. */
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_READY, 0);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_READY), 0);
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_DESC_LOW, 0x5000);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_DESC_LOW), 0x5000);
}

static void test_queue_sel_beyond(void **state)
{
	struct fx *f = *state;
	uint32_t sels[] = { 1, VIRTIO_MAX_QUEUES, VIRTIO_MAX_QUEUES + 1, 0xffffffff };

	driver_up(f, true);
	for (unsigned int i = 0; i < ARRAY_SIZE(sels); i++) {
		vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_SEL, sels[i]);
		assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_NUM_MAX), 0);
		vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NUM, QSIZE);
		vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_DESC_LOW, 0x5000);
		vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_AVAIL_LOW, 0x6000);
		vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_USED_LOW, 0x7000);
		vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_READY, 1);
		assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_READY), 0);
		assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_DESC_LOW), 0);
		assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_USED_HIGH), 0);
		vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NOTIFY, sels[i]);
	}
	for (unsigned int q = 1; q < VIRTIO_MAX_QUEUES; q++)
		assert_false(f->d->vqs[q].ready);
	/* Queue 0 is untouched and still works. */
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_SEL, 0);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_READY), 1);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_DESC_LOW), DESC_GPA);
	if (f->kind == FX_BLK) {
		assert_int_equal(blk_req(f, VIRTIO_BLK_T_FLUSH, 0, 0, false, NULL),
				 VIRTIO_BLK_S_OK);
	}
}

static void test_interrupt(void **state)
{
	struct fx *f = *state;
	const struct seg one[] = { { DATA_GPA, 64, true } };
	unsigned long raised;

	driver_up(f, true);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	submit(f, one, 1);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_VRING);
	assert_int_equal(f->d->irqs_raised, 1);
	vdrv_wr(&f->drv, VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_CONFIG);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_VRING);
	vdrv_wr(&f->drv, VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_VRING);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	/* InterruptStatus is read-only. */
	vdrv_wr(&f->drv, VIRTIO_MMIO_INTERRUPT_STATUS, 3);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_INTERRUPT_STATUS), 0);

	/* The driver polls: no interrupt. */
	wr16(f->ram + AVAIL_GPA, VRING_AVAIL_F_NO_INTERRUPT);
	raised = f->d->irqs_raised;
	submit(f, one, 1);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	assert_int_equal(f->d->irqs_raised, raised);
}

static void test_notify_before_driver_ok(void **state)
{
	struct fx *f = *state;
	const struct seg one[] = { { DATA_GPA, 64, true } };

	driver_up(f, false);
	make_chain(f, 0, one, 1);
	vdrv_offer(&f->drv, 0, 0);
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	assert_int_equal(vdrv_used_idx(&f->drv, 0), 0);
	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FOK | S_DOK);
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	assert_int_equal(vdrv_used_idx(&f->drv, 0), 1);
	/* The ioeventfd path takes the same checks. */
	vdrv_offer(&f->drv, 0, 0);
	virtio_dev_notify(f->d, 0);
	virtio_dev_notify(f->d, 5);
	assert_int_equal(vdrv_used_idx(&f->drv, 0), 2);
}

/* One request the device answers in full: an rng read or a blk flush. */
static uint32_t poke(struct fx *f)
{
	const struct seg one[] = { { DATA_GPA, 64, true } };
	uint32_t len;

	if (f->kind == FX_RNG)
		return submit(f, one, 1);
	assert_int_equal(blk_req(f, VIRTIO_BLK_T_FLUSH, 0, 0, false, &len), VIRTIO_BLK_S_OK);
	return len;
}

static void test_reset(void **state)
{
	struct fx *f = *state;
	const struct seg one[] = { { DATA_GPA, 64, true } };

	driver_up(f, true);
	poke(f);
	assert_int_not_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	vdrv_wr(&f->drv, VIRTIO_MMIO_STATUS, 0);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_STATUS), 0);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_READY), 0);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_DESC_LOW), 0);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_AVAIL_LOW), 0);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_USED_LOW), 0);
	assert_int_equal(f->d->driver_features, 0);
	for (unsigned int q = 0; q < VIRTIO_MAX_QUEUES; q++)
		assert_false(f->d->vqs[q].ready);
	/* Buffers offered now go unanswered. */
	make_chain(f, 0, one, 1);
	vdrv_offer(&f->drv, 0, 0);
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	assert_int_equal(vdrv_used_idx(&f->drv, 0), 1);
	/* A fresh bring-up starts the rings over. */
	driver_up(f, true);
	assert_int_equal(poke(f), f->kind == FX_RNG ? 64 : 1);
}

static void test_register_width(void **state)
{
	struct fx *f = *state;
	uint8_t buf[8];
	uint64_t v8 = 0x20;

	driver_up(f, true);
	/* Reads that are not 4 bytes wide and aligned give 0. */
	for (uint32_t len = 1; len <= 8; len *= 2) {
		if (len == 4)
			continue;
		memset(buf, 0xaa, sizeof(buf));
		virtio_mmio_access(f->d, VIRTIO_MMIO_MAGIC_VALUE, buf, len, false);
		for (unsigned int i = 0; i < len; i++)
			assert_int_equal(buf[i], 0);
	}
	for (uint64_t off = 1; off < 4; off++) {
		memset(buf, 0xaa, sizeof(buf));
		virtio_mmio_access(f->d, VIRTIO_MMIO_MAGIC_VALUE + off, buf, 4, false);
		assert_int_equal(rd32(buf), 0);
	}
	/* Such writes are dropped. */
	virtio_mmio_access(f->d, VIRTIO_MMIO_STATUS, (uint8_t *)&(uint16_t){ 0 }, 2, true);
	virtio_mmio_access(f->d, VIRTIO_MMIO_STATUS + 1, (uint8_t *)&(uint32_t){ 0 }, 4, true);
	virtio_mmio_access(f->d, VIRTIO_MMIO_STATUS, (uint8_t *)&(uint64_t){ 0 }, 8, true);
	virtio_mmio_access(f->d, VIRTIO_MMIO_QUEUE_SEL, (uint8_t *)&v8, 1, true);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_STATUS), S_ACK | S_DRV | S_FOK | S_DOK);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_NUM_MAX), VIRTQ_MAX_SIZE);
	/* Unknown and legacy-only registers read 0 and ignore writes. */
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_PFN), 0);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_SHM_SEL), 0);
	assert_int_equal(vdrv_rd(&f->drv, 0xf8), 0);
	vdrv_wr(&f->drv, VIRTIO_MMIO_GUEST_PAGE_SIZE, 4096);
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_PFN, 1);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_QUEUE_READY), 1);
	assert_int_equal(vdrv_rd(&f->drv, VIRTIO_MMIO_CONFIG_GENERATION), 0);
}

static uint64_t cfg_read(struct fx *f, uint32_t off, uint32_t len)
{
	uint64_t v = 0x5555555555555555ULL;

	virtio_mmio_access(f->d, VIRTIO_MMIO_CONFIG + off, (uint8_t *)&v, len, false);
	return len == 8 ? v : v & ((1ULL << (8 * len)) - 1);
}

static void test_blk_config(void **state)
{
	struct fx *f = *state;
	uint32_t end = sizeof(struct virtio_blk_config);

	assert_int_equal(cfg_read(f, offsetof(struct virtio_blk_config, capacity), 8),
			 DISK_SECTORS);
	assert_int_equal(cfg_read(f, offsetof(struct virtio_blk_config, capacity), 4),
			 DISK_SECTORS);
	assert_int_equal(cfg_read(f, offsetof(struct virtio_blk_config, capacity) + 4, 4), 0);
	assert_int_equal(cfg_read(f, offsetof(struct virtio_blk_config, capacity), 1),
			 DISK_SECTORS);
	assert_int_equal(cfg_read(f, offsetof(struct virtio_blk_config, blk_size), 4), SECTOR);
	assert_int_equal(cfg_read(f, offsetof(struct virtio_blk_config, seg_max), 4),
			 126);
	/* 512 KiB in sectors: Linux then reads ahead 1 MiB. */
	assert_int_equal(cfg_read(f, offsetof(struct virtio_blk_config, min_io_size), 2), 1);
	assert_int_equal(cfg_read(f, offsetof(struct virtio_blk_config, opt_io_size), 4), 1024);
	/* The last byte is readable; anything reaching past the end reads 0. */
	assert_int_equal(cfg_read(f, end - 1, 1), ((uint8_t *)f->d->config)[end - 1]);
	assert_int_equal(cfg_read(f, end, 1), 0);
	assert_int_equal(cfg_read(f, end - 2, 4), 0);
	assert_int_equal(cfg_read(f, end - 4, 8), 0);
	assert_int_equal(cfg_read(f, VIRTIO_MMIO_SIZE - VIRTIO_MMIO_CONFIG - 8, 8), 0);
	/* Widths other than 1, 2, 4, 8. */
	assert_int_equal(cfg_read(f, 0, 3), 0);
	/* Config writes are ignored: blk has no writable fields. */
	virtio_mmio_access(f->d, VIRTIO_MMIO_CONFIG, (uint8_t *)&(uint64_t){ 99 }, 8, true);
	assert_int_equal(cfg_read(f, 0, 8), DISK_SECTORS);
}

static void test_rng_config(void **state)
{
	struct fx *f = *state;

	assert_int_equal(cfg_read(f, 0, 1), 0);
	assert_int_equal(cfg_read(f, 0, 8), 0);
	assert_int_equal(cfg_read(f, 0x100, 4), 0);
	virtio_mmio_access(f->d, VIRTIO_MMIO_CONFIG, (uint8_t *)&(uint32_t){ 1 }, 4, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define BLK(fn)	   cmocka_unit_test_setup_teardown(fn, blk_setup, fx_teardown)
#define BLK_RO(fn) cmocka_unit_test_setup_teardown(fn, blk_ro_setup, fx_teardown)
#define RNG(fn)	   cmocka_unit_test_setup_teardown(fn, rng_setup, fx_teardown)
		BLK(test_ids),
		RNG(test_ids),
		BLK(test_blk_features),
		BLK_RO(test_blk_ro_features),
		RNG(test_rng_features),
		BLK(test_queue_regs),
		RNG(test_queue_regs),
		BLK(test_queue_sel_beyond),
		RNG(test_queue_sel_beyond),
		RNG(test_interrupt),
		BLK(test_notify_before_driver_ok),
		RNG(test_notify_before_driver_ok),
		RNG(test_reset),
		BLK(test_reset),
		BLK(test_register_width),
		BLK(test_blk_config),
		RNG(test_rng_config),
#undef BLK
#undef BLK_RO
#undef RNG
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
