/* Published-port specs (see portspec.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/portspec.h"

/* A decimal port, 0..65535, all digits, no sign or spaces. */
static int parse_port(const char *s, size_t len, bool zero_ok, uint16_t *out)
{
	unsigned long v = 0;

	if (len == 0 || len > 5)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v > 65535 || (v == 0 && !zero_ok))
		return -1;
	*out = (uint16_t)v;
	return 0;
}

int port_spec_parse(const char *s, struct port_spec *p, gantry_error_t *err)
{
	char ip[INET_ADDRSTRLEN];
	const char *slash, *end, *c1, *c2;

	*p = (struct port_spec){ .host_ip.s_addr = htonl(INADDR_LOOPBACK) };
	if (s == NULL || *s == '\0')
		return gantry_error(err, 0, "empty port spec");
	if (strlen(s) >= PORT_SPEC_MAX + 8)
		return gantry_error(err, 0, "port spec too long");
	if (s[0] == '[')
		return gantry_error(err, 0, "port `%s`: IPv6 host addresses are not supported", s);
	slash = strchr(s, '/');
	end = slash ? slash : s + strlen(s);
	if (slash) {
		if (strcmp(slash, "/udp") == 0)
			p->udp = true;
		else if (strcmp(slash, "/tcp") != 0)
			return gantry_error(err, 0, "port `%s`: protocol must be tcp or udp", s);
	}
	c2 = memrchr(s, ':', (size_t)(end - s));
	if (c2 == NULL) {
		if (parse_port(s, (size_t)(end - s), false, &p->guest_port) < 0)
			return gantry_error(
				err, 0, "port `%s`: want [IP:]HOST:GUEST or GUEST, ports 1-65535",
				s);
		return 0;
	}
	if (parse_port(c2 + 1, (size_t)(end - c2 - 1), false, &p->guest_port) < 0)
		return gantry_error(err, 0, "port `%s`: guest port must be 1-65535", s);
	c1 = memrchr(s, ':', (size_t)(c2 - s));
	if (parse_port(c1 ? c1 + 1 : s, (size_t)(c2 - (c1 ? c1 + 1 : s)), true, &p->host_port) < 0)
		return gantry_error(err, 0, "port `%s`: host port must be 0-65535", s);
	if (c1) {
		size_t n = (size_t)(c1 - s);

		if (n == 0 || n >= sizeof(ip))
			return gantry_error(err, 0, "port `%s`: bad host address", s);
		memcpy(ip, s, n);
		ip[n] = '\0';
		if (inet_pton(AF_INET, ip, &p->host_ip) != 1)
			return gantry_error(err, 0, "port `%s`: host address `%s` is not IPv4", s,
					    ip);
	}
	return 0;
}

void port_spec_format(const struct port_spec *p, char buf[PORT_SPEC_MAX])
{
	char ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &p->host_ip, ip, sizeof(ip));
	snprintf(buf, PORT_SPEC_MAX, "%s:%u:%u%s", ip, p->host_port, p->guest_port,
		 p->udp ? "/udp" : "");
}

bool port_spec_same_bind(const struct port_spec *a, const struct port_spec *b)
{
	return a->udp == b->udp && a->host_port == b->host_port &&
	       a->host_ip.s_addr == b->host_ip.s_addr;
}

int port_spec_bind(struct port_spec *p, int *out, gantry_error_t *err)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr = p->host_ip,
				  .sin_port = htons(p->host_port) };
	socklen_t len = sizeof(sa);
	char ip[INET_ADDRSTRLEN];
	int fd, on = 1, e;

	inet_ntop(AF_INET, &p->host_ip, ip, sizeof(ip));
	fd = socket(AF_INET, (p->udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return gantry_error_errno(err, "socket");
	/* As libslirp's own listeners: reusable at once after a close, urgent
	 * data inline and no Nagle on what is accepted from it. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (!p->udp) {
		setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &on, sizeof(on));
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    (p->udp || listen(fd, PORT_BACKLOG) == 0) &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0) {
		p->host_port = ntohs(sa.sin_port);
		*out = fd;
		return 0;
	}
	e = errno;
	close(fd);
	if (p->host_port == 0)
		return gantry_error(err, e, "no free %s port on %s: %s", p->udp ? "udp" : "tcp", ip,
				    strerror(e));
	if (e == EADDRINUSE)
		return gantry_error(err, e, "port %s:%u/%s: address in use", ip, p->host_port,
				    p->udp ? "udp" : "tcp");
	return gantry_error(err, e, "port %s:%u/%s: %s", ip, p->host_port, p->udp ? "udp" : "tcp",
			    strerror(e));
}

bool port_socket_bound(int fd, bool udp, struct in_addr host, int port)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa), ol = sizeof(int);
	int type = 0;

	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &ol) == 0 &&
	       type == (udp ? SOCK_DGRAM : SOCK_STREAM) &&
	       getsockname(fd, (struct sockaddr *)&sa, &sl) == 0 && sa.sin_family == AF_INET &&
	       sa.sin_addr.s_addr == host.s_addr && (port < 0 || ntohs(sa.sin_port) == port);
}

int port_spec_pick(struct port_spec *p, gantry_error_t *err)
{
	int fd;

	if (p->host_port)
		return 0;
	if (port_spec_bind(p, &fd, err) < 0)
		return -1;
	close(fd);
	return 0;
}
