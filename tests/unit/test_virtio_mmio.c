/* Unit tests for virtio/mmio.c and virtio/dev.c with the real devices behind
 * them: a driver written against the register offsets of uapi
 * <linux/virtio_mmio.h> brings up virtio-blk (over a temporary file) and
 * virtio-rng and sends them requests, well-formed and not, through
 * QueueNotify. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <linux/virtio_blk.h>
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_ring.h>

#include "common/util.h"
#include "virtio/devices.h"
#include "virtio/mmio.h"
#include "guest.h"
#include "../virtio_driver.h"

#define RAM_SIZE     (1 * MiB)
#define DESC_GPA     0x1000ULL
#define AVAIL_GPA    0x2000ULL
#define USED_GPA     0x3000ULL
#define HDR_GPA	     0x8000ULL
#define STATUS_GPA   0x8100ULL
#define DATA_GPA     0x10000ULL
#define QSIZE	     16
#define SECTOR	     512
#define DISK_SECTORS 8

#define S_ACK VIRTIO_CONFIG_S_ACKNOWLEDGE
#define S_DRV VIRTIO_CONFIG_S_DRIVER
#define S_FOK VIRTIO_CONFIG_S_FEATURES_OK
#define S_DOK VIRTIO_CONFIG_S_DRIVER_OK

enum fx_kind { FX_BLK, FX_BLK_RO, FX_RNG };

struct fx {
	enum fx_kind kind;
	uint8_t *ram;
	struct guest_mem mem;
	struct virtio_dev *d;
	char path[256];
	struct vdrv drv;
};

/* One descriptor of a request as the test driver describes it. */
struct seg {
	uint64_t gpa;
	uint32_t len;
	bool write;
};

static uint8_t disk_byte(uint64_t off)
{
	return (uint8_t)(off * 7 + (off / SECTOR) * 13 + 1);
}

static void make_disk(struct fx *f)
{
	const char *dir = getenv("TMPDIR");
	uint8_t buf[DISK_SECTORS * SECTOR];
	int fd;

	snprintf(f->path, sizeof(f->path), "%s/gantry-test-blk-XXXXXX", dir ? dir : "/tmp");
	fd = mkstemp(f->path);
	assert_true(fd >= 0);
	for (unsigned int i = 0; i < sizeof(buf); i++)
		buf[i] = disk_byte(i);
	assert_int_equal(write_full(fd, buf, sizeof(buf)), 0);
	close(fd);
}

static int fx_setup(void **state, enum fx_kind kind)
{
	struct fx *f = xzalloc(sizeof(*f));
	gantry_error_t err = NULL;

	f->kind = kind;
	f->ram = xzalloc(RAM_SIZE);
	guest_mem_init_buffer(&f->mem, f->ram, RAM_SIZE);
	if (kind == FX_RNG) {
		f->d = virtio_rng_create(&f->mem);
	} else {
		make_disk(f);
		f->d = virtio_blk_create(&f->mem, f->path, -1, kind == FX_BLK_RO, &err);
		if (f->d == NULL)
			fail_msg("virtio_blk_create: %s", gantry_error_str(err));
	}
	vdrv_init(&f->drv, f->ram, f->d, QSIZE, 1, DESC_GPA, USED_GPA + 0x1000 - DESC_GPA);
	*state = f;
	return 0;
}

static int blk_setup(void **state)
{
	return fx_setup(state, FX_BLK);
}

static int blk_ro_setup(void **state)
{
	return fx_setup(state, FX_BLK_RO);
}

static int rng_setup(void **state)
{
	return fx_setup(state, FX_RNG);
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	f->d->ops->destroy(f->d);
	if (f->path[0])
		unlink(f->path);
	free(f->ram);
	free(f);
	return 0;
}

/* The virtio 1.x initialisation sequence (section 3.1.1), up to ready queues;
 * DRIVER_OK is left to the caller when ok is false. */
static void driver_up(struct fx *f, bool ok)
{
	vdrv_begin(&f->drv);
	assert_int_equal(vdrv_features_ok(&f->drv, vdrv_dev_features(&f->drv)),
			 S_ACK | S_DRV | S_FOK);
	assert_true(vdrv_queues_up(&f->drv));
	if (ok)
		vdrv_driver_ok(&f->drv);
}

static void set_desc(struct fx *f, unsigned int i, const struct seg *s, bool more, uint16_t next)
{
	uint16_t flags = (s->write ? VRING_DESC_F_WRITE : 0) | (more ? VRING_DESC_F_NEXT : 0);

	vdrv_set_desc(&f->drv, 0, i, s->gpa, s->len, flags, next);
}

/* Lay out segs as a chain starting at descriptor first; does not offer it. */
static void make_chain(struct fx *f, unsigned int first, const struct seg *segs, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		set_desc(f, first + i, &segs[i], i + 1 < n, (uint16_t)(first + i + 1));
}

/* Check used ring entry number slot: returns its len after checking its id. */
static uint32_t used_entry(struct fx *f, uint16_t slot, uint16_t id)
{
	uint32_t got, len;

	vdrv_used_entry(&f->drv, 0, slot, &got, &len);
	assert_int_equal(got, id);
	return len;
}

/* Send one request through QueueNotify and return the used length. */
static uint32_t submit(struct fx *f, const struct seg *segs, unsigned int n)
{
	uint16_t before = vdrv_used_idx(&f->drv, 0);

	make_chain(f, 0, segs, n);
	vdrv_offer(&f->drv, 0, 0);
	vdrv_wr(&f->drv, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	assert_int_equal(vdrv_used_idx(&f->drv, 0), (uint16_t)(before + 1));
	return used_entry(f, before, 0);
}

/* A block request: header, optional data buffer, status byte. */
static uint8_t blk_req(struct fx *f, uint32_t type, uint64_t sector, uint32_t data_len,
		       bool data_in, uint32_t *len)
{
	struct seg segs[3] = {
		{ HDR_GPA, 16, false },
	};
	unsigned int n = 1;
	uint32_t used;

	memcpy(f->ram + HDR_GPA, &type, 4);
	memset(f->ram + HDR_GPA + 4, 0, 4);
	memcpy(f->ram + HDR_GPA + 8, &sector, 8);
	if (data_len)
		segs[n++] = (struct seg){ DATA_GPA, data_len, data_in };
	segs[n++] = (struct seg){ STATUS_GPA, 1, true };
	f->ram[STATUS_GPA] = 0xee;
	used = submit(f, segs, n);
	if (len)
		*len = used;
	return f->ram[STATUS_GPA];
}

static void read_disk(struct fx *f, uint8_t *buf)
{
	int fd = open(f->path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, DISK_SECTORS * SECTOR, 0), DISK_SECTORS * SECTOR);
	close(fd);
}

static void assert_disk_pristine(struct fx *f)
{
	uint8_t buf[DISK_SECTORS * SECTOR];
	struct stat st;

	read_disk(f, buf);
	for (unsigned int i = 0; i < sizeof(buf); i++)
		assert_int_equal(buf[i], disk_byte(i));
	assert_int_equal(stat(f->path, &st), 0);
	assert_int_equal(st.st_size, DISK_SECTORS * SECTOR);
}

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
