/* gantry.net= and the files made from it (see netconf.h). The value comes
 * from the host, but a typo there must cost the guest its network, with a
 * line saying why, not configure something else. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "guest/netconf.h"
#include "proto/netplan.h"

#define PREFIX_MIN 1
#define PREFIX_MAX 30 /* /31 and /32 leave no room for a gateway beside us */

static void why_set(char why[NETCONF_WHY_MAX], const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void why_set(char why[NETCONF_WHY_MAX], const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, NETCONF_WHY_MAX, fmt, ap);
	va_end(ap);
}

/* A decimal of 1..max_digits digits, no leading zero, at most max. */
static const char *parse_num(const char *p, unsigned int max_digits, unsigned int max,
			     unsigned int *out)
{
	unsigned int v = 0, i;

	for (i = 0; i < max_digits && p[i] >= '0' && p[i] <= '9'; i++)
		v = v * 10 + (unsigned int)(p[i] - '0');
	if (i == 0 || (p[i] >= '0' && p[i] <= '9') || (i > 1 && p[0] == '0') || v > max)
		return NULL;
	*out = v;
	return p + i;
}

/* Exactly four dotted octets; returns where they end. */
static const char *parse_quad(const char *p, uint32_t *out)
{
	uint32_t a = 0;

	for (int i = 0; i < 4; i++) {
		unsigned int octet;

		if (i && *p++ != '.')
			return NULL;
		p = parse_num(p, 3, 255, &octet);
		if (p == NULL)
			return NULL;
		a = a << 8 | octet;
	}
	*out = a;
	return p;
}

uint32_t netconf_mask(unsigned int prefix)
{
	return prefix == 0 ? 0 : prefix >= 32 ? 0xffffffffu : ~(0xffffffffu >> prefix);
}

const char *netconf_ntoa(uint32_t a, char buf[16])
{
	snprintf(buf, 16, "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff);
	return buf;
}

/* Neither "this network" (0/8), loopback (127/8), nor multicast and above. */
static bool unicast(uint32_t a)
{
	return (a >> 24) != 0 && (a >> 24) != 127 && a < 0xe0000000u;
}

/* A unicast address whose host part is neither all zeros nor all ones. */
static bool host_in(uint32_t a, uint32_t mask)
{
	return unicast(a) && (a & ~mask) != 0 && (a & ~mask) != ~mask;
}

static const char *field(const char *p, char sep, uint32_t *out)
{
	p = parse_quad(p, out);
	return p && *p == sep ? p + (sep != '\0') : NULL;
}

int netconf_parse(const char *value, struct netconf *n, char why[NETCONF_WHY_MAX])
{
	struct netconf c = { .on = true };
	const char *p = value;
	uint32_t mask;

	*n = (struct netconf){ 0 };
	if ((p = field(p, '/', &c.addr)) == NULL ||
	    (p = parse_num(p, 2, PREFIX_MAX, &c.prefix)) == NULL || *p++ != ',' ||
	    (p = field(p, ',', &c.gateway)) == NULL || (p = field(p, '\0', &c.dns)) == NULL) {
		why_set(why, "gantry.net=%.40s: want ADDR/PREFIX,GATEWAY,DNS (like %s)", value,
			&NET_GUEST_CMDLINE[sizeof("gantry.net=") - 1]);
		return -1;
	}
	mask = netconf_mask(c.prefix);
	if (c.prefix < PREFIX_MIN) {
		why_set(why, "gantry.net=: prefix /%u out of range %d..%d", c.prefix, PREFIX_MIN,
			PREFIX_MAX);
		return -1;
	}
	if (!host_in(c.addr, mask)) {
		why_set(why, "gantry.net=: address is not a host address of its /%u", c.prefix);
		return -1;
	}
	if (!host_in(c.gateway, mask) || (c.gateway & mask) != (c.addr & mask) ||
	    c.gateway == c.addr) {
		why_set(why, "gantry.net=: gateway is not another host of the guest's /%u",
			c.prefix);
		return -1;
	}
	if (!unicast(c.dns)) {
		why_set(why, "gantry.net=: DNS server is not a unicast address");
		return -1;
	}
	*n = c;
	return 0;
}

bool netconf_hostname_valid(const char *name)
{
	size_t len = strlen(name);

	return len > 0 && len <= NETCONF_HOST_MAX && name[0] != '-' &&
	       strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
		       len;
}

/* snprintf that says -1 rather than truncate. */
static int format(char *buf, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int format(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return r < 0 || (size_t)r >= size ? -1 : r;
}

/* Without a network, nothing to name: an empty file resolves nothing, fast. */
int netconf_resolv(const struct netconf *n, char *buf, size_t size)
{
	char dns[16];

	if (!n->on)
		return format(buf, size, "%s", "");
	return format(buf, size, "nameserver %s\noptions edns0\n", netconf_ntoa(n->dns, dns));
}

/* Our own name resolves to eth0's address, or beside localhost when there is
 * none; the host's and the gateway's names only where they can be reached. */
int netconf_hosts(const struct netconf *n, const char *hostname, char *buf, size_t size)
{
	char addr[16], gw[16];

	if (!n->on)
		return format(buf, size, "127.0.0.1\tlocalhost %s\n", hostname);
	return format(buf, size,
		      "127.0.0.1\tlocalhost\n"
		      "%s\t%s\n"
		      "%s\thost.gantry.internal host.docker.internal host.containers.internal\n"
		      "%s\tgateway.gantry.internal\n",
		      netconf_ntoa(n->addr, addr), hostname, NET_HOST_STR,
		      netconf_ntoa(n->gateway, gw));
}

int netconf_hostname(const char *hostname, char *buf, size_t size)
{
	return format(buf, size, "%s\n", hostname);
}
