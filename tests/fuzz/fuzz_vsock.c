/* libFuzzer target for virtio-vsock: hostile guest packet sequences through
 * the TX queue, with RX buffers of any size offered or withheld, raw writes
 * into the rings, driver resets, and a host side that accepts, writes,
 * closes and sends CONNECT lines on real Unix sockets in a private temporary
 * directory. The I/O loop runs on this thread (ioloop_run_once) so each input
 * replays the same way. Work per input is bounded by MAX_OPS.
 *
 * Input: a sequence of operations, each one kind byte and its arguments:
 *   0 TX   sel op sport dport flags buf_alloc:u32 fwd_cnt:u32 len:u24 given lie:u32,
 *          then the first `given` payload bytes; the rest of len is a pattern
 *   1 RX   count size:u16       offer count buffers of size bytes
 *   2 LOOP                      run the I/O loop until it is idle (bounded)
 *   3 HOST what arg             accept / write / shutdown / close / CONNECT
 *   4 RAM  off:u16 len bytes    write into the rings
 *   5 UP                        reset the driver and bring it up again
 *   6 KICK q                    QueueNotify q
 */
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_ring.h>
#include <linux/virtio_vsock.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/util.h"
#include "virtio/devices.h"
#include "virtio/mmio.h"
#include "virtio/vsock.h"
#include "vmm/ioloop.h"
#include "../virtio_driver.h"
#include "check.h"

#define RAM_SIZE     0x60000
#define QN	     32
#define RING_GPA(q)  (0x1000 + (q)*0x3000) /* desc, then avail +0x1000, used +0x2000 */
#define RING_END     RING_GPA(3)
#define TX_HDR_GPA   0x10000
#define TX_DATA_GPA  0x10100
#define TX_DATA_MAX  (VSOCK_MAX_PKT + 256)
#define RXBUF_GPA    0x30000
#define RXBUF_STRIDE 0x1100
#define HDR	     ((uint32_t)sizeof(struct virtio_vsock_hdr))
#define GUEST_CID    3
#define LISTEN_PORT  1234
#define MAX_OPS	     256
#define MAX_HOST_FDS 8

static char dir[64];
static int listen_fd = -1;

struct fz {
	uint8_t *ram;
	struct virtio_dev *d;
	struct ioloop loop;
	struct vdrv drv;
	uint16_t rx_next;
	int fds[MAX_HOST_FDS]; /* accepted streams and vsock.sock clients */
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

static void cleanup(void)
{
	char path[128];

	if (listen_fd >= 0)
		close(listen_fd);
	snprintf(path, sizeof(path), "%s/%u.sock", dir, LISTEN_PORT);
	unlink(path);
	rmdir(dir);
}

/* Once per process: a directory with a listener on LISTEN_PORT. */
static void host_prepare(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *tmp = getenv("TMPDIR");

	if (listen_fd >= 0)
		return;
	snprintf(dir, sizeof(dir), "%s/gantry-fuzz-vsock-XXXXXX",
		 tmp && strlen(tmp) < 32 ? tmp : "/tmp");
	if (mkdtemp(dir) == NULL)
		abort();
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%u.sock", dir, LISTEN_PORT);
	listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(listen_fd, 64) < 0)
		abort();
	atexit(cleanup);
}

/* Reset the driver and bring all three queues up; RX buffers are left to
 * the input. */
static void driver_up(struct fz *z)
{
	vdrv_negotiate(&z->drv, 1ULL << VIRTIO_F_VERSION_1_BIT);
	z->rx_next = 0;
	vdrv_queues_up(&z->drv);
	vdrv_driver_ok(&z->drv);
}

/* Offer count RX buffers of size bytes (0: empty, which the ring refuses),
 * never more than the ring holds. */
static void op_rx(struct fz *z)
{
	unsigned int count = take8(z) % (QN + 1);
	uint32_t size = take(z, 2) % (RXBUF_STRIDE + 1);

	for (unsigned int i = 0; i < count; i++) {
		uint16_t id = z->rx_next++ % QN;

		if ((uint16_t)(z->drv.q[0].avail_idx - vdrv_used_idx(&z->drv, 0)) >= QN)
			break;
		vdrv_set_desc(&z->drv, 0, id, RXBUF_GPA + (uint64_t)id * RXBUF_STRIDE, size,
			      VRING_DESC_F_WRITE, 0);
		vdrv_offer(&z->drv, 0, id);
	}
	vdrv_wr(&z->drv, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
}

static uint32_t pick_port(uint8_t sel, uint32_t raw)
{
	switch (sel & 3) {
	case 0:
		return LISTEN_PORT;
	case 1:
		return 1000 + (sel >> 2) % 4; /* guest ports, or hosts with no listener */
	case 2:
		return VSOCK_EPHEMERAL_BASE + (sel >> 2) % 4; /* host-initiated streams */
	default:
		return raw;
	}
}

/* One TX packet; header and payload each in one or two descriptors. */
static void op_tx(struct fz *z)
{
	uint8_t sel = take8(z), op = take8(z), sp = take8(z), dp = take8(z);
	uint32_t flags = take8(z), buf_alloc = take(z, 4), fwd_cnt = take(z, 4);
	uint32_t len = take(z, 3) % (TX_DATA_MAX + 1), given = take8(z), lie = take(z, 4);
	struct virtio_vsock_hdr h = {
		.src_cid = (sel & 3) == 3 ? lie & 7 : GUEST_CID,
		.dst_cid = (sel & 4) ? lie >> 8 : VSOCK_HOST_CID,
		.src_port = pick_port(sp, lie),
		.dst_port = pick_port(dp, lie),
		.type = (sel & 8) ? (uint16_t)(lie >> 16) : VIRTIO_VSOCK_TYPE_STREAM,
		.op = (op & 0x80) ? op : op % 8,
		.flags = flags,
		.buf_alloc = buf_alloc,
		.fwd_cnt = fwd_cnt,
	};
	uint8_t *data = z->ram + TX_DATA_GPA;
	uint32_t hdr_len = HDR, split, n = 0;
	size_t have;

	switch ((sel >> 4) & 3) {
	case 0:
	case 1:
		h.len = len;
		break;
	case 2:
		h.len = len + (lie % 5) - 2;
		break;
	default:
		h.len = lie;
	}
	if (sel & 0x80)
		hdr_len = 1 + lie % HDR; /* a header cut short */
	have = MIN(MIN(len, given), z->input.left);
	memcpy(data, z->input.in, have);
	z->input.in += have;
	z->input.left -= have;
	for (size_t i = have; i < len; i++)
		data[i] = (uint8_t)i;
	memcpy(z->ram + TX_HDR_GPA, &h, sizeof(h));

	split = (sel & 0x40) ? hdr_len / 2 : 0;
	if (split) {
		vdrv_set_desc(&z->drv, 1, n, TX_HDR_GPA, split, VRING_DESC_F_NEXT,
			      (uint16_t)(n + 1));
		n++;
	}
	vdrv_set_desc(&z->drv, 1, n, TX_HDR_GPA + split, hdr_len - split,
		      len ? VRING_DESC_F_NEXT : 0, (uint16_t)(n + 1));
	n++;
	if (len) {
		uint32_t first = (sel & 0x40) && len > 1 ? len / 3 + 1 : len;

		vdrv_set_desc(&z->drv, 1, n, TX_DATA_GPA, first,
			      first < len ? VRING_DESC_F_NEXT : 0, (uint16_t)(n + 1));
		n++;
		if (first < len)
			vdrv_set_desc(&z->drv, 1, n, TX_DATA_GPA + first, len - first, 0, 0);
	}
	vdrv_offer(&z->drv, 1, 0);
	vdrv_wr(&z->drv, VIRTIO_MMIO_QUEUE_NOTIFY, 1);
}

static void run_loop(struct fz *z)
{
	for (unsigned int i = 0; i < 8 && ioloop_run_once(&z->loop, 0) > 0; i++)
		;
}

static int *free_slot(struct fz *z)
{
	for (unsigned int i = 0; i < MAX_HOST_FDS; i++) {
		if (z->fds[i] < 0)
			return &z->fds[i];
	}
	return NULL;
}

static void op_host(struct fz *z)
{
	uint8_t what = take8(z), arg = take8(z);
	int *fd = &z->fds[arg % MAX_HOST_FDS], *slot;
	char buf[256];

	switch (what % 6) {
	case 0: /* accept a stream the guest opened */
		slot = free_slot(z);
		if (slot)
			*slot = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		break;
	case 1: /* write arg bytes */
		if (*fd >= 0) {
			memset(buf, 'h', sizeof(buf));
			(void)!send(*fd, buf, MIN((size_t)arg + 1, sizeof(buf)),
				    MSG_NOSIGNAL | MSG_DONTWAIT);
		}
		break;
	case 2: /* read what is there */
		if (*fd >= 0)
			(void)!recv(*fd, buf, sizeof(buf), MSG_DONTWAIT);
		break;
	case 3:
		if (*fd >= 0)
			shutdown(*fd, arg & 1 ? SHUT_WR : SHUT_RD);
		break;
	case 4:
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		break;
	case 5: { /* a vsock.sock client and its line */
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		int len;

		slot = free_slot(z);
		if (slot == NULL)
			break;
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dir, VSOCK_LISTEN_NAME);
		*slot = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (*slot < 0 || connect(*slot, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			break;
		if (arg & 0x80) /* raw bytes from the input */
			len = (int)MIN((size_t)(arg & 0x3f), z->input.left);
		else
			len = snprintf(buf, sizeof(buf), "CONNECT %u\n", pick_port(arg, 1001));
		if (arg & 0x80) {
			memcpy(buf, z->input.in, (size_t)len);
			z->input.in += len;
			z->input.left -= (size_t)len;
		}
		(void)!send(*slot, buf, (size_t)len, MSG_NOSIGNAL);
		break;
	}
	}
}

static void op_ram(struct fz *z)
{
	uint32_t off = take(z, 2) % RING_END, len = take8(z) % 9;

	for (uint32_t i = 0; i < len && off + i < RING_END; i++)
		z->ram[off + i] = take8(z);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct guest_mem mem;
	gantry_error_t err = NULL;
	struct fz z = { .input = { data, size } };

	host_prepare();
	for (unsigned int i = 0; i < MAX_HOST_FDS; i++)
		z.fds[i] = -1;
	z.ram = calloc(1, RAM_SIZE); /* exactly RAM_SIZE, so ASan sees strays */
	if (z.ram == NULL || ioloop_init(&z.loop, &err) < 0)
		abort();
	guest_mem_init_buffer(&mem, z.ram, RAM_SIZE);
	z.d = virtio_vsock_create(&mem, &z.loop, GUEST_CID, dir, NULL, &err);
	if (z.d == NULL)
		abort(); /* the harness itself is broken */
	vdrv_init(&z.drv, z.ram, z.d, QN, 3, RING_GPA(0), RING_GPA(1) - RING_GPA(0));
	if (vdrv_rd(&z.drv, VIRTIO_MMIO_DEVICE_ID) != VSOCK_DEVICE_ID)
		abort();
	driver_up(&z);

	for (unsigned int n = 0; n < MAX_OPS && z.input.left > 0; n++) {
		switch (take8(&z) % 7) {
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
			op_host(&z);
			break;
		case 4:
			op_ram(&z);
			break;
		case 5:
			driver_up(&z);
			break;
		case 6:
			vdrv_wr(&z.drv, VIRTIO_MMIO_QUEUE_NOTIFY, take8(&z) % 4);
			break;
		}
	}
	run_loop(&z);

	z.d->ops->destroy(z.d);
	ioloop_destroy(&z.loop);
	for (unsigned int i = 0; i < MAX_HOST_FDS; i++) {
		if (z.fds[i] >= 0)
			close(z.fds[i]);
	}
	/* Streams the guest opened that nobody accepted. */
	for (int fd; (fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0;)
		close(fd);
	free(z.ram);
	return 0;
}
