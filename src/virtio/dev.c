/* The device core every virtio device shares (see dev.h): set-up, serving a
 * queue, interrupts and the needs-reset state. */
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "snapshot/state.h"
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

#define VDEV_TAG STATE_TAG('V', 'D', 'E', 'V')
#define VCFG_TAG STATE_TAG('V', 'C', 'F', 'G')
#define VDEX_TAG STATE_TAG('V', 'D', 'E', 'X')
#define VDBL_TAG STATE_TAG('V', 'D', 'B', 'L')

struct vq_saved {
	uint64_t desc, avail, used;
	uint16_t num, last_avail, used_idx, signalled_used;
	uint8_t ready, broken, event_idx, signalled_valid, pad[4];
};

struct dev_saved {
	uint32_t device_id, nr_queues, status, dev_features_sel;
	uint32_t drv_features_sel, queue_sel, config_generation, isr;
	uint64_t driver_features;
	struct vq_saved q[VIRTIO_MAX_QUEUES];
};

int virtio_dev_save(struct virtio_dev *d, struct state_writer *w, gantry_error_t *err)
{
	uint8_t extra[VIRTIO_DEV_EXTRA_MAX], *blob = NULL;
	size_t extra_len = 0, blob_len = 0;
	struct dev_saved s;

	memset(&s, 0, sizeof(s));
	pthread_mutex_lock(&d->lock);
	/* First: a device may give back a request it holds (virtq_unpop). */
	if (d->ops->save && d->ops->save(d, extra, &extra_len, err) < 0) {
		pthread_mutex_unlock(&d->lock);
		return gantry_error_prefix(err, "%s", d->ops->name);
	}
	s.device_id = d->ops->device_id;
	s.nr_queues = d->ops->num_queues;
	s.status = d->status;
	s.dev_features_sel = d->dev_features_sel;
	s.drv_features_sel = d->drv_features_sel;
	s.queue_sel = d->queue_sel;
	s.config_generation = d->config_generation;
	s.isr = atomic_load(&d->isr);
	s.driver_features = d->driver_features;
	for (unsigned int i = 0; i < d->ops->num_queues; i++) {
		const struct virtq *vq = &d->vqs[i];

		s.q[i] = (struct vq_saved){
			.desc = vq->desc_gpa,
			.avail = vq->avail_gpa,
			.used = vq->used_gpa,
			.num = vq->num,
			.last_avail = vq->last_avail,
			.used_idx = vq->used_idx,
			.signalled_used = vq->signalled_used,
			.ready = vq->ready,
			.broken = vq->broken,
			.event_idx = vq->event_idx,
			.signalled_valid = vq->signalled_valid,
		};
	}
	state_put(w, VDEV_TAG, &s, sizeof(s));
	state_put(w, VCFG_TAG, d->config, d->config_len);
	state_put(w, VDEX_TAG, extra, MIN(extra_len, sizeof(extra)));
	if (d->ops->save_blob && d->ops->save_blob(d, &blob, &blob_len, err) < 0) {
		pthread_mutex_unlock(&d->lock);
		return gantry_error_prefix(err, "%s", d->ops->name);
	}
	state_put(w, VDBL_TAG, blob, blob ? blob_len : 0);
	free(blob);
	pthread_mutex_unlock(&d->lock);
	return 0;
}

static int vq_restore(struct virtio_dev *d, unsigned int i, const struct vq_saved *q,
		      gantry_error_t *err)
{
	struct virtq *vq = &d->vqs[i];

	virtq_reset(vq);
	if (q->num > virtio_dev_queue_max(d))
		return gantry_error(err, 0, "queue %u: %u entries, at most %u", i, q->num,
				    virtio_dev_queue_max(d));
	vq->num = q->num;
	vq->desc_gpa = q->desc;
	vq->avail_gpa = q->avail;
	vq->used_gpa = q->used;
	if (!q->ready)
		return 0;
	if (virtq_enable(vq, d->mem, q->event_idx != 0) < 0)
		return gantry_error(err, 0, "queue %u: its rings are not in guest RAM", i);
	vq->last_avail = q->last_avail;
	vq->used_idx = q->used_idx;
	vq->signalled_used = q->signalled_used;
	vq->signalled_valid = q->signalled_valid != 0;
	vq->broken = q->broken != 0;
	return 0;
}

int virtio_dev_restore(struct virtio_dev *d, const struct state_file *sf, unsigned int index,
		       gantry_error_t *err)
{
	const struct state_section *cfg = state_find(sf, VCFG_TAG, index);
	const struct state_section *extra = state_find(sf, VDEX_TAG, index);
	const struct state_section *blob = state_find(sf, VDBL_TAG, index);
	struct dev_saved s;
	int r = 0;

	if (state_get(sf, VDEV_TAG, index, &s, sizeof(s), err) < 0)
		return -1;
	if (s.device_id != d->ops->device_id || s.nr_queues != d->ops->num_queues)
		return gantry_error(err, 0, "device %u is a %u with %u queues, this VM's a %s",
				    index, s.device_id, s.nr_queues, d->ops->name);
	if (cfg == NULL || cfg->len != d->config_len)
		return gantry_error(err, 0, "device %u (%s): its config space is not %u bytes",
				    index, d->ops->name, d->config_len);
	if (extra == NULL || extra->len > VIRTIO_DEV_EXTRA_MAX)
		return gantry_error(err, 0, "device %u (%s): no device section", index, d->ops->name);
	/* A file from before VDBL has none. */
	if (blob && blob->len && !d->ops->restore_blob)
		return gantry_error(err, 0, "device %u (%s): a blob section it never writes", index,
				    d->ops->name);
	if (blob && blob->len && d->ops->restore_blob(d, blob->data, blob->len, err) < 0)
		return gantry_error_prefix(err, "device %u (%s)", index, d->ops->name);
	if (d->ops->restore && d->ops->restore(d, extra->data, extra->len, err) < 0)
		return gantry_error_prefix(err, "device %u (%s)", index, d->ops->name);
	if (!d->ops->restore && extra->len != 0)
		return gantry_error(err, 0, "device %u (%s): a device section it never writes", index,
				    d->ops->name);
	if (s.driver_features & ~d->features)
		return gantry_error(err, 0, "device %u (%s): features %#llx were never offered",
				    index, d->ops->name,
				    (unsigned long long)(s.driver_features & ~d->features));
	pthread_mutex_lock(&d->lock);
	d->status = s.status;
	d->dev_features_sel = s.dev_features_sel;
	d->drv_features_sel = s.drv_features_sel;
	d->queue_sel = s.queue_sel;
	d->config_generation = s.config_generation;
	atomic_store(&d->isr, s.isr);
	d->driver_features = s.driver_features;
	if (d->config_len)
		memcpy(d->config, cfg->data, d->config_len);
	for (unsigned int i = 0; i < d->ops->num_queues && r == 0; i++)
		r = vq_restore(d, i, &s.q[i], err);
	pthread_mutex_unlock(&d->lock);
	if (r < 0)
		return gantry_error_prefix(err, "device %u (%s)", index, d->ops->name);
	return 0;
}

void virtio_dev_resume(struct virtio_dev *d, bool restored)
{
	uint64_t one = 1;
	bool ready = false;

	if (d->ops->resumed) {
		pthread_mutex_lock(&d->lock);
		d->ops->resumed(d, restored);
		pthread_mutex_unlock(&d->lock);
	}
	for (unsigned int q = 0; q < d->ops->num_queues; q++) {
		ready |= d->vqs[q].ready;
		if (d->vqs[q].ready && d->queue_fds[q] >= 0)
			(void)!write(d->queue_fds[q], &one, sizeof(one));
	}
	/* Between a vCPU's state being read and the device stopping, the
	 * device may have used buffers and raised an interrupt the saved
	 * LAPIC never got; with event index it would not raise another until
	 * the driver looks. One interrupt now makes the driver look at every
	 * used ring; with nothing new there it is a spurious one, which a
	 * virtio driver takes as such. */
	if (ready)
		virtio_raise(d, VIRTIO_MMIO_INT_VRING);
}
