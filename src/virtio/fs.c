/* virtio-fs (virtio 1.x, section 5.11): FUSE requests from the guest's
 * virtiofs driver, handed whole to a request handler (the share server).
 *
 * Queue 0 ("hiprio") carries FORGETs, which get no reply; queue 1 carries
 * every other request. Linux 6.1 uses one request queue, whatever the
 * config offers, so that is what we offer.
 *
 * Threading: a FUSE operation may take long (an fsync, a large read), so
 * requests are served on a pool of worker threads, never on the one I/O
 * thread that every device shares. The request queue's kicks go to the
 * pool itself: one worker at a time, the leader, blocks reading the
 * queue's ioeventfd; woken, it pops the chains under the device lock,
 * sends malformed ones straight back, queues the rest on a bounded job
 * list, wakes a worker for each but the first and serves that itself, so
 * a request reaches its handler with no hand-over between threads. Before
 * one that may wait on the host's storage (READ, WRITE, FSYNC, ...) it
 * wakes another worker to lead meanwhile; a metadata request, which the
 * share server serialises anyway, it serves at once. The hiprio queue
 * (FORGETs) and a notify that comes as an MMIO exit are popped where they
 * arrive, onto the same list.
 * Handlers run without the device lock, which is taken again to push the
 * used element and interrupt the guest: replies may complete out of
 * order, as FUSE allows. A reset drops queued jobs, waits for the
 * handlers under way to return and joins the pool (the leader woken by a
 * write to its eventfd), so the device touches none of the guest's
 * buffers once the reset is done; the pool starts again when the driver
 * is ready (DRIVER_OK notifies every ready queue) or at its next kick. */
#include <endian.h>
#include <errno.h>
#include <linux/fuse.h>
#include <linux/virtio_fs.h>
#include <linux/virtio_ids.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/settings.h"
#include "common/util.h"
#include "proto/virtiofs.h"
#include "virtio/devices.h"

#define FS_HIPRIO_Q   0
#define FS_REQUEST_Q  1
#define FS_NUM_QUEUES 2
/* QueueNumMax: Linux caps max_pages at the ring's size less four, and a
 * ring of 1024 holds three full-size requests at once. */
#define FS_QUEUE_SIZE 1024
#define FS_IN_HDR     40 /* struct fuse_in_header */
#define FS_OUT_HDR    16 /* struct fuse_out_header */
/* Linux sends a WRITE as in header, arguments and data pages, then out
 * header and fuse_write_out: max_pages + 4 descriptors, its longest chain
 * (virtio_fs.c's FUSE_HEADER_OVERHEAD). Longer ones are refused. */
#define FS_CHAIN_MAX	   (FS_MAX_PAGES + 4)
#define FS_JOBS_MAX	   128 /* popped chains waiting for a worker */
#define FS_THREADS_DEFAULT 4
#define FS_THREADS_MAX	   16

_Static_assert(FS_CHAIN_MAX <= VIRTQ_MAX_CHAIN, "a full-size FUSE request must fit one chain");
_Static_assert(FS_QUEUE_SIZE <= VIRTQ_RING_MAX, "ring too large");
_Static_assert(FS_CHAIN_MAX * 2 <= FS_QUEUE_SIZE, "the ring must hold two full-size requests");
_Static_assert(FS_NUM_QUEUES <= VIRTIO_MAX_QUEUES, "too many queues");
_Static_assert(FS_IN_HDR == sizeof(struct fuse_in_header), "fuse_in_header");
_Static_assert(FS_OUT_HDR == sizeof(struct fuse_out_header), "fuse_out_header");
_Static_assert(sizeof(struct virtio_fs_config) == 40, "virtio_fs_config");

/* One request: the chain's readable buffers, then its writable ones, as
 * host addresses inside guest RAM (checked by virtq_pop). */
struct fs_job {
	unsigned int q;
	uint16_t head;
	uint32_t opcode;	    /* as first read: only to choose a thread */
	unsigned int nr_out, nr_in; /* virtio's sense: out = readable by us */
	uint32_t in_len;	    /* writable bytes */
	struct iovec iov[FS_CHAIN_MAX];
};

struct virtio_fs;

struct fs_worker {
	struct virtio_fs *fs;
	pthread_t thread;
	struct fs_job job; /* the one it serves, copied off the list */
};

struct virtio_fs {
	struct virtio_dev dev;
	struct virtio_fs_config config;
	struct virtio_fs_handler handler;
	unsigned int nr_threads; /* the pool's size */

	/* Everything below is under dev.lock, but for each worker's job: that
	 * is its own. */
	struct fs_worker workers[FS_THREADS_MAX];
	unsigned int nr_started; /* threads running; 0: the pool is stopped */
	bool stopping;		 /* the pool is being joined */
	bool leading;		 /* a worker waits on the request queue's kick fd */
	bool lead_failed;	 /* that fd failed: none waits on it till a reset */
	uint64_t gen;		 /* bumped by reset: answers from before are dropped */
	pthread_cond_t work;	 /* a job was queued, or the pool stops */
	pthread_cond_t idle;	 /* a worker finished a job */
	struct fs_job jobs[FS_JOBS_MAX];
	unsigned int job_head, nr_jobs;
	unsigned int busy;	     /* jobs the workers hold */
	bool starved[FS_NUM_QUEUES]; /* a full list left chains on this ring */
	uint32_t init_minor;	     /* the guest's last INIT asked this; 0 after DESTROY */
	struct virtq_elem elem;	     /* virtq_pop's scratch */
	struct virtio_fs_stats stats;
};

/* Whether a chain has the shape of a FUSE request: a readable part that
 * holds a fuse_in_header, room for a fuse_out_header when a reply is due,
 * no more descriptors than Linux ever sends, and parts whose sizes a used
 * length can count. *opcode: the request's, as read now. */
static bool fs_chain_ok(const struct virtq_elem *e, unsigned int q, uint32_t *opcode)
{
	*opcode = FUSE_FORGET;
	if (e->nr_out + e->nr_in > FS_CHAIN_MAX || e->nr_out == 0)
		return false;
	if (e->out_len < FS_IN_HDR || e->out_len > UINT32_MAX || e->in_len > UINT32_MAX)
		return false;
	if (q == FS_HIPRIO_Q)
		return true; /* FORGETs: nothing to answer */
	/* The guest may change it later: the handler reads its own copy. */
	if (virtq_elem_read(e, offsetof(struct fuse_in_header, opcode), opcode, 4) != 4)
		return false;
	return e->in_len >= FS_OUT_HDR || *opcode == FUSE_FORGET || *opcode == FUSE_BATCH_FORGET;
}

/* Requests that may wait on the host's storage, which the share server
 * serves without its lock, beside others: a worker about to serve one
 * hands the lead on first. Any other it serves at once, as virtiofsd
 * does: a kick meanwhile waits for it, and no thread is woken. */
static bool fs_may_block(uint32_t opcode)
{
	switch (opcode) {
	case FUSE_READ:
	case FUSE_WRITE:
	case FUSE_FLUSH:
	case FUSE_FSYNC:
	case FUSE_FSYNCDIR:
	case FUSE_FALLOCATE:
	case FUSE_SYNCFS:
		return true;
	default:
		return false;
	}
}

static void fs_queue_job(struct virtio_fs *fs, unsigned int q, const struct virtq_elem *e,
			 uint32_t opcode)
{
	struct fs_job *j = &fs->jobs[(fs->job_head + fs->nr_jobs) % FS_JOBS_MAX];
	unsigned int n = e->nr_out + e->nr_in;

	j->q = q;
	j->head = e->head;
	j->opcode = opcode;
	j->nr_out = e->nr_out;
	j->nr_in = e->nr_in;
	j->in_len = (uint32_t)e->in_len;
	memcpy(j->iov, e->iov, n * sizeof(e->iov[0]));
	fs->nr_jobs++;
}

/* What a snapshot must give the next server: the FUSE minor the guest's
 * INIT settled on (the server's answer clamps it the same way). Only a
 * hint, the guest's to lie about: its own session is all it can spoil. */
static void fs_note_session(struct virtio_fs *fs, const struct virtq_elem *e, uint32_t opcode)
{
	uint32_t minor;

	if (opcode == FUSE_DESTROY)
		fs->init_minor = 0;
	else if (opcode == FUSE_INIT &&
		 virtq_elem_read(e, FS_IN_HDR + offsetof(struct fuse_init_in, minor), &minor, 4) == 4)
		fs->init_minor = le32toh(minor);
}

/* Move ring q's chains onto the job list while it has room; malformed ones
 * go back at once, with nothing written. The list's bound is also what
 * bounds the work of one notification. A worker is woken for each job but
 * the first keep, which the caller serves itself. */
static void fs_pop(struct virtio_fs *fs, unsigned int q, unsigned int keep)
{
	struct virtio_dev *d = &fs->dev;
	struct virtq *vq = &d->vqs[q];
	struct virtq_elem *e = &fs->elem;
	unsigned int queued = 0;
	bool pushed = false;
	uint32_t opcode;
	int r;

	if (!vq->ready || !virtio_dev_driver_ok(d) || fs->stopping || fs->nr_started == 0)
		return;
	fs->starved[q] = false;
	for (;;) {
		if (fs->nr_jobs == FS_JOBS_MAX) {
			fs->starved[q] = true; /* a worker pops the rest */
			break;
		}
		r = virtq_pop(vq, e);
		if (r == VIRTQ_EMPTY)
			break;
		if (r == VIRTQ_BROKEN) {
			virtio_dev_needs_reset(d);
			break;
		}
		if (r == VIRTQ_BAD_CHAIN || !fs_chain_ok(e, q, &opcode)) {
			fs->stats.malformed++;
			virtq_push(vq, e->head, 0);
			pushed = true;
			continue;
		}
		if (q == FS_REQUEST_Q)
			fs_note_session(fs, e, opcode);
		fs_queue_job(fs, q, e, opcode);
		queued++;
	}
	if (pushed)
		virtio_dev_signal(d, vq);
	for (; keep < queued; keep++)
		pthread_cond_signal(&fs->work);
}

/* Take the oldest job into w; a ring that found the list full gets the
 * slot this frees. */
static void fs_take_job(struct virtio_fs *fs, struct fs_worker *w)
{
	const struct fs_job *j = &fs->jobs[fs->job_head];

	memcpy(&w->job, j,
	       offsetof(struct fs_job, iov) + (j->nr_out + j->nr_in) * sizeof(j->iov[0]));
	fs->job_head = (fs->job_head + 1) % FS_JOBS_MAX;
	fs->nr_jobs--;
	fs->busy++;
	fs->stats.requests++;
	for (unsigned int q = 0; q < FS_NUM_QUEUES; q++) {
		if (fs->starved[q])
			fs_pop(fs, q, 0);
	}
}

/* The handler's in is the chain's readable part, its out the writable. */
static size_t fs_serve(struct virtio_fs *fs, const struct fs_job *j)
{
	return fs->handler.handle(fs->handler.opaque, j->iov, j->nr_out, j->iov + j->nr_out,
				  j->nr_in);
}

static void fs_complete(struct virtio_fs *fs, const struct fs_job *j, size_t written)
{
	struct virtio_dev *d = &fs->dev;
	struct virtq *vq = &d->vqs[j->q];
	uint32_t len = (uint32_t)MIN(written, (size_t)j->in_len);

	/* A FORGET's chain is readable only: the driver expects no length. */
	if (j->q == FS_HIPRIO_Q)
		len = 0;
	virtq_push(vq, j->head, len);
	virtio_dev_signal(d, vq);
}

static void fs_worker_setup(void)
{
	/* A cwd and umask of its own: the handler's *at calls then create
	 * nodes with exactly the modes the guest asked for, and the VMM's own
	 * umask stays as it was. */
	if (unshare(CLONE_FS) < 0) {
		log_warn("virtio-fs: unshare(CLONE_FS): %s; new files get the VMM's umask",
			 strerror(errno));
		return;
	}
	umask(0);
}

/* Serve the oldest job as w; the device lock is let go meanwhile. */
static void fs_run_job(struct virtio_fs *fs, struct fs_worker *w)
{
	struct virtio_dev *d = &fs->dev;
	uint64_t gen;
	size_t written;

	fs_take_job(fs, w);
	if (fs_may_block(w->job.opcode) && !fs->leading)
		pthread_cond_signal(&fs->work); /* to take the lead meanwhile */
	gen = fs->gen;
	pthread_mutex_unlock(&d->lock);
	written = fs_serve(fs, &w->job);
	pthread_mutex_lock(&d->lock);
	fs->busy--;
	if (gen == fs->gen)
		fs_complete(fs, &w->job, written);
	if (fs->nr_jobs == 0 && fs->busy == 0)
		pthread_cond_broadcast(&fs->idle);
}

/* The request queue's kick fd (blocking; the I/O loop leaves it to us), or
 * -1 where the device has none (tests): then notifies come as MMIO exits. */
static int fs_kick_fd(const struct virtio_fs *fs)
{
	return fs->dev.queue_fds[FS_REQUEST_Q];
}

/* Lead: wait for the guest's kick, then pop the request queue. Each job
 * but the first wakes a follower; the first the leader serves itself. The
 * blocking read(2) of the eventfd is the one call a worker makes beyond
 * the handler's own, the futexes and the irqfd's write. */
static void fs_lead(struct virtio_fs *fs)
{
	struct virtio_dev *d = &fs->dev;
	uint64_t n;
	ssize_t r;

	fs->leading = true;
	pthread_mutex_unlock(&d->lock);
	do
		r = read(fs_kick_fd(fs), &n, sizeof(n));
	while (r < 0 && errno == EINTR);
	pthread_mutex_lock(&d->lock);
	fs->leading = false;
	if (fs->stopping)
		return;
	if (r != sizeof(n)) {
		/* Cannot happen with an eventfd; never spin on it. */
		log_warn("virtio-fs: reading the request queue's kicks: %s",
			 r < 0 ? strerror(errno) : "short read");
		virtio_dev_needs_reset(d);
		fs->lead_failed = true; /* no one leads again until the reset */
		return;
	}
	fs_pop(fs, FS_REQUEST_Q, 1);
}

static void *fs_worker_main(void *arg)
{
	struct fs_worker *w = arg;
	struct virtio_fs *fs = w->fs;
	struct virtio_dev *d = &fs->dev;

	fs_worker_setup();
	virtio_dev_thread_start(d);
	pthread_mutex_lock(&d->lock);
	while (!fs->stopping) {
		if (fs->nr_jobs > 0)
			fs_run_job(fs, w);
		else if (!fs->leading && !fs->lead_failed && fs_kick_fd(fs) >= 0)
			fs_lead(fs);
		else
			pthread_cond_wait(&fs->work, &d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/* Start the pool, under the device lock; false if no thread would start. */
static bool fs_pool_start(struct virtio_fs *fs)
{
	sigset_t all, old;
	int r = 0;

	/* Signals are for the VMM's own threads, never a worker. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	while (fs->nr_started < fs->nr_threads) {
		struct fs_worker *w = &fs->workers[fs->nr_started];

		w->fs = fs;
		r = pthread_create(&w->thread, NULL, fs_worker_main, w);
		if (r != 0)
			break;
		fs->nr_started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0)
		log_warn("virtio-fs: %u of %u worker threads started: %s", fs->nr_started,
			 fs->nr_threads, strerror(r));
	return fs->nr_started > 0;
}

/* Drop the queued jobs and every answer still under way, and join the
 * pool. Called with the device lock held; it is let go while the workers
 * finish, and held again on return. */
static void fs_pool_stop(struct virtio_fs *fs)
{
	struct virtio_dev *d = &fs->dev;
	unsigned int n = fs->nr_started;

	fs->gen++;
	fs->stats.dropped += fs->nr_jobs + fs->busy;
	fs->nr_jobs = fs->job_head = 0;
	memset(fs->starved, 0, sizeof(fs->starved));
	if (n == 0)
		return;
	fs->stopping = true;
	pthread_cond_broadcast(&fs->work);
	if (fs->leading) {
		uint64_t one = 1;

		/* The leader's read returns; it sees stopping and ends. */
		(void)!write(fs_kick_fd(fs), &one, sizeof(one));
	}
	pthread_mutex_unlock(&d->lock);
	for (unsigned int i = 0; i < n; i++)
		pthread_join(fs->workers[i].thread, NULL);
	pthread_mutex_lock(&d->lock);
	fs->nr_started = 0;
	fs->stopping = false;
	fs->lead_failed = false;
	pthread_cond_broadcast(&fs->idle);
}

static void fs_queue_notify(struct virtio_dev *d, unsigned int q)
{
	struct virtio_fs *fs = d->priv;

	if (fs->stopping)
		return; /* a driver racing its own reset: it kicks again */
	if (fs->nr_started == 0 && !fs_pool_start(fs)) {
		virtio_dev_needs_reset(d);
		return;
	}
	fs_pop(fs, q, 0);
}

static void fs_reset(struct virtio_dev *d)
{
	struct virtio_fs *fs = d->priv;

	fs_pool_stop(fs);
	fs->init_minor = 0;
	/* The pool is joined: no handler runs, so the server may forget. */
	if (fs->handler.reset)
		fs->handler.reset(fs->handler.opaque);
}

#define FS_SAVE_WAIT_MS 5000

struct fs_saved {
	uint32_t init_minor, pad;
};

/* Under the device lock, the vCPUs stopped: every request popped is
 * answered first (the share worker still serves), within a bound, and
 * the pool joined, so the rings hold no chain the device owes. */
static int fs_save(struct virtio_dev *d, void *data, size_t *len, gantry_error_t *err)
{
	struct virtio_fs *fs = d->priv;
	struct fs_saved s = { 0 };
	struct timespec until;
	int r = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += FS_SAVE_WAIT_MS / 1000;
	while ((fs->nr_jobs || fs->busy) && fs->nr_started && r == 0)
		r = pthread_cond_timedwait(&fs->idle, &d->lock, &until);
	if (fs->nr_jobs || fs->busy)
		return gantry_error(err, 0, "a share request was still under way after %d s",
				    FS_SAVE_WAIT_MS / 1000);
	fs_pool_stop(fs);
	/* Read once the last request is answered: an INIT or DESTROY among
	 * those waited for changed it. */
	s.init_minor = fs->init_minor;
	memcpy(data, &s, sizeof(s));
	*len = sizeof(s);
	return 0;
}

/* The server behind a restored device is a new one: it takes the
 * session as the guest left it (handler->restored) and, given the saved
 * server's tables (fs_restore_blob, before this), the guest's nodes and
 * handles; a node it could not take gets ESTALE until the guest looks
 * its path up again. */
static int fs_restore(struct virtio_dev *d, const void *data, size_t len, gantry_error_t *err)
{
	struct virtio_fs *fs = d->priv;
	struct fs_saved s;

	if (len != sizeof(s))
		return gantry_error(err, 0, "a share section of %zu bytes", len);
	memcpy(&s, data, sizeof(s));
	fs->init_minor = s.init_minor;
	if (fs->handler.restored)
		fs->handler.restored(fs->handler.opaque, s.init_minor);
	return 0;
}

/* After fs_save (the pool stopped, nothing under way): the server's
 * tables, so that the restored VM's new server knows the guest's nodes
 * and handles. None where the server cannot say them. */
static int fs_save_blob(struct virtio_dev *d, uint8_t **blob, size_t *len, gantry_error_t *err)
{
	struct virtio_fs *fs = d->priv;

	(void)err;
	*len = fs->handler.save ? fs->handler.save(fs->handler.opaque, blob) : 0;
	return 0;
}

static int fs_restore_blob(struct virtio_dev *d, const void *blob, size_t len,
			   gantry_error_t *err)
{
	struct virtio_fs *fs = d->priv;

	(void)err;
	if (fs->handler.load)
		fs->handler.load(fs->handler.opaque, blob, len);
	return 0;
}

static void fs_destroy(struct virtio_dev *d)
{
	struct virtio_fs *fs = d->priv;

	pthread_mutex_lock(&d->lock);
	fs_pool_stop(fs);
	pthread_mutex_unlock(&d->lock);
	pthread_cond_destroy(&fs->work);
	pthread_cond_destroy(&fs->idle);
	virtio_dev_destroy(d);
	free(fs);
}

static const struct virtio_dev_ops fs_ops = {
	.name = "virtio-fs",
	.device_id = VIRTIO_ID_FS,
	.num_queues = FS_NUM_QUEUES,
	.queue_max = FS_QUEUE_SIZE,
	.own_kicks = 1u << FS_REQUEST_Q,
	.queue_notify = fs_queue_notify,
	.reset = fs_reset,
	.destroy = fs_destroy,
	.save = fs_save,
	.restore = fs_restore,
	.save_blob = fs_save_blob,
	.restore_blob = fs_restore_blob,
};

int virtio_fs_threads(unsigned int *n, gantry_error_t *err)
{
	const char *s = gantry_setting(VIRTIO_FS_THREADS_ENV);
	uint64_t v;

	*n = FS_THREADS_DEFAULT;
	if (s == NULL || *s == '\0')
		return 0;
	if (parse_u64(s, FS_THREADS_MAX, &v) < 0 || v == 0)
		return gantry_error(err, EINVAL, "%s=%s: expected 1 to %d threads",
				    VIRTIO_FS_THREADS_ENV, s, FS_THREADS_MAX);
	*n = (unsigned int)v;
	return 0;
}

struct virtio_dev *virtio_fs_create(const struct guest_mem *mem, const char *tag,
				    const struct virtio_fs_handler *h, gantry_error_t *err)
{
	size_t len = tag ? strlen(tag) : 0;
	struct virtio_fs *fs;
	unsigned int threads;

	if (len == 0 || len > sizeof(fs->config.tag)) {
		gantry_error(err, EINVAL, "virtio-fs: the tag must be 1 to %zu bytes",
			     sizeof(fs->config.tag));
		return NULL;
	}
	if (h == NULL || h->handle == NULL) {
		gantry_error(err, EINVAL, "virtio-fs: no request handler");
		return NULL;
	}
	if (virtio_fs_threads(&threads, err) < 0) {
		gantry_error_prefix(err, "virtio-fs");
		return NULL;
	}
	fs = xzalloc(sizeof(*fs));
	/* NUL-padded; a 36-byte tag has no NUL at all. */
	memcpy(fs->config.tag, tag, len);
	fs->config.num_request_queues = htole32(1);
	fs->handler = *h;
	fs->nr_threads = threads;
	pthread_cond_init(&fs->work, NULL);
	pthread_cond_init(&fs->idle, NULL);
	virtio_dev_init(&fs->dev, &fs_ops, fs, mem, VIRTIO_DEV_EVENT_IDX, &fs->config, sizeof(fs->config));
	if (h->attach)
		h->attach(h->opaque, mem);
	return &fs->dev;
}

void virtio_fs_wait_idle(struct virtio_dev *d)
{
	struct virtio_fs *fs = d->priv;

	pthread_mutex_lock(&d->lock);
	while ((fs->nr_jobs || fs->busy || fs->stopping) && fs->nr_started)
		pthread_cond_wait(&fs->idle, &d->lock);
	pthread_mutex_unlock(&d->lock);
}

struct virtio_fs_stats virtio_fs_stats(struct virtio_dev *d)
{
	struct virtio_fs *fs = d->priv;
	struct virtio_fs_stats s;

	pthread_mutex_lock(&d->lock);
	s = fs->stats;
	s.workers = fs->nr_started;
	pthread_mutex_unlock(&d->lock);
	return s;
}
