/* Registry host names (see registry_host.h). */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/settings.h"
#include "common/util.h"
#include "image/reference.h"
#include "image/registry_host.h"

static bool port_valid(const char *p, size_t n)
{
	unsigned long v = 0;

	if (n == 0 || n > 5)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)p[i]))
			return false;
		v = v * 10 + (unsigned long)(p[i] - '0');
	}
	return v >= 1 && v <= 65535;
}

bool registry_host_valid(const char *s, size_t n)
{
	size_t end = n, i;
	const char *colon;

	if (n == 0)
		return false;
	if (s[0] == '[') {
		const char *close = memchr(s, ']', n);
		char addr[INET6_ADDRSTRLEN];
		struct in6_addr a6;
		size_t alen;

		if (close == NULL)
			return false;
		alen = (size_t)(close - s - 1);
		if (alen == 0 || alen >= sizeof(addr))
			return false;
		memcpy(addr, s + 1, alen);
		addr[alen] = '\0';
		if (inet_pton(AF_INET6, addr, &a6) != 1)
			return false;
		i = (size_t)(close - s) + 1;
		return i == n || (s[i] == ':' && port_valid(s + i + 1, n - i - 1));
	}
	colon = memchr(s, ':', n);
	if (colon) {
		end = (size_t)(colon - s);
		if (!port_valid(colon + 1, n - end - 1))
			return false;
	}
	for (i = 0; i < end; i++) {
		char c = s[i];
		bool edge = i == 0 || i + 1 == end || s[i - 1] == '.' || s[i + 1] == '.';

		if (isalnum((unsigned char)c))
			continue;
		if (c == '-' && !edge)
			continue;
		if (c == '.' && i > 0 && i + 1 < end && s[i + 1] != '.')
			continue;
		return false;
	}
	return end > 0;
}

bool registry_is_hub(const char *host)
{
	return strcasecmp(host, REF_DOCKER_HUB) == 0 || strcasecmp(host, "index.docker.io") == 0 ||
	       strcasecmp(host, REGISTRY_HUB_API_HOST) == 0;
}

char *registry_normalize(const char *name)
{
	const char *p = name, *end;
	char *host;

	if (strncmp(p, "https://", 8) == 0)
		p += 8;
	else if (strncmp(p, "http://", 7) == 0)
		p += 7;
	end = strchr(p, '/');
	if (end == NULL)
		end = p + strlen(p);
	if (!registry_host_valid(p, (size_t)(end - p)))
		return NULL;
	host = strndup(p, (size_t)(end - p));
	if (host == NULL)
		abort();
	for (char *c = host; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	if (registry_is_hub(host)) {
		free(host);
		return xstrdup(REF_DOCKER_HUB);
	}
	return host;
}

const char *registry_api_host(const char *registry)
{
	return strcmp(registry, REF_DOCKER_HUB) == 0 ? REGISTRY_HUB_API_HOST : registry;
}

/* The host without brackets or port, in buf. */
static void host_only(const char *host, char *buf, size_t size)
{
	const char *end;

	if (host[0] == '[') {
		end = strchr(host, ']');
		host++;
	} else {
		end = strchr(host, ':');
	}
	if (end == NULL)
		end = host + strlen(host);
	snprintf(buf, size, "%.*s", (int)MIN((size_t)(end - host), size - 1), host);
}

bool registry_is_loopback(const char *host)
{
	char h[256];
	struct in6_addr a6;
	struct in_addr a4;

	host_only(host, h, sizeof(h));
	if (strcasecmp(h, "localhost") == 0)
		return true;
	if (inet_pton(AF_INET, h, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	return inet_pton(AF_INET6, h, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

static bool listed(const char *host, const char *list)
{
	char bare[256];
	size_t hn = strlen(host), bn;

	if (list == NULL)
		return false;
	host_only(host, bare, sizeof(bare));
	bn = strlen(bare);
	for (const char *p = list; *p;) {
		size_t n = strcspn(p, ", ");

		if (n && ((n == hn && strncasecmp(p, host, n) == 0) ||
			  (n == bn && strncasecmp(p, bare, n) == 0)))
			return true;
		p += n;
		p += strspn(p, ", ");
	}
	return false;
}

bool registry_plain_http(const char *host, const char *extra)
{
	return registry_is_loopback(host) || listed(host, gantry_setting(REGISTRY_INSECURE_ENV)) ||
	       listed(host, extra);
}
