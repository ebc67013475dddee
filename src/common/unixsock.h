/* Listening Unix sockets for the host side: the agent's ports, a VMM's vsock
 * bridge, a sandbox's ctl.sock; connecting to one; and passing a
 * descriptor over one. And a TCP listener on loopback (an OAuth login's
 * callback). */
#ifndef GANTRY_COMMON_UNIXSOCK_H
#define GANTRY_COMMON_UNIXSOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

/* A non-blocking, close-on-exec stream socket listening at path, mode 0600
 * before anyone can connect to it; the process's umask is left alone, so
 * threads may call it. A socket left at path (by a process that died) is
 * replaced; anything else there makes it fail. */
int unix_listen(const char *path, int backlog, gantry_error_t *err);
/* A close-on-exec stream socket connected to path; with SOCK_NONBLOCK in
 * flags non-blocking, a connect still under way taken as made. Its fd, or
 * -1 with errno (ENAMETOOLONG: path does not fit a socket address). */
int unix_connect(const char *path, int flags);
/* Whether path fits a socket address (sun_path, with its NUL). */
bool unix_path_fits(const char *path);
/* The same for name in the directory dirfd, however long the
 * directory's path (through /proc/self/fd). */
int unix_connect_at(int dirfd, const char *name, int flags);
/* The UID of the peer on the Unix socket fd (SO_PEERCRED); -1 when it
 * cannot be known. */
long unix_peer_uid(int fd);
/* Whether that peer runs as our effective UID. */
bool unix_peer_is_us(int fd);

/* sendmsg() of len bytes from buf with fd attached (SCM_RIGHTS); flags as
 * for sendmsg. Returns what sendmsg returns. */
ssize_t unix_send_fd(int sock, const void *buf, size_t len, int fd, int flags);

/* The same with nr_fds (at most UNIX_FDS_MAX) descriptors. */
#define UNIX_FDS_MAX 128
ssize_t unix_send_fds(int sock, const void *buf, size_t len, const int *fds, size_t nr_fds,
		      int flags);
/* recvmsg() of one message into buf, its descriptors (close-on-exec) into
 * fds, at most max_fds (the rest closed). A message or descriptor list
 * cut short is an error (EMSGSIZE), its descriptors closed. */
ssize_t unix_recv_fds(int sock, void *buf, size_t cap, int *fds, size_t max_fds, size_t *nr_fds,
		      int flags);

/* A non-blocking, close-on-exec TCP listener on the loopback address of
 * family af (AF_INET: 127.0.0.1; AF_INET6: [::1], IPv6 only) at *port, 0
 * for any free one (*port then says which): its fd, or -1 with errno. */
int loopback_listen(int af, uint16_t *port);

#endif
