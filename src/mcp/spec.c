/* -mcp-remote specs (see spec.h). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "mcp/spec.h"
#include "oauth/custody.h"

/* Tools that would let the guest change or see the remote's credentials. */
static const char *const refused_tools[] = { "*auth*", "*revoke*", "*login*", "*logout*",
					     "*token*" };

static int spec_error(gantry_error_t *err, const char *what)
{
	return gantry_error_opt(err, "mcp_remotes", ": %s", what);
}

bool mcp_glob(const char *g, const char *s)
{
	const char *star = NULL, *back = NULL;

	while (*s) {
		if (*g == '*') {
			star = g++;
			back = s;
		} else if (*g == '?' || *g == *s) {
			g++;
			s++;
		} else if (star) {
			g = star + 1;
			s = ++back;
		} else {
			return false;
		}
	}
	while (*g == '*')
		g++;
	return *g == '\0';
}

bool mcp_tool_allowed(const struct mcp_remote_spec *r, const char *tool)
{
	bool allowed = false;

	for (size_t i = 0; i < ARRAY_SIZE(refused_tools); i++) {
		cleanup_free char *lower = xstrdup(tool);

		for (char *c = lower; *c; c++)
			*c = (char)tolower((unsigned char)*c);
		if (mcp_glob(refused_tools[i], lower))
			return false;
	}
	for (size_t i = 0; i < r->nr_deny; i++)
		if (mcp_glob(r->deny[i], tool))
			return false;
	for (size_t i = 0; i < r->nr_allow && !allowed; i++)
		allowed = mcp_glob(r->allow[i], tool);
	return allowed;
}

static bool v4_refused(uint32_t a, bool loopback_ok)
{
	if ((a >> 24) == 127)
		return !loopback_ok;
	return (a >> 24) == 0 || (a >> 24) == 10 || (a >> 20) == (172u << 4 | 1) ||
	       (a >> 16) == (192u << 8 | 168) || (a >> 16) == (169u << 8 | 254) ||
	       (a >> 22) == (100u << 2 | 1) || (a >> 28) == 14 || (a >> 28) == 15 ||
	       (a >> 8) == (192u << 16 | 0 << 8 | 0); /* 192.0.0/24, IETF protocol space */
}

bool mcp_addr_refused(const struct sockaddr *sa, bool loopback_ok)
{
	if (sa->sa_family == AF_INET)
		return v4_refused(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr),
				  loopback_ok);
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(a) || IN6_IS_ADDR_V4COMPAT(a)) {
			uint32_t v4;

			memcpy(&v4, a->s6_addr + 12, 4);
			return v4_refused(ntohl(v4), loopback_ok);
		}
		if (IN6_IS_ADDR_LOOPBACK(a))
			return !loopback_ok;
		return IN6_IS_ADDR_UNSPECIFIED(a) || IN6_IS_ADDR_LINKLOCAL(a) ||
		       IN6_IS_ADDR_SITELOCAL(a) || IN6_IS_ADDR_MULTICAST(a) ||
		       (a->s6_addr[0] & 0xfe) == 0xfc; /* fc00::/7, unique local */
	}
	return true;
}

static bool id_valid(const char *v)
{
	size_t n = strlen(v);

	/* Tools are NAME__TOOL, split at the first "__": a name ending in
	 * '_' would be cut short there. */
	if (n == 0 || n > MCP_ID_MAX || !isalnum((unsigned char)v[0]) || strstr(v, "__") ||
	    v[n - 1] == '_' || strcmp(v, "fs") == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)v[i]) && !strchr("._-", v[i]))
			return false;
	return true;
}

static bool secret_name_valid(const char *v)
{
	size_t n = strlen(v);

	if (n == 0 || n > MCP_SECRET_NAME_MAX || isdigit((unsigned char)v[0]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)v[i]) && v[i] != '_')
			return false;
	return true;
}

static bool header_name_valid(const char *v)
{
	size_t n = strlen(v);

	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)v[i]) && v[i] != '-')
			return false;
	/* The request's own framing is not the remote's credential. */
	return strcasecmp(v, "Host") != 0 && strcasecmp(v, "Content-Length") != 0 &&
	       strcasecmp(v, "Content-Type") != 0 && strcasecmp(v, "Transfer-Encoding") != 0 &&
	       strncasecmp(v, "Mcp-", 4) != 0;
}

/* The URL's scheme and host checks (the rest is the HTTP client's). */
static int url_check(const char *url, struct mcp_remote_spec *r, gantry_error_t *err)
{
	const char *rest, *end, *at;
	char host[256];
	size_t n;
	struct in_addr v4;
	struct in6_addr v6;
	bool https;

	if (strncmp(url, "https://", 8) == 0)
		https = true, rest = url + 8;
	else if (strncmp(url, "http://", 7) == 0)
		https = false, rest = url + 7;
	else
		return spec_error(err, "url= must be https:// (or http:// to a loopback address)");
	for (const char *c = url; *c; c++)
		if ((unsigned char)*c <= ' ' || *c == 0x7f)
			return spec_error(err, "url= holds a space or a control character");
	end = rest + strcspn(rest, "/?#");
	at = memchr(rest, '@', (size_t)(end - rest));
	if (at)
		return spec_error(err, "url= may not hold a user or password (use auth=)");
	if (*rest == '[') {
		const char *close = memchr(rest, ']', (size_t)(end - rest));

		if (close == NULL)
			return spec_error(err, "url=: an unterminated [IPv6 address]");
		n = (size_t)(close - rest - 1);
		rest++;
	} else {
		n = strcspn(rest, ":/?#");
	}
	if (n == 0 || n >= sizeof(host))
		return spec_error(err, "url= has no host, or one too long");
	memcpy(host, rest, n);
	host[n] = '\0';
	if (inet_pton(AF_INET, host, &v4) == 1) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = v4 };

		r->loopback = (ntohl(v4.s_addr) >> 24) == 127;
		if (mcp_addr_refused((struct sockaddr *)&sa, !https && r->loopback))
			return spec_error(err, "url= names a private, link-local or metadata "
					       "address");
	} else if (inet_pton(AF_INET6, host, &v6) == 1) {
		struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_addr = v6 };

		r->loopback = IN6_IS_ADDR_LOOPBACK(&v6);
		if (mcp_addr_refused((struct sockaddr *)&sa, !https && r->loopback))
			return spec_error(err, "url= names a private, link-local or metadata "
					       "address");
	} else if (strcasecmp(host, "localhost") == 0) {
		return spec_error(err, "url=: name the loopback address (127.0.0.1), not "
				       "localhost");
	}
	if (!https && !r->loopback)
		return spec_error(err, "url=: http:// only to a loopback address (127.0.0.1, "
				       "[::1]); https:// otherwise");
	return 0;
}

static int auth_parse(const char *v, struct mcp_remote_spec *r, gantry_error_t *err)
{
	const char *name;

	if (r->auth != MCP_AUTH_NONE)
		return spec_error(err, "auth= given twice");
	if (strncmp(v, "bearer:", 7) == 0) {
		r->auth = MCP_AUTH_BEARER;
		name = v + 7;
	} else if (strncmp(v, "header:", 7) == 0) {
		const char *colon = strchr(v + 7, ':');

		if (colon == NULL)
			return spec_error(err, "auth=header:NAME:SECRET");
		r->header = xstrndup(v + 7, (size_t)(colon - v - 7));
		if (!header_name_valid(r->header))
			return spec_error(err, "auth=header:NAME: not a header name it may set");
		r->auth = MCP_AUTH_HEADER;
		name = colon + 1;
	} else if (strncmp(v, "custody:", 8) == 0) {
		if (!oauth_name_valid(v + 8))
			return spec_error(err, "auth=custody:PROVIDER: not a provider's name");
		r->auth = MCP_AUTH_CUSTODY;
		r->custody = xstrdup(v + 8);
		return 0;
	} else {
		return spec_error(err, "auth= is bearer:SECRET, header:NAME:SECRET or "
				       "custody:PROVIDER");
	}
	if (!secret_name_valid(name))
		return spec_error(err, "auth=: SECRET is the name of an environment variable");
	r->auth_secret = xstrdup(name);
	return 0;
}

static int glob_add(char **v, size_t *n, size_t max, const char *g, const char *key,
		    gantry_error_t *err)
{
	char what[64];

	if (*g == '\0' || strlen(g) > 128) {
		snprintf(what, sizeof(what), "%s= takes a glob of 1 to 128 bytes", key);
		return spec_error(err, what);
	}
	if (*n == max) {
		snprintf(what, sizeof(what), "more than %zu %s=", max, key);
		return spec_error(err, what);
	}
	v[(*n)++] = xstrdup(g);
	return 0;
}

static int pair(char *kv, struct mcp_remote_spec *r, gantry_error_t *err)
{
	char *eq = strchr(kv, '=');
	const char *v;

	if (eq == NULL)
		return spec_error(err, "expected KEY=VALUE pairs (name=, url=, auth=, allow=, "
				       "deny=, redact=)");
	*eq = '\0';
	v = eq + 1;
	if (strcmp(kv, "name") == 0) {
		if (r->id[0])
			return spec_error(err, "name= given twice");
		if (!id_valid(v))
			return spec_error(err, "name= is 1 to 31 of A-Z a-z 0-9 . _ -, starting "
					       "with a letter or digit, without __, not fs");
		snprintf(r->id, sizeof(r->id), "%s", v);
	} else if (strcmp(kv, "url") == 0) {
		if (r->url)
			return spec_error(err, "url= given twice");
		r->url = xstrdup(v);
		return url_check(v, r, err);
	} else if (strcmp(kv, "auth") == 0) {
		return auth_parse(v, r, err);
	} else if (strcmp(kv, "allow") == 0) {
		return glob_add(r->allow, &r->nr_allow, MCP_GLOBS_MAX, v, "allow", err);
	} else if (strcmp(kv, "deny") == 0) {
		return glob_add(r->deny, &r->nr_deny, MCP_GLOBS_MAX, v, "deny", err);
	} else if (strcmp(kv, "redact") == 0) {
		if (!secret_name_valid(v))
			return spec_error(err, "redact= names an environment variable");
		if (r->nr_redact == MCP_REDACT_MAX)
			return spec_error(err, "too many redact=");
		r->redact[r->nr_redact++] = xstrdup(v);
	} else {
		return spec_error(err, "unknown key (name, url, auth, allow, deny, redact)");
	}
	return 0;
}

int mcp_remote_spec_parse(const char *s, struct mcp_remote_spec *r, gantry_error_t *err)
{
	cleanup_free char *copy = NULL;
	char *save = NULL, *kv;

	memset(r, 0, sizeof(*r));
	if (strlen(s) > MCP_SPEC_MAX)
		return spec_error(err, "longer than 4096 bytes");
	copy = xstrdup(s);
	for (kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save))
		if (pair(kv, r, err) < 0) {
			mcp_remote_spec_free(r);
			return -1;
		}
	if (r->id[0] == '\0' || r->url == NULL) {
		mcp_remote_spec_free(r);
		return spec_error(err, "name= and url= are required");
	}
	return 0;
}

void mcp_remote_spec_free(struct mcp_remote_spec *r)
{
	free(r->url);
	free(r->header);
	free(r->auth_secret);
	free(r->custody);
	for (size_t i = 0; i < r->nr_allow; i++)
		free(r->allow[i]);
	for (size_t i = 0; i < r->nr_deny; i++)
		free(r->deny[i]);
	for (size_t i = 0; i < r->nr_redact; i++)
		free(r->redact[i]);
	memset(r, 0, sizeof(*r));
}
