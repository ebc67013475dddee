/* Doors: how the guest's dials to host ports reach the servers of this
 * process without a listener named in the filesystem. A server opens a
 * door for its port and polls the end it is given as it would a listening
 * socket, taking each connection with door_accept(); a dial (the VMM's,
 * or the VMM worker's asked of us) makes a connected pair of stream
 * sockets and passes one end through the door. A port with no door open
 * cannot be dialled: the table is also the list of what the guest may
 * reach. Thread-safe: the VMM's I/O thread dials while servers open. */
#ifndef GANTRY_COMMON_DOOR_H
#define GANTRY_COMMON_DOOR_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define DOORS_MAX	16
#define DOOR_SNDBUF	8192 /* the kernel doubles it: about 20 dials waiting */

struct doors {
	pthread_mutex_t lock;
	size_t n;
	struct {
		uint32_t port;
		int knock; /* the dialler's end */
	} d[DOORS_MAX];
};

#define DOORS_INIT ((struct doors){ .lock = PTHREAD_MUTEX_INITIALIZER })

/* A door for port: the server's end (non-blocking, close-on-exec), or -1.
 * An earlier door of the port is shut first. */
int doors_open(struct doors *t, uint32_t port, gantry_error_t *err);
/* A connection to port's server: our end (non-blocking, close-on-exec),
 * or -1 with errno (ECONNREFUSED: no door, or its server is gone;
 * EAGAIN: it has as many dials waiting as a door holds, about 20, like a
 * listener's backlog). Never blocks. */
int doors_dial(struct doors *t, uint32_t port);
/* Later dials to port are refused; the server's end stays its own. */
void doors_shut(struct doors *t, uint32_t port);
/* Every door shut. */
void doors_free(struct doors *t);

/* The next connection handed through the server's end in, as the dial
 * made it (non-blocking, close-on-exec), or -1 with errno (EAGAIN: none
 * waits; EPIPE: the door is shut and empty). */
int door_accept(int in);

#endif
