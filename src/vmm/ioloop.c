/* The device I/O thread (see ioloop.h). */
#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/util.h"
#include "vmm/ioloop.h"

int ioloop_init(struct ioloop *l, gantry_error_t *err)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };

	*l = (struct ioloop){ .epfd = -1, .stopfd = -1 };
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

int ioloop_add(struct ioloop *l, int fd, ioloop_fn fn, void *opaque, gantry_error_t *err)
{
	struct ioloop_watch *w = xmalloc(sizeof(*w));
	struct epoll_event ev = { .events = EPOLLIN };

	*w = (struct ioloop_watch){ fd, fn, opaque };
	ev.data.ptr = w;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		free(w);
		return gantry_error_errno(err, "epoll_ctl add fd %d", fd);
	}
	l->watches = xrealloc(l->watches, (l->nr_watches + 1) * sizeof(*l->watches));
	l->watches[l->nr_watches++] = w;
	return 0;
}

void ioloop_remove(struct ioloop *l, int fd)
{
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
}

static void *ioloop_thread(void *arg)
{
	struct ioloop *l = arg;
	struct epoll_event evs[32];

	for (;;) {
		int n = epoll_wait(l->epfd, evs, ARRAY_SIZE(evs), -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		for (int i = 0; i < n; i++) {
			struct ioloop_watch *w = evs[i].data.ptr;

			if (w == NULL)
				return NULL;
			w->fn(w->opaque, w->fd, evs[i].events);
		}
	}
	return NULL;
}

int ioloop_start(struct ioloop *l, gantry_error_t *err)
{
	int r = pthread_create(&l->thread, NULL, ioloop_thread, l);

	if (r != 0)
		return gantry_error(err, r, "cannot start the I/O thread");
	l->running = true;
	return 0;
}

void ioloop_stop(struct ioloop *l)
{
	uint64_t one = 1;

	if (!l->running)
		return;
	(void)!write(l->stopfd, &one, sizeof(one));
	pthread_join(l->thread, NULL);
	l->running = false;
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
}
