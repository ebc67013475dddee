/* gantry-init's link to the host: dialling a host port (vsock CID 2, or a
 * Unix socket in test mode), the control connection's first dial retried
 * briefly, and frames sent on the control connection, which a failed send
 * closes. It calls nothing of gantry-init but guest.c. */
#include <errno.h>
#include <linux/vm_sockets.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "guest/guest.h"

#define DIAL_RETRY_MS 10

/* A connected stream socket of family to sa, or -1 with errno. */
static int connect_to(int family, const void *sa, socklen_t len)
{
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd >= 0 && connect(fd, sa, len) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int link_dial(const struct guest_config *cfg, unsigned int port)
{
	if (cfg->host_dir) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };

		if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%u.sock", cfg->host_dir,
				     port) >= sizeof(sa.sun_path)) {
			errno = ENAMETOOLONG;
			return -1;
		}
		return connect_to(AF_UNIX, &sa, sizeof(sa));
	}
	{
		struct sockaddr_vm sa = {
			.svm_family = AF_VSOCK,
			.svm_cid = VMADDR_CID_HOST,
			.svm_port = port,
		};

		return connect_to(AF_VSOCK, &sa, sizeof(sa));
	}
}

int link_dial_control(const struct guest_config *cfg, unsigned int timeout_ms)
{
	uint64_t deadline = guest_now_ms(CLOCK_MONOTONIC) + timeout_ms;
	struct timespec pause = { .tv_nsec = DIAL_RETRY_MS * 1000000L };
	int fd;

	for (;;) {
		fd = link_dial(cfg, PROTO_CONTROL_PORT);
		if (fd >= 0 || guest_now_ms(CLOCK_MONOTONIC) >= deadline)
			return fd;
		nanosleep(&pause, NULL);
	}
}

void link_send(struct guest *g, const struct proto_msg *m)
{
	if (g->control < 0)
		return;
	if (proto_write_msg(g->control, m) < 0) {
		guest_log("control connection: send %s: %s", proto_type_name(m->type),
			  strerror(errno));
		close(g->control);
		g->control = -1;
	}
}

void link_send_error(struct guest *g, uint32_t id, uint32_t code, const char *fmt, ...)
{
	struct proto_msg m = { .type = PROTO_ERROR };
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	m.u.error.id = id;
	m.u.error.code = code;
	m.u.error.message = msg;
	guest_debug(g, "session %u: error %u: %s", id, code, msg);
	link_send(g, &m);
}
