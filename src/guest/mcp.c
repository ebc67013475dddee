/* `gantry-guest mcp-proxy` (PROTO_MCP_ARG): the guest's end of the MCP
 * gateway. An MCP client in the container runs it as a stdio server
 * ({"command": "/dev/.gantry-guest", "args": ["mcp-proxy"]}); it dials the
 * host's PROTO_MCP_PORT and carries the client's newline-delimited
 * JSON-RPC there and the gateway's back, byte for byte, whole lines at a
 * time. It holds no credential and parses nothing: the gateway bounds and
 * checks every message. The one line it looks at is the gateway's request
 * for the built-in fs server, marked by its first byte (proto/agent.h),
 * which it carries to gantry-init's fs server and answers with what that
 * server says. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "guest/guest.h"

/* A line longer than this either way ends the proxy: the gateway takes
 * 1 MiB, and sends no more than that and an fs answer. */
#define MCP_LINE_MAX  (4 * 1024 * 1024)
#define MCP_READ_BUF  (64 * 1024)
#define MCP_FS_WAIT_MS 15000

struct linebuf {
	char *buf;
	size_t len, cap;
};

/* Read what fd has onto b: 1, 0 at its end, -1 on an error, -2 when a
 * line would be longer than MCP_LINE_MAX. */
static int fill(int fd, struct linebuf *b)
{
	ssize_t n;

	if (b->cap - b->len < MCP_READ_BUF) {
		size_t cap = b->cap ? b->cap * 2 : 2 * MCP_READ_BUF;
		char *p;

		if (cap > MCP_LINE_MAX + MCP_READ_BUF)
			return -2;
		if ((p = realloc(b->buf, cap)) == NULL)
			return -1;
		b->buf = p;
		b->cap = cap;
	}
	n = read(fd, b->buf + b->len, b->cap - b->len);
	if (n < 0 && errno == EINTR)
		return 1;
	if (n <= 0)
		return n == 0 ? 0 : -1;
	b->len += (size_t)n;
	return 1;
}

static void consume(struct linebuf *b, size_t n)
{
	memmove(b->buf, b->buf + n, b->len - n);
	b->len -= n;
}

/* Append n bytes to b (the bytes owed the gateway): false past the
 * bound, which ends the proxy. */
static bool queue(struct linebuf *b, const char *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 2 * MCP_READ_BUF;
		char *q;

		while (cap < b->len + n)
			cap *= 2;
		if (cap > 2 * MCP_LINE_MAX || (q = realloc(b->buf, cap)) == NULL)
			return false;
		b->buf = q;
		b->cap = cap;
	}
	memcpy(b->buf + b->len, p, n);
	b->len += n;
	return true;
}

/* The gateway's fs request (a whole line, its newline included) to the fs
 * server; its answer, or an error line of our own, queued for the
 * gateway. */
static bool fs_request(struct linebuf *up, const char *line, size_t len)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = PROTO_MCP_FS_SOCKET };
	size_t seq = strspn(line + 1, "0123456789"), got = 0, cap = PROTO_MCP_FS_LINE + 64;
	char *answer = malloc(cap), err[96];
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	if (answer && fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    guest_write_all(fd, line, len) == 0) {
		for (;;) {
			struct pollfd p = { .fd = fd, .events = POLLIN };
			ssize_t n;

			if (poll(&p, 1, MCP_FS_WAIT_MS) <= 0)
				break;
			n = read(fd, answer + got, cap - got);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0 || (got += (size_t)n) == cap)
				break;
		}
	}
	if (fd >= 0)
		close(fd);
	if (got > 1 && answer[0] == PROTO_MCP_FS_MARK && answer[got - 1] == '\n') {
		ok = queue(up, answer, got);
	} else {
		int n = snprintf(err, sizeof(err), "%c%.*s err no answer from the fs server\n",
				 PROTO_MCP_FS_MARK, (int)(seq < 20 ? seq : 20), line + 1);

		ok = queue(up, err, (size_t)n);
	}
	free(answer);
	return ok;
}

/* Both ways at once: the client's whole lines and the fs answers are
 * queued for the gateway and written as it takes them, so that the
 * gateway's side is always read, whatever either is sending. */
int guest_mcp_proxy_main(int argc, char **argv)
{
	static const struct guest_config cfg = { 0 };
	struct linebuf in = { 0 }, out = { 0 }, up = { 0 };
	bool in_open = true, up_open = true;
	int fd;

	(void)argv;
	if (argc != 0) {
		fprintf(stderr, "usage: %s %s\n", GUEST_HELPER_PATH, PROTO_MCP_ARG);
		return 2;
	}
	fd = link_dial(&cfg, PROTO_MCP_PORT);
	if (fd < 0) {
		fprintf(stderr, "gantry: no MCP gateway (run with -mcp or -mcp-remote): %s\n",
			strerror(errno));
		return 1;
	}
	for (;;) {
		/* Read the client only while the gateway keeps up with it. */
		struct pollfd p[2] = {
			{ .fd = in_open && up.len < MCP_LINE_MAX ? STDIN_FILENO : -1, .events = POLLIN },
			{ .fd = fd, .events = POLLIN | (up.len ? POLLOUT : 0) },
		};
		char *nl;
		int r;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		if (p[0].revents) {
			r = fill(STDIN_FILENO, &in);
			if (r == -2)
				return 1;
			/* The client's whole lines; at its end, the rest too. */
			while ((nl = memchr(in.buf, '\n', in.len)) != NULL) {
				if (!queue(&up, in.buf, (size_t)(nl - in.buf) + 1))
					return 1;
				consume(&in, (size_t)(nl - in.buf) + 1);
			}
			if (r <= 0) {
				if (in.len && !queue(&up, in.buf, in.len))
					return 1;
				in.len = 0;
				in_open = false;
			}
		}
		if ((p[1].revents & POLLOUT) && up.len) {
			ssize_t n = send(fd, up.buf, up.len, MSG_DONTWAIT | MSG_NOSIGNAL);

			if (n < 0 && errno != EAGAIN && errno != EINTR)
				return 1;
			if (n > 0)
				consume(&up, (size_t)n);
		}
		/* The client gone and everything of it sent: the gateway is told. */
		if (!in_open && up.len == 0 && up_open) {
			shutdown(fd, SHUT_WR);
			up_open = false;
		}
		if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			/* The gateway's end is ours: once it closes, so do we. */
			r = fill(fd, &out);
			if (r == -2)
				return 1;
			while ((nl = memchr(out.buf, '\n', out.len)) != NULL) {
				size_t n = (size_t)(nl - out.buf) + 1;

				if (out.buf[0] == PROTO_MCP_FS_MARK ? !fs_request(&up, out.buf, n) :
					guest_write_all(STDOUT_FILENO, out.buf, n) < 0)
					return 1;
				consume(&out, n);
			}
			if (r <= 0) {
				if (out.len)
					(void)!guest_write_all(STDOUT_FILENO, out.buf, out.len);
				return r == 0 ? 0 : 1;
			}
		}
	}
}
