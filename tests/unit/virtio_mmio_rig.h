/* What the virtio-mmio tests share (test_virtio_mmio.c,
 * test_virtio_mmio_requests.c): a driver written against the register
 * offsets of uapi <linux/virtio_mmio.h> over a calloc'd guest RAM, with
 * virtio-blk (over a temporary file of known bytes) or virtio-rng behind
 * it; its bring-up, chains sent through QueueNotify, block requests, and
 * the disk read back. Include after <cmocka.h>. */
#ifndef GANTRY_TESTS_UNIT_VIRTIO_MMIO_RIG_H
#define GANTRY_TESTS_UNIT_VIRTIO_MMIO_RIG_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

#endif
