/* Listening Unix sockets and descriptor passing (see unixsock.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/unixsock.h"
#include "common/util.h"

int unix_listen(const char *path, int backlog, gantry_error_t *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	cleanup_close int fd = -1;
	struct stat st;
	int r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return gantry_error(err, ENAMETOOLONG, "socket path `%s` is too long", path);
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return gantry_error_errno(err, "socket");
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && unlink(path) < 0)
		return gantry_error_errno(err, "remove stale `%s`", path);
	/* No umask dance (it is the whole process's, threads and all): until
	 * listen() nobody can connect, and by then it is 0600. */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return gantry_error_errno(err, "bind `%s`", path);
	if (chmod(path, 0600) < 0 || listen(fd, backlog) < 0) {
		r = errno;
		unlink(path);
		return gantry_error(err, r, "listen `%s`", path);
	}
	return steal_fd(&fd);
}

bool unix_path_fits(const char *path)
{
	return strlen(path) < sizeof(((struct sockaddr_un *)0)->sun_path);
}

int unix_connect(const char *path, int flags)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, e;

	if (!unix_path_fits(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (flags & SOCK_NONBLOCK), 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ||
	    (errno == EINPROGRESS && (flags & SOCK_NONBLOCK)))
		return fd;
	e = errno;
	close(fd);
	errno = e;
	return -1;
}

int unix_connect_at(int dirfd, const char *name, int flags)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];

	if ((size_t)snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", dirfd, name) >=
	    sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return unix_connect(path, flags);
}

ssize_t unix_send_fds(int sock, const void *buf, size_t len, const int *fds, size_t nr_fds,
		      int flags)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	cleanup_free char *ctl = NULL;
	struct cmsghdr *cm;

	if (nr_fds > UNIX_FDS_MAX) {
		errno = EINVAL;
		return -1;
	}
	if (nr_fds == 0)
		return sendmsg(sock, &msg, flags);
	ctl = xzalloc(CMSG_SPACE(nr_fds * sizeof(int)));
	msg.msg_control = ctl;
	msg.msg_controllen = CMSG_SPACE(nr_fds * sizeof(int));
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(nr_fds * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, nr_fds * sizeof(int));
	return sendmsg(sock, &msg, flags);
}

ssize_t unix_recv_fds(int sock, void *buf, size_t cap, int *fds, size_t max_fds, size_t *nr_fds,
		      int flags)
{
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	size_t space = CMSG_SPACE(UNIX_FDS_MAX * sizeof(int));
	cleanup_free char *ctl = xzalloc(space);
	ssize_t n;

	*nr_fds = 0;
	msg.msg_control = ctl;
	msg.msg_controllen = space;
	n = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -1;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
		size_t k;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (*nr_fds < max_fds)
				fds[(*nr_fds)++] = fd;
			else
				close(fd);
		}
	}
	if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		for (size_t i = 0; i < *nr_fds; i++)
			close(fds[i]);
		*nr_fds = 0;
		errno = EMSGSIZE;
		return -1;
	}
	return n;
}

ssize_t unix_send_fd(int sock, const void *buf, size_t len, int fd, int flags)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	memset(&ctl, 0, sizeof(ctl));
	msg.msg_control = ctl.buf;
	msg.msg_controllen = sizeof(ctl.buf);
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sock, &msg, flags);
}

int loopback_listen(int af, uint16_t *port)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_port = htons(*port),
				   .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	struct sockaddr_in s4 = { .sin_family = AF_INET, .sin_port = htons(*port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr *sa = af == AF_INET6 ? (struct sockaddr *)&s6 : (struct sockaddr *)&s4;
	socklen_t sl = af == AF_INET6 ? sizeof(s6) : sizeof(s4);
	int one = 1, fd = socket(af, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (af == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, sa, sl) < 0 || listen(fd, 8) < 0 || getsockname(fd, sa, &sl) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	*port = ntohs(af == AF_INET6 ? s6.sin6_port : s4.sin_port);
	return fd;
}

long unix_peer_uid(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -1;
	return (long)cred.uid;
}

bool unix_peer_is_us(int fd)
{
	return unix_peer_uid(fd) == (long)geteuid();
}
