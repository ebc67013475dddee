/* A session's output to the caller's fds (see hostout.h).
 *
 * A blocking write() to the user's terminal stopped with Ctrl-S, or to a
 * pipe into a pager that stopped reading, would park the relay until the
 * user's side moves again, deaf to EXIT, to agent_cancel and to the
 * signals it forwards. Setting O_NONBLOCK on the fds we were given is no
 * cure: the flag belongs to the open file description, which the shell and
 * every other process on that terminal share, and a shell whose terminal
 * turned non-blocking under it breaks. So, by what the fd is:
 *  - a regular file or a block device never waits on a reader: plain
 *    writes to the caller's fd (not a copy: its offset and O_APPEND are
 *    the caller's);
 *  - a socket: send() with MSG_DONTWAIT, non-blocking for that call only;
 *  - a pipe, FIFO or terminal: a description of our own, opened through
 *    /proc/self/fd with O_NONBLOCK; the caller's is untouched;
 *  - where that open fails (no /proc, a pty master, which it would
 *    duplicate, a FIFO whose reader is gone): the caller's fd, written only
 *    once poll() says it is writable and at most PIPE_BUF bytes at a time,
 *    which a pipe takes whole; a terminal that stops in the middle of such
 *    a write can still hold the relay, a risk left to those hosts.
 * What does not go now waits in the relay, which stops reading the guest's
 * stream meanwhile: backpressure reaches the guest's pipe, not our memory. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "agent/hostout.h"
#include "common/util.h"

#define PTMX_MAJOR 5 /* /dev/ptmx: opening it again makes a new terminal */
#define PTMX_MINOR 2

void hostout_open(struct hostout *o, int fd)
{
	char path[32];
	struct stat st;
	int own;

	o->fd = fd;
	o->dead = false;
	if (fd < 0) {
		o->kind = HOSTOUT_NONE;
		return;
	}
	if (fstat(fd, &st) < 0 || S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) {
		o->kind = HOSTOUT_PLAIN; /* a failed fstat: its writes will say */
		return;
	}
	if (S_ISSOCK(st.st_mode)) {
		o->kind = HOSTOUT_SOCKET;
		return;
	}
	o->kind = HOSTOUT_GATED;
	if (S_ISCHR(st.st_mode) && major(st.st_rdev) == PTMX_MAJOR &&
	    minor(st.st_rdev) == PTMX_MINOR)
		return;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	own = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (own >= 0) {
		o->fd = own;
		o->kind = HOSTOUT_PRIVATE;
	}
}

void hostout_close(struct hostout *o)
{
	if (o->kind == HOSTOUT_PRIVATE)
		close(o->fd);
	o->kind = HOSTOUT_NONE;
	o->fd = -1;
}

bool hostout_live(const struct hostout *o)
{
	return o->kind != HOSTOUT_NONE && !o->dead;
}

int hostout_fd(const struct hostout *o)
{
	return o->fd;
}

/* write() without dying of SIGPIPE: blocked on this thread for the call,
 * and a SIGPIPE it raised is taken back. */
static ssize_t write_quietly(int fd, const void *buf, size_t len)
{
	sigset_t pipe_set, old;
	ssize_t n;
	int saved;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	do
		n = write(fd, buf, len);
	while (n < 0 && errno == EINTR);
	saved = errno;
	if (n < 0 && saved == EPIPE && !sigismember(&old, SIGPIPE)) {
		struct timespec zero = { 0 };

		sigtimedwait(&pipe_set, NULL, &zero);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved;
	return n;
}

/* GATED: may a write go now, and how much of one. */
static size_t gated_room(const struct hostout *o, size_t len)
{
	struct pollfd p = { .fd = o->fd, .events = POLLOUT };

	if (poll(&p, 1, 0) <= 0)
		return 0;
	/* POLLERR or POLLHUP: the write says what happened. */
	return MIN(len, (size_t)PIPE_BUF);
}

ssize_t hostout_write(struct hostout *o, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	size_t done = 0;

	if (!hostout_live(o))
		return o->dead ? -1 : (ssize_t)len;
	while (done < len) {
		size_t chunk = len - done;
		ssize_t n;

		if (o->kind == HOSTOUT_GATED && (chunk = gated_room(o, chunk)) == 0)
			break;
		if (o->kind == HOSTOUT_SOCKET)
			n = send(o->fd, p + done, chunk, MSG_DONTWAIT | MSG_NOSIGNAL);
		else
			n = write_quietly(o->fd, p + done, chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if ((n < 0 && errno == EAGAIN) || n == 0)
			break;
		if (n < 0) {
			o->dead = true;
			return -1;
		}
		done += (size_t)n;
	}
	return (ssize_t)done;
}
