/* virtio-blk (virtio 1.x, section 5.2): read, write, flush and get-id on a
 * host file. Every request's sector range is checked against the capacity;
 * a read-only disk answers writes with an I/O error. */
#include <errno.h>
#include <fcntl.h>
#include <linux/virtio_blk.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "virtio/devices.h"

#define BLK_SECTOR   512ULL
#define BLK_HDR_SIZE 16
#define BLK_SEG_MAX  126 /* data segments: a chain of 128 with header and status */
#define BLK_REQ_MAX  (4 * MiB)		   /* largest transfer we accept */
#define BLK_OPT_IO   (512 * 1024)	   /* announced optimal transfer */

struct virtio_blk {
	struct virtio_dev dev;
	int fd;
	bool ro;
	uint64_t capacity; /* sectors */
	char id[VIRTIO_BLK_ID_BYTES];
	struct virtio_blk_config config;
};

struct blk_req_hdr {
	uint32_t type;
	uint32_t reserved;
	uint64_t sector;
};

/* Gather the data buffers of e, skipping skip bytes at the front of the
 * readable part (OUT) or leaving the trailing status byte (IN). */
static unsigned int blk_data_iov(const struct virtq_elem *e, bool in, struct iovec *out,
				 uint64_t *total)
{
	unsigned int first = in ? e->nr_out : 0;
	unsigned int last = in ? e->nr_out + e->nr_in : e->nr_out;
	uint64_t skip = in ? 0 : BLK_HDR_SIZE;
	uint64_t limit = in ? e->in_len - 1 : e->out_len - BLK_HDR_SIZE;
	unsigned int n = 0;

	*total = 0;
	for (unsigned int i = first; i < last && *total < limit; i++) {
		uint8_t *base = e->iov[i].iov_base;
		uint64_t len = e->iov[i].iov_len;

		if (skip >= len) {
			skip -= len;
			continue;
		}
		base += skip;
		len -= skip;
		skip = 0;
		len = MIN(len, limit - *total);
		out[n].iov_base = base;
		out[n].iov_len = len;
		*total += len;
		n++;
	}
	return n;
}

static bool blk_range_ok(const struct virtio_blk *b, uint64_t sector, uint64_t bytes)
{
	uint64_t sectors = bytes / BLK_SECTOR;

	if (bytes % BLK_SECTOR || bytes > BLK_REQ_MAX)
		return false;
	return sector <= b->capacity && sectors <= b->capacity - sector;
}

static int blk_rw(struct virtio_blk *b, const struct iovec *iov, unsigned int n, uint64_t off,
		  bool write)
{
	unsigned int i = 0;
	struct iovec cur[VIRTQ_MAX_CHAIN];

	memcpy(cur, iov, n * sizeof(*iov));
	while (i < n) {
		ssize_t r = write ? pwritev(b->fd, &cur[i], (int)(n - i), (off_t)off)
				  : preadv(b->fd, &cur[i], (int)(n - i), (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		off += (uint64_t)r;
		while (r > 0 && i < n) {
			if ((size_t)r >= cur[i].iov_len) {
				r -= (ssize_t)cur[i].iov_len;
				i++;
			} else {
				cur[i].iov_base = (uint8_t *)cur[i].iov_base + r;
				cur[i].iov_len -= (size_t)r;
				r = 0;
			}
		}
	}
	return 0;
}

/* Serve one request; returns the status byte and sets *written. */
static uint8_t blk_serve(struct virtio_blk *b, const struct virtq_elem *e, uint32_t *written)
{
	struct blk_req_hdr hdr;
	struct iovec iov[VIRTQ_MAX_CHAIN];
	uint64_t total;
	unsigned int n;

	*written = 0;
	if (virtq_elem_read(e, 0, &hdr, sizeof(hdr)) != sizeof(hdr))
		return VIRTIO_BLK_S_IOERR;

	switch (hdr.type) {
	case VIRTIO_BLK_T_IN:
		n = blk_data_iov(e, true, iov, &total);
		if (!blk_range_ok(b, hdr.sector, total))
			return VIRTIO_BLK_S_IOERR;
		if (blk_rw(b, iov, n, hdr.sector * BLK_SECTOR, false) < 0)
			return VIRTIO_BLK_S_IOERR;
		*written = (uint32_t)total;
		return VIRTIO_BLK_S_OK;
	case VIRTIO_BLK_T_OUT:
		if (b->ro)
			return VIRTIO_BLK_S_IOERR;
		n = blk_data_iov(e, false, iov, &total);
		if (!blk_range_ok(b, hdr.sector, total))
			return VIRTIO_BLK_S_IOERR;
		return blk_rw(b, iov, n, hdr.sector * BLK_SECTOR, true) < 0 ? VIRTIO_BLK_S_IOERR
									    : VIRTIO_BLK_S_OK;
	case VIRTIO_BLK_T_FLUSH:
		if (!b->ro && fdatasync(b->fd) < 0)
			return VIRTIO_BLK_S_IOERR;
		return VIRTIO_BLK_S_OK;
	case VIRTIO_BLK_T_GET_ID:
		*written =
			(uint32_t)virtq_elem_write(e, 0, b->id, MIN(sizeof(b->id), e->in_len - 1));
		return VIRTIO_BLK_S_OK;
	default:
		return VIRTIO_BLK_S_UNSUPP;
	}
}

static uint32_t blk_serve_elem(struct virtio_dev *d, const struct virtq_elem *e)
{
	uint32_t written = 0;
	uint8_t status;

	/* Nowhere sane to put a status byte: hand the buffers back. */
	if (e->nr_in == 0 || e->out_len < BLK_HDR_SIZE)
		return 0;
	status = blk_serve(d->priv, e, &written);
	virtq_elem_write(e, e->in_len - 1, &status, 1);
	return written + 1;
}

static void blk_queue_notify(struct virtio_dev *d, unsigned int q)
{
	virtio_dev_serve_queue(d, q, blk_serve_elem);
}

static void blk_destroy(struct virtio_dev *d)
{
	struct virtio_blk *b = d->priv;

	if (b->fd >= 0)
		close(b->fd);
	virtio_dev_destroy(d);
	free(b);
}

/* A saved VM's disk must be the file it had: the guest's page cache,
 * saved with its RAM, holds blocks of it. Its size and modification time
 * say so, as far as a file can (a copy made with `cp -p` keeps both). */
struct blk_saved {
	uint64_t size;
	int64_t mtime_sec, mtime_nsec;
	uint32_t ro, pad;
};

static bool blk_identity(const struct virtio_blk *b, struct blk_saved *s)
{
	struct stat st;

	if (fstat(b->fd, &st) < 0)
		return false;
	*s = (struct blk_saved){
		.size = b->capacity * BLK_SECTOR,
		.mtime_sec = st.st_mtim.tv_sec,
		.mtime_nsec = st.st_mtim.tv_nsec,
		.ro = b->ro,
	};
	return true;
}

static int blk_save(struct virtio_dev *d, void *data, size_t *len, gantry_error_t *err)
{
	struct virtio_blk *b = d->priv;
	struct blk_saved s;

	(void)err;
	/* What the guest wrote is on the host's disk with the save. */
	if (!b->ro)
		(void)fdatasync(b->fd);
	if (!blk_identity(b, &s))
		memset(&s, 0, sizeof(s));
	memcpy(data, &s, sizeof(s));
	*len = sizeof(s);
	return 0;
}

static int blk_restore(struct virtio_dev *d, const void *data, size_t len, gantry_error_t *err)
{
	struct virtio_blk *b = d->priv;
	struct blk_saved saved, now;

	if (len != sizeof(saved))
		return gantry_error(err, 0, "a disk section of %zu bytes", len);
	memcpy(&saved, data, sizeof(saved));
	if (!blk_identity(b, &now))
		return gantry_error_errno(err, "the disk");
	if (saved.ro != now.ro)
		return gantry_error(err, 0, "the disk was %s when saved",
				    saved.ro ? "read-only" : "writable");
	if (saved.size != now.size || saved.mtime_sec != now.mtime_sec ||
	    saved.mtime_nsec != now.mtime_nsec)
		return gantry_error(err, 0, "the disk changed since the VM was saved (its size or "
					    "modification time)");
	return 0;
}

static const struct virtio_dev_ops blk_ops = {
	.name = "virtio-blk",
	.device_id = 2, /* VIRTIO_ID_BLOCK */
	.num_queues = 1,
	.queue_notify = blk_queue_notify,
	.destroy = blk_destroy,
	.save = blk_save,
	.restore = blk_restore,
};

struct virtio_dev *virtio_blk_create(const struct guest_mem *mem, const char *path, int given,
				     bool ro, gantry_error_t *err)
{
	cleanup_close int fd = given > 0 ? given : open(path, (ro ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	struct virtio_blk *b;
	uint64_t features;
	struct stat st;
	off_t size;

	if (fd < 0)
		return gantry_error_errno(err, "disk `%s`", path), NULL;
	if (fstat(fd, &st) < 0)
		return gantry_error_errno(err, "disk `%s`", path), NULL;
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
		return gantry_error(err, 0, "disk `%s` is not a file or block device", path), NULL;
	/* One writer at a time; readers may share a read-only image. */
	if (flock(fd, (ro ? LOCK_SH : LOCK_EX) | LOCK_NB) < 0)
		return gantry_error(err, 0, "disk `%s` is in use by another VM", path), NULL;
	size = lseek(fd, 0, SEEK_END);
	if (size < 0)
		return gantry_error_errno(err, "disk `%s`: size", path), NULL;
	if ((uint64_t)size < BLK_SECTOR)
		return gantry_error(err, 0, "disk `%s` is smaller than one 512-byte sector", path),
		       NULL;

	b = xzalloc(sizeof(*b));
	b->fd = steal_fd(&fd);
	b->ro = ro;
	b->capacity = (uint64_t)size / BLK_SECTOR;
	snprintf(b->id, sizeof(b->id), "gantry%llx",
		 (unsigned long long)((uint64_t)st.st_dev << 32 ^ st.st_ino));
	b->config.capacity = b->capacity;
	b->config.seg_max = BLK_SEG_MAX;
	b->config.size_max = BLK_REQ_MAX;
	b->config.blk_size = BLK_SECTOR;
	/* A host file reads best in large pieces, and Linux reads ahead twice
	 * the optimal size: 1 MiB instead of its default 128 KiB, so a guest
	 * loading a program and its libraries asks a few times, not dozens. */
	b->config.min_io_size = 1;
	b->config.opt_io_size = BLK_OPT_IO / BLK_SECTOR;

	features = (1ULL << VIRTIO_BLK_F_SEG_MAX) | (1ULL << VIRTIO_BLK_F_SIZE_MAX) |
		   (1ULL << VIRTIO_BLK_F_BLK_SIZE) | (1ULL << VIRTIO_BLK_F_FLUSH) |
		   (1ULL << VIRTIO_BLK_F_TOPOLOGY) | VIRTIO_DEV_EVENT_IDX;
	if (ro)
		features |= 1ULL << VIRTIO_BLK_F_RO;
	virtio_dev_init(&b->dev, &blk_ops, b, mem, features, &b->config, sizeof(b->config));
	return &b->dev;
}
