/* The HTTP/1.x request rewriter's insides, shared by its two files:
 * http.c (the stream: reading a head, framing a body) and http_head.c
 * (writing a head out rewritten). Only http.c and http_head.c include
 * this; http.h is the rewriter's face. */
#ifndef GANTRY_EGRESS_HTTP_PRIV_H
#define GANTRY_EGRESS_HTTP_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <http_parser.h>

#include "egress/http.h"

enum http_state {
	ST_HEAD, /* gathering a head */
	ST_BODY, /* passing a body on */
	ST_RAW,	 /* after an Upgrade or a CONNECT: no longer HTTP */
	ST_FAILED,
};

/* The chunked framing, read strictly (RFC 9112 7.1, no whitespace). */
enum chunk_state {
	CK_SIZE0, /* a size's first digit */
	CK_SIZE,
	CK_EXT, /* after ';', to CR */
	CK_SIZE_LF,
	CK_DATA,
	CK_DATA_CR,
	CK_DATA_LF,
	CK_TRAILER0, /* a trailer line's start, or the last CR */
	CK_TRAILER,
	CK_TRAILER_LF,
	CK_END_LF,
	CK_DONE,
};

struct chunk_check {
	enum chunk_state state;
	uint64_t size; /* the size being read, then the data left */
	size_t line;   /* bytes of the size line */
	size_t trailer_bytes, trailer_lines;
};

struct header {
	const uint8_t *name, *val; /* val: all after the colon, to CR */
	size_t name_len, val_len;
};

struct egress_http {
	http_parser parser;
	enum http_state state;
	enum egress_http_status failed;
	struct egress_buf head; /* the guest's bytes of the head so far */
	/* The head's reading so far (head_byte). */
	size_t line_len; /* bytes of the current line, CR included */
	size_t lines;	 /* its non-empty lines */
	bool cr;	 /* the last byte was a CR */
	/* From http_parser's callbacks, during an execute. */
	bool headers_done, message_done;
	bool chunked;
	struct chunk_check ck;
	/* The whole head, split (head_split). */
	size_t pre_len; /* leading blank lines and the request line */
	struct header hdrs[EGRESS_HTTP_LINES_MAX];
	size_t nr_hdrs;
};

/* RFC 9110 5.6.2's tchar. */
static inline bool is_tchar(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static inline uint8_t lower(uint8_t c)
{
	return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* ASCII only, whatever the locale. */
static inline bool case_eq(const uint8_t *a, size_t n, const char *b)
{
	if (strlen(b) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (lower(a[i]) != lower((uint8_t)b[i]))
			return false;
	return true;
}

static inline bool is_ows(uint8_t c)
{
	return c == ' ' || c == '\t';
}

/* http.c: the whole head split into its header lines (h->hdrs), its
 * framing headers checked. */
enum egress_http_status head_split(struct egress_http *h);

/* http_head.c: the whole head in h->head, rewritten into out. */
/* http.c: whether split head h is for host alone (egress_bindings.host). */
enum egress_http_status head_route(const struct egress_http *h, const char *host);
enum egress_http_status head_rewrite(struct egress_http *h, const struct egress_bindings *b,
				     struct egress_buf *out, egress_event_fn *fn, void *opaque);

#endif
