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
#include <errno.h>
#include <fcntl.h>
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

/* One connection: dial the host, name the socket, join the two. */
static void serve_conn(const struct guest_config *cfg, int conn, uint32_t index)
{
	uint8_t hdr[4] = { (uint8_t)index, (uint8_t)(index >> 8), (uint8_t)(index >> 16),
			   (uint8_t)(index >> 24) };
	struct pollfd p[2];
	bool open[2] = { true, true };
	char *buf = malloc(SOCKET_COPY_BUF);
	int host = link_dial(cfg, PROTO_SOCKET_PORT);

	if (host < 0 || buf == NULL || write(host, hdr, sizeof(hdr)) != (ssize_t)sizeof(hdr))
		_exit(1);
	while (open[0] || open[1]) {
		p[0] = (struct pollfd){ .fd = open[0] ? conn : -1, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = open[1] ? host : -1, .events = POLLIN };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents && !copy_once(conn, host, buf))
			open[0] = false;
		if (p[1].revents && !copy_once(host, conn, buf))
			open[1] = false;
	}
	_exit(0);
}

static int listen_at(size_t i)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

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
	struct pollfd p[SOCKETS_MAX];
	sigset_t none;
	pid_t pid;

	if (cfg->sockets == NULL || cfg->sockets->n == 0)
		return;
	if (mkdir(SOCKETS_DIR, 0755) < 0 && errno != EEXIST) {
		guest_log("mkdir %s: %s; no socket relayed", SOCKETS_DIR, strerror(errno));
		return;
	}
	for (size_t i = 0; i < cfg->sockets->n; i++)
		p[i] = (struct pollfd){ .fd = listen_at(i), .events = POLLIN };
	pid = fork();
	if (pid < 0)
		guest_log("fork the socket relay: %s", strerror(errno));
	if (pid != 0) {
		for (size_t i = 0; i < cfg->sockets->n; i++)
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
		if (poll(p, cfg->sockets->n, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		for (size_t i = 0; i < cfg->sockets->n; i++) {
			int conn;

			if (!(p[i].revents & POLLIN))
				continue;
			conn = accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC);
			if (conn < 0)
				continue;
			if (fork() == 0)
				serve_conn(cfg, conn, (uint32_t)i);
			close(conn);
		}
	}
}
