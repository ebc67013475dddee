/* A listener served on a thread (see acceptor.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/acceptor.h"
#include "common/unixsock.h"
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
		fd = accept4(a->listen, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			continue;
		if (a->max == 0)
			a->conn(a->opaque, fd);
		else
			hand_over(a, fd);
	}
	return NULL;
}

int acceptor_listen(struct acceptor *a, const char *path, int backlog, unsigned int max,
		    void (*conn)(void *opaque, int fd), void *opaque, gantry_error_t *err)
{
	*a = (struct acceptor){ .listen = -1, .stop = { -1, -1 }, .max = max, .conn = conn,
				.opaque = opaque };
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->done, NULL);
	a->ready = true;
	a->listen = unix_listen(path, backlog, err);
	if (a->listen < 0)
		return -1;
	if (pipe2(a->stop, O_CLOEXEC) < 0)
		return gantry_error_errno(err, "a stop pipe");
	return 0;
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
