/* Agent protocol frames on file descriptors (see agent.h): blocking reads
 * and writes of one frame, sending what a full socket left over, and the
 * incremental decoder event loops feed as bytes arrive. Frames themselves
 * are encoded and decoded by codec.c. libc only, like the codec. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/agent.h"

/* --- blocking I/O --------------------------------------------------------------- */

/* 1 all read, 0 EOF before any byte, -1 error (EPROTO: EOF midway). */
static int read_all(int fd, uint8_t *p, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, p + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0) {
			if (got == 0)
				return 0;
			errno = EPROTO;
			return -1;
		}
		got += (size_t)n;
	}
	return 1;
}

int proto_read_msg(int fd, void *buf, struct proto_msg *m, const char **why)
{
	uint8_t *p = buf;
	uint32_t body;
	uint16_t type;
	int r;

	*why = NULL;
	memset(m, 0, sizeof(*m));
	r = read_all(fd, p, PROTO_HDR_SIZE);
	if (r <= 0) {
		if (r < 0)
			*why = errno == EPROTO ? "truncated header" : "read";
		return r;
	}
	if (proto_parse_header(p, &type, &body, why) < 0) {
		errno = EPROTO;
		return -1;
	}
	if (body && read_all(fd, p + PROTO_HDR_SIZE, body) <= 0) {
		if (errno == EPROTO || errno == 0) {
			errno = EPROTO;
			*why = "truncated body";
		} else {
			*why = "read";
		}
		return -1;
	}
	if (proto_decode(p, PROTO_HDR_SIZE + (size_t)body, m, why) < 0) {
		errno = EPROTO;
		return -1;
	}
	return 1;
}

int proto_send_pending(int fd, const uint8_t *buf, size_t len, size_t *off)
{
	while (*off < len) {
		ssize_t n = send(fd, buf + *off, len - *off, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0)
			return -1;
		*off += (size_t)n;
	}
	return 1;
}

int proto_write_msg(int fd, const struct proto_msg *m)
{
	uint8_t *buf = malloc(PROTO_MAX_FRAME);
	ssize_t len;
	size_t off = 0;
	int saved;

	if (buf == NULL) {
		errno = ENOMEM;
		return -1;
	}
	len = proto_encode(m, buf, PROTO_MAX_FRAME);
	if (len < 0) {
		free(buf);
		errno = EMSGSIZE;
		return -1;
	}
	while (off < (size_t)len) {
		ssize_t n = send(fd, buf + off, (size_t)len - off, MSG_NOSIGNAL);

		if (n < 0 && errno == ENOTSOCK)
			n = write(fd, buf + off, (size_t)len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			saved = errno;
			free(buf);
			errno = saved;
			return -1;
		}
		off += (size_t)n;
	}
	free(buf);
	return 0;
}

/* --- incremental decoder ---------------------------------------------------------- */

void proto_decoder_init(struct proto_decoder *d)
{
	d->have = 0;
	d->start = 0;
}

size_t proto_decoder_space(struct proto_decoder *d, uint8_t **p)
{
	/* Slide what is left to the front, so a whole frame always fits. */
	if (d->start > 0) {
		memmove(d->buf, d->buf + d->start, d->have - d->start);
		d->have -= d->start;
		d->start = 0;
	}
	*p = d->buf + d->have;
	return sizeof(d->buf) - d->have;
}

void proto_decoder_commit(struct proto_decoder *d, size_t n)
{
	size_t room = sizeof(d->buf) - d->have;

	d->have += n < room ? n : room;
}

size_t proto_decoder_push(struct proto_decoder *d, const void *data, size_t len)
{
	uint8_t *p;
	size_t room = proto_decoder_space(d, &p);
	size_t n = len < room ? len : room;

	memcpy(p, data, n);
	proto_decoder_commit(d, n);
	return n;
}

ssize_t proto_decoder_fill(struct proto_decoder *d, int fd)
{
	uint8_t *p;
	size_t room = proto_decoder_space(d, &p);
	ssize_t n;

	if (room == 0) {
		errno = ENOBUFS; /* the caller did not take the frames out */
		return -1;
	}
	do
		n = read(fd, p, room);
	while (n < 0 && errno == EINTR);
	if (n > 0)
		proto_decoder_commit(d, (size_t)n);
	return n;
}

int proto_decoder_next(struct proto_decoder *d, struct proto_msg *m, const char **why)
{
	size_t avail = d->have - d->start;
	uint8_t *p = d->buf + d->start;
	uint32_t body;
	uint16_t type;

	if (avail < PROTO_HDR_SIZE)
		return 0;
	if (proto_parse_header(p, &type, &body, why) < 0)
		return -1;
	if (avail - PROTO_HDR_SIZE < body)
		return 0;
	if (proto_decode(p, PROTO_HDR_SIZE + (size_t)body, m, why) < 0)
		return -1;
	d->start += PROTO_HDR_SIZE + (size_t)body;
	if (d->start == d->have)
		d->start = d->have = 0;
	return 1;
}

size_t proto_decoder_pending(const struct proto_decoder *d)
{
	return d->have - d->start;
}
