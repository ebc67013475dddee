/* The guest's network settings as text: the gantry.net= kernel parameter
 * parsed (NET_GUEST_CMDLINE in net/net.h) and the resolv.conf, hosts and
 * hostname files made from it. Pure: no system calls, so the host's unit
 * tests run it as is; net.c applies the result. */
#ifndef GANTRY_GUEST_NETCONF_H
#define GANTRY_GUEST_NETCONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NETCONF_WHY_MAX	 128
#define NETCONF_HOST_MAX 64 /* a hostname's bytes (the kernel's __NEW_UTS_LEN) */
#define NETCONF_FILE_MAX 1024

/* Addresses in host byte order. on false: no network, only lo. */
struct netconf {
	bool on;
	uint32_t addr, gateway, dns;
	unsigned int prefix;
};

/* Parse VALUE of gantry.net=ADDR/PREFIX,GATEWAY,DNS strictly: dotted quads
 * without leading zeros, prefix 1..30, ADDR and GATEWAY distinct hosts of
 * one subnet, DNS a unicast address. 0, or -1 with why filled and n off. */
int netconf_parse(const char *value, struct netconf *n, char why[NETCONF_WHY_MAX]);

uint32_t netconf_mask(unsigned int prefix);
/* "a.b.c.d" of a host-order address; buf holds 16 bytes. */
const char *netconf_ntoa(uint32_t addr, char buf[16]);

/* Letters, digits, '.', '-', '_' (what sandbox names may hold), at most
 * NETCONF_HOST_MAX bytes, not starting with '-'. */
bool netconf_hostname_valid(const char *name);

/* The files' contents; the length, or -1 when buf is too small. */
int netconf_resolv(const struct netconf *n, char *buf, size_t size);
int netconf_hosts(const struct netconf *n, const char *hostname, char *buf, size_t size);
int netconf_hostname(const char *hostname, char *buf, size_t size);

#endif
