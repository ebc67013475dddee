/* Doors for the guest's dials (see door.h). */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/door.h"
#include "common/unixsock.h"
#include "common/util.h"

/* Where port's door sits in t, or t->n. Under t->lock. */
static size_t find(const struct doors *t, uint32_t port)
{
	size_t i = 0;

	while (i < t->n && t->d[i].port != port)
		i++;
	return i;
}

static void shut(struct doors *t, size_t i)
{
	close(t->d[i].knock);
	t->d[i] = t->d[--t->n];
}

/* A door is a stream pair, each dial one byte with its descriptor (a
 * read of one byte takes one). It holds as many dials as the dialler's
 * send buffer, DOOR_SNDBUF: about 20 (a datagram queue would hold a
 * sysctl's ten). Each waits as a descriptor in flight, which the kernel
 * counts against the user's open-file limit, so the bound matters: a
 * guest that dials without end must not pin more. */
int doors_open(struct doors *t, uint32_t port, gantry_error_t *err)
{
	int sv[2], size = DOOR_SNDBUF;
	size_t i;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
		return gantry_error_errno(err, "a door for host port %u", port);
	if (setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)) < 0) {
		gantry_error_errno(err, "a door for host port %u", port);
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	pthread_mutex_lock(&t->lock);
	i = find(t, port);
	if (i < t->n)
		shut(t, i);
	if (t->n == DOORS_MAX) {
		pthread_mutex_unlock(&t->lock);
		close(sv[0]);
		close(sv[1]);
		return gantry_error(err, EMFILE, "a door for host port %u: %d are open", port,
				    DOORS_MAX);
	}
	t->d[t->n].port = port;
	t->d[t->n++].knock = sv[1];
	pthread_mutex_unlock(&t->lock);
	return sv[0];
}

int doors_dial(struct doors *t, uint32_t port)
{
	int pair[2], e = ECONNREFUSED;
	ssize_t sent = -1;
	size_t i;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) < 0)
		return -1;
	pthread_mutex_lock(&t->lock);
	i = find(t, port);
	if (i < t->n) {
		sent = unix_send_fd(t->d[i].knock, "c", 1, pair[1], MSG_DONTWAIT | MSG_NOSIGNAL);
		if (sent < 0)
			e = errno == EAGAIN ? EAGAIN : ECONNREFUSED;
	}
	pthread_mutex_unlock(&t->lock);
	close(pair[1]);
	if (sent < 0) {
		close(pair[0]);
		errno = e;
		return -1;
	}
	return pair[0];
}

void doors_shut(struct doors *t, uint32_t port)
{
	size_t i;

	pthread_mutex_lock(&t->lock);
	i = find(t, port);
	if (i < t->n)
		shut(t, i);
	pthread_mutex_unlock(&t->lock);
}

void doors_free(struct doors *t)
{
	pthread_mutex_lock(&t->lock);
	while (t->n)
		shut(t, 0);
	pthread_mutex_unlock(&t->lock);
}

int door_accept(int in)
{
	char c;
	int fd = -1;
	size_t n = 0;
	ssize_t got = unix_recv_fds(in, &c, 1, &fd, 1, &n, MSG_DONTWAIT);

	if (got == 0 || (got > 0 && n == 0)) {
		/* Every dialler gone; or a byte with nothing on it. */
		errno = got == 0 ? EPIPE : EPROTO;
		return -1;
	}
	return got < 0 ? -1 : fd;
}
