/* libFuzzer target for virtio-fs: FUSE-shaped chains of any length, cut and
 * ordering, descriptors written raw (any address, length, flags and next),
 * heads offered twice, raw writes into the rings, resets and teardowns with
 * requests under way, config accesses. The request handler checks that
 * every buffer it is given lies inside guest RAM and that the chain had the
 * shape the device promises (a readable fuse_in_header, no more than
 * FS_MAX_PAGES + 4 descriptors), reads all it was given and writes all of
 * its room, so ASan sees any stray. The device's workers run beside this
 * thread; op WAIT waits for them. Work per input is bounded by MAX_OPS.
 *
 * Input: one byte (worker threads: 1 + b % 4), then operations, each one
 * kind byte and its arguments:
 *   0 CHAIN  q n split sel seed:u32 opcode:u8   a chain of n descriptors
 *   1 DESC   q i addr:u32 len:u32 flags next:u8 one raw descriptor
 *   2 OFFER  q head                             offer head, and kick
 *   3 RAM    off:u16 len bytes                  write into the rings
 *   4 UP     feat                               reset, bring the driver up
 *   5 KICK   q                                  QueueNotify q
 *   6 WAIT                                      until the workers are idle
 *   7 RESET                                     status 0, driver left down
 *   8 CFG    off len write value:u32            a config space access
 */
#include <linux/fuse.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_ring.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/settings.h"
#include "common/util.h"
#include "share/server.h"
#include "virtio/devices.h"
#include "virtio/mmio.h"
#include "../virtio_driver.h"
#include "check.h"

#define QN	    128
#define RING_GPA(q) (0x1000 + (q)*0x3000) /* desc, then avail +0x1000, used +0x2000 */
#define RING_END    RING_GPA(2)
#define DATA_GPA    0x8000
#define DATA_SIZE   0x10000
#define RAM_SIZE    (DATA_GPA + DATA_SIZE) /* calloc'd to the byte: ASan sees strays */
#define CHAIN_MAX   (FS_MAX_PAGES + 4)
#define MAX_OPS	    256

static uint8_t *ram;
static atomic_ulong calls;

static bool in_ram(const struct iovec *v)
{
	uintptr_t b = (uintptr_t)v->iov_base, lo = (uintptr_t)ram;

	return v->iov_len > 0 && b >= lo && b - lo <= RAM_SIZE && v->iov_len <= RAM_SIZE - (b - lo);
}

/* The request handler: every check is one the device promises. */
static size_t fuzz_handle(void *opaque, const struct iovec *in, size_t nr_in,
			  const struct iovec *out, size_t nr_out)
{
	struct fuse_in_header ih;
	size_t got = 0, room = 0, sum = 0;
	volatile uint8_t sink = 0;

	(void)opaque;
	atomic_fetch_add(&calls, 1);
	check(nr_in >= 1 && nr_in + nr_out <= CHAIN_MAX);
	for (size_t i = 0; i < nr_in + nr_out; i++) {
		const struct iovec *v = i < nr_in ? &in[i] : &out[i - nr_in];

		check(in_ram(v));
		if (i < nr_in)
			got += v->iov_len;
		else
			room += v->iov_len;
	}
	check(got >= sizeof(ih));
	/* Copy the header out first, as the server does: the guest may change
	 * it meanwhile. Then read everything, and fill all the room. */
	memset(&ih, 0, sizeof(ih));
	for (size_t i = 0, off = 0; i < nr_in && off < sizeof(ih); i++) {
		size_t c = MIN(in[i].iov_len, sizeof(ih) - off);

		memcpy((uint8_t *)&ih + off, in[i].iov_base, c);
		off += c;
	}
	for (size_t i = 0; i < nr_in; i++) {
		for (size_t j = 0; j < in[i].iov_len; j++)
			sum += ((const uint8_t *)in[i].iov_base)[j];
	}
	sink = (uint8_t)sum;
	(void)sink;
	for (size_t i = 0; i < nr_out; i++)
		memset(out[i].iov_base, 0xa5, out[i].iov_len);
	if (room < sizeof(struct fuse_out_header))
		return 0;
	switch (ih.unique % 3) {
	case 0:
		return 0;
	case 1:
		return room;
	default:
		return room + 1 + ih.len; /* more than there is: the device caps it */
	}
}

struct fz {
	struct virtio_dev *d;
	struct vdrv drv;
	uint16_t next_desc[2];
	bool down, touched; /* reset and left down; the rings written since */
	uint16_t used_at_reset[2];
	struct fuzz_in input;
};

static uint8_t take8(struct fz *z)
{
	return fuzz_take8(&z->input);
}

static uint32_t take(struct fz *z, unsigned int bytes)
{
	return fuzz_take(&z->input, bytes);
}

/* A driver that was reset and left down must see no used entry since. */
static void check_quiet(struct fz *z)
{
	if (!z->down || z->touched)
		return;
	virtio_fs_wait_idle(z->d);
	for (unsigned int q = 0; q < 2; q++)
		check(vdrv_used_idx(&z->drv, q) == z->used_at_reset[q]);
}

static void driver_up(struct fz *z, uint8_t feat)
{
	uint64_t f = 1ULL << VIRTIO_F_VERSION_1_BIT;

	check_quiet(z);
	if (feat & 0x80)
		f |= 1ULL << (feat & 0x3f); /* perhaps one we never offered */
	vdrv_negotiate(&z->drv, f);
	memset(z->next_desc, 0, sizeof(z->next_desc));
	vdrv_queues_up(&z->drv);
	vdrv_driver_ok(&z->drv);
	z->down = z->touched = false;
}

static uint32_t lcg(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

/* n descriptors (1 to CHAIN_MAX + 3), the first `split` readable and the
 * rest writable, each of a pseudo-random size inside the data area. sel:
 * bit 0 no kick, bit 1 one writable moved to the front, bit 2 a descriptor
 * that runs past RAM, bit 3 a zero length, bits 4-5 the size scale. The
 * first descriptor starts with a fuse_in_header of the given opcode. */
static void op_chain(struct fz *z)
{
	unsigned int q = take8(z) & 1, n = 1 + take8(z) % (CHAIN_MAX + 3), split = take8(z);
	uint8_t sel = take8(z);
	uint32_t seed = take(z, 4), opcode = take8(z);
	uint32_t scale = 1u << (4 + 3 * ((sel >> 4) & 3)); /* 16 B to 8 KiB */
	uint16_t head = z->next_desc[q] % QN, id = head;

	split = split % (n + 1);
	for (unsigned int i = 0; i < n; i++) {
		uint32_t len = 1 + lcg(&seed) % scale;
		uint64_t gpa = DATA_GPA + lcg(&seed) % (DATA_SIZE - MIN(len, DATA_SIZE - 1));
		bool write = i >= split;
		uint16_t next = (uint16_t)((id + 1) % QN);

		if (i == 0 && (sel & 2) && n > 1)
			write = true;
		if (i == n - 1 && (sel & 4))
			gpa = RAM_SIZE - len / 2; /* runs off the end */
		if (i == n / 2 && (sel & 8))
			len = 0;
		if (i == 0 && len >= sizeof(struct fuse_in_header) && gpa + len <= RAM_SIZE) {
			struct fuse_in_header ih = { .len = len, .opcode = opcode, .unique = seed };

			memcpy(ram + gpa, &ih, sizeof(ih));
		}
		vdrv_set_desc(&z->drv, q, id, gpa, len,
			      (uint16_t)((write ? VRING_DESC_F_WRITE : 0) |
					 (i + 1 < n ? VRING_DESC_F_NEXT : 0)),
			      next);
		id = next;
	}
	z->next_desc[q] = id;
	vdrv_offer(&z->drv, q, head);
	if (!(sel & 1))
		vdrv_wr(&z->drv, VIRTIO_MMIO_QUEUE_NOTIFY, q);
}

static void op_desc(struct fz *z)
{
	unsigned int q = take8(z) & 1, i = take8(z) % QN;
	uint64_t addr = take(z, 4);
	uint32_t len = take(z, 4);
	uint16_t flags = take8(z), next = take8(z);

	vdrv_set_desc(&z->drv, q, i, addr, len, flags, next);
}

static void op_offer(struct fz *z)
{
	unsigned int q = take8(z) & 1;
	uint16_t head = take8(z);

	vdrv_offer(&z->drv, q, head);
	vdrv_wr(&z->drv, VIRTIO_MMIO_QUEUE_NOTIFY, q);
}

static void op_ram(struct fz *z)
{
	uint32_t off = take(z, 2) % RING_END, len = take8(z) % 9;

	for (uint32_t i = 0; i < len && off + i < RING_END; i++)
		ram[off + i] = take8(z);
	z->touched = true;
}

static void op_reset(struct fz *z)
{
	vdrv_wr(&z->drv, VIRTIO_MMIO_STATUS, 0);
	z->down = true;
	z->touched = false;
	for (unsigned int q = 0; q < 2; q++)
		z->used_at_reset[q] = vdrv_used_idx(&z->drv, q);
}

static void op_cfg(struct fz *z)
{
	static const uint32_t lens[] = { 1, 2, 4, 8, 3 };
	uint32_t off = take8(z) % 48, len = lens[take8(z) % ARRAY_SIZE(lens)];
	bool write = take8(z) & 1;
	uint8_t v[8] = { 0 };
	uint32_t val = take(z, 4);

	memcpy(v, &val, sizeof(val));
	virtio_mmio_access(z->d, VIRTIO_MMIO_CONFIG + off, v, len, write);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct virtio_fs_handler handler = { .handle = fuzz_handle };
	struct fz z = { .input = { data, size } };
	struct guest_mem mem;
	gantry_error_t err = NULL;
	char threads[2] = { (char)('1' + take8(&z) % 4), 0 };
	uint32_t id;

	ram = calloc(1, RAM_SIZE);
	if (ram == NULL)
		abort();
	setenv(VIRTIO_FS_THREADS_ENV, threads, 1);
	gantry_settings_load();
	guest_mem_init_buffer(&mem, ram, RAM_SIZE);
	z.d = virtio_fs_create(&mem, "gantry-shares", &handler, &err);
	if (z.d == NULL)
		abort(); /* the harness itself is broken */
	virtio_mmio_access(z.d, VIRTIO_MMIO_DEVICE_ID, (uint8_t *)&id, 4, false);
	if (id != VIRTIO_ID_FS)
		abort();
	atomic_store(&calls, 0);
	vdrv_init(&z.drv, ram, z.d, QN, 2, RING_GPA(0), RING_GPA(1) - RING_GPA(0));
	driver_up(&z, 0);

	for (unsigned int n = 0; n < MAX_OPS && z.input.left > 0; n++) {
		switch (take8(&z) % 9) {
		case 0:
			op_chain(&z);
			break;
		case 1:
			op_desc(&z);
			break;
		case 2:
			op_offer(&z);
			break;
		case 3:
			op_ram(&z);
			break;
		case 4:
			driver_up(&z, take8(&z));
			break;
		case 5:
			vdrv_wr(&z.drv, VIRTIO_MMIO_QUEUE_NOTIFY, take8(&z) % 3);
			break;
		case 6:
			virtio_fs_wait_idle(z.d);
			break;
		case 7:
			op_reset(&z);
			break;
		case 8:
			op_cfg(&z);
			break;
		}
	}
	virtio_fs_wait_idle(z.d);
	check_quiet(&z);
	check(virtio_fs_stats(z.d).requests == atomic_load(&calls));

	z.d->ops->destroy(z.d);
	free(ram);
	ram = NULL;
	return 0;
}
