/* The device I/O thread (see ioloop.h). */
#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/util.h"
#include "vmm/ioloop.h"

#define IOLOOP_BATCH 32 /* events handled per epoll_wait */

int ioloop_init(struct ioloop *l, gantry_error_t *err)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };

	*l = (struct ioloop){ .epfd = -1, .stopfd = -1 };
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0)
		return gantry_error_errno(err, "epoll_create1");
	l->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->stopfd < 0)
		return gantry_error_errno(err, "eventfd");
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->stopfd, &ev) < 0)
		return gantry_error_errno(err, "epoll_ctl");
	return 0;
}

int ioloop_add_events(struct ioloop *l, int fd, unsigned int events, ioloop_fn fn, void *opaque,
		      gantry_error_t *err)
{
	struct ioloop_watch *w = xmalloc(sizeof(*w));
	struct epoll_event ev = { .events = events, .data.ptr = w };

	w->fd = fd;
	w->fn = fn;
	w->opaque = opaque;
	atomic_init(&w->dead, false);
	pthread_mutex_lock(&l->lock);
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int e = errno;

		pthread_mutex_unlock(&l->lock);
		free(w);
		return gantry_error(err, e, "epoll_ctl add fd %d", fd);
	}
	l->watches = xrealloc(l->watches, (l->nr_watches + 1) * sizeof(*l->watches));
	l->watches[l->nr_watches++] = w;
	pthread_mutex_unlock(&l->lock);
	return 0;
}

int ioloop_add(struct ioloop *l, int fd, ioloop_fn fn, void *opaque, gantry_error_t *err)
{
	return ioloop_add_events(l, fd, EPOLLIN, fn, opaque, err);
}

/* Free the dead watches; only when no batch of events can still name them. */
static void ioloop_sweep(struct ioloop *l)
{
	unsigned int kept = 0;

	for (unsigned int i = 0; i < l->nr_watches; i++) {
		if (atomic_load(&l->watches[i]->dead))
			free(l->watches[i]);
		else
			l->watches[kept++] = l->watches[i];
	}
	l->nr_watches = kept;
}

void ioloop_close(struct ioloop *l, int *fd)
{
	if (*fd < 0)
		return;
	ioloop_remove(l, *fd);
	close(*fd);
	*fd = -1;
}

void ioloop_remove(struct ioloop *l, int fd)
{
	pthread_mutex_lock(&l->lock);
	for (unsigned int i = 0; i < l->nr_watches; i++) {
		struct ioloop_watch *w = l->watches[i];

		if (w->fd != fd || atomic_load(&w->dead))
			continue;
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
		atomic_store(&w->dead, true);
		/* A thread blocked in epoll_wait may yet return it: free it later. */
		if (!l->running && !l->dispatching)
			ioloop_sweep(l);
		break;
	}
	pthread_mutex_unlock(&l->lock);
}

/* Asked to pause (the stop eventfd written): parked until let go. */
static bool ioloop_park(struct ioloop *l)
{
	uint64_t v;

	pthread_mutex_lock(&l->lock);
	if (!l->pausing) {
		pthread_mutex_unlock(&l->lock);
		return false;
	}
	(void)!read(l->stopfd, &v, sizeof(v));
	l->parked = true;
	pthread_cond_broadcast(&l->cond);
	while (l->pausing)
		pthread_cond_wait(&l->cond, &l->lock);
	l->parked = false;
	pthread_cond_broadcast(&l->cond); /* a pause waiting for us to leave */
	pthread_mutex_unlock(&l->lock);
	return true;
}

/* Handle one batch; returns false when the loop was asked to stop. */
static bool ioloop_dispatch(struct ioloop *l, const struct epoll_event *evs, int n)
{
	bool go_on = true, pause = false;

	pthread_mutex_lock(&l->lock);
	l->dispatching = true;
	pthread_mutex_unlock(&l->lock);
	for (int i = 0; i < n; i++) {
		struct ioloop_watch *w = evs[i].data.ptr;

		if (w == NULL) {
			pause = true;
			continue;
		}
		if (!atomic_load(&w->dead))
			w->fn(w->opaque, w->fd, evs[i].events);
	}
	pthread_mutex_lock(&l->lock);
	l->dispatching = false;
	ioloop_sweep(l);
	pthread_mutex_unlock(&l->lock);
	if (pause)
		go_on = ioloop_park(l);
	return go_on;
}

static void *ioloop_thread(void *arg)
{
	struct ioloop *l = arg;
	struct epoll_event evs[IOLOOP_BATCH];

	if (l->thread_start && !l->thread_start(l->thread_opaque))
		return NULL;
	for (;;) {
		int n = epoll_wait(l->epfd, evs, ARRAY_SIZE(evs), -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || !ioloop_dispatch(l, evs, n))
			break;
	}
	return NULL;
}

int ioloop_run_once(struct ioloop *l, int timeout_ms)
{
	struct epoll_event evs[IOLOOP_BATCH];
	int n = epoll_wait(l->epfd, evs, ARRAY_SIZE(evs), timeout_ms);

	if (n < 0)
		return errno == EINTR ? 0 : -1;
	if (!ioloop_dispatch(l, evs, n)) {
		uint64_t v;

		(void)!read(l->stopfd, &v, sizeof(v)); /* a stale stop request */
	}
	return n;
}

int ioloop_start(struct ioloop *l, gantry_error_t *err)
{
	int r;

	pthread_mutex_lock(&l->lock);
	l->running = true;
	pthread_mutex_unlock(&l->lock);
	r = pthread_create(&l->thread, NULL, ioloop_thread, l);
	if (r != 0) {
		pthread_mutex_lock(&l->lock);
		l->running = false;
		pthread_mutex_unlock(&l->lock);
		return gantry_error(err, r, "cannot start the I/O thread");
	}
	return 0;
}

void ioloop_stop(struct ioloop *l)
{
	uint64_t one = 1;

	if (!l->running)
		return;
	ioloop_unpause(l);
	(void)!write(l->stopfd, &one, sizeof(one));
	pthread_join(l->thread, NULL);
	(void)!read(l->stopfd, &one, sizeof(one));
	pthread_mutex_lock(&l->lock);
	l->running = false;
	ioloop_sweep(l);
	pthread_mutex_unlock(&l->lock);
}

void ioloop_pause(struct ioloop *l)
{
	uint64_t one = 1;

	pthread_mutex_lock(&l->lock);
	if (!l->running) {
		pthread_mutex_unlock(&l->lock);
		return;
	}
	if (!l->pausing) {
		/* The park the last unpause let go of may not be left yet:
		 * taken for this one, it would leave our stop request to be
		 * read, once let go, as a stop. */
		while (l->parked)
			pthread_cond_wait(&l->cond, &l->lock);
		l->pausing = true;
		(void)!write(l->stopfd, &one, sizeof(one));
	}
	while (!l->parked)
		pthread_cond_wait(&l->cond, &l->lock);
	pthread_mutex_unlock(&l->lock);
}

void ioloop_unpause(struct ioloop *l)
{
	pthread_mutex_lock(&l->lock);
	l->pausing = false;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

void ioloop_destroy(struct ioloop *l)
{
	ioloop_stop(l);
	for (unsigned int i = 0; i < l->nr_watches; i++)
		free(l->watches[i]);
	free(l->watches);
	l->watches = NULL;
	l->nr_watches = 0;
	if (l->epfd >= 0)
		close(l->epfd);
	if (l->stopfd >= 0)
		close(l->stopfd);
	l->epfd = l->stopfd = -1;
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->lock);
}
