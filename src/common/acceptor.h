/* A listener served on a thread of its own until stopped, for the small
 * services a one-shot run keeps beside its VM (the credential broker, the
 * socket relay, the MCP gateway on a thread), whose guest's dials come
 * through a door (common/door.h), and for TCP ones: each connection
 * is handed to conn(), on the acceptor's own thread one after the other
 * (max 0), or on a thread of its own, at most max at once (one more is
 * closed as it comes: the guest may try again). A handler waits on
 * acceptor_stop_fd() beside its own, and returns once it is readable. */
#ifndef GANTRY_COMMON_ACCEPTOR_H
#define GANTRY_COMMON_ACCEPTOR_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

struct acceptor {
	int listen, stop[2];
	bool door; /* listen is a door's end */
	pthread_t thread;
	bool running, ready;
	unsigned int max, active;
	pthread_mutex_t lock;
	pthread_cond_t done;
	void (*conn)(void *opaque, int fd); /* owns fd */
	void *opaque;
};

#define ACCEPTOR_NONE ((struct acceptor){ .listen = -1, .stop = { -1, -1 } })

/* Open port's door in doors and serve it for conn, with a stop pipe. */
struct doors;
int acceptor_door(struct acceptor *a, struct doors *doors, uint32_t port, unsigned int max,
		  void (*conn)(void *opaque, int fd), void *opaque, gantry_error_t *err);
/* The same for a listening socket (a TCP one), taken. */
int acceptor_adopt(struct acceptor *a, int listen, unsigned int max,
		   void (*conn)(void *opaque, int fd), void *opaque, gantry_error_t *err);
/* Copy both ways between x and y (non-blocking), holding at most one
 * buffer each way, until both directions ended or a stops; a half-close
 * passes on as one. For a handler. */
void acceptor_join(const struct acceptor *a, int x, int y);
/* Serve, on a thread; nothing when it does not listen. */
int acceptor_run(struct acceptor *a, const char *what, gantry_error_t *err);
/* Readable once the acceptor stops. */
static inline int acceptor_stop_fd(const struct acceptor *a)
{
	return a->stop[0];
}
/* A request line for a handler: up to max bytes of fd (buf holds max +
 * 1), read until a newline is among them, NUL-terminated. Their count, or
 * -1 when the peer went, was slower than ms between reads, or a stops. */
ssize_t acceptor_read_line(const struct acceptor *a, int fd, char *buf, size_t max, int ms);
/* Stop: the thread and every handler joined, the listener closed. */
void acceptor_stop(struct acceptor *a);

#endif
