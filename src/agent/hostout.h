/* Inside the agent library only: a session's output written to the
 * caller's fds (the user's terminal, a pipe, a file) without ever blocking
 * the relay loop, so that a stopped terminal or a pager that stopped
 * reading cannot make it deaf to EXIT, cancel and signals. It owns the
 * private descriptions it opens, never the caller's fds or their flags. */
#ifndef GANTRY_AGENT_HOSTOUT_H
#define GANTRY_AGENT_HOSTOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

enum hostout_kind {
	HOSTOUT_NONE,	 /* no fd: output dropped */
	HOSTOUT_PLAIN,	 /* a regular file or block device: never waits on a reader */
	HOSTOUT_SOCKET,	 /* send(MSG_DONTWAIT) */
	HOSTOUT_PRIVATE, /* our own non-blocking description of a pipe or terminal */
	HOSTOUT_GATED,	 /* the caller's blocking fd, written after POLLOUT only */
};

struct hostout {
	enum hostout_kind kind;
	int fd;	   /* what we write to: the caller's, or ours (PRIVATE) */
	bool dead; /* it refused a write (EPIPE, EIO...): drop the rest */
};

void hostout_open(struct hostout *o, int fd);
void hostout_close(struct hostout *o);
/* Anything to write to (an fd that has not refused a write). */
bool hostout_live(const struct hostout *o);
/* Write what goes without waiting: how many bytes (0: try again on POLLOUT
 * of hostout_fd), or -1 once the fd refused it (o->dead is then set). */
ssize_t hostout_write(struct hostout *o, const void *buf, size_t len);
/* The fd to poll for POLLOUT while bytes wait. */
int hostout_fd(const struct hostout *o);

#endif
