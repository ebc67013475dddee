/* virtio-rng (virtio 1.x, section 5.4): entropy from getrandom(2). */
#include <sys/random.h>

#include "common/util.h"
#include "virtio/devices.h"

#define RNG_REQ_MAX (64 * 1024) /* bytes served per request */

struct virtio_rng {
	struct virtio_dev dev;
};

static void rng_queue_notify(struct virtio_dev *d, unsigned int q)
{
	struct virtq *vq = &d->vqs[q];
	struct virtq_elem e;
	bool pushed = false;
	int r;

	while ((r = virtq_pop(vq, &e)) != VIRTQ_EMPTY) {
		uint32_t written = 0;

		if (r == VIRTQ_BROKEN) {
			virtio_dev_needs_reset(d);
			break;
		}
		for (unsigned int i = e.nr_out; r == VIRTQ_ELEM && i < e.nr_out + e.nr_in; i++) {
			size_t want = MIN(e.iov[i].iov_len, RNG_REQ_MAX - written);
			ssize_t got = want ? getrandom(e.iov[i].iov_base, want, 0) : 0;

			if (got <= 0)
				break;
			written += (uint32_t)got;
		}
		virtq_push(vq, e.head, written);
		pushed = true;
	}
	if (pushed)
		virtio_dev_signal(d, vq);
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

	virtio_dev_init(&r->dev, &rng_ops, r, mem, 0, NULL, 0);
	return &r->dev;
}
