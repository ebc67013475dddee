/* The workload's proxy (-proxy URL, -no-proxy LIST): checked once, then
 * turned into the proxy variables of every process the sandbox runs and,
 * for the network worker, into the addresses the proxy rules name.
 *
 * URL: http://, https://, socks5:// or socks5h:// HOST[:PORT][/], no user
 * or password (a secret in an environment variable is everyone's), SOCKS
 * with its port. A loopback HOST (localhost, 127/8) means the host's own:
 * the guest reaches it at 192.168.127.254, and its variables say so. */
#ifndef GANTRY_NET_PROXY_H
#define GANTRY_NET_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define NET_PROXY_HOST_MAX   253
#define NET_NO_PROXY_MAX     1024
#define NET_NO_PROXY_DEFAULT "localhost,127.0.0.1,::1"

struct net_proxy {
	char scheme[8];
	char host[NET_PROXY_HOST_MAX + 1]; /* lowercased */
	uint16_t port;
	bool loopback;
	char guest_url[NET_PROXY_HOST_MAX + 32]; /* the URL the guest's variables hold */
};

int net_proxy_parse(const char *url, struct net_proxy *out, gantry_error_t *err);
/* A NO_PROXY list: host names, addresses, CIDRs, `*`, comma-separated. */
int net_no_proxy_check(const char *list, gantry_error_t *err);
/* HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY, each also in lower
 * case: 8 "NAME=VALUE" strings, NULL-terminated (strv_free). no_proxy
 * NULL: NET_NO_PROXY_DEFAULT. */
char **net_proxy_env(const struct net_proxy *p, const char *no_proxy);
/* The proxy's IPv4 addresses as the guest reaches them (192.168.127.254
 * for a loopback one), host order, at most max; a name is resolved now. */
int net_proxy_addrs(const struct net_proxy *p, uint32_t *out, size_t max, size_t *n,
		    gantry_error_t *err);

#endif
