/* A one-shot's relayed host sockets (see oneshot_sockets.h): one thread
 * accepts the guest's streams, and one thread per stream joins it to the
 * host's socket, copying each way as the other side takes the bytes
 * (never more than one buffer held per direction). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/door.h"
#include "common/log.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "proto/agent.h"
#include "sandbox/oneshot_sockets.h"

#define SOCKET_HDR_MS 5000

/* The socket's index, in its first 4 bytes. */
static int read_index(struct oneshot_sockets *s, int fd, uint32_t *index)
{
	uint8_t hdr[4];
	size_t got = 0;
	uint64_t deadline = now_ms() + SOCKET_HDR_MS;

	while (got < sizeof(hdr)) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN },
				       { .fd = acceptor_stop_fd(&s->acc), .events = POLLIN } };
		uint64_t now = now_ms();
		ssize_t n;

		if (now >= deadline || poll(p, 2, (int)(deadline - now)) < 0 || p[1].revents)
			return -1;
		n = recv(fd, hdr + got, sizeof(hdr) - got, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	*index = hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 | (uint32_t)hdr[3] << 24;
	return *index < s->n ? 0 : -1;
}

/* One stream of the guest's: the socket it names, joined. */
static void serve_stream(void *opaque, int guest)
{
	struct oneshot_sockets *s = opaque;
	uint32_t index;
	int host = -1;

	if (read_index(s, guest, &index) == 0) {
		host = unix_connect(s->paths[index], SOCK_NONBLOCK);
		if (host < 0)
			log_info("socket %s: %s", s->paths[index], strerror(errno));
		else
			acceptor_join(&s->acc, guest, host);
	}
	if (host >= 0)
		close(host);
	close(guest);
}

int oneshot_sockets_start(struct oneshot_sockets *s, struct doors *doors, char *const *paths,
			  size_t n, gantry_error_t *err)
{
	*s = (struct oneshot_sockets){ .acc = ACCEPTOR_NONE };
	if (n == 0)
		return 0;
	if (n > ONESHOT_SOCKETS_MAX)
		return gantry_error(err, 0, "more than %d sockets", ONESHOT_SOCKETS_MAX);
	s->paths = paths;
	s->n = n;
	if (acceptor_door(&s->acc, doors, PROTO_SOCKET_PORT, ONESHOT_SOCKET_CONNS, serve_stream, s,
			  err) < 0) {
		oneshot_sockets_stop(s);
		return gantry_error_prefix(err, "the socket relay");
	}
	return 0;
}

int oneshot_sockets_run(struct oneshot_sockets *s, gantry_error_t *err)
{
	return acceptor_run(&s->acc, "the socket relay", err);
}

void oneshot_sockets_stop(struct oneshot_sockets *s)
{
	acceptor_stop(&s->acc);
}
