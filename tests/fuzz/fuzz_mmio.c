/* libFuzzer target for the virtio-mmio transport and the devices behind it.
 * The input is one flags byte and then a sequence of 12-byte operations
 * (see mkcorpus.py), applied to a virtio-blk over a small memfd and a
 * virtio-rng and a virtio-balloon (its free page reports) sharing one guest RAM: register reads and writes as the bus
 * delivers them, raw writes into guest RAM (so rings change between
 * notifies), queue notifications, and a macro that runs the whole driver
 * initialisation so the fuzzer reaches the request paths quickly. */
#include <fcntl.h>
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/util.h"
#include "virtio/devices.h"
#include "virtio/mmio.h"

#define RAM_SIZE     0x10000
#define DISK_SIZE    (8 * 512)
#define MAX_OPS	     512
#define OP_SIZE	     12
#define RING_SPACING 0x8000 /* the rng's rings sit this far above the blk's */
#define BALLOON_BASE 0xc000 /* and the balloon's, whichever queue is up */
#define NR_DEVS	     3
#define DESC_GPA     0x0000
#define AVAIL_GPA    0x1000
#define USED_GPA     0x2000

/* Operation: kind, size, off (u16 LE), val (u64 LE). kind >> 4 picks the
 * device (0 blk, 1 rng, 2 balloon, modulo 3); kind & 7 picks what to do. */
enum {
	OP_READ = 0,
	OP_WRITE = 1,
	OP_RAM = 2,    /* (size & 7) + 1 bytes of val at gpa off */
	OP_NOTIFY = 3, /* queue val & 0xff; size & 1: through virtio_dev_notify */
	OP_UP = 4,     /* reset and bring up queue off (modulo the device's
			* queues) with 1 << (size % 9) entries */
	OP_READ2 = 5,
	OP_WRITE2 = 6,
	OP_RAM2 = 7,
};

#define F_RO 0x01 /* the disk is read-only */

static int disk_fd = -1;
static char disk_path[64];

static void disk_prepare(void)
{
	uint8_t buf[DISK_SIZE];

	if (disk_fd < 0) {
		disk_fd = memfd_create("gantry-fuzz-disk", MFD_CLOEXEC);
		if (disk_fd < 0)
			abort();
		snprintf(disk_path, sizeof(disk_path), "/proc/self/fd/%d", disk_fd);
	}
	for (unsigned int i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 1);
	if (ftruncate(disk_fd, DISK_SIZE) < 0 || pwrite(disk_fd, buf, sizeof(buf), 0) != DISK_SIZE)
		abort();
}

static uint32_t rd(struct virtio_dev *d, uint64_t off)
{
	uint32_t v;

	virtio_mmio_access(d, off, (uint8_t *)&v, 4, false);
	return v;
}

static void wr(struct virtio_dev *d, uint64_t off, uint32_t v)
{
	virtio_mmio_access(d, off, (uint8_t *)&v, 4, true);
}

static void driver_up(struct virtio_dev *d, uint64_t base, uint32_t q, uint32_t num)
{
	uint32_t lo, hi;

	wr(d, VIRTIO_MMIO_STATUS, 0);
	wr(d, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	wr(d, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	lo = rd(d, VIRTIO_MMIO_DEVICE_FEATURES);
	wr(d, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	hi = rd(d, VIRTIO_MMIO_DEVICE_FEATURES);
	wr(d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	wr(d, VIRTIO_MMIO_DRIVER_FEATURES, lo);
	wr(d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	wr(d, VIRTIO_MMIO_DRIVER_FEATURES, hi);
	wr(d, VIRTIO_MMIO_STATUS,
	   VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK);
	wr(d, VIRTIO_MMIO_QUEUE_SEL, q);
	wr(d, VIRTIO_MMIO_QUEUE_NUM, num);
	wr(d, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)(base + DESC_GPA));
	wr(d, VIRTIO_MMIO_QUEUE_DESC_HIGH, 0);
	wr(d, VIRTIO_MMIO_QUEUE_AVAIL_LOW, (uint32_t)(base + AVAIL_GPA));
	wr(d, VIRTIO_MMIO_QUEUE_AVAIL_HIGH, 0);
	wr(d, VIRTIO_MMIO_QUEUE_USED_LOW, (uint32_t)(base + USED_GPA));
	wr(d, VIRTIO_MMIO_QUEUE_USED_HIGH, 0);
	wr(d, VIRTIO_MMIO_QUEUE_READY, 1);
	wr(d, VIRTIO_MMIO_STATUS,
	   VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK |
		   VIRTIO_CONFIG_S_DRIVER_OK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t bases[NR_DEVS] = { 0, RING_SPACING, BALLOON_BASE };
	struct virtio_dev *devs[NR_DEVS];
	gantry_error_t err = NULL;
	struct guest_mem mem;
	uint8_t flags, *ram;

	if (size < 1)
		return 0;
	flags = data[0];
	data++;
	size--;

	/* Exactly RAM_SIZE bytes on the heap, so ASan sees any access outside. */
	ram = calloc(1, RAM_SIZE);
	if (ram == NULL)
		abort();
	guest_mem_init_buffer(&mem, ram, RAM_SIZE);
	disk_prepare();
	devs[0] = virtio_blk_create(&mem, disk_path, -1, flags & F_RO, &err);
	if (devs[0] == NULL)
		abort(); /* the harness itself is broken */
	devs[1] = virtio_rng_create(&mem);
	devs[2] = virtio_balloon_create(&mem);

	for (unsigned int n = 0; n < MAX_OPS && size >= OP_SIZE;
	     n++, data += OP_SIZE, size -= OP_SIZE) {
		unsigned int which = (data[0] >> 4) % NR_DEVS;
		struct virtio_dev *d = devs[which];
		uint32_t len = 1u << (data[1] & 3);
		uint64_t off = (uint64_t)data[2] | (uint64_t)data[3] << 8;
		uint8_t val[8];

		memcpy(val, data + 4, sizeof(val));
		switch (data[0] & 7) {
		case OP_READ:
		case OP_READ2:
		case OP_WRITE:
		case OP_WRITE2:
			/* The bus only delivers accesses that fit the 4 KiB window. */
			off %= VIRTIO_MMIO_SIZE;
			if (off + len > VIRTIO_MMIO_SIZE)
				off = VIRTIO_MMIO_SIZE - len;
			virtio_mmio_access(d, off, val, len, (data[0] & 7) % 5 == OP_WRITE);
			break;
		case OP_RAM:
		case OP_RAM2:
			memcpy(ram + off, val, MIN((uint64_t)(data[1] & 7) + 1, RAM_SIZE - off));
			break;
		case OP_NOTIFY:
			if (data[1] & 1)
				virtio_dev_notify(d, val[0]);
			else
				wr(d, VIRTIO_MMIO_QUEUE_NOTIFY, val[0]);
			break;
		case OP_UP:
			driver_up(d, bases[which], (uint32_t)(off % d->ops->num_queues),
				  1u << (data[1] % 9));
			break;
		}
	}

	for (unsigned int i = 0; i < NR_DEVS; i++)
		devs[i]->ops->destroy(devs[i]);
	free(ram);
	return 0;
}
