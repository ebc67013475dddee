/* libFuzzer target for what a registry's responses say before their body
 * (image/http.c): the input is cut into lines at '\n' and each is handed to
 * http_head_line in a buffer of its own exact size, as libcurl hands header
 * lines over (no NUL), so a read past the line is caught. The
 * WWW-Authenticate value that leaves, and the whole input as one string,
 * go through http_challenge_parse; a challenge rebuilt from what was parsed
 * must parse back to the same fields. Inputs are plain text: response
 * heads and bare challenges. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "image/http.h"

#include "check.h"

/* A header value as http_header_value leaves it: trimmed at both ends. */
static void check_value(const char *v)
{
	size_t n;

	if (v == NULL)
		return;
	n = strlen(v);
	check(n == 0 || (v[0] != ' ' && v[0] != '\t'));
	check(n == 0 || !strchr(" \r\n", v[n - 1]));
	check(strchr(v, '\n') == NULL); /* lines were cut at '\n' */
}

/* key="value" with '"' and '\\' escaped, appended to *out. */
static void append_param(char **out, const char *key, const char *v)
{
	size_t n = strlen(*out), len = strlen(v);
	char *s = xmalloc(n + strlen(key) + 2 * len + 6), *p;

	p = s + sprintf(s, "%s,%s=\"", *out, key);
	for (size_t i = 0; i < len; i++) {
		if (v[i] == '"' || v[i] == '\\')
			*p++ = '\\';
		*p++ = v[i];
	}
	strcpy(p, "\"");
	free(*out);
	*out = s;
}

static void check_same(const char *a, const char *b)
{
	check((a == NULL) == (b == NULL));
	check(a == NULL || strcmp(a, b) == 0);
}

static void fuzz_challenge(const char *h)
{
	struct http_challenge c, back;
	char *again;

	http_challenge_parse(h, &c);
	check(strlen(c.scheme) < sizeof(c.scheme));
	for (const char *p = c.scheme; *p; p++)
		check(!strchr(" \t\n\v\f\r", *p));
	/* The scheme, a space, then each parameter there was. */
	xasprintf(&again, "%s ", c.scheme);
	if (c.realm)
		append_param(&again, "realm", c.realm);
	if (c.service)
		append_param(&again, "Service", c.service);
	if (c.scope)
		append_param(&again, "SCOPE", c.scope);
	http_challenge_parse(again, &back);
	check(strcmp(back.scheme, c.scheme) == 0);
	check_same(back.realm, c.realm);
	check_same(back.service, c.service);
	check_same(back.scope, c.scope);
	http_challenge_free(&back);
	http_challenge_free(&c);
	check(c.realm == NULL && c.service == NULL && c.scope == NULL);
	free(again);
}

static void fuzz_head(const uint8_t *data, size_t size)
{
	struct http_head h = { .length = -1 };
	size_t at = 0;

	while (at < size) {
		const uint8_t *nl = memchr(data + at, '\n', size - at);
		size_t n = nl ? (size_t)(nl - (data + at)) + 1 : size - at;
		char *line = xmalloc(n);

		memcpy(line, data + at, n);
		http_head_line(&h, line, n);
		free(line);
		at += n;
		check(h.status >= 0 && h.status <= 999);
		check(h.length >= -1);
		check(!h.done || h.status >= 200);
	}
	check_value(h.content_type);
	check_value(h.docker_digest);
	check_value(h.challenge);
	if (h.challenge)
		fuzz_challenge(h.challenge);
	http_head_reset(&h);
	check(h.challenge == NULL && h.length == -1 && !h.done);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;

	if (size > 4096)
		return 0;
	fuzz_head(data, size);
	s = xmalloc(size + 1);
	memcpy(s, data, size);
	s[size] = '\0';
	fuzz_challenge(s);
	free(s);
	return 0;
}
