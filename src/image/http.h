/* What the registry client reads out of HTTP responses, parsed without
 * libcurl so it can be fuzzed (tests/fuzz/fuzz_registry_auth.c): the head
 * of a response, header line by header line as libcurl hands them over
 * (not NUL-terminated), and the WWW-Authenticate challenge of a 401. All of
 * it comes from the network: every read stays inside the bytes given. */
#ifndef GANTRY_IMAGE_HTTP_H
#define GANTRY_IMAGE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http_head {
	long status; /* of the last status line; 0 when it had none */
	char *content_type;
	char *docker_digest; /* Docker-Content-Digest */
	char *challenge;     /* WWW-Authenticate */
	int64_t length;	     /* Content-Length, INT64_MAX when larger, or -1 */
	bool done;	     /* the blank line after a final (2xx and up) head */
};

/* Take one header line ("Name: value\r\n"; n bytes, no NUL needed). A
 * status line ("HTTP/1.1 200 OK") starts a new head: an interim 1xx
 * response's headers are forgotten. */
void http_head_line(struct http_head *h, const char *line, size_t n);
/* Forget the headers (the status stays); length -1, done false. */
void http_head_reset(struct http_head *h);
/* The value of header name (case-insensitive) in line, trimmed; NULL when
 * line is another header or holds a NUL byte. Caller frees. */
char *http_header_value(const char *line, size_t n, const char *name);

/* `Bearer realm="...",service="...",scope="..."`, or `Basic realm=...`. */
struct http_challenge {
	char scheme[16];	       /* as sent, cut to 15 bytes */
	char *realm, *service, *scope; /* NULL when absent */
};

/* Parse a challenge; quoted values may hold commas and backslash escapes,
 * parameter names are case-insensitive, the first of a repeated one wins. */
void http_challenge_parse(const char *h, struct http_challenge *c);
void http_challenge_free(struct http_challenge *c);

#endif
