/* The credential broker: host-bound secrets (NAME@HOST) served to the
 * container's git credential helper (guest/credential.c) over vsock port
 * PROTO_BROKER_PORT, whose dials reach us through its door. One
 * request each way (proto/agent.h), every connection non-blocking and
 * bounded: SUP_BROKER_IN bytes in, SUP_BROKER_MS to say it and take the
 * answer, SUP_BROKER_CONNS at once.
 *
 * The gates, in order, each decision audited by the secret's name (never
 * its value): the request is well formed (protocol https or http, a host
 * that is a DNS name); the sandbox has a network and its egress policy
 * lets the guest reach that name (before any source of the secret runs);
 * a secret is bound to the host (exactly, or *.suffix); its value is
 * there (its file or command read now, failing closed: on a thread of
 * its own, so a slow command never holds the loop). The answer is built
 * in the secret arena and zeroed once sent. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "net/policy.h"
#include "sandbox/network.h"
#include "secret/broker.h"
#include "supervisor/supervisor_priv.h"

void sup_broker_init(struct sup *s)
{
	gantry_error_t err = NULL;

	s->broker.wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->broker.wake < 0) {
		log_warn("no credential broker: eventfd: %s", strerror(errno));
		return;
	}
	s->broker.listen = doors_open(&s->doors, PROTO_BROKER_PORT, &err);
	if (s->broker.listen < 0) {
		log_warn("no credential broker: %s", gantry_error_str(err));
		gantry_error_free(&err);
	}
}

/* Its connection ends; a lookup under way keeps the slot until it is done. */
static void conn_close(struct broker_conn *b)
{
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
	explicit_bzero(b->in, sizeof(b->in));
	broker_out_free(&b->out);
	b->got = b->out_sent = 0;
}

void sup_broker_accept(struct sup *s)
{
	for (;;) {
		int fd = door_accept(s->broker.listen);
		struct broker_conn *b = NULL;

		if (fd < 0 && errno == EPIPE)
			close_fd(&s->broker.listen); /* its door is shut: no dial comes */
		if (fd < 0)
			return;
		for (size_t i = 0; i < SUP_BROKER_CONNS && b == NULL; i++)
			if (s->broker.c[i].fd < 0 && !s->broker.c[i].resolving)
				b = &s->broker.c[i];
		if (b == NULL) {
			close(fd); /* the helper says the broker did not answer */
			continue;
		}
		b->fd = fd;
		b->deadline = now_ms() + SUP_BROKER_MS;
	}
}

/* gate: which one said no (docs/audit.md). The guest hears why, but not
 * a source's details (its path, its command): those are the audit's. */
static void withhold(struct sup *s, struct broker_conn *b, const char *gate, const char *secret,
		     const char *host, const char *why)
{
	sup_audit_guest(s, "withhold", gate, secret, host, "%s", why);
	broker_refusal(&b->out,
		       strcmp(gate, "source") == 0 ? "its source failed (see gantry audit)" : why);
}

/* On a thread of its own: the value of the secret bound to the host (its
 * source read, maybe slowly); the loop is woken when it is there. */
static void *lookup(void *arg)
{
	struct broker_conn *b = arg;
	gantry_error_t err = NULL;
	uint64_t one = 1;

	b->r = secret_store_for_host(b->store, b->req.host, policy_domain_match, &b->v, &err);
	if (b->r < 0)
		snprintf(b->why, sizeof(b->why), "%s", gantry_error_str(err));
	gantry_error_free(&err);
	atomic_store(&b->resolved, true);
	(void)!write(b->wake, &one, sizeof(one));
	return NULL;
}

static void broker_request(struct sup *s, struct broker_conn *b)
{
	const char *why;

	if (broker_parse(b->in, &b->req, &why) < 0) {
		withhold(s, b, "request", NULL, NULL, why);
		return;
	}
	if (!sandbox_net_reaches(&s->sb, b->req.host, &why)) {
		withhold(s, b, "policy", NULL, b->req.host, why);
		return;
	}
	b->store = &s->secrets;
	b->wake = s->broker.wake;
	atomic_store(&b->resolved, false);
	if (pthread_create(&b->thread, NULL, lookup, b) != 0)
		withhold(s, b, "source", NULL, b->req.host, "no thread to look the secret up");
	else
		b->resolving = true;
}

/* The lookup is done: its answer, on the loop's thread. */
static void lookup_done(struct sup *s, struct broker_conn *b)
{
	const char *why;

	pthread_join(b->thread, NULL);
	b->resolving = false;
	if (b->fd < 0) {
		/* The helper went (or ran out of time) meanwhile. */
		secret_value_free(&b->v);
		return;
	}
	if (b->r == 0)
		withhold(s, b, "binding", NULL, b->req.host, "no secret is bound to that host");
	else if (b->r < 0)
		withhold(s, b, "source", b->v.name, b->req.host, b->why);
	else if (broker_answer(&b->req, &b->v, &b->out, &why) < 0)
		withhold(s, b, "source", b->v.name, b->req.host, why);
	else if (b->out.text)
		sup_audit_guest(s, "deliver", "broker", b->v.name, b->req.host,
				"to git's credential helper");
	secret_value_free(&b->v);
	if (b->out.text == NULL)
		conn_close(b); /* no room in the arena: the helper hears nothing */
}

void sup_broker_woken(struct sup *s)
{
	uint64_t n;

	(void)!read(s->broker.wake, &n, sizeof(n));
	for (size_t i = 0; i < SUP_BROKER_CONNS; i++) {
		struct broker_conn *b = &s->broker.c[i];

		if (b->resolving && atomic_load(&b->resolved))
			lookup_done(s, b);
	}
}

static void conn_event(struct sup *s, struct broker_conn *b, short revents)
{
	ssize_t n;

	if (b->out.text == NULL && (revents & (POLLIN | POLLHUP | POLLERR))) {
		n = recv(b->fd, b->in + b->got, SUP_BROKER_IN - b->got, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			conn_close(b);
			return;
		}
		b->got += (size_t)n;
		b->in[b->got] = '\0';
		if (memchr(b->in, '\0', b->got)) {
			conn_close(b);
			return;
		}
		if (!broker_request_whole(b->in, b->got)) {
			if (b->got == SUP_BROKER_IN)
				withhold(s, b, "request", NULL, NULL, "the request is too long");
			else
				return;
		} else {
			broker_request(s, b);
		}
		if (b->resolving)
			return; /* answered once the lookup is done */
		if (b->out.text == NULL) {
			conn_close(b); /* no room in the arena: the helper hears nothing */
			return;
		}
	}
	if (b->out.text) {
		n = send(b->fd, b->out.text + b->out_sent, b->out.len - b->out_sent,
			 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n > 0)
			b->out_sent += (size_t)n;
		if (n <= 0 || b->out_sent == b->out.len)
			conn_close(b);
	}
}

size_t sup_broker_fds(struct sup *s, struct pollfd *fds, struct broker_conn **owner, uint64_t now,
		      uint64_t *wake)
{
	size_t n = 0;

	for (size_t i = 0; i < SUP_BROKER_CONNS; i++) {
		struct broker_conn *b = &s->broker.c[i];

		if (b->fd < 0)
			continue;
		if (now >= b->deadline) {
			conn_close(b); /* too slow to ask, or to take the answer */
			continue;
		}
		*wake = MIN(*wake, b->deadline);
		if (b->resolving)
			continue; /* nothing to read or write until it is done */
		owner[n] = b;
		fds[n++] = (struct pollfd){ .fd = b->fd, .events = b->out.text ? POLLOUT : POLLIN };
	}
	return n;
}

void sup_broker_event(struct sup *s, struct broker_conn *b, int fd, short revents)
{
	if (b->fd == fd)
		conn_event(s, b, revents);
}
