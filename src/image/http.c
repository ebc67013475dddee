/* Response heads and WWW-Authenticate challenges (see http.h). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"
#include "image/http.h"

void http_head_reset(struct http_head *h)
{
	free(h->content_type);
	free(h->docker_digest);
	free(h->challenge);
	h->content_type = h->docker_digest = h->challenge = NULL;
	h->length = -1;
	h->done = false;
}

char *http_header_value(const char *line, size_t n, const char *name)
{
	size_t k = strlen(name);
	const char *v, *end = line + n;
	char *out;

	/* A NUL has no place in a header: such a line is none we read. */
	if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':' || memchr(line, '\0', n))
		return NULL;
	for (v = line + k + 1; v < end && (*v == ' ' || *v == '\t'); v++)
		;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
		end--;
	out = xmalloc((size_t)(end - v) + 1);
	memcpy(out, v, (size_t)(end - v));
	out[end - v] = '\0';
	return out;
}

/* "HTTP/1.1 404 Not Found", "HTTP/2 200": the three-digit code, else 0. */
static long status_code(const char *line, size_t n)
{
	const char *sp = memchr(line, ' ', n), *end = line + n;
	long code = 0;

	if (sp == NULL || end - sp < 4)
		return 0;
	for (const char *p = sp + 1; p < sp + 4; p++) {
		if (!isdigit((unsigned char)*p))
			return 0;
		code = code * 10 + (*p - '0');
	}
	if (sp + 4 < end && !strchr(" \r\n", sp[4]))
		return 0;
	return code;
}

static int64_t content_length(const char *v)
{
	uint64_t n;

	switch (parse_u64(v, INT64_MAX, &n)) {
	case 0:
		return (int64_t)n;
	case -2:
		return INT64_MAX; /* more than anything we would read */
	}
	return -1;
}

static void set(char **field, char *v)
{
	free(*field);
	*field = v;
}

void http_head_line(struct http_head *h, const char *line, size_t n)
{
	char *v;

	if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
		http_head_reset(h);
		h->status = status_code(line, n);
	} else if (n >= 1 && n <= 2 && (line[0] == '\r' || line[0] == '\n')) {
		h->done = h->status >= 200;
	} else if ((v = http_header_value(line, n, "Content-Type"))) {
		set(&h->content_type, v);
	} else if ((v = http_header_value(line, n, "Docker-Content-Digest"))) {
		set(&h->docker_digest, v);
	} else if ((v = http_header_value(line, n, "WWW-Authenticate"))) {
		set(&h->challenge, v);
	} else if ((v = http_header_value(line, n, "Content-Length"))) {
		h->length = content_length(v);
		free(v);
	}
}

void http_challenge_free(struct http_challenge *c)
{
	free(c->realm);
	free(c->service);
	free(c->scope);
	*c = (struct http_challenge){ 0 };
}

void http_challenge_parse(const char *h, struct http_challenge *c)
{
	const char *p = h;
	size_t n = 0;

	*c = (struct http_challenge){ 0 };
	while (*p && !isspace((unsigned char)*p) && n + 1 < sizeof(c->scheme))
		c->scheme[n++] = *p++;
	while (*p) {
		char key[16], *val = xmalloc(strlen(p) + 1), **dst = NULL;
		size_t k = 0, v = 0;

		while (*p == ' ' || *p == ',' || *p == '\t')
			p++;
		while (*p && *p != '=' && *p != ',' && k + 1 < sizeof(key))
			key[k++] = (char)tolower((unsigned char)*p++);
		key[k] = '\0';
		if (*p == '=')
			p++;
		if (*p == '"') {
			for (p++; *p && *p != '"'; p++) {
				if (*p == '\\' && p[1])
					p++;
				val[v++] = *p;
			}
			if (*p == '"')
				p++;
		} else {
			while (*p && *p != ',' && *p != ' ')
				val[v++] = *p++;
		}
		val[v] = '\0';
		if (strcmp(key, "realm") == 0)
			dst = &c->realm;
		else if (strcmp(key, "service") == 0)
			dst = &c->service;
		else if (strcmp(key, "scope") == 0)
			dst = &c->scope;
		if (dst && *dst == NULL)
			*dst = val;
		else
			free(val);
	}
}
