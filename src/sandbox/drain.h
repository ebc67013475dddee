/* A session's output read to its end on a thread of its own (a pipe whose
 * write end the session holds): its first max bytes kept, the rest read
 * and dropped, so however much the guest writes costs no more memory. For
 * the helper sessions that gantry runs itself (cp's tar, top's ps). */
#ifndef GANTRY_SANDBOX_DRAIN_H
#define GANTRY_SANDBOX_DRAIN_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

struct drain {
	int fd;	   /* the read end: the caller's, not closed here */
	char *buf; /* max + 1 bytes, the caller's */
	size_t max;
	size_t len; /* bytes kept */
	bool over;  /* more came than max */
	pthread_t thread;
	bool started;
};

/* Start reading fd into buf; -1 when no thread could start. */
int drain_start(struct drain *d, int fd, char *buf, size_t max);
/* Wait for the end of what it reads (its writers gone); buf then ends
 * with a NUL after len bytes. A drain never started is left as it is. */
void drain_join(struct drain *d);
/* drain_join(), then buf cut to its first line, sanitised for a terminal
 * (what a helper said on its stderr, quoted in an error). */
void drain_join_line(struct drain *d);

#endif
