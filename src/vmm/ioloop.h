/* The device I/O thread: one epoll loop that runs virtqueue work signalled by
 * ioeventfds, console input, device sockets and timers, off the vCPU exit
 * path. It owns its watches: a watch removed while a batch of events may
 * still name it is only marked dead, skipped, and freed once that batch is
 * over, so a callback may remove any watch (its own included) and free the
 * object behind it. */
#ifndef GANTRY_VMM_IOLOOP_H
#define GANTRY_VMM_IOLOOP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "common/error.h"

typedef void (*ioloop_fn)(void *opaque, int fd, unsigned int events);

struct ioloop_watch {
	int fd;
	ioloop_fn fn;
	void *opaque;
	atomic_bool dead; /* removed: never called again, freed after the batch */
};

struct ioloop {
	int epfd;
	int stopfd;
	pthread_t thread;
	bool running;
	pthread_mutex_t lock; /* watches, nr_watches, dispatching */
	struct ioloop_watch **watches;
	unsigned int nr_watches;
	bool dispatching; /* a batch of events is being handled */
	/* ioloop_pause: the thread, between batches, parks until let go. */
	bool pausing, parked;
	pthread_cond_t cond;
	/* Set before ioloop_start: called first on the loop thread; false
	 * ends it at once. */
	bool (*thread_start)(void *opaque);
	void *thread_opaque;
};

int ioloop_init(struct ioloop *l, gantry_error_t *err);
/* Call fn(opaque, fd, events) on the loop thread whenever fd is readable
 * (level-triggered EPOLLIN). */
int ioloop_add(struct ioloop *l, int fd, ioloop_fn fn, void *opaque, gantry_error_t *err);
/* Same with the epoll event mask spelled out: EPOLLIN, EPOLLOUT, EPOLLRDHUP,
 * EPOLLET for edge-triggered. EPOLLERR and EPOLLHUP are always reported. */
int ioloop_add_events(struct ioloop *l, int fd, unsigned int events, ioloop_fn fn, void *opaque,
		      gantry_error_t *err);
/* Stop watching fd; any thread, from a callback too. The watch is not called
 * again once this returns on the loop thread; from another thread, a call
 * already under way may still finish. The fd stays open (its owner closes
 * it, after this call). */
void ioloop_remove(struct ioloop *l, int fd);
/* ioloop_remove, then close *fd and set it to -1 (-1 already: nothing). */
void ioloop_close(struct ioloop *l, int *fd);
int ioloop_start(struct ioloop *l, gantry_error_t *err);
/* Stop and join the thread; watched fds stay open (their owners close them). */
void ioloop_stop(struct ioloop *l);
/* Park the started thread between two batches (returns once it is) and
 * let it go again: no callback runs in between. */
void ioloop_pause(struct ioloop *l);
void ioloop_unpause(struct ioloop *l);
/* Handle one batch of ready events on the calling thread, waiting up to
 * timeout_ms (-1: forever) for the first; for a caller that owns the loop
 * instead of a started thread (tests, fuzzers). Returns the number of
 * events handled, or -1 on error. */
int ioloop_run_once(struct ioloop *l, int timeout_ms);
void ioloop_destroy(struct ioloop *l);

#endif
