/* `gantry-guest mcp-proxy` (PROTO_MCP_ARG): the guest's end of the MCP
 * gateway. An MCP client in the container runs it as a stdio server
 * ({"command": "/dev/.gantry-guest", "args": ["mcp-proxy"]}); it dials the
 * host's PROTO_MCP_PORT and carries the client's newline-delimited
 * JSON-RPC there and the gateway's back, byte for byte. It holds no
 * credential and parses nothing: the gateway bounds and checks every
 * message. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "guest/guest.h"

#define MCP_COPY_BUF (64 * 1024)

/* Copy one read's worth; false once the source ended (the far side is
 * told, for a socket, by a shutdown). */
static bool copy_once(int from, int to, bool to_socket, char *buf)
{
	ssize_t n = read(from, buf, MCP_COPY_BUF);

	if (n < 0 && errno == EINTR)
		return true;
	if (n <= 0) {
		if (to_socket)
			shutdown(to, SHUT_WR);
		return false;
	}
	return guest_write_all(to, buf, (size_t)n) == 0;
}

int guest_mcp_proxy_main(int argc, char **argv)
{
	static const struct guest_config cfg = { 0 };
	char *buf = malloc(MCP_COPY_BUF);
	bool in_open = true;
	int fd;

	(void)argv;
	if (argc != 0) {
		fprintf(stderr, "usage: %s %s\n", GUEST_HELPER_PATH, PROTO_MCP_ARG);
		return 2;
	}
	fd = link_dial(&cfg, PROTO_MCP_PORT);
	if (fd < 0 || buf == NULL) {
		fprintf(stderr, "gantry: no MCP gateway (run with -mcp-remote): %s\n",
			strerror(errno));
		return 1;
	}
	for (;;) {
		struct pollfd p[2] = { { .fd = in_open ? STDIN_FILENO : -1, .events = POLLIN },
				       { .fd = fd, .events = POLLIN } };

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		if (p[0].revents && !copy_once(STDIN_FILENO, fd, true, buf))
			in_open = false;
		/* The gateway's end is ours: once it closes, so do we. */
		if (p[1].revents && !copy_once(fd, STDOUT_FILENO, false, buf))
			return 0;
	}
}
