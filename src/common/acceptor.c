/* A listener served on a thread (see acceptor.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/acceptor.h"
#include "common/door.h"
#include "common/util.h"

struct handed {
	struct acceptor *a;
	int fd;
};

static void *conn_main(void *arg)
{
	struct handed *h = arg;
	struct acceptor *a = h->a;

	a->conn(a->opaque, h->fd);
	free(h);
	pthread_mutex_lock(&a->lock);
	a->active--;
	pthread_cond_broadcast(&a->done);
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

/* fd on a thread of its own, within max; else closed. */
static void hand_over(struct acceptor *a, int fd)
{
	struct handed *h;
	pthread_t t;

	pthread_mutex_lock(&a->lock);
	if (a->active == a->max) {
		pthread_mutex_unlock(&a->lock);
		close(fd);
		return;
	}
	h = xmalloc(sizeof(*h));
	*h = (struct handed){ a, fd };
	if (pthread_create(&t, NULL, conn_main, h) != 0) {
		pthread_mutex_unlock(&a->lock);
		close(fd);
		free(h);
		return;
	}
	pthread_detach(t);
	a->active++;
	pthread_mutex_unlock(&a->lock);
}

static void *serve(void *arg)
{
	struct acceptor *a = arg;

	for (;;) {
		struct pollfd p[2] = { { .fd = a->listen, .events = POLLIN },
				       { .fd = a->stop[0], .events = POLLIN } };
		int fd;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!p[0].revents)
			continue;
		fd = a->door ? door_accept(a->listen) :
			       accept4(a->listen, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0 && errno == EPIPE)
			break; /* the door is shut: no dial comes any more */
		if (fd < 0)
			continue;
		if (a->max == 0)
			a->conn(a->opaque, fd);
		else
			hand_over(a, fd);
	}
	return NULL;
}

int acceptor_adopt(struct acceptor *a, int listen, unsigned int max,
		   void (*conn)(void *opaque, int fd), void *opaque, gantry_error_t *err)
{
	*a = (struct acceptor){ .listen = listen, .stop = { -1, -1 }, .max = max, .conn = conn,
				.opaque = opaque };
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->done, NULL);
	a->ready = true;
	if (listen < 0)
		return -1;
	if (pipe2(a->stop, O_CLOEXEC) < 0)
		return gantry_error_errno(err, "a stop pipe");
	return 0;
}

int acceptor_door(struct acceptor *a, struct doors *doors, uint32_t port, unsigned int max,
		  void (*conn)(void *opaque, int fd), void *opaque, gantry_error_t *err)
{
	int r = acceptor_adopt(a, doors_open(doors, port, err), max, conn, opaque, err);

	a->door = true;
	return r;
}

#define JOIN_BUF (64 * 1024)

struct join_dir {
	char buf[JOIN_BUF];
	size_t len, off;
	bool eof; /* the reading side ended */
};

/* Move bytes from one side into d, or from d to the other side. */
static void pump(int from, int to, struct join_dir *d, short rev_from, short rev_to)
{
	if (d->len == 0 && !d->eof && (rev_from & (POLLIN | POLLHUP | POLLERR))) {
		ssize_t n = recv(from, d->buf, sizeof(d->buf), MSG_DONTWAIT);

		if (n > 0)
			d->len = (size_t)n, d->off = 0;
		else if (n == 0 || (errno != EAGAIN && errno != EINTR))
			d->eof = true;
		if (d->eof)
			shutdown(to, SHUT_WR);
	}
	if (d->len && (rev_to & POLLOUT)) {
		ssize_t n = send(to, d->buf + d->off, d->len - d->off, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n > 0) {
			d->off += (size_t)n;
			if (d->off == d->len)
				d->len = d->off = 0;
		} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
			d->eof = true;
			d->len = 0;
		}
	}
}

void acceptor_join(const struct acceptor *a, int x, int y)
{
	struct join_dir *up = xzalloc(sizeof(*up)), *down = xzalloc(sizeof(*down));

	while (!(up->eof && up->len == 0 && down->eof && down->len == 0)) {
		struct pollfd p[3] = {
			{ .fd = x,
			  .events = (short)((!up->eof && !up->len ? POLLIN : 0) |
					    (down->len ? POLLOUT : 0)) },
			{ .fd = y,
			  .events = (short)((!down->eof && !down->len ? POLLIN : 0) |
					    (up->len ? POLLOUT : 0)) },
			{ .fd = a->stop[0], .events = POLLIN },
		};

		/* A side hung up reports it at every poll: one asked for
		 * nothing is left out, so the wait is for the other. */
		for (int i = 0; i < 2; i++)
			if (p[i].events == 0)
				p[i].fd = -1;
		if (poll(p, 3, -1) < 0 && errno != EINTR)
			break;
		if (p[2].revents)
			break;
		pump(x, y, up, p[0].revents, p[1].revents);
		pump(y, x, down, p[1].revents, p[0].revents);
		/* A side that hung up both ways takes no more. */
		if ((p[0].revents & (POLLHUP | POLLERR)) && up->eof)
			down->eof = true, down->len = 0;
		if ((p[1].revents & (POLLHUP | POLLERR)) && down->eof)
			up->eof = true, up->len = 0;
	}
	free(up);
	free(down);
}

int acceptor_run(struct acceptor *a, const char *what, gantry_error_t *err)
{
	if (a->listen < 0 || a->running)
		return 0;
	if (pthread_create(&a->thread, NULL, serve, a) != 0)
		return gantry_error(err, EAGAIN, "%s: no thread", what);
	a->running = true;
	return 0;
}

ssize_t acceptor_read_line(const struct acceptor *a, int fd, char *buf, size_t max, int ms)
{
	size_t got = 0;

	while (got < max && !memchr(buf, '\n', got)) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN },
				       { .fd = a->stop[0], .events = POLLIN } };
		ssize_t n;

		if (poll(p, 2, ms) <= 0 || p[1].revents)
			return -1;
		n = recv(fd, buf + got, max - got, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	buf[got] = '\0';
	return (ssize_t)got;
}

void acceptor_stop(struct acceptor *a)
{
	if (a->running) {
		(void)!write(a->stop[1], "x", 1);
		pthread_join(a->thread, NULL);
		pthread_mutex_lock(&a->lock);
		while (a->active)
			pthread_cond_wait(&a->done, &a->lock);
		pthread_mutex_unlock(&a->lock);
		a->running = false;
	}
	close_fd(&a->listen);
	close_fd(&a->stop[0]);
	close_fd(&a->stop[1]);
	if (a->ready) {
		pthread_mutex_destroy(&a->lock);
		pthread_cond_destroy(&a->done);
		a->ready = false;
	}
}
