/* The workload's proxy (see proxy.h). */
#include <arpa/inet.h>
#include <ctype.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "common/util.h"
#include "net/net.h"
#include "net/proxy.h"

static const char *const schemes[] = { "http", "https", "socks5", "socks5h" };
static const char *const env_names[] = { "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY" };

static bool host_char(char c)
{
	return isalnum((unsigned char)c) || c == '-' || c == '.' || c == '_';
}

static bool is_loopback(const char *host)
{
	struct in_addr a;

	if (strcmp(host, "localhost") == 0)
		return true;
	return inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

int net_proxy_parse(const char *url, struct net_proxy *out, gantry_error_t *err)
{
	const char *sep = strstr(url, "://"), *host, *end, *colon;
	size_t i, hlen;
	uint64_t port = 0;

	memset(out, 0, sizeof(*out));
	if (sep == NULL)
		return gantry_error_opt(err, "proxy", " `%.80s`: want SCHEME://HOST[:PORT]", url);
	for (i = 0; i < ARRAY_SIZE(schemes); i++)
		if ((size_t)(sep - url) == strlen(schemes[i]) &&
		    strncasecmp(url, schemes[i], strlen(schemes[i])) == 0)
			break;
	if (i == ARRAY_SIZE(schemes))
		return gantry_error_opt(
			err, "proxy", " `%.80s`: the scheme must be http, https, socks5 or socks5h",
			url);
	snprintf(out->scheme, sizeof(out->scheme), "%s", schemes[i]);
	host = sep + 3;
	end = host + strcspn(host, "/");
	if (end[0] == '/' && end[1] != '\0')
		return gantry_error_opt(err, "proxy", " `%.80s`: no path after the host", url);
	if (memchr(host, '@', (size_t)(end - host)))
		return gantry_error_opt(err, "proxy",
					" `%.80s`: no user or password in the URL (the workload's "
					"environment is no place for a secret)",
					url);
	if (host[0] == '[')
		return gantry_error_opt(err, "proxy", " `%.80s`: IPv6 proxies are not supported",
					url);
	colon = memchr(host, ':', (size_t)(end - host));
	hlen = (size_t)((colon ? colon : end) - host);
	if (hlen == 0 || hlen > NET_PROXY_HOST_MAX)
		return gantry_error_opt(err, "proxy", " `%.80s`: no host", url);
	for (i = 0; i < hlen; i++) {
		if (!host_char(host[i]))
			return gantry_error_opt(err, "proxy", " `%.80s`: bad host name", url);
		out->host[i] = (char)tolower((unsigned char)host[i]);
	}
	if (colon) {
		char digits[8];
		size_t dlen = (size_t)(end - colon - 1);

		if (dlen == 0 || dlen >= sizeof(digits))
			return gantry_error_opt(err, "proxy", " `%.80s`: bad port", url);
		memcpy(digits, colon + 1, dlen);
		digits[dlen] = '\0';
		if (parse_u64(digits, 65535, &port) < 0 || port == 0)
			return gantry_error_opt(err, "proxy", " `%.80s`: bad port", url);
	} else if (strncmp(out->scheme, "socks", 5) == 0) {
		return gantry_error_opt(err, "proxy", " `%.80s`: a SOCKS proxy needs its port",
					url);
	} else {
		port = strcmp(out->scheme, "https") == 0 ? 443 : 80;
	}
	out->port = (uint16_t)port;
	out->loopback = is_loopback(out->host);
	snprintf(out->guest_url, sizeof(out->guest_url), "%s://%s:%u", out->scheme,
		 out->loopback ? NET_HOST_STR : out->host, out->port);
	return 0;
}

int net_no_proxy_check(const char *list, gantry_error_t *err)
{
	if (strlen(list) > NET_NO_PROXY_MAX)
		return gantry_error_opt(err, "no_proxy", ": longer than %d bytes",
					NET_NO_PROXY_MAX);
	for (const char *c = list; *c; c++)
		if (!host_char(*c) && !strchr(",:*/[]", *c))
			return gantry_error_opt(err, "no_proxy",
						": `%c` is not allowed in the list", *c);
	return 0;
}

char **net_proxy_env(const struct net_proxy *p, const char *no_proxy)
{
	char **env = xzalloc(9 * sizeof(*env));
	size_t n = 0;

	for (size_t i = 0; i < ARRAY_SIZE(env_names); i++) {
		char lower[16];
		size_t k;

		for (k = 0; env_names[i][k]; k++)
			lower[k] = (char)tolower((unsigned char)env_names[i][k]);
		lower[k] = '\0';
		xasprintf(&env[n++], "%s=%s", env_names[i], p->guest_url);
		xasprintf(&env[n++], "%s=%s", lower, p->guest_url);
	}
	xasprintf(&env[n++], "NO_PROXY=%s", no_proxy ? no_proxy : NET_NO_PROXY_DEFAULT);
	xasprintf(&env[n++], "no_proxy=%s", no_proxy ? no_proxy : NET_NO_PROXY_DEFAULT);
	return env;
}

int net_proxy_addrs(const struct net_proxy *p, uint32_t *out, size_t max, size_t *n,
		    gantry_error_t *err)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res, *ai;
	int rc;

	*n = 0;
	if (p->loopback) {
		out[(*n)++] = NET_HOST;
		return 0;
	}
	rc = getaddrinfo(p->host, NULL, &hints, &res);
	if (rc != 0)
		return gantry_error_opt(err, "proxy", ": cannot resolve `%s`: %s", p->host,
					gai_strerror(rc));
	for (ai = res; ai && *n < max; ai = ai->ai_next) {
		uint32_t ip = ntohl(((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr);
		bool seen = false;

		for (size_t i = 0; i < *n; i++)
			seen |= out[i] == ip;
		if (!seen)
			out[(*n)++] = ip;
	}
	freeaddrinfo(res);
	if (*n == 0)
		return gantry_error_opt(err, "proxy", ": `%s` has no IPv4 address", p->host);
	return 0;
}
