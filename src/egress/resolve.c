/* The egress worker's A look-ups (see resolve.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util.h"
#include "egress/resolve.h"
#include "net/dns_wire.h"

static void learned(void *opaque, const struct dns_question *q, const char *owner,
		    struct in_addr ip, uint32_t ttl)
{
	struct lookup *l = opaque;

	(void)q;
	(void)owner;
	if (l->nr_ips < LOOKUP_ADDRS_MAX) {
		l->ttl = l->nr_ips ? MIN(l->ttl, ttl) : ttl;
		l->ips[l->nr_ips++] = ntohl(ip.s_addr);
	}
}

/* The query for l->q into buf (at least DNS_HDR_LEN + 258 + 4 bytes). */
static size_t query(struct lookup *l, uint8_t *buf)
{
	size_t at = DNS_HDR_LEN;
	const char *p = l->q.name;

	memset(buf, 0, DNS_HDR_LEN);
	dns_put16(buf, l->q.id);
	dns_put16(buf + 2, DNS_FLAG_RD);
	dns_put16(buf + 4, 1);
	while (*p) {
		size_t n = strcspn(p, ".");

		buf[at++] = (uint8_t)n;
		memcpy(buf + at, p, n);
		at += n;
		p += n + (p[n] == '.');
	}
	buf[at++] = 0;
	dns_put16(buf + at, DNS_TYPE_A);
	dns_put16(buf + at + 2, DNS_CLASS_IN);
	return at + 4;
}

/* Send the query to nameserver l->at from a fresh socket. */
static int ask(struct lookup *l, gantry_error_t *err)
{
	uint8_t buf[DNS_HDR_LEN + DNS_NAME_MAX + 8];
	size_t len;

	if (l->fd >= 0)
		close(l->fd);
	if (getrandom(&l->q.id, sizeof(l->q.id), 0) != sizeof(l->q.id))
		return gantry_error_errno(err, "getrandom");
	len = query(l, buf);
	l->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l->fd < 0)
		return gantry_error_errno(err, "DNS socket");
	if (connect(l->fd, (const struct sockaddr *)&l->up[l->at], sizeof(l->up[l->at])) < 0 ||
	    send(l->fd, buf, len, 0) < 0)
		return gantry_error_errno(err, "DNS query for %s", l->q.name);
	l->deadline = now_ms() + LOOKUP_TRY_MS;
	return 0;
}

int lookup_start(struct lookup *l, const char *host, const struct sockaddr_in *up, size_t nr_up,
		 gantry_error_t *err)
{
	*l = (struct lookup){ .fd = -1, .up = up, .nr_up = nr_up };
	if (nr_up == 0)
		return gantry_error(err, 0, "no nameserver to look %s up with", host);
	if (strlen(host) > DNS_NAME_MAX)
		return gantry_error(err, EINVAL, "host name too long");
	snprintf(l->q.name, sizeof(l->q.name), "%s", host);
	l->q.qtype = DNS_TYPE_A;
	l->q.qclass = DNS_CLASS_IN;
	return ask(l, err);
}

int lookup_step(struct lookup *l, uint64_t now, gantry_error_t *err)
{
	const struct dns_hooks hooks = { .opaque = l, .learned = learned };
	uint8_t buf[DNS_UDP_MAX];
	ssize_t n;

	while ((n = recv(l->fd, buf, sizeof(buf), 0)) > 0) {
		if ((size_t)n < DNS_HDR_LEN || dns_get16(buf) != l->q.id)
			continue; /* not the answer to our question */
		l->nr_ips = 0;
		if (dns_answer_learn(buf, (size_t)n, &l->q, &hooks) < 0)
			continue;
		if (l->nr_ips == 0)
			return gantry_error(err, 0, "%s has no IPv4 address", l->q.name);
		lookup_end(l);
		return 1;
	}
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNREFUSED)
		return gantry_error_errno(err, "DNS answer for %s", l->q.name);
	if (now < l->deadline)
		return 0;
	if (++l->at == l->nr_up)
		return gantry_error(err, ETIMEDOUT, "no nameserver answered for %s", l->q.name);
	return ask(l, err) < 0 ? -1 : 0;
}

void lookup_end(struct lookup *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}
