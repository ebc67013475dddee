/* Host Unix sockets in the container (gantry wrap's -socket): one
 * gantry.sock=CTR token each, CTR the socket's path in base64url (as a
 * share's). A host socket seen through a share cannot be connected to from
 * the guest, so gantry-init listens on a socket of its own for each
 * (SOCKETS_DIR/N), spec.c binds it over CTR in the container, and each
 * connection is carried over a vsock stream to the host's PROTO_SOCKET_PORT,
 * its first 4 bytes N (little-endian), where the host connects to its
 * socket and the two are joined.
 *
 * One process of its own does it (forked before READY): it accepts, and a
 * child per connection copies the bytes both ways until either side ends.
 * gantry-init itself never blocks on a connection. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "guest/guest.h"

#define SOCKET_COPY_BUF (64 * 1024)

bool sockets_add(struct guest_sockets *l, const char *value, char why[SHARE_WHY_MAX])
{
	char path[SHARE_PATH_MAX + 1];
	const char *problem;
	long n;

	if (l->n == SOCKETS_MAX) {
		snprintf(why, SHARE_WHY_MAX, "more than %d sockets", SOCKETS_MAX);
		return false;
	}
	n = shares_b64url_decode(value, strlen(value), path, sizeof(path));
	if (n < 0) {
		snprintf(why, SHARE_WHY_MAX, "not a path in base64url");
		return false;
	}
	problem = shares_path_problem(path, (size_t)n);
	if (problem) {
		snprintf(why, SHARE_WHY_MAX, "%s", problem);
		return false;
	}
	l->v[l->n] = strdup(path);
	if (l->v[l->n] == NULL) {
		snprintf(why, SHARE_WHY_MAX, "out of memory");
		return false;
	}
	l->n++;
	return true;
}

/* Copy what one side has into the other, whole; false once a side ended
 * (its half of the other is shut, so the peer sees the end too). */
static bool copy_once(int from, int to, char *buf)
{
	ssize_t n = read(from, buf, SOCKET_COPY_BUF);

	if (n <= 0) {
		shutdown(to, SHUT_WR);
		return false;
	}
	for (ssize_t off = 0; off < n;) {
		ssize_t w = write(to, buf + off, (size_t)(n - off));

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		off += w;
	}
	return true;
}

/* Copy both ways between a and b until both ends ended; then exit (a
 * connection's own process). */
static void join_and_exit(int a, int b)
{
	struct pollfd p[2];
	bool open[2] = { true, true };
	char *buf = malloc(SOCKET_COPY_BUF);

	if (buf == NULL)
		_exit(1);
	while (open[0] || open[1]) {
		p[0] = (struct pollfd){ .fd = open[0] ? a : -1, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = open[1] ? b : -1, .events = POLLIN };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents && !copy_once(a, b, buf))
			open[0] = false;
		if (p[1].revents && !copy_once(b, a, buf))
			open[1] = false;
	}
	_exit(0);
}

/* One connection: dial the host, name the socket, join the two. */
static void serve_conn(const struct guest_config *cfg, int conn, uint32_t index)
{
	uint8_t hdr[4] = { (uint8_t)index, (uint8_t)(index >> 8), (uint8_t)(index >> 16),
			   (uint8_t)(index >> 24) };
	int host = link_dial(cfg, PROTO_SOCKET_PORT);

	if (host < 0 || write(host, hdr, sizeof(hdr)) != (ssize_t)sizeof(hdr))
		_exit(1);
	join_and_exit(conn, host);
}

/* The OAuth bridge's replay (gantry.oauth=1): the host carries a browser's
 * callback request to a loopback port of the guest, named in the stream's
 * first 2 bytes (little-endian); joined to a connection to 127.0.0.1 there,
 * where the login tool waits for it. */
static void serve_replay(int host)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	uint8_t port[2];
	int tcp;

	if (read(host, port, sizeof(port)) != (ssize_t)sizeof(port) || (port[0] | port[1]) == 0)
		_exit(1);
	sa.sin_port = htons((uint16_t)(port[0] | port[1] << 8));
	tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (tcp < 0 || connect(tcp, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		_exit(1);
	join_and_exit(host, tcp);
}

static int listen_replay(void)
{
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK,
				  .svm_cid = VMADDR_CID_ANY,
				  .svm_port = PROTO_OAUTH_REPLAY_PORT };
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 8) < 0) {
		guest_log("the OAuth bridge's vsock port %d: %s", PROTO_OAUTH_REPLAY_PORT,
			  strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* SOCKETS_DIR/I, or path when given. */
static int listen_at(size_t i, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (path)
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	else
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%zu", SOCKETS_DIR, i);
	unlink(sa.sun_path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(sa.sun_path, 0666) < 0 || listen(fd, 64) < 0) {
		guest_log("socket %s: %s", sa.sun_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

void sockets_start(const struct guest_config *cfg)
{
	struct pollfd p[SOCKETS_MAX + 2];
	size_t n = cfg->sockets ? cfg->sockets->n : 0;
	sigset_t none;
	pid_t pid;

	if (n == 0 && !cfg->oauth_bridge && !cfg->mcpfs)
		return;
	if ((n || cfg->mcpfs) && mkdir(SOCKETS_DIR, 0755) < 0 && errno != EEXIST) {
		guest_log("mkdir %s: %s; no socket relayed", SOCKETS_DIR, strerror(errno));
		n = 0;
	}
	for (size_t i = 0; i < n; i++)
		p[i] = (struct pollfd){ .fd = listen_at(i, NULL), .events = POLLIN };
	/* The last two slots: the OAuth bridge's replays and the MCP fs
	 * server, where asked for. */
	p[n] = (struct pollfd){ .fd = cfg->oauth_bridge ? listen_replay() : -1, .events = POLLIN };
	p[n + 1] = (struct pollfd){ .fd = cfg->mcpfs ? listen_at(0, MCPFS_LISTEN) : -1,
				    .events = POLLIN };
	pid = fork();
	if (pid < 0)
		guest_log("fork the socket relay: %s", strerror(errno));
	if (pid != 0) {
		for (size_t i = 0; i <= n + 1; i++)
			if (p[i].fd >= 0)
				close(p[i].fd);
		return;
	}
	/* The relay: its children reap themselves. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGCHLD, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	for (;;) {
		if (poll(p, n + 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		for (size_t i = 0; i <= n + 1; i++) {
			int conn;

			if (!(p[i].revents & POLLIN))
				continue;
			conn = accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC);
			if (conn < 0)
				continue;
			if (fork() == 0) {
				if (i == n + 1)
					mcpfs_serve(cfg->mcpfs, conn);
				if (i == n)
					serve_replay(conn);
				serve_conn(cfg, conn, (uint32_t)i);
			}
			close(conn);
		}
	}
}
