/* virtio-rng (virtio 1.x, section 5.4): entropy from getrandom(2). */
#include <sys/random.h>

#include "common/util.h"
#include "virtio/devices.h"

#define RNG_REQ_MAX (64 * 1024) /* bytes served per request */

struct virtio_rng {
	struct virtio_dev dev;
};

static uint32_t rng_serve_elem(struct virtio_dev *d, const struct virtq_elem *e)
{
	uint32_t written = 0;

	(void)d;
	for (unsigned int i = e->nr_out; i < e->nr_out + e->nr_in; i++) {
		size_t want = MIN(e->iov[i].iov_len, RNG_REQ_MAX - written);
		ssize_t got = want ? getrandom(e->iov[i].iov_base, want, 0) : 0;

		if (got <= 0)
			break;
		written += (uint32_t)got;
	}
	return written;
}

static void rng_queue_notify(struct virtio_dev *d, unsigned int q)
{
	virtio_dev_serve_queue(d, q, rng_serve_elem);
}

static void rng_destroy(struct virtio_dev *d)
{
	virtio_dev_destroy(d);
	free(d->priv);
}

static const struct virtio_dev_ops rng_ops = {
	.name = "virtio-rng",
	.device_id = 4, /* VIRTIO_ID_RNG */
	.num_queues = 1,
	.queue_notify = rng_queue_notify,
	.destroy = rng_destroy,
};

struct virtio_dev *virtio_rng_create(const struct guest_mem *mem)
{
	struct virtio_rng *r = xzalloc(sizeof(*r));

	virtio_dev_init(&r->dev, &rng_ops, r, mem, VIRTIO_DEV_EVENT_IDX, NULL, 0);
	return &r->dev;
}
