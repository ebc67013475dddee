/* The egress proxy's HTTP/1.x request-stream rewriter: the guest's
 * plaintext requests to one host (keep-alive, pipelined) go in, and come
 * out with the placeholders it holds in request headers replaced by the
 * real values of the secrets bound to that host. Bodies, request lines
 * and everything after an Upgrade or a CONNECT pass unchanged. Every
 * byte is the guest's: heads are bounded, parsed by libhttp-parser
 * (loaded lazily) and refused where they are malformed or where their
 * reading could differ from the server's. It owns the bytes of the head
 * being gathered (wiped when freed); what holds a real value is only
 * ever written into the caller's struct egress_buf. */
#ifndef GANTRY_EGRESS_HTTP_H
#define GANTRY_EGRESS_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define EGRESS_HTTP_HEAD_MAX  (64 * 1024) /* a head from the guest, request line to blank line */
#define EGRESS_HTTP_LINES_MAX 256	  /* header lines in one head (trailers too) */
/* A head once rewritten: values longer than their placeholders grow it. */
#define EGRESS_HTTP_HEAD_OUT_MAX    (4 * EGRESS_HTTP_HEAD_MAX)
#define EGRESS_HTTP_PLACEHOLDER_MIN 16 /* shorter placeholders are ignored */
#define EGRESS_HTTP_NAME_MAX	    64 /* header names in events are cut to this */

/* Bytes that may hold a real value: grown by copying, and every block let
 * go is zeroed first, so wiping data[0..cap) at the end leaves no copy. */
struct egress_buf {
	uint8_t *data;
	size_t len, cap;
};

/* Room for more bytes after len (aborts where memory runs out). */
void egress_buf_reserve(struct egress_buf *b, size_t more);
void egress_buf_append(struct egress_buf *b, const void *p, size_t n);
/* Drop the first n bytes (sent on), zeroing what they leave. */
void egress_buf_consume(struct egress_buf *b, size_t n);
/* Zero all of data and free it; b is empty afterwards. */
void egress_buf_wipe_free(struct egress_buf *b);

struct egress_binding {
	const char *name;	 /* the secret's NAME, for events */
	const char *placeholder; /* what the guest holds, NUL-terminated */
	const uint8_t *value;	 /* the real value */
	size_t value_len;
	const char *header; /* NULL: any header; else only this one */
	/* NULL, or with header: that header's value, added where the request
	 * has no such header; exactly one "%s" (the value), "%%" for '%'. */
	const char *format;
};

/* The secrets for this connection's host, and those bound to other hosts
 * (foreign: only name and placeholder are read). */
struct egress_bindings {
	const struct egress_binding *bound;
	size_t nr_bound;
	const struct egress_binding *foreign;
	size_t nr_foreign;
	/* The host the connection is to (its TLS name): each request must
	 * be for it, by one Host header (HOST or HOST:443) and an
	 * origin-form target (or an absolute one naming it), else it is
	 * MISDIRECTED; CONNECT, TRACE and TRACK are METHOD. NULL: no check. */
	const char *host;
};

enum egress_event_kind {
	EGRESS_EV_INJECT,    /* the value went into header (or a header was added) */
	EGRESS_EV_MISPLACED, /* the placeholder is in a header the secret is not for */
	EGRESS_EV_FOREIGN,   /* the placeholder of a secret bound to another host */
	/* The value has CR, LF or NUL (or a header to add has a name or
	 * format that cannot be written): left out of the head. */
	EGRESS_EV_UNFIT,
};

/* name: the binding's; header: the request's header name, token
 * characters only, at most EGRESS_HTTP_NAME_MAX bytes (for an added
 * header, the binding's). Never a value. Both live for the call only. */
typedef void egress_event_fn(void *opaque, enum egress_event_kind kind, const char *name,
			     const char *header);

enum egress_http_status {
	EGRESS_HTTP_OK,
	EGRESS_HTTP_BAD,	 /* not a request we read as the server must: answer 400 */
	EGRESS_HTTP_TOO_BIG,	 /* a head or trailer over the bounds: answer 431 */
	EGRESS_HTTP_MISDIRECTED, /* for another host than the connection's: answer 421 */
	EGRESS_HTTP_METHOD,	 /* a method that would echo or tunnel the head: answer 405 */
};

struct egress_http; /* one connection's request stream */

/* Loads libhttp-parser on first use: -1 with an error naming the Debian
 * package where it is missing. */
int egress_http_new(struct egress_http **out, gantry_error_t *err);
/* Feed the guest's stream: of buf's len bytes, *used are taken, and what
 * goes on to the server is appended to out. It takes no more once this
 * call has appended room bytes (SIZE_MAX: no bound); past room it adds at
 * most one head (EGRESS_HTTP_HEAD_OUT_MAX) or len bytes, so what a burst
 * of requests makes of long values waits in buf, not in out: the caller
 * feeds buf + *used once the server has taken some of out. On failure,
 * its status, with some prefix of the output appended (the caller then
 * answers and closes; later calls return the same status and add
 * nothing). Bindings are read only during the call (the caller holds
 * their lock); events go to fn during it, once per secret and header
 * line, and only for a head that is passed on. Any split of a stream into
 * calls, and any room, gives the same output and events. */
enum egress_http_status egress_http_feed(struct egress_http *h, const uint8_t *buf, size_t len,
					 size_t *used, const struct egress_bindings *b,
					 struct egress_buf *out, size_t room, egress_event_fn *fn,
					 void *opaque);
/* Whether part of a head has come and not yet its end (the caller's
 * idle timeout for a slow head). */
bool egress_http_in_head(const struct egress_http *h);
const char *egress_http_status_str(enum egress_http_status s);
/* Frees h and wipes the bytes it holds; NULL is fine. */
void egress_http_free(struct egress_http *h);

#endif
