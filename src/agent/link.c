/* The agent's link (see link.h and session.h): the listeners where the
 * guest's control and stdio dials land, the control connection that
 * carries HELLO and READY, its bounded outbound queue, and SHUTDOWN.
 * Every wait polls the cancel pipe too and has a deadline, or none only
 * where the caller asked for none. */
#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent/link.h"
#include "common/door.h"
#include "common/unixsock.h"
#include "common/util.h"

#define AGENT_BACKLOG 16

uint64_t link_deadline(int timeout_ms)
{
	return timeout_ms < 0 ? UINT64_MAX : now_ms() + (uint64_t)timeout_ms;
}

int link_left_ms(uint64_t deadline)
{
	uint64_t now = now_ms();

	if (deadline == UINT64_MAX)
		return -1;
	return now >= deadline ? 0 : (int)MIN(deadline - now, (uint64_t)INT32_MAX);
}

int link_accept(const struct agent *a, int listen)
{
	if (a->doors)
		return door_accept(listen);
	return accept4(listen, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
}

static int set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -1;
	return fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

static int listen_vsock(unsigned int port, gantry_error_t *err)
{
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK,
				  .svm_cid = VMADDR_CID_ANY,
				  .svm_port = port };
	cleanup_close int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return gantry_error_errno(err, "vsock socket (is vhost_vsock loaded?)");
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return gantry_error_errno(err, "bind vsock port %u", port);
	if (listen(fd, AGENT_BACKLOG) < 0)
		return gantry_error_errno(err, "listen on vsock port %u", port);
	return steal_fd(&fd);
}

static struct agent *agent_new(gantry_error_t *err)
{
	struct agent *a = xzalloc(sizeof(*a));

	a->ctl_listen = a->stdio_listen = a->control = a->cancel_ext = -1;
	a->cancel[0] = a->cancel[1] = a->wake[0] = a->wake[1] = -1;
	a->peer = "the guest";
	outq_init(&a->out, AGENT_SEND_QUEUE_MAX);
	pthread_mutex_init(&a->send_lock, NULL);
	a->dec = xmalloc(sizeof(*a->dec));
	proto_decoder_init(a->dec);
	if (pipe2(a->cancel, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    pipe2(a->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		gantry_error_errno(err, "pipe");
		agent_free(a);
		return NULL;
	}
	return a;
}

/* Both listeners opened (a's paths name them), or a freed. */
static int agent_listening(struct agent *a, struct agent **out)
{
	if (a->ctl_listen < 0 || a->stdio_listen < 0) {
		agent_free(a);
		return -1;
	}
	*out = a;
	return 0;
}

int agent_listen(const char *dir, struct agent **out, gantry_error_t *err)
{
	struct agent *a = agent_new(err);

	if (a == NULL)
		return -1;
	a->unix_paths = true;
	xasprintf(&a->ctl_path, "%s/%d.sock", dir, PROTO_CONTROL_PORT);
	xasprintf(&a->stdio_path, "%s/%d.sock", dir, PROTO_STDIO_PORT);
	a->ctl_listen = unix_listen(a->ctl_path, AGENT_BACKLOG, err);
	if (a->ctl_listen >= 0)
		a->stdio_listen = unix_listen(a->stdio_path, AGENT_BACKLOG, err);
	return agent_listening(a, out);
}

int agent_open_doors(struct doors *d, struct agent **out, gantry_error_t *err)
{
	struct agent *a = agent_new(err);

	if (a == NULL)
		return -1;
	a->doors = true;
	xasprintf(&a->ctl_path, "host port %d", PROTO_CONTROL_PORT);
	xasprintf(&a->stdio_path, "host port %d", PROTO_STDIO_PORT);
	a->ctl_listen = doors_open(d, PROTO_CONTROL_PORT, err);
	if (a->ctl_listen >= 0)
		a->stdio_listen = doors_open(d, PROTO_STDIO_PORT, err);
	return agent_listening(a, out);
}

int agent_attach(int fd, struct agent **out, gantry_error_t *err)
{
	struct agent *a;

	/* On failure fd stays the caller's. */
	if (set_nonblock(fd, true) < 0)
		return gantry_error_errno(err, "session connection");
	a = agent_new(err);
	if (a == NULL)
		return -1;
	a->remote = true;
	a->peer = "the sandbox";
	a->control = fd;
	*out = a;
	return 0;
}

int agent_take_link(struct agent *a, int *control, int *stdio_listen, gantry_error_t *err)
{
	if (a->control < 0)
		return gantry_error(err, ENOTCONN, "the guest agent is not connected");
	if (proto_decoder_pending(a->dec))
		return gantry_error(err, EPROTO, "the guest sent more than HELLO unasked");
	if (link_pending(a))
		return gantry_error(err, EBUSY, "frames for the guest are still waiting");
	if (set_nonblock(a->control, false) < 0)
		return gantry_error_errno(err, "guest control connection");
	*control = steal_fd(&a->control);
	*stdio_listen = steal_fd(&a->stdio_listen);
	return 0;
}

int agent_listen_vsock(struct agent **out, gantry_error_t *err)
{
	struct agent *a = agent_new(err);

	if (a == NULL)
		return -1;
	xasprintf(&a->ctl_path, "vsock port %d", PROTO_CONTROL_PORT);
	xasprintf(&a->stdio_path, "vsock port %d", PROTO_STDIO_PORT);
	a->ctl_listen = listen_vsock(PROTO_CONTROL_PORT, err);
	if (a->ctl_listen >= 0)
		a->stdio_listen = listen_vsock(PROTO_STDIO_PORT, err);
	return agent_listening(a, out);
}

void agent_cancel(struct agent *a)
{
	char c = 1;

	(void)!write(a->cancel[1], &c, 1);
}

void agent_free(struct agent *a)
{
	if (a == NULL)
		return;
	if (a->unix_paths && a->ctl_listen >= 0)
		unlink(a->ctl_path);
	if (a->unix_paths && a->stdio_listen >= 0)
		unlink(a->stdio_path);
	close_fd(&a->ctl_listen);
	close_fd(&a->stdio_listen);
	close_fd(&a->control);
	close_fd(&a->cancel[0]);
	close_fd(&a->cancel[1]);
	close_fd(&a->wake[0]);
	close_fd(&a->wake[1]);
	for (size_t i = 0; i < a->npassed; i++)
		close(a->passed[i]);
	outq_free(&a->out);
	free(a->ctl_path);
	free(a->stdio_path);
	free(a->kernel);
	free(a->dec);
	pthread_mutex_destroy(&a->send_lock);
	free(a);
}

void agent_watch_cancel(struct agent *a, int fd)
{
	a->cancel_ext = fd;
}

bool link_cancelled(struct agent *a)
{
	struct pollfd p[2] = { { .fd = a->cancel[0], .events = POLLIN },
			       { .fd = a->cancel_ext, .events = POLLIN } };

	return poll(p, 2, 0) > 0;
}

/* --- the outbound queue ------------------------------------------------------------------ */

static int cut_error(struct agent *a, gantry_error_t *err)
{
	return gantry_error(err, 0, "%s", a->cut_why);
}

/* Locked. Drop what waits and fail every later send and wait. */
static int link_cut(struct agent *a, gantry_error_t *err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int link_cut(struct agent *a, gantry_error_t *err, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!a->cut) {
		n = snprintf(a->cut_why, sizeof(a->cut_why),
			     "%s stopped reading its control "
			     "connection: ",
			     a->peer);
		va_start(ap, fmt);
		vsnprintf(a->cut_why + n, sizeof(a->cut_why) - (size_t)n, fmt, ap);
		va_end(ap);
		a->cut = true;
	}
	outq_free(&a->out);
	return cut_error(a, err);
}

/* Locked: a's control connection can be written to. */
static int link_usable(struct agent *a, gantry_error_t *err)
{
	if (a->cut)
		return cut_error(a, err);
	if (a->control < 0)
		return gantry_error(err, ENOTCONN, "no control connection to %s", a->peer);
	return 0;
}

/* Locked. Queue m behind what waits and send what the socket takes: 1
 * when nothing is left waiting, 0 when some is, -1 when the peer is gone or
 * more than AGENT_SEND_QUEUE_MAX would wait (the link is then cut). */
static int send_locked(struct agent *a, const struct proto_msg *m, gantry_error_t *err)
{
	uint8_t frame[PROTO_MAX_FRAME];
	ssize_t n = proto_encode(m, frame, sizeof(frame));
	int r;

	if (n < 0)
		return gantry_error(err, EMSGSIZE, "%s does not fit in one frame",
				    proto_type_name(m->type));
	r = outq_send(&a->out, a->control, frame, (size_t)n, -1);
	/* An EXEC's environment may hold secrets: gone from the stack now
	 * (a part the socket did not take waits in the queue, which zeroes
	 * what it frees). */
	explicit_bzero(frame, (size_t)n);
	if (r < 0) {
		if (errno == ENOBUFS)
			return link_cut(a, err, "more than %d KiB waiting",
					AGENT_SEND_QUEUE_MAX / 1024);
		outq_free(&a->out);
		return gantry_error_errno(err, "control connection to %s", a->peer);
	}
	return outq_pending(&a->out) ? 0 : 1;
}

/* Locked: link_flush. */
static int flush_locked(struct agent *a, gantry_error_t *err)
{
	if (link_usable(a, err) < 0)
		return -1;
	if (outq_flush(&a->out, a->control) < 0) {
		outq_free(&a->out);
		return gantry_error_errno(err, "control connection to %s", a->peer);
	}
	return outq_pending(&a->out) ? 0 : 1;
}

int link_send(struct agent *a, const struct proto_msg *m, gantry_error_t *err)
{
	char c = 1;
	int r;

	pthread_mutex_lock(&a->send_lock);
	r = link_usable(a, err);
	/* An EXEC names the running session before its frame can reach the
	 * guest: a SIGNAL from another thread that finds the id waits on this
	 * lock, then queues behind the EXEC, never before it or not at all. */
	if (r == 0 && m->type == PROTO_EXEC)
		atomic_store(&a->running, m->u.exec.id);
	if (r == 0)
		r = send_locked(a, m, err);
	if (r < 0 && m->type == PROTO_EXEC)
		atomic_store(&a->running, 0);
	pthread_mutex_unlock(&a->send_lock);
	/* Bytes wait, or the link was cut: whoever polls it must look again. */
	if (r <= 0)
		(void)!write(a->wake[1], &c, 1);
	if (r < 0)
		return gantry_error_prefix(err, "send %s", proto_type_name(m->type));
	return 0;
}

int link_flush(struct agent *a, gantry_error_t *err)
{
	int r;

	pthread_mutex_lock(&a->send_lock);
	r = flush_locked(a, err);
	pthread_mutex_unlock(&a->send_lock);
	return r;
}

bool link_pending(struct agent *a)
{
	bool r;

	pthread_mutex_lock(&a->send_lock);
	r = outq_pending(&a->out);
	pthread_mutex_unlock(&a->send_lock);
	return r;
}

int link_check(struct agent *a, gantry_error_t *err)
{
	int r = 0;

	pthread_mutex_lock(&a->send_lock);
	if (a->cut)
		r = cut_error(a, err);
	else if (outq_stalled(&a->out, now_ms(), AGENT_SEND_STALL_MS))
		r = link_cut(a, err, "%zu bytes waiting, none taken for %d s", a->out.bytes,
			     AGENT_SEND_STALL_MS / 1000);
	pthread_mutex_unlock(&a->send_lock);
	return r;
}

int link_timeout_ms(struct agent *a)
{
	int r = -1;

	pthread_mutex_lock(&a->send_lock);
	if (outq_pending(&a->out))
		r = link_left_ms(a->out.progress_at + AGENT_SEND_STALL_MS);
	pthread_mutex_unlock(&a->send_lock);
	return r;
}

void link_woken(struct agent *a)
{
	char buf[64];

	while (read(a->wake[0], buf, sizeof(buf)) > 0)
		;
}

void link_close(struct agent *a)
{
	pthread_mutex_lock(&a->send_lock);
	close_fd(&a->control);
	outq_free(&a->out);
	pthread_mutex_unlock(&a->send_lock);
}

/* --- waiting on the guest ---------------------------------------------------------------- */

/* Wait for fd (or cancel); 1 ready, 0 timed out, -1 cancelled or failed. */
static int wait_fd(struct agent *a, int fd, short events, uint64_t deadline, gantry_error_t *err)
{
	for (;;) {
		struct pollfd p[3] = { { .fd = fd, .events = events },
				       { .fd = a->cancel[0], .events = POLLIN },
				       { .fd = a->cancel_ext, .events = POLLIN } };
		int r = poll(p, 3, link_left_ms(deadline));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return gantry_error_errno(err, "poll");
		if (p[1].revents || p[2].revents)
			return gantry_error(err, ECANCELED, "cancelled");
		return r > 0;
	}
}

/* Send everything queued by deadline (and within the stall bound). */
static int link_drain(struct agent *a, uint64_t deadline, gantry_error_t *err)
{
	for (;;) {
		int r = link_flush(a, err);
		uint64_t stall;

		if (r != 0)
			return r < 0 ? -1 : 0;
		if (link_check(a, err) < 0)
			return -1;
		stall = now_ms() + (uint64_t)MAX(link_timeout_ms(a), 0);
		r = wait_fd(a, a->control, POLLOUT, MIN(deadline, stall), err);
		if (r < 0)
			return -1;
		if (r == 0 && now_ms() >= deadline)
			return gantry_error(err, ETIMEDOUT, "%s did not take what was sent in time",
					    a->peer);
	}
}

ssize_t link_fill(struct agent *a)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(AGENT_PASSED * sizeof(int))];
	} ctl;
	struct iovec iov;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	uint8_t *p;
	ssize_t n;

	if (!a->remote)
		return proto_decoder_fill(a->dec, a->control);
	iov.iov_len = proto_decoder_space(a->dec, &p);
	iov.iov_base = p;
	if (iov.iov_len == 0) {
		errno = EMSGSIZE;
		return -1;
	}
	msg.msg_control = ctl.buf;
	msg.msg_controllen = sizeof(ctl.buf);
	n = recvmsg(a->control, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		size_t nfd;
		int fds[AGENT_PASSED];

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		memcpy(fds, CMSG_DATA(c), MIN(nfd, (size_t)AGENT_PASSED) * sizeof(int));
		for (size_t i = 0; i < nfd && i < AGENT_PASSED; i++) {
			if (a->npassed < AGENT_PASSED)
				a->passed[a->npassed++] = fds[i];
			else
				close(fds[i]);
		}
	}
	proto_decoder_commit(a->dec, (size_t)n);
	return n;
}

/* The next control frame, waiting until deadline. */
static int control_next(struct agent *a, struct proto_msg *m, uint64_t deadline,
			gantry_error_t *err)
{
	const char *why;
	ssize_t n;
	int r;

	for (;;) {
		r = proto_decoder_next(a->dec, m, &why);
		if (r > 0)
			return 0;
		if (r < 0)
			return gantry_error(err, EPROTO, "guest control connection: %s", why);
		r = wait_fd(a, a->control, POLLIN, deadline, err);
		if (r < 0)
			return -1;
		if (r == 0)
			return gantry_error(err, ETIMEDOUT, "guest control connection: timed out");
		n = link_fill(a);
		if (n == 0)
			return gantry_error(err, ECONNRESET,
					    "the guest closed the control connection");
		if (n < 0 && errno != EINTR && errno != EAGAIN)
			return gantry_error_errno(err, "guest control connection");
	}
}

static int accept_control(struct agent *a, uint64_t deadline, int timeout_ms, gantry_error_t *err)
{
	for (;;) {
		int r = wait_fd(a, a->ctl_listen, POLLIN, deadline, err);

		if (r < 0)
			return -1;
		if (r == 0)
			return gantry_error(err, ETIMEDOUT,
					    "the guest agent did not connect within %d ms",
					    timeout_ms);
		a->control = link_accept(a, a->ctl_listen);
		if (a->control >= 0)
			break;
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			return gantry_error_errno(err, "accept `%s`", a->ctl_path);
	}
	proto_decoder_init(a->dec);
	return 0;
}

/* Accept the guest's control connection (unless there is one) and read
 * its HELLO, of our protocol version. */
static int wait_hello(struct agent *a, uint64_t deadline, int timeout_ms,
		      struct proto_hello *hello, gantry_error_t *err)
{
	struct proto_msg m;

	if (a->control < 0 && accept_control(a, deadline, timeout_ms, err) < 0)
		return -1;
	if (control_next(a, &m, deadline, err) < 0)
		return gantry_error_prefix(err, "waiting for the guest's HELLO");
	if (m.type != PROTO_HELLO) {
		gantry_error(err, EPROTO, "the guest sent %s before HELLO",
			     proto_type_name(m.type));
		proto_msg_free(&m);
		return -1;
	}
	if (m.u.hello.version != PROTO_VERSION) {
		gantry_error(err, EPROTO, "the guest agent speaks protocol version %u, we speak %u",
			     m.u.hello.version, PROTO_VERSION);
		proto_msg_free(&m);
		return -1;
	}
	free(a->kernel);
	a->kernel = steal_pointer(&m.u.hello.kernel);
	if (hello) {
		*hello = m.u.hello;
		hello->kernel = a->kernel;
	}
	proto_msg_free(&m);
	return 0;
}

/* After HELLO: READY, with no message. */
static int wait_ready(struct agent *a, uint64_t deadline, gantry_error_t *err)
{
	struct proto_msg m;

	if (control_next(a, &m, deadline, err) < 0)
		return gantry_error_prefix(err, "waiting for the guest to be ready");
	if (m.type != PROTO_READY) {
		gantry_error(err, EPROTO, "the guest sent %s before READY",
			     proto_type_name(m.type));
	} else if (m.u.ready.message && *m.u.ready.message) {
		gantry_error(err, 0, "the guest cannot run processes: %s", m.u.ready.message);
	} else {
		proto_msg_free(&m);
		return 0;
	}
	proto_msg_free(&m);
	return -1;
}

int agent_wait_ready(struct agent *a, int timeout_ms, struct proto_hello *hello,
		     gantry_error_t *err)
{
	uint64_t deadline = link_deadline(timeout_ms);

	if (wait_hello(a, deadline, timeout_ms, hello, err) < 0)
		return -1;
	return wait_ready(a, deadline, err);
}

/* After HELLO: RENEW (see agent_wait_renewed; config for a template's
 * boot) and its RENEWED. */
static int renew(struct agent *a, uint64_t deadline, const char *hostname, char **shares,
		 size_t nr_shares, const char *ca, const char *config, gantry_error_t *err)
{
	uint32_t want = PROTO_RENEWED_RANDOM | PROTO_RENEWED_CLOCK;
	struct proto_msg m = { .type = PROTO_RENEW };
	struct timespec now;
	int r = -1;

	if (getrandom(m.u.renew.entropy, sizeof(m.u.renew.entropy), 0) !=
	    (ssize_t)sizeof(m.u.renew.entropy))
		return gantry_error_errno(err, "getrandom");
	/* Taken last: the guest's clock is set to what it says. */
	clock_gettime(CLOCK_REALTIME, &now);
	m.u.renew.time_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	m.u.renew.hostname = (char *)(hostname ? hostname : "");
	m.u.renew.shares = shares;
	m.u.renew.nr_shares = (uint32_t)nr_shares;
	m.u.renew.ca = (char *)(ca ? ca : "");
	m.u.renew.config = (char *)(config ? config : "");
	if (nr_shares)
		want |= PROTO_RENEWED_SHARES;
	if (ca && *ca)
		want |= PROTO_RENEWED_CA;
	if (hostname && *hostname)
		want |= PROTO_RENEWED_ID;
	if (config && *config)
		want |= PROTO_RENEWED_CONFIG;
	r = link_send(a, &m, err);
	explicit_bzero(m.u.renew.entropy, sizeof(m.u.renew.entropy));
	if (r < 0 || link_drain(a, deadline, err) < 0)
		return -1;
	if (control_next(a, &m, deadline, err) < 0)
		return gantry_error_prefix(err, "waiting for the restored guest to renew itself");
	r = -1;
	if (m.type != PROTO_RENEWED)
		gantry_error(err, EPROTO,
			     "the restored guest sent %s, not RENEWED: it did not renew its "
			     "entropy and clock",
			     proto_type_name(m.type));
	else if ((m.u.renewed.flags & want) != want)
		gantry_error(err, 0, "the restored guest could not renew itself: %s",
			     *m.u.renewed.message ? m.u.renewed.message : "it did not say why");
	else
		r = 0;
	proto_msg_free(&m);
	return r;
}

int agent_wait_renewed(struct agent *a, int timeout_ms, const char *hostname, char **shares,
		       size_t nr_shares, const char *ca, gantry_error_t *err)
{
	uint64_t deadline = link_deadline(timeout_ms);

	if (wait_hello(a, deadline, timeout_ms, NULL, err) < 0)
		return -1;
	return renew(a, deadline, hostname, shares, nr_shares, ca, NULL, err);
}

int agent_wait_configured(struct agent *a, int timeout_ms, const char *config,
			  int (*hello)(void *opaque, gantry_error_t *err), void *opaque,
			  bool *renewed, gantry_error_t *err)
{
	uint64_t deadline = link_deadline(timeout_ms);

	*renewed = false;
	if (wait_hello(a, deadline, timeout_ms, NULL, err) < 0 ||
	    (hello && hello(opaque, err) < 0) ||
	    renew(a, deadline, NULL, NULL, 0, NULL, config, err) < 0)
		return -1;
	*renewed = true;
	return wait_ready(a, deadline, err);
}

int agent_shutdown(struct agent *a, int status, int timeout_ms, gantry_error_t *err)
{
	struct proto_msg m = { .type = PROTO_SHUTDOWN };
	uint64_t deadline = link_deadline(timeout_ms);

	if (status < 0 || status > 255)
		return gantry_error(err, EINVAL, "shutdown status %d is not 0-255", status);
	m.u.shutdown.status = (uint32_t)status;
	if (link_send(a, &m, err) < 0)
		return -1;
	/* SHUTDOWN itself must go out even when nobody waits for the hang-up;
	 * the stall bound ends that wait when timeout_ms does not. */
	if (link_drain(a, timeout_ms == 0 ? UINT64_MAX : deadline, err) < 0) {
		link_close(a);
		return gantry_error_prefix(err, "shutdown");
	}
	if (timeout_ms == 0)
		return 0;
	/* Whatever else the guest says now is moot: wait for it to hang up. */
	for (;;) {
		char buf[4096];
		int r = wait_fd(a, a->control, POLLIN, deadline, err);
		ssize_t n;

		if (r < 0)
			return -1;
		if (r == 0)
			return gantry_error(err, ETIMEDOUT,
					    "the guest did not power off within %d ms", timeout_ms);
		n = read(a->control, buf, sizeof(buf));
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break;
	}
	link_close(a);
	return 0;
}
