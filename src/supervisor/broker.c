/* The credential broker: host-bound secrets (NAME@HOST) served to the
 * container's git credential helper (guest/credential.c) over vsock port
 * PROTO_BROKER_PORT, which the VMM bridges to SUP_BROKER_SOCK here. One
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
#include "supervisor/supervisor_priv.h"

#define BROKER_USER "x-access-token" /* what git hosts take with a token as its password */

void sup_broker_init(struct sup *s)
{
	gantry_error_t err = NULL;

	unlink(SUP_BROKER_SOCK);
	s->broker.wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->broker.wake < 0) {
		log_warn("no credential broker: eventfd: %s", strerror(errno));
		return;
	}
	s->broker.listen = unix_listen(SUP_BROKER_SOCK, SUP_BROKER_CONNS, &err);
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
	secret_free(b->out, b->out_size);
	b->out = NULL;
	b->got = b->out_len = b->out_sent = b->out_size = 0;
}

void sup_broker_accept(struct sup *s)
{
	for (;;) {
		int fd = accept4(s->broker.listen, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		struct broker_conn *b = NULL;

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

/* Queue text (a plain answer: no secret in it) or the arena's answer. */
static void answer_plain(struct broker_conn *b, const char *fmt, const char *why)
{
	size_t n = (size_t)snprintf(NULL, 0, fmt, why) + 1;

	b->out = secret_alloc(n);
	if (b->out == NULL)
		return;
	b->out_size = n;
	b->out_len = (size_t)snprintf(b->out, n, fmt, why);
}

/* gate: which one said no (docs/audit.md). The guest hears why, but not
 * a source's details (its path, its command): those are the audit's. */
static void withhold(struct sup *s, struct broker_conn *b, const char *gate, const char *secret,
		     const char *host, const char *why)
{
	sup_audit_guest(s, "withhold", gate, secret, host, "%s", why);
	answer_plain(b, "error=%s\n\n",
		     strcmp(gate, "source") == 0 ? "its source failed (see gantry audit)" : why);
}

/* Whether the egress policy lets the guest reach name: the policy's DNS
 * would learn its addresses, or resolve it under a default that allows. */
static bool policy_allows(struct sup *s, const char *name, const char **why)
{
	struct policy *p = NULL;
	gantry_error_t err = NULL;
	enum policy_dns d;
	bool ok;

	if (!s->sb.net) {
		*why = "the sandbox has no network";
		return false;
	}
	if (s->sb.net_policy == NULL)
		p = policy_default(s->sb.allow_local_net);
	else if (policy_from_json(s->sb.net_policy, &p, &err) < 0) {
		gantry_error_free(&err);
		*why = "its egress policy does not read";
		return false;
	}
	d = policy_dns_name(p, name);
	ok = d == POLICY_DNS_LEARN || (d == POLICY_DNS_RESOLVE && p->default_allow);
	policy_free(p);
	*why = "the egress policy does not allow that host";
	return ok;
}

/* A request's value of key ("host="...), at most cap - 1 bytes; false
 * when it has none. */
static bool field(const char *req, const char *key, char *out, size_t cap)
{
	size_t klen = strlen(key);

	for (const char *line = req; *line;) {
		size_t n = strcspn(line, "\n");

		if (n > klen && strncmp(line, key, klen) == 0 && n - klen < cap) {
			memcpy(out, line + klen, n - klen);
			out[n - klen] = '\0';
			return true;
		}
		line += n + (line[n] == '\n');
	}
	return false;
}

/* A host as git names it (maybe with a port): the DNS name, lowercased. */
static bool host_name(char *host)
{
	size_t n;

	host[strcspn(host, ":")] = '\0';
	n = strlen(host);
	if (n == 0 || n > SECRET_HOST_MAX || host[0] == '.' || host[n - 1] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = host[i];

		if (ch >= 'A' && ch <= 'Z')
			host[i] = (char)(ch - 'A' + 'a');
		else if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
			   ch == '.'))
			return false;
	}
	return strstr(host, "..") == NULL;
}

/* On a thread of its own: the value of the secret bound to b->host (its
 * source read, maybe slowly); the loop is woken when it is there. */
static void *lookup(void *arg)
{
	struct broker_conn *b = arg;
	gantry_error_t err = NULL;
	uint64_t one = 1;

	b->r = secret_store_for_host(b->store, b->host, policy_domain_match, &b->v, &err);
	if (b->r < 0)
		snprintf(b->why, sizeof(b->why), "%s", gantry_error_str(err));
	gantry_error_free(&err);
	atomic_store(&b->resolved, true);
	(void)!write(b->wake, &one, sizeof(one));
	return NULL;
}

static void broker_request(struct sup *s, struct broker_conn *b)
{
	char proto[16], host[SECRET_HOST_MAX + 8], user[256] = BROKER_USER;
	const char *why;

	if (!field(b->in, "protocol=", proto, sizeof(proto)) ||
	    (strcmp(proto, "https") != 0 && strcmp(proto, "http") != 0)) {
		withhold(s, b, "request", NULL, NULL, "only https and http credentials are served");
		return;
	}
	if (!field(b->in, "host=", host, sizeof(host)) || !host_name(host)) {
		withhold(s, b, "request", NULL, NULL, "no host, or not a DNS name");
		return;
	}
	if (field(b->in, "username=", user, sizeof(user)) && strpbrk(user, "\r"))
		snprintf(user, sizeof(user), "%s", BROKER_USER);
	if (!policy_allows(s, host, &why)) {
		withhold(s, b, "policy", NULL, host, why);
		return;
	}
	snprintf(b->host, sizeof(b->host), "%s", host);
	snprintf(b->user, sizeof(b->user), "%s", user);
	b->store = &s->secrets;
	b->wake = s->broker.wake;
	atomic_store(&b->resolved, false);
	if (pthread_create(&b->thread, NULL, lookup, b) != 0)
		withhold(s, b, "source", NULL, host, "no thread to look the secret up");
	else
		b->resolving = true;
}

/* The lookup is done: its answer, on the loop's thread. */
static void lookup_done(struct sup *s, struct broker_conn *b)
{
	pthread_join(b->thread, NULL);
	b->resolving = false;
	if (b->fd < 0) {
		/* The helper went (or ran out of time) meanwhile. */
		secret_value_free(&b->v);
		return;
	}
	if (b->r == 0) {
		withhold(s, b, "binding", NULL, b->host, "no secret is bound to that host");
	} else if (b->r < 0) {
		withhold(s, b, "source", b->v.name, b->host, b->why);
	} else if (strpbrk(b->v.value, "\n\r")) {
		withhold(s, b, "source", b->v.name, b->host, "its value holds a line break");
	} else {
		size_t n = sizeof("username=\npassword=\n\n") + strlen(b->user) + b->v.len;

		b->out = secret_alloc(n);
		if (b->out) {
			b->out_size = n;
			b->out_len = (size_t)snprintf(b->out, n, "username=%s\npassword=%s\n\n",
						      b->user, b->v.value);
			sup_audit_guest(s, "deliver", "broker", b->v.name, b->host,
					"to git's credential helper");
		}
	}
	secret_value_free(&b->v);
	if (b->out == NULL)
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

	if (b->out == NULL && (revents & (POLLIN | POLLHUP | POLLERR))) {
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
		if (strstr(b->in, "\n\n") == NULL && b->in[0] != '\n') {
			if (b->got == SUP_BROKER_IN)
				withhold(s, b, "request", NULL, NULL, "the request is too long");
			else
				return;
		} else {
			broker_request(s, b);
		}
		if (b->resolving)
			return; /* answered once the lookup is done */
		if (b->out == NULL) {
			conn_close(b); /* no room in the arena: the helper hears nothing */
			return;
		}
	}
	if (b->out) {
		n = send(b->fd, b->out + b->out_sent, b->out_len - b->out_sent,
			 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n > 0)
			b->out_sent += (size_t)n;
		if (n <= 0 || b->out_sent == b->out_len)
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
		fds[n++] = (struct pollfd){ .fd = b->fd, .events = b->out ? POLLOUT : POLLIN };
	}
	return n;
}

void sup_broker_event(struct sup *s, struct broker_conn *b, int fd, short revents)
{
	if (b->fd == fd)
		conn_event(s, b, revents);
}
