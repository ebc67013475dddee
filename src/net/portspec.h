/* Published ports (grammar of the reference, 2.5):
 *   [HOST_IP:]HOST_PORT:GUEST_PORT[/tcp|/udp]  or  GUEST_PORT[/tcp|/udp]
 * HOST_IP is an IPv4 address, 127.0.0.1 when absent; a missing or zero host
 * port means "pick a free one" (port_spec_pick), which is stored as chosen.
 * Canonical form, as stored: IP:HOST:GUEST for tcp, IP:HOST:GUEST/udp. */
#ifndef GANTRY_NET_PORTSPEC_H
#define GANTRY_NET_PORTSPEC_H

#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>

#include "common/error.h"

#define PORT_SPEC_MAX 40 /* "255.255.255.255:65535:65535/udp" and a NUL */
/* A published port's listen backlog: libslirp's own is 1, so a burst of
 * connections overflows it, the kernel answers with SYN cookies, and a
 * client whose first ACK found the queue full has its data reset. */
#define PORT_BACKLOG 128

struct port_spec {
	struct in_addr host_ip;
	uint16_t host_port; /* 0: not chosen yet */
	uint16_t guest_port;
	bool udp;
};

/* Parse s; a one-line error naming what is wrong. */
int port_spec_parse(const char *s, struct port_spec *p, gantry_error_t *err);
/* Canonical text into buf (PORT_SPEC_MAX bytes). */
void port_spec_format(const struct port_spec *p, char buf[PORT_SPEC_MAX]);
/* Same forward: protocol, host address and host port. */
bool port_spec_same_bind(const struct port_spec *a, const struct port_spec *b);
/* A zero host port: bind one on host_ip, read the port the kernel chose,
 * release it. Fails, saying so, when nothing can be bound there. */
int port_spec_pick(struct port_spec *p, gantry_error_t *err);
/* The forward's host socket, bound (a zero host port chosen, and stored),
 * TCP's listening: made by the caller, who may bind ports the network
 * worker may not (below 1024, as root), and handed to it (*fd, close-on-
 * exec). A one-line error naming the port when it cannot be bound. */
int port_spec_bind(struct port_spec *p, int *fd, gantry_error_t *err);
/* Whether fd is a socket of that protocol bound on host (and on port,
 * unless port is negative). */
bool port_socket_bound(int fd, bool udp, struct in_addr host, int port);

#endif
