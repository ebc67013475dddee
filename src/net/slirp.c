/* libslirp glue for the network worker (see slirp.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/lazy.h"
#include "common/log.h"
#include "common/util.h"
#include "net/net.h"
#include "net/portspec.h"
#include "net/slirp.h"

/* libslirp and the GLib under it are loaded by the network worker alone,
 * as it starts (nat_init), before its confinement: no other process maps
 * or relocates them (common/lazy.h). */
#define SLIRP_SYMS(X)                                                                              \
	X(slirp_new)                                                                               \
	X(slirp_cleanup)                                                                           \
	X(slirp_input)                                                                             \
	X(slirp_pollfds_fill)                                                                      \
	X(slirp_pollfds_poll)                                                                      \
	X(slirp_handle_timer)                                                                      \
	X(slirp_add_unix)                                                                          \
	X(slirp_add_hostfwd)                                                                       \
	X(slirp_remove_hostfwd)

SLIRP_SYMS(LAZY_DEFINE)
static const struct lazy_sym slirp_syms[] = { SLIRP_SYMS(LAZY_ENTRY) };
static struct lazy_lib slirp_lib = LAZY_LIB("libslirp.so.0", "libslirp0", slirp_syms);

/* libslirp's timeout when nothing in it is pending (slirp_update_timeout
 * caps every timeout at a second): then the worker may sleep on. */
#define SLIRP_IDLE_MS	   1000
#define GUEST_ERROR_GAP_MS 1000

struct nat_timer {
	struct nat_timer *next;
	SlirpTimerId id;
	void *cb_opaque;
	int64_t expire_ms; /* -1: not armed */
};

static int64_t clock_ns(void *opaque)
{
	struct timespec ts;

	(void)opaque;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static ssize_t send_packet(const void *buf, size_t len, void *opaque)
{
	struct nat *n = opaque;

	n->send(n->opaque, buf, len);
	return (ssize_t)len;
}

/* libslirp's complaints about guest frames: at most one line a second. */
static void guest_error(const char *msg, void *opaque)
{
	struct nat *n = opaque;
	uint64_t now = now_ms();

	if (now - n->last_error_ms < GUEST_ERROR_GAP_MS && n->last_error_ms) {
		n->errors_quiet++;
		return;
	}
	log_warn("libslirp: guest error: %s (%u more not shown)", msg, n->errors_quiet);
	n->last_error_ms = now;
	n->errors_quiet = 0;
}

static void *timer_new_opaque(SlirpTimerId id, void *cb_opaque, void *opaque)
{
	struct nat *n = opaque;
	struct nat_timer *t = xzalloc(sizeof(*t));

	t->id = id;
	t->cb_opaque = cb_opaque;
	t->expire_ms = -1;
	t->next = n->timers;
	n->timers = t;
	return t;
}

static void timer_free(void *timer, void *opaque)
{
	struct nat *n = opaque;

	for (struct nat_timer **p = &n->timers; *p; p = &(*p)->next) {
		if (*p == timer) {
			*p = (*p)->next;
			free(timer);
			return;
		}
	}
}

static void timer_mod(void *timer, int64_t expire_ms, void *opaque)
{
	(void)opaque;
	((struct nat_timer *)timer)->expire_ms = expire_ms;
}

static void poll_fd_nop(int fd, void *opaque)
{
	(void)fd;
	(void)opaque;
}

static void notify(void *opaque)
{
	((struct nat *)opaque)->kicked = true;
}

static const SlirpCb callbacks = {
	.send_packet = send_packet,
	.guest_error = guest_error,
	.clock_get_ns = clock_ns,
	.timer_free = timer_free,
	.timer_mod = timer_mod,
	.register_poll_fd = poll_fd_nop,
	.unregister_poll_fd = poll_fd_nop,
	.notify = notify,
	.timer_new_opaque = timer_new_opaque,
};

static struct in_addr addr(uint32_t host_order)
{
	return (struct in_addr){ .s_addr = htonl(host_order) };
}

int nat_lib_load(gantry_error_t *err)
{
	return lazy_load(&slirp_lib, err);
}

int nat_init(struct nat *n, const char *dns_path, gantry_error_t *err)
{
	struct in_addr gw = addr(NET_GATEWAY);
	SlirpConfig cfg = {
		.version = 4,
		.in_enabled = true,
		.vnetwork = addr(NET_NETWORK),
		.vnetmask = addr(NET_NETMASK),
		.vhost = addr(NET_HOST),
		.in6_enabled = false,
		.vdhcp_start = addr(NET_GUEST),
		.vnameserver = addr(NET_SLIRP_DNS),
		.if_mtu = NET_MTU,
		.if_mru = NET_MTU,
		.disable_host_loopback = false, /* .254 is the host's 127.0.0.1 */
		.enable_emu = false,
		.disable_dns = true,
		.disable_dhcp = true,
	};

	if (nat_lib_load(err) < 0)
		return -1;
	n->read_host = true;
	n->slirp = sym_slirp_new(&cfg, &callbacks, n);
	if (n->slirp == NULL)
		return gantry_error(err, 0, "libslirp: cannot start its instance");
	if (sym_slirp_add_unix(n->slirp, dns_path, &gw, 53) < 0) {
		nat_cleanup(n);
		return gantry_error(err, 0, "libslirp: cannot forward TCP %s:53 to the DNS proxy",
				    NET_GATEWAY_STR);
	}
	return 0;
}

int nat_add_unix(struct nat *n, const char *path, uint16_t port, gantry_error_t *err)
{
	struct in_addr gw = addr(NET_GATEWAY);

	if (sym_slirp_add_unix(n->slirp, path, &gw, port) < 0)
		return gantry_error(err, 0, "libslirp: cannot forward TCP %s:%u", NET_GATEWAY_STR,
				    port);
	return 0;
}

void nat_cleanup(struct nat *n)
{
	struct nat_timer *t;

	if (n->slirp)
		sym_slirp_cleanup(n->slirp);
	n->slirp = NULL;
	while ((t = n->timers)) {
		n->timers = t->next;
		free(t);
	}
}

void nat_input(struct nat *n, const uint8_t *frame, size_t len)
{
	sym_slirp_input(n->slirp, frame, (int)len);
}

/* The fill pass's view of the worker's poll array. */
struct fill {
	struct nat *n;
	struct pollfd **fds;
	size_t *nfds, *cap;
};

static int add_poll(int fd, int events, void *opaque)
{
	struct fill *f = opaque;
	short ev = 0;

	if (*f->nfds == *f->cap) {
		*f->cap = *f->cap ? *f->cap * 2 : 64;
		*f->fds = xrealloc(*f->fds, *f->cap * sizeof(**f->fds));
	}
	/* Backpressure: with the guest's queue full, host sockets wait in
	 * the kernel instead of piling up here. */
	if (f->n->read_host) {
		if (events & SLIRP_POLL_IN)
			ev |= POLLIN;
		if (events & SLIRP_POLL_PRI)
			ev |= POLLPRI;
	}
	if (events & SLIRP_POLL_OUT)
		ev |= POLLOUT;
	(*f->fds)[*f->nfds] = (struct pollfd){ .fd = fd, .events = ev };
	return (int)(*f->nfds)++;
}

static int get_revents(int idx, void *opaque)
{
	struct nat *n = opaque;
	short re;
	int r = 0;

	if (idx < 0 || (size_t)idx < n->base || (size_t)idx >= n->base + n->n)
		return 0;
	re = n->fds[idx].revents;
	if (re & POLLIN)
		r |= SLIRP_POLL_IN;
	if (re & POLLOUT)
		r |= SLIRP_POLL_OUT;
	if (re & POLLPRI)
		r |= SLIRP_POLL_PRI;
	if (re & (POLLERR | POLLNVAL))
		r |= SLIRP_POLL_ERR;
	if (re & POLLHUP)
		r |= SLIRP_POLL_HUP;
	return r;
}

static int timers_timeout(const struct nat *n)
{
	int64_t now = clock_ns(NULL) / 1000000, best = -1;

	for (const struct nat_timer *t = n->timers; t; t = t->next) {
		if (t->expire_ms < 0)
			continue;
		if (best < 0 || t->expire_ms - now < best)
			best = MAX(t->expire_ms - now, 0);
	}
	return best > INT_MAX ? INT_MAX : (int)best;
}

int nat_pollfds(struct nat *n, struct pollfd **fds, size_t *nfds, size_t *cap)
{
	struct fill f = { .n = n, .fds = fds, .nfds = nfds, .cap = cap };
	uint32_t timeout = UINT32_MAX;
	int t, tt;

	n->base = *nfds;
	sym_slirp_pollfds_fill(n->slirp, &timeout, add_poll, &f);
	n->fds = *fds;
	n->n = *nfds - n->base;
	t = timeout >= SLIRP_IDLE_MS ? -1 : (int)timeout;
	tt = timers_timeout(n);
	if (tt >= 0 && (t < 0 || tt < t))
		t = tt;
	if (n->kicked) {
		n->kicked = false;
		t = 0;
	}
	return t;
}

void nat_dispatch(struct nat *n, bool err)
{
	int64_t now;
	bool fired;

	sym_slirp_pollfds_poll(n->slirp, err, get_revents, n);
	/* A timer's callback may re-arm or free timers: rescan after each. */
	do {
		fired = false;
		now = clock_ns(NULL) / 1000000;
		for (struct nat_timer *t = n->timers; t; t = t->next) {
			if (t->expire_ms >= 0 && t->expire_ms <= now) {
				t->expire_ms = -1;
				sym_slirp_handle_timer(n->slirp, t->id, t->cb_opaque);
				fired = true;
				break;
			}
		}
	} while (fired);
}

/* The listener libslirp just made for a TCP forward, told apart from its
 * other sockets by SO_ACCEPTCONN and its address, listens again with a
 * backlog of PORT_BACKLOG (see there). */
struct listener {
	struct in_addr host;
	uint16_t port;
};

static int raise_backlog(int fd, int events, void *opaque)
{
	const struct listener *l = opaque;
	socklen_t ol = sizeof(int);
	int on = 0;

	(void)events;
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &ol) == 0 && on &&
	    port_socket_bound(fd, false, l->host, l->port) && listen(fd, PORT_BACKLOG) < 0)
		log_warn("published port %u: listen backlog stays at 1: %s", l->port,
			 strerror(errno));
	return -1;
}

/* The fds libslirp polls, from a fill pass: which socket a forward made. */
struct slirp_fds {
	int *v;
	size_t n, cap;
};

static int collect_fd(int fd, int events, void *opaque)
{
	struct slirp_fds *f = opaque;

	(void)events;
	if (f->n == f->cap) {
		f->cap = f->cap ? 2 * f->cap : 64;
		f->v = xrealloc(f->v, f->cap * sizeof(*f->v));
	}
	f->v[f->n++] = fd;
	return -1;
}

static void slirp_fds(struct nat *n, struct slirp_fds *f)
{
	uint32_t timeout = UINT32_MAX;

	f->n = 0;
	sym_slirp_pollfds_fill(n->slirp, &timeout, collect_fd, f);
}

/* The socket in after and not in before that is bound on host: the one
 * libslirp just made for a forward; -1 if there is none. */
static int new_socket(const struct slirp_fds *before, const struct slirp_fds *after, bool udp,
		      struct in_addr host)
{
	for (size_t i = 0; i < after->n; i++) {
		int fd = after->v[i];
		bool old = false;

		for (size_t j = 0; j < before->n && !old; j++)
			old = before->v[j] == fd;
		if (!old && port_socket_bound(fd, udp, host, -1))
			return fd;
	}
	return -1;
}

/* A forward whose host socket the caller bound (fd): libslirp makes one
 * of its own on a port the kernel picks, and fd takes that socket's place
 * under the same number, so libslirp accepts from and closes fd. Its
 * removal finds it by fd's own address (getsockname), the forward's. */
static int forward_adopt(struct nat *n, bool udp, struct in_addr host, uint16_t guest_port, int fd)
{
	struct slirp_fds before = { 0 }, after = { 0 };
	int theirs, fl, e = 0;

	slirp_fds(n, &before);
	errno = 0;
	if (sym_slirp_add_hostfwd(n->slirp, udp, host, 0, addr(NET_GUEST), guest_port) < 0) {
		e = errno ? errno : EADDRINUSE;
	} else {
		slirp_fds(n, &after);
		theirs = new_socket(&before, &after, udp, host);
		fl = theirs >= 0 ? fcntl(theirs, F_GETFL) : -1;
		if (theirs < 0 || fl < 0 || fcntl(fd, F_SETFL, fl) < 0 ||
		    dup3(fd, theirs, O_CLOEXEC) < 0)
			e = theirs < 0 ? EIO : errno; /* its own stays, on a port no one knows */
	}
	free(before.v);
	free(after.v);
	close(fd);
	errno = e;
	return e ? -1 : 0;
}

int nat_forward_add(struct nat *n, bool udp, struct in_addr host, uint16_t host_port,
		    uint16_t guest_port, int fd)
{
	struct listener l = { .host = host, .port = host_port };
	uint32_t timeout = UINT32_MAX;

	if (fd >= 0)
		return forward_adopt(n, udp, host, guest_port, fd);
	errno = 0;
	if (sym_slirp_add_hostfwd(n->slirp, udp, host, host_port, addr(NET_GUEST), guest_port) <
	    0) {
		if (errno == 0)
			errno = EADDRINUSE;
		return -1;
	}
	/* A fill pass out of turn: the loop fills again before it polls. */
	if (!udp)
		sym_slirp_pollfds_fill(n->slirp, &timeout, raise_backlog, &l);
	return 0;
}

int nat_forward_remove(struct nat *n, bool udp, struct in_addr host, uint16_t host_port)
{
	if (sym_slirp_remove_hostfwd(n->slirp, udp, host, host_port) < 0) {
		errno = ENOENT;
		return -1;
	}
	return 0;
}
