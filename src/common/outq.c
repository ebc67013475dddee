/* The bounded outbound queue (see outq.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/outq.h"
#include "common/unixsock.h"
#include "common/util.h"

struct outq_chunk {
	struct outq_chunk *next;
	size_t len, off;
	int fd; /* goes with the chunk's first byte; -1: none */
	uint8_t data[];
};

void outq_init(struct outq *q, size_t cap)
{
	*q = (struct outq){ .cap = cap };
}

bool outq_pending(const struct outq *q)
{
	return q->head != NULL;
}

/* Zeroed first: a queued frame may carry a process's environment. */
static void chunk_free(struct outq_chunk *c)
{
	if (c->fd >= 0)
		close(c->fd);
	explicit_bzero(c->data, c->len);
	free(c);
}

int outq_flush(struct outq *q, int sock)
{
	while (q->head) {
		struct outq_chunk *c = q->head;
		const uint8_t *p = c->data + c->off;
		size_t left = c->len - c->off;
		ssize_t n;

		if (c->fd >= 0)
			n = unix_send_fd(sock, p, left, c->fd, MSG_DONTWAIT | MSG_NOSIGNAL);
		else
			n = send(sock, p, left, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n < 0)
			return -1;
		q->progress_at = now_ms();
		if (n > 0 && c->fd >= 0) {
			close(c->fd);
			c->fd = -1;
		}
		c->off += (size_t)n;
		q->bytes -= (size_t)n;
		if (c->off < c->len)
			return 0;
		q->head = c->next;
		if (q->head == NULL)
			q->tail = NULL;
		chunk_free(c);
	}
	return 0;
}

int outq_send(struct outq *q, int sock, const void *buf, size_t len, int fd)
{
	struct outq_chunk *c;

	if (len == 0) { /* an fd needs a byte to travel with */
		errno = EINVAL;
		return -1;
	}
	if (q->bytes + len > q->cap) {
		errno = ENOBUFS;
		return -1;
	}
	c = xmalloc(sizeof(*c) + len);
	c->next = NULL;
	c->len = len;
	c->off = 0;
	c->fd = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
	if (fd >= 0 && c->fd < 0) {
		free(c);
		return -1;
	}
	memcpy(c->data, buf, len);
	if (q->head == NULL)
		q->progress_at = now_ms();
	if (q->tail)
		q->tail->next = c;
	else
		q->head = c;
	q->tail = c;
	q->bytes += len;
	return outq_flush(q, sock);
}

bool outq_stalled(const struct outq *q, uint64_t now, uint64_t stall_ms)
{
	return q->head && now >= q->progress_at + stall_ms;
}

void outq_free(struct outq *q)
{
	while (q->head) {
		struct outq_chunk *c = q->head;

		q->head = c->next;
		chunk_free(c);
	}
	q->tail = NULL;
	q->bytes = 0;
}
