/* libslirp inside the network worker: the instance on our address plan,
 * its callbacks (frames out, timers, logging) and its share of the poll
 * set. Every call is made from the worker's one thread. */
#ifndef GANTRY_NET_SLIRP_H
#define GANTRY_NET_SLIRP_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <slirp/libslirp.h>

#include "common/error.h"

struct nat_timer;

struct nat {
	Slirp *slirp;
	/* Frames libslirp sends to the guest. */
	void (*send)(void *opaque, const uint8_t *frame, size_t len);
	void *opaque;
	struct nat_timer *timers;
	/* Whether host sockets are read (false: the guest's queue is full). */
	bool read_host;
	bool kicked; /* libslirp asked to be polled again at once */
	struct pollfd *fds;
	size_t base, n, cap; /* libslirp's slice of fds */
	uint64_t last_error_ms;
	unsigned errors_quiet;
};

/* dns_path: the DNS proxy's Unix socket, reached for TCP to .1:53. */
/* libslirp loaded (nat_init does it); what is missing said as one line. */
int nat_lib_load(gantry_error_t *err);
int nat_init(struct nat *n, const char *dns_path, gantry_error_t *err);
/* TCP to the gateway's port goes to the Unix socket path (libslirp
 * dials it for each connection). */
int nat_add_unix(struct nat *n, const char *path, uint16_t port, gantry_error_t *err);
void nat_cleanup(struct nat *n);
/* A guest frame the check passed. */
void nat_input(struct nat *n, const uint8_t *frame, size_t len);

/* Append libslirp's fds to *fds (of *cap, grown as needed) from index
 * *nfds; returns the poll timeout it and its timers want (ms, -1: none). */
int nat_pollfds(struct nat *n, struct pollfd **fds, size_t *nfds, size_t *cap);
/* After poll(): hand libslirp its events (err: poll failed) and run the
 * timers that are due. */
void nat_dispatch(struct nat *n, bool err);

/* Published ports: 0, or -1 with errno from the host socket. fd: the
 * forward's host socket, bound by the caller (port_spec_bind), taken over
 * (closed, whatever happens); -1: libslirp binds it. */
int nat_forward_add(struct nat *n, bool udp, struct in_addr host, uint16_t host_port,
		    uint16_t guest_port, int fd);
int nat_forward_remove(struct nat *n, bool udp, struct in_addr host, uint16_t host_port);

#endif
