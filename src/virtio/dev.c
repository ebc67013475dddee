/* The device core every virtio device shares (see dev.h): set-up, serving a
 * queue, interrupts and the needs-reset state. */
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <string.h>
#include <unistd.h>

#include "virtio/dev.h"

void virtio_dev_init(struct virtio_dev *d, const struct virtio_dev_ops *ops, void *priv,
		     const struct guest_mem *mem, uint64_t features, void *config,
		     uint32_t config_len)
{
	memset(d, 0, sizeof(*d));
	pthread_mutex_init(&d->lock, NULL);
	d->ops = ops;
	d->priv = priv;
	d->mem = mem;
	d->features = features | (1ULL << VIRTIO_F_VERSION_1_BIT);
	d->config = config;
	d->config_len = config_len;
	d->irqfd = -1;
	for (unsigned int q = 0; q < VIRTIO_MAX_QUEUES; q++)
		d->queue_fds[q] = -1;
}

void virtio_dev_destroy(struct virtio_dev *d)
{
	if (d->irqfd >= 0)
		close(d->irqfd);
	d->irqfd = -1;
	pthread_mutex_destroy(&d->lock);
}

bool virtio_dev_driver_ok(const struct virtio_dev *d)
{
	return (d->status & VIRTIO_CONFIG_S_DRIVER_OK) &&
	       !(d->status & VIRTIO_CONFIG_S_NEEDS_RESET);
}

static void virtio_raise(struct virtio_dev *d, unsigned int bits)
{
	uint64_t one = 1;

	atomic_fetch_or(&d->isr, bits);
	d->irqs_raised++;
	if (d->irqfd >= 0)
		(void)!write(d->irqfd, &one, sizeof(one));
}

uint16_t virtio_dev_queue_max(const struct virtio_dev *d)
{
	return d->ops->queue_max ? d->ops->queue_max : VIRTQ_MAX_SIZE;
}

void virtio_dev_signal(struct virtio_dev *d, struct virtq *vq)
{
	if (virtq_wants_interrupt(vq))
		virtio_raise(d, VIRTIO_MMIO_INT_VRING);
}

/* The budget ran out with chains perhaps still on the ring: the loop sees
 * the queue's fd ready again on its next round. */
static void virtio_queue_again(struct virtio_dev *d, unsigned int q)
{
	uint64_t one = 1;

	(void)!write(d->queue_fds[q], &one, sizeof(one));
}

void virtio_dev_serve_queue(struct virtio_dev *d, unsigned int q, virtio_serve_fn serve)
{
	struct virtq *vq = &d->vqs[q];
	bool bounded = d->queue_fds[q] >= 0;
	unsigned int served = 0;
	struct virtq_elem e;
	int r;

	while (!(bounded && served == VIRTQ_BUDGET) && (r = virtq_pop(vq, &e)) != VIRTQ_EMPTY) {
		if (r == VIRTQ_BROKEN) {
			virtio_dev_needs_reset(d);
			break;
		}
		virtq_push(vq, e.head, r == VIRTQ_ELEM ? serve(d, &e) : 0);
		served++;
	}
	if (served)
		virtio_dev_signal(d, vq);
	if (bounded && served == VIRTQ_BUDGET)
		virtio_queue_again(d, q);
}

void virtio_dev_needs_reset(struct virtio_dev *d)
{
	if (d->status & VIRTIO_CONFIG_S_NEEDS_RESET)
		return;
	d->status |= VIRTIO_CONFIG_S_NEEDS_RESET;
	if (d->status & VIRTIO_CONFIG_S_DRIVER_OK)
		virtio_raise(d, VIRTIO_MMIO_INT_CONFIG);
}

void virtio_dev_config_changed(struct virtio_dev *d)
{
	d->config_generation++;
	if (virtio_dev_driver_ok(d))
		virtio_raise(d, VIRTIO_MMIO_INT_CONFIG);
}

void virtio_dev_notify(struct virtio_dev *d, unsigned int q)
{
	pthread_mutex_lock(&d->lock);
	if (q < d->ops->num_queues && d->vqs[q].ready && virtio_dev_driver_ok(d))
		d->ops->queue_notify(d, q);
	pthread_mutex_unlock(&d->lock);
}

void virtio_dev_thread_start(struct virtio_dev *d)
{
	if (d->thread_start)
		d->thread_start(d->thread_opaque);
}
