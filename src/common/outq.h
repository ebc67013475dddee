/* An outbound queue for a non-blocking stream socket shared with a guest or
 * a client: what the peer does not take at once waits here, bounded, and
 * goes when the socket is writable. A peer that lets the queue pass its cap,
 * or takes nothing for a while with bytes waiting, is to be cut off: the
 * host never blocks on it and never holds an unbounded backlog for it. */
#ifndef GANTRY_COMMON_OUTQ_H
#define GANTRY_COMMON_OUTQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OUTQ_STALL_MS 10000 /* bytes waiting and none taken for this long: cut off */

struct outq_chunk;

struct outq {
	struct outq_chunk *head, *tail;
	size_t bytes, cap;
	uint64_t progress_at; /* when the peer last took bytes, or the queue filled */
};

void outq_init(struct outq *q, size_t cap);
/* Queue len bytes (with a dup of fd attached to their first byte when
 * fd >= 0, sent with SCM_RIGHTS) behind what waits, then send what the
 * socket takes. -1 with errno set on a send error, or ENOBUFS when the
 * bytes waiting would pass the cap (nothing is queued then). */
int outq_send(struct outq *q, int sock, const void *buf, size_t len, int fd);
/* Send what waits, as much as the socket takes; -1 with errno on an error. */
int outq_flush(struct outq *q, int sock);
bool outq_pending(const struct outq *q);
/* Bytes have waited with none taken for stall_ms up to now. */
bool outq_stalled(const struct outq *q, uint64_t now, uint64_t stall_ms);
/* Drop what waits (closing attached fds). */
void outq_free(struct outq *q);

#endif
