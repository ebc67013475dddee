/* libFuzzer target for virtio-net: hostile TX chains (any header, any cut
 * into descriptors, runts and giants, writable buffers mixed in), RX buffers
 * of any size and shape offered or withheld, raw writes into the rings,
 * driver resets with and without mergeable buffers, config accesses, and a
 * network worker on the other end of a real SOCK_SEQPACKET socketpair that
 * sends frames of any length, reads or leaves ours, shrinks its buffers or
 * hangs up. The I/O loop runs on this thread (ioloop_run_once) so each input
 * replays the same way. Work per input is bounded by MAX_OPS.
 *
 * Input: a sequence of operations, each one kind byte and its arguments:
 *   0 TX     sel flags gso len:u24 given cuts, then `given` frame bytes;
 *            the rest of the frame is a pattern
 *   1 RX     count size:u16 shape    offer count buffers of size bytes
 *   2 LOOP                           run the I/O loop until it is idle
 *   3 WORKER what len:u24 given      send a frame / read / shrink / hang up
 *   4 RAM    off:u16 len bytes       write into the rings
 *   5 UP     feat                    reset the driver and bring it up again
 *   6 KICK   q                       QueueNotify q
 *   7 CFG    off len write value:u32 a config space access
 */
#include <linux/virtio_config.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_net.h>
#include <linux/virtio_ring.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/settings.h"
#include "common/util.h"
#include "net/net.h"
#include "virtio/devices.h"
#include "virtio/mmio.h"
#include "vmm/ioloop.h"
#include "../virtio_driver.h"
#include "check.h"

#define QN	     32
#define RING_GPA(q)  (0x1000 + (q)*0x3000) /* desc, then avail +0x1000, used +0x2000 */
#define RING_END     RING_GPA(2)
#define HDR	     12u
#define TX_GPA	     0x10000
#define TX_MAX	     (HDR + NET_FRAME_MAX + 64) /* a little over the largest frame */
#define RXBUF_GPA    0x22000
#define RXBUF_STRIDE 0x1000
#define RAM_SIZE     (RXBUF_GPA + QN * RXBUF_STRIDE + 0x2000)
#define WORKER_MAX   (NET_FRAME_MAX + 64)
#define MAX_OPS	     256

static uint8_t frame[WORKER_MAX];

struct fz {
	uint8_t *ram;
	struct virtio_dev *d;
	struct ioloop loop;
	int dev_fd, worker_fd;
	struct vdrv drv;
	uint16_t next_desc[2];
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

/* len bytes into p: the first `given` from the input, then a pattern. */
static void take_bytes(struct fz *z, uint8_t *p, size_t len, size_t given)
{
	size_t have = MIN(MIN(len, given), z->input.left);

	memcpy(p, z->input.in, have);
	z->input.in += have;
	z->input.left -= have;
	for (size_t i = have; i < len; i++)
		p[i] = (uint8_t)(i * 7);
}

static void driver_up(struct fz *z, uint8_t feat)
{
	uint64_t f = 1ULL << VIRTIO_F_VERSION_1_BIT;

	if (!(feat & 1))
		f |= 1ULL << VIRTIO_NET_F_MRG_RXBUF;
	if (!(feat & 2))
		f |= (1ULL << VIRTIO_NET_F_MAC) | (1ULL << VIRTIO_NET_F_MTU) |
		     (1ULL << VIRTIO_NET_F_STATUS);
	if (feat & 4)
		f |= 1ULL << VIRTIO_NET_F_GUEST_CSUM;
	if (feat & 8)
		f |= 1ULL << VIRTIO_RING_F_EVENT_IDX;
	if (feat & 0x80)
		f |= 1ULL << (feat & 0x3f); /* perhaps one we never offered */
	vdrv_negotiate(&z->drv, f);
	memset(z->next_desc, 0, sizeof(z->next_desc));
	vdrv_queues_up(&z->drv);
	vdrv_driver_ok(&z->drv);
}

/* Whether the ring has room for another chain (the driver never offers
 * more than it holds; raw RAM writes may still lie about it). */
static bool ring_room(struct fz *z, unsigned int q)
{
	return (uint16_t)(z->drv.q[q].avail_idx - vdrv_used_idx(&z->drv, q)) < QN;
}

/* One TX chain: a 12-byte header (its flags and gso_type from the input)
 * and a frame, cut into up to 8 descriptors at input-chosen points. sel:
 * bit 0 a writable descriptor at the end, bit 1 a header cut short, bits
 * 2-4 the number of cuts, bit 5 no cut at the header's end. */
static void op_tx(struct fz *z)
{
	uint8_t sel = take8(z), flags = take8(z), gso = take8(z);
	uint32_t len = take(z, 3) % (TX_MAX - HDR + 1), given = take8(z), seed = take(z, 4);
	struct virtio_net_hdr_mrg_rxbuf h = { .hdr = { .flags = flags & 0x80 ? flags : 0,
						       .gso_type = gso & 0x80 ? gso : 0 } };
	uint32_t total = HDR + len, cuts[8], start = 0;
	unsigned int want = (sel >> 2) & 7, n = 0;
	uint16_t head, id;

	if (!ring_room(z, 1))
		return;
	memcpy(z->ram + TX_GPA, &h, sizeof(h));
	take_bytes(z, z->ram + TX_GPA + HDR, len, given);
	if (sel & 2)
		total = 1 + seed % HDR; /* only part of a header */
	if (want && !(sel & 0x20) && total > HDR)
		cuts[n++] = HDR;
	while (n < want && total > 1) {
		seed = seed * 1103515245u + 12345u;
		cuts[n++] = 1 + (seed >> 8) % (total - 1);
	}
	/* Ascending, distinct, inside the chain. */
	for (unsigned int i = 1; i < n; i++) {
		for (unsigned int j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
			uint32_t t = cuts[j];

			cuts[j] = cuts[j - 1];
			cuts[j - 1] = t;
		}
	}
	head = id = z->next_desc[1] % QN;
	for (unsigned int i = 0; i <= n; i++) {
		uint32_t end = i < n ? cuts[i] : total;
		bool last = i == n && !(sel & 1);

		if (end <= start)
			continue;
		vdrv_set_desc(&z->drv, 1, id, TX_GPA + start, end - start,
			      last ? 0 : VRING_DESC_F_NEXT, (uint16_t)((id + 1) % QN));
		id = (id + 1) % QN;
		start = end;
	}
	if (sel & 1) {
		vdrv_set_desc(&z->drv, 1, id, TX_GPA, 64, VRING_DESC_F_WRITE, 0);
		id = (id + 1) % QN;
	}
	z->next_desc[1] = id;
	vdrv_offer(&z->drv, 1, head);
	vdrv_wr(&z->drv, VIRTIO_MMIO_QUEUE_NOTIFY, 1);
}

/* Offer count RX buffers of size bytes; shape: bit 0 two descriptors per
 * buffer, bit 1 a readable descriptor first, bit 2 no notify. */
static void op_rx(struct fz *z)
{
	unsigned int count = take8(z) % (QN + 1);
	uint32_t size = take(z, 2) % (RXBUF_STRIDE + 1);
	uint8_t shape = take8(z);

	for (unsigned int i = 0; i < count && ring_room(z, 0); i++) {
		uint16_t id = z->next_desc[0] % QN;
		uint64_t gpa = RXBUF_GPA + (uint64_t)id * RXBUF_STRIDE;

		if (shape & 2) {
			vdrv_set_desc(&z->drv, 0, id, gpa, 16, VRING_DESC_F_NEXT,
				      (uint16_t)((id + 1) % QN));
			z->next_desc[0]++;
		}
		if (shape & 1) {
			uint16_t b = z->next_desc[0] % QN;

			vdrv_set_desc(&z->drv, 0, b, gpa, size / 2,
				      VRING_DESC_F_WRITE | VRING_DESC_F_NEXT,
				      (uint16_t)((b + 1) % QN));
			vdrv_set_desc(&z->drv, 0, b + 1, gpa + size / 2, size - size / 2,
				      VRING_DESC_F_WRITE, 0);
			z->next_desc[0] += 2;
		} else {
			vdrv_set_desc(&z->drv, 0, z->next_desc[0] % QN, gpa, size,
				      VRING_DESC_F_WRITE, 0);
			z->next_desc[0]++;
		}
		vdrv_offer(&z->drv, 0, id);
	}
	if (!(shape & 4))
		vdrv_wr(&z->drv, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
}

static void run_loop(struct fz *z)
{
	for (unsigned int i = 0; i < 8 && ioloop_run_once(&z->loop, 0) > 0; i++)
		;
}

static void op_worker(struct fz *z)
{
	uint8_t what = take8(z);
	uint32_t len = take(z, 3) % (WORKER_MAX + 1), given = take8(z);
	int size = 4096;

	if (z->worker_fd < 0)
		return;
	switch (what % 5) {
	case 0: /* one frame, perhaps a runt or too big */
	case 1:
		take_bytes(z, frame, len, given);
		(void)!send(z->worker_fd, frame, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		break;
	case 2: /* read up to what+1 of the guest's frames */
		for (unsigned int i = 0; i <= what / 8; i++) {
			if (recv(z->worker_fd, frame, sizeof(frame), MSG_DONTWAIT) < 0)
				break;
		}
		break;
	case 3: /* small buffers: the device sees EAGAIN soon */
		setsockopt(z->dev_fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
		break;
	case 4: /* the worker dies */
		close(z->worker_fd);
		z->worker_fd = -1;
		break;
	}
}

static void op_ram(struct fz *z)
{
	uint32_t off = take(z, 2) % RING_END, len = take8(z) % 9;

	for (uint32_t i = 0; i < len && off + i < RING_END; i++)
		z->ram[off + i] = take8(z);
}

static void op_cfg(struct fz *z)
{
	static const uint32_t lens[] = { 1, 2, 4, 8, 3 };
	uint32_t off = take8(z) % 24, len = lens[take8(z) % ARRAY_SIZE(lens)];
	bool write = take8(z) & 1;
	uint8_t v[8] = { 0 };
	uint32_t val = take(z, 4);

	memcpy(v, &val, sizeof(val));
	virtio_mmio_access(z->d, VIRTIO_MMIO_CONFIG + off, v, len, write);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t mac[6] = NET_GUEST_MAC;
	struct guest_mem mem;
	gantry_error_t err = NULL;
	struct fz z = { .input = { data, size } };
	int sv[2];
	uint32_t id;

	setenv("GANTRY_LOG", "error", 0); /* a link down per input is no news */
	z.ram = calloc(1, RAM_SIZE); /* exactly RAM_SIZE, so ASan sees strays */
	if (z.ram == NULL || ioloop_init(&z.loop, &err) < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	gantry_settings_load();
	z.dev_fd = sv[0];
	z.worker_fd = sv[1];
	guest_mem_init_buffer(&mem, z.ram, RAM_SIZE);
	z.d = virtio_net_create(&mem, &z.loop, z.dev_fd, mac, &err);
	if (z.d == NULL)
		abort(); /* the harness itself is broken */
	virtio_mmio_access(z.d, VIRTIO_MMIO_DEVICE_ID, (uint8_t *)&id, 4, false);
	if (id != VIRTIO_ID_NET)
		abort();
	vdrv_init(&z.drv, z.ram, z.d, QN, 2, RING_GPA(0), RING_GPA(1) - RING_GPA(0));
	driver_up(&z, 0);

	for (unsigned int n = 0; n < MAX_OPS && z.input.left > 0; n++) {
		switch (take8(&z) % 8) {
		case 0:
			op_tx(&z);
			break;
		case 1:
			op_rx(&z);
			break;
		case 2:
			run_loop(&z);
			break;
		case 3:
			op_worker(&z);
			break;
		case 4:
			op_ram(&z);
			break;
		case 5:
			driver_up(&z, take8(&z));
			break;
		case 6:
			vdrv_wr(&z.drv, VIRTIO_MMIO_QUEUE_NOTIFY, take8(&z) % 3);
			break;
		case 7:
			op_cfg(&z);
			break;
		}
	}
	run_loop(&z);

	z.d->ops->destroy(z.d);
	ioloop_destroy(&z.loop);
	close(z.dev_fd);
	if (z.worker_fd >= 0)
		close(z.worker_fd);
	free(z.ram);
	return 0;
}
