/* virtio-balloon (virtio 1.x, section 5.5), for free page reporting only:
 * the guest's kernel hands over ranges of memory it has free (whole
 * blocks of 4 MiB or so, after a workload freed them), and the host drops
 * the pages behind them, so a sandbox's RAM shrinks back when its workload
 * is done with it. The host never asks for memory (num_pages stays 0);
 * should a driver inflate anyway, the pages it names go back too.
 *
 * Queues, as Linux numbers them when only VIRTIO_BALLOON_F_REPORTING is
 * offered: 0 inflate, 1 deflate, 2 reporting. A report is a chain of
 * device-writable buffers, each one free range; the driver waits for the
 * chain back before it uses those pages again, so dropping them here
 * before pushing the chain is safe. */
#include <endian.h>
#include <linux/virtio_balloon.h>
#include <stdatomic.h>
#include <string.h>

#include "common/util.h"
#include "virtio/devices.h"

enum { BALLOON_Q_INFLATE, BALLOON_Q_DEFLATE, BALLOON_Q_REPORTING, BALLOON_QUEUES };

struct virtio_balloon {
	struct virtio_dev dev;
	struct virtio_balloon_config config;
	atomic_uint_fast64_t reported, reports, inflated;
};

/* A free page report: every buffer of the chain is a free range. */
static uint32_t balloon_report(struct virtio_dev *d, const struct virtq_elem *e)
{
	struct virtio_balloon *b = d->priv;
	uint64_t freed = 0;

	for (unsigned int i = 0; i < e->nr_out + e->nr_in; i++)
		freed += guest_mem_discard(d->mem, e->iov[i].iov_base, e->iov[i].iov_len);
	atomic_fetch_add(&b->reported, freed);
	atomic_fetch_add(&b->reports, 1);
	return 0;
}

/* Inflate: an array of 32-bit page frame numbers of 4 KiB pages. */
static uint32_t balloon_inflate(struct virtio_dev *d, const struct virtq_elem *e)
{
	struct virtio_balloon *b = d->priv;
	uint64_t freed = 0;

	for (unsigned int i = 0; i < e->nr_out; i++) {
		const uint8_t *p = e->iov[i].iov_base;

		for (size_t off = 0; off + 4 <= e->iov[i].iov_len; off += 4) {
			uint32_t pfn;
			void *hva;

			memcpy(&pfn, p + off, sizeof(pfn));
			hva = guest_ptr(d->mem, (uint64_t)le32toh(pfn) << VIRTIO_BALLOON_PFN_SHIFT,
					1u << VIRTIO_BALLOON_PFN_SHIFT);
			if (hva)
				freed += guest_mem_discard(d->mem, hva,
							   1u << VIRTIO_BALLOON_PFN_SHIFT);
		}
	}
	atomic_fetch_add(&b->inflated, freed);
	return 0;
}

/* Deflate: the pages are the guest's again; it faults them back in. */
static uint32_t balloon_deflate(struct virtio_dev *d, const struct virtq_elem *e)
{
	(void)d;
	(void)e;
	return 0;
}

static void balloon_queue_notify(struct virtio_dev *d, unsigned int q)
{
	static const virtio_serve_fn serve[BALLOON_QUEUES] = {
		[BALLOON_Q_INFLATE] = balloon_inflate,
		[BALLOON_Q_DEFLATE] = balloon_deflate,
		[BALLOON_Q_REPORTING] = balloon_report,
	};

	if (q < BALLOON_QUEUES)
		virtio_dev_serve_queue(d, q, serve[q]);
}

/* The driver says how many pages it holds in the balloon: noted, and
 * read back as written. */
static void balloon_config_write(struct virtio_dev *d, uint32_t off, const uint8_t *data,
				 uint32_t len)
{
	struct virtio_balloon *b = d->priv;
	uint32_t at = offsetof(struct virtio_balloon_config, actual);

	/* Only `actual` is the driver's to write. */
	if (off >= at && off - at < sizeof(b->config.actual) &&
	    len <= sizeof(b->config.actual) - (off - at))
		memcpy((uint8_t *)&b->config.actual + (off - at), data, len);
}

static void balloon_destroy(struct virtio_dev *d)
{
	virtio_dev_destroy(d);
	free(d->priv);
}

static const struct virtio_dev_ops balloon_ops = {
	.name = "virtio-balloon",
	.device_id = 5, /* VIRTIO_ID_BALLOON */
	.num_queues = BALLOON_QUEUES,
	.config_write = balloon_config_write,
	.queue_notify = balloon_queue_notify,
	.destroy = balloon_destroy,
};

struct virtio_dev *virtio_balloon_create(const struct guest_mem *mem)
{
	struct virtio_balloon *b = xzalloc(sizeof(*b));

	virtio_dev_init(&b->dev, &balloon_ops, b, mem,
			VIRTIO_DEV_EVENT_IDX | (1ULL << VIRTIO_BALLOON_F_REPORTING), &b->config,
			sizeof(b->config));
	return &b->dev;
}

struct virtio_balloon_stats virtio_balloon_stats(struct virtio_dev *d)
{
	struct virtio_balloon *b = d->priv;

	return (struct virtio_balloon_stats){
		.reported_bytes = atomic_load(&b->reported),
		.reports = atomic_load(&b->reports),
		.inflated_bytes = atomic_load(&b->inflated),
	};
}
