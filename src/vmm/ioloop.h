/* The device I/O thread: one epoll loop that runs virtqueue work signalled by
 * ioeventfds, console input and timers, off the vCPU exit path. */
#ifndef GANTRY_VMM_IOLOOP_H
#define GANTRY_VMM_IOLOOP_H

#include <pthread.h>
#include <stdbool.h>

#include "common/error.h"

typedef void (*ioloop_fn)(void *opaque, int fd, unsigned int events);

struct ioloop_watch {
	int fd;
	ioloop_fn fn;
	void *opaque;
};

struct ioloop {
	int epfd;
	int stopfd;
	pthread_t thread;
	bool running;
	struct ioloop_watch **watches;
	unsigned int nr_watches;
};

int ioloop_init(struct ioloop *l, gantry_error_t *err);
/* Call fn(opaque, fd, events) on the loop thread whenever fd is readable. */
int ioloop_add(struct ioloop *l, int fd, ioloop_fn fn, void *opaque, gantry_error_t *err);
/* Stop watching fd (from a callback too); the watch is freed at destroy. */
void ioloop_remove(struct ioloop *l, int fd);
int ioloop_start(struct ioloop *l, gantry_error_t *err);
/* Stop and join the thread; watched fds stay open (their owners close them). */
void ioloop_stop(struct ioloop *l);
void ioloop_destroy(struct ioloop *l);

#endif
