/* The egress proxy's HTTP/1.x request rewriter (see http.h). A head is
 * gathered whole, read byte by byte here (stricter than http_parser: CR
 * only before LF, no folded lines, no control bytes) and by http_parser,
 * then written out rewritten (http_head.c); a body is passed on as it
 * comes, framed by http_parser and, where chunked, by a strict reader of
 * its own beside it. Strict, because where our framing and the server's
 * could differ, the guest would choose where a request ends, and so which
 * bytes we take for a head and fill with values. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "common/lazy.h"
#include "common/util.h"
#include "egress/http_priv.h"

/* libhttp-parser is loaded by the first connection's egress_http_new. */
#define HTTP_SYMS(X)                                                                               \
	X(http_parser_init)                                                                        \
	X(http_parser_execute)                                                                     \
	X(http_parser_pause)

HTTP_SYMS(LAZY_DEFINE)
static const struct lazy_sym http_syms[] = { HTTP_SYMS(LAZY_ENTRY) };
static struct lazy_lib http_lib = LAZY_LIB("libhttp_parser.so.2.9", "libhttp-parser2.9", http_syms);

#define CHUNK_LINE_MAX 4096 /* a chunk's size line, extensions and all */

void egress_buf_reserve(struct egress_buf *b, size_t more)
{
	size_t len = b->len, cap;
	uint8_t *p;

	if (more <= b->cap - len)
		return;
	/* Never realloc: it may leave the old block as it was. */
	cap = MAX(b->cap * 2, (size_t)256);
	if (more > SIZE_MAX / 2 - len)
		cap = SIZE_MAX; /* malloc refuses it: xmalloc's message */
	else if (cap < len + more)
		cap = len + more;
	p = xmalloc(cap);
	if (len)
		memcpy(p, b->data, len);
	egress_buf_wipe_free(b);
	b->data = p;
	b->len = len;
	b->cap = cap;
}

void egress_buf_append(struct egress_buf *b, const void *p, size_t n)
{
	if (n == 0)
		return;
	egress_buf_reserve(b, n);
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

void egress_buf_consume(struct egress_buf *b, size_t n)
{
	n = MIN(n, b->len);
	if (n == 0)
		return;
	memmove(b->data, b->data + n, b->len - n);
	explicit_bzero(b->data + b->len - n, n);
	b->len -= n;
}

void egress_buf_wipe_free(struct egress_buf *b)
{
	if (b->data) {
		explicit_bzero(b->data, b->cap);
		free(b->data);
	}
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

/* v without the whitespace around it. */
static void trim(const uint8_t **v, size_t *n)
{
	while (*n && is_ows(**v)) {
		(*v)++;
		(*n)--;
	}
	while (*n && is_ows((*v)[*n - 1]))
		(*n)--;
}

/* One more byte of a head: *end where it is the head's last. */
static enum egress_http_status head_byte(struct egress_http *h, uint8_t c, bool *end)
{
	/* A lone CR or LF is a line end to some servers and not to others. */
	if (h->cr != (c == '\n'))
		return EGRESS_HTTP_BAD;
	h->cr = c == '\r';
	if (c == '\n') {
		if (h->line_len == 1) {
			/* Blank lines before the request line are skipped
			 * (RFC 9112 2.2); the one after the headers ends it. */
			*end = h->lines > 0;
		} else if (++h->lines > EGRESS_HTTP_LINES_MAX + 1) {
			return EGRESS_HTTP_TOO_BIG;
		}
		h->line_len = 0;
		return EGRESS_HTTP_OK;
	}
	/* A folded line (obs-fold) continues a value some servers unfold. */
	if (h->line_len == 0 && is_ows(c))
		return EGRESS_HTTP_BAD;
	if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f)
		return EGRESS_HTTP_BAD;
	if (c == '\t' && h->lines == 0)
		return EGRESS_HTTP_BAD;
	h->line_len++;
	return EGRESS_HTTP_OK;
}

static int hex_digit(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = lower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* One more byte of a chunked body's framing, outside a chunk's data. */
static enum egress_http_status chunk_byte(struct chunk_check *ck, uint8_t c)
{
	int d;

	switch (ck->state) {
	case CK_SIZE0:
	case CK_SIZE:
		if (++ck->line > CHUNK_LINE_MAX)
			return EGRESS_HTTP_BAD;
		d = hex_digit(c);
		if (d >= 0) {
			if (ck->size >> 59)
				return EGRESS_HTTP_BAD;
			ck->size = ck->size * 16 + (uint64_t)d;
			ck->state = CK_SIZE;
		} else if (ck->state == CK_SIZE0) {
			return EGRESS_HTTP_BAD;
		} else if (c == ';') {
			ck->state = CK_EXT;
		} else if (c == '\r') {
			ck->state = CK_SIZE_LF;
		} else {
			return EGRESS_HTTP_BAD;
		}
		return EGRESS_HTTP_OK;
	case CK_EXT:
		if (++ck->line > CHUNK_LINE_MAX)
			return EGRESS_HTTP_BAD;
		if (c == '\r')
			ck->state = CK_SIZE_LF;
		else if ((c < 0x20 && c != '\t') || c == 0x7f)
			return EGRESS_HTTP_BAD;
		return EGRESS_HTTP_OK;
	case CK_SIZE_LF:
		if (c != '\n')
			return EGRESS_HTTP_BAD;
		ck->line = 0;
		ck->state = ck->size ? CK_DATA : CK_TRAILER0;
		return EGRESS_HTTP_OK;
	case CK_DATA_CR:
		if (c != '\r')
			return EGRESS_HTTP_BAD;
		ck->state = CK_DATA_LF;
		return EGRESS_HTTP_OK;
	case CK_DATA_LF:
		if (c != '\n')
			return EGRESS_HTTP_BAD;
		ck->state = CK_SIZE0;
		return EGRESS_HTTP_OK;
	case CK_TRAILER0:
	case CK_TRAILER:
	case CK_TRAILER_LF:
	case CK_END_LF:
		if (++ck->trailer_bytes > EGRESS_HTTP_HEAD_MAX)
			return EGRESS_HTTP_TOO_BIG;
		break;
	case CK_DATA:
	case CK_DONE:
		return EGRESS_HTTP_BAD;
	}
	/* The trailer: header lines, passed on as they are. */
	switch (ck->state) {
	case CK_TRAILER0:
		if (c == '\r') {
			ck->state = CK_END_LF;
			return EGRESS_HTTP_OK;
		}
		if (is_ows(c))
			return EGRESS_HTTP_BAD;
		if (++ck->trailer_lines > EGRESS_HTTP_LINES_MAX)
			return EGRESS_HTTP_TOO_BIG;
		ck->state = CK_TRAILER;
		/* fall through */
	case CK_TRAILER:
		if (c == '\r')
			ck->state = CK_TRAILER_LF;
		else if ((c < 0x20 && c != '\t') || c == 0x7f)
			return EGRESS_HTTP_BAD;
		return EGRESS_HTTP_OK;
	case CK_TRAILER_LF:
		if (c != '\n')
			return EGRESS_HTTP_BAD;
		ck->state = CK_TRAILER0;
		return EGRESS_HTTP_OK;
	default: /* CK_END_LF */
		if (c != '\n')
			return EGRESS_HTTP_BAD;
		ck->state = CK_DONE;
		return EGRESS_HTTP_OK;
	}
}

/* Read the chunked framing over buf, up to the body's end: *took, the
 * bytes read before that end or the byte refused. */
static enum egress_http_status chunk_scan(struct chunk_check *ck, const uint8_t *buf, size_t len,
					  size_t *took)
{
	enum egress_http_status r = EGRESS_HTTP_OK;
	size_t i = 0, n;

	while (i < len && ck->state != CK_DONE) {
		if (ck->state == CK_DATA) {
			n = (size_t)MIN(ck->size, (uint64_t)(len - i));
			ck->size -= n;
			i += n;
			if (ck->size == 0)
				ck->state = CK_DATA_CR;
			continue;
		}
		r = chunk_byte(ck, buf[i]);
		if (r != EGRESS_HTTP_OK)
			break;
		i++;
	}
	*took = i;
	return r;
}

static int on_headers_complete(http_parser *p)
{
	struct egress_http *h = p->data;

	h->headers_done = true;
	return 0;
}

/* Pauses the parser: execute returns with the message's last byte, and
 * what follows is read as a new head (or raw). */
static int on_message_complete(http_parser *p)
{
	struct egress_http *h = p->data;

	h->message_done = true;
	sym_http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings parser_settings = {
	.on_headers_complete = on_headers_complete,
	.on_message_complete = on_message_complete,
};

/* http_parser over buf: *took, its bytes up to the message's end. */
static enum egress_http_status parse(struct egress_http *h, const uint8_t *buf, size_t len,
				     size_t *took)
{
	size_t n;

	*took = 0;
	if (len == 0) /* to http_parser, the end of the stream */
		return EGRESS_HTTP_OK;
	n = sym_http_parser_execute(&h->parser, &parser_settings, (const char *)buf, len);
	if (HTTP_PARSER_ERRNO(&h->parser) == HPE_PAUSED && h->message_done)
		sym_http_parser_pause(&h->parser, 0);
	else if (HTTP_PARSER_ERRNO(&h->parser) != HPE_OK || n != len)
		return EGRESS_HTTP_BAD;
	*took = n;
	return EGRESS_HTTP_OK;
}

/* method SP request-target SP HTTP-version, exactly (RFC 9112 3): what
 * http_parser lets by (spaces, odd versions) some servers read otherwise. */
static bool request_line_ok(const uint8_t *p, size_t n)
{
	size_t i = 0, j;

	while (i < n && is_tchar(p[i]))
		i++;
	if (i == 0 || i == n || p[i] != ' ')
		return false;
	for (j = ++i; j < n && p[j] != ' ';)
		j++;
	if (j == i || n - j != 9)
		return false;
	p += j + 1;
	return memcmp(p, "HTTP/", 5) == 0 && p[5] >= '0' && p[5] <= '9' && p[6] == '.' &&
	       p[7] >= '0' && p[7] <= '9';
}

/* Split the whole head into its header lines (head_byte has checked its
 * bytes and line ends, http_parser its grammar), and refuse the framing
 * headers a server could read other than http_parser does. */
enum egress_http_status head_split(struct egress_http *h)
{
	const uint8_t *p = h->head.data, *end = p + h->head.len - 2, *cr, *colon, *v;
	size_t n, nr_cl = 0, nr_te = 0, nr_up = 0;

	while (p[0] == '\r') /* blank lines */
		p += 2;
	cr = memchr(p, '\r', (size_t)(end - p));
	if (cr == NULL || !request_line_ok(p, (size_t)(cr - p)))
		return EGRESS_HTTP_BAD;
	p = cr + 2;
	h->pre_len = (size_t)(p - h->head.data);
	h->nr_hdrs = 0;
	for (; p < end; p = cr + 2) {
		struct header *hd = &h->hdrs[h->nr_hdrs];

		cr = memchr(p, '\r', (size_t)(end - p));
		if (cr == NULL)
			return EGRESS_HTTP_BAD;
		colon = memchr(p, ':', (size_t)(cr - p));
		if (colon == NULL || colon == p || h->nr_hdrs == EGRESS_HTTP_LINES_MAX)
			return EGRESS_HTTP_BAD;
		for (const uint8_t *c = p; c < colon; c++)
			if (!is_tchar(*c))
				return EGRESS_HTTP_BAD;
		hd->name = p;
		hd->name_len = (size_t)(colon - p);
		hd->val = colon + 1;
		hd->val_len = (size_t)(cr - hd->val);
		h->nr_hdrs++;

		v = hd->val;
		n = hd->val_len;
		trim(&v, &n);
		if (case_eq(hd->name, hd->name_len, "content-length")) {
			if (++nr_cl > 1 || n == 0 || n > 18)
				return EGRESS_HTTP_BAD;
			for (size_t i = 0; i < n; i++)
				if (v[i] < '0' || v[i] > '9')
					return EGRESS_HTTP_BAD;
		} else if (case_eq(hd->name, hd->name_len, "transfer-encoding")) {
			/* Chunked alone: anything else is framed differently
			 * by different servers, or not at all. */
			if (++nr_te > 1 || !case_eq(v, n, "chunked"))
				return EGRESS_HTTP_BAD;
		} else if (case_eq(hd->name, hd->name_len, "upgrade")) {
			nr_up++;
		}
	}
	if (nr_cl && nr_te)
		return EGRESS_HTTP_BAD;
	/* An Upgrade that http_parser does not take for one (no "Connection:
	 * upgrade"): a front end that switches on Upgrade alone would tunnel
	 * what we go on reading as heads, values put in. */
	if (nr_up && !(h->parser.flags & F_CONNECTION_UPGRADE))
		return EGRESS_HTTP_BAD;
	/* What the framing headers said is what http_parser took them for. */
	if (!!nr_te != !!(h->parser.flags & F_CHUNKED))
		return EGRESS_HTTP_BAD;
	return EGRESS_HTTP_OK;
}

/* v (n bytes) names host: HOST or HOST:443, in any case. */
static bool authority_is(const uint8_t *v, size_t n, const char *host)
{
	size_t hl = strlen(host);

	if (n == hl + 4 && memcmp(v + hl, ":443", 4) == 0)
		n = hl;
	return case_eq(v, n, host);
}

enum egress_http_status head_route(const struct egress_http *h, const char *host)
{
	const uint8_t *p = h->head.data, *sp, *target, *end;
	size_t method_len, nr_host = 0;

	end = p + h->pre_len - 2; /* the request line's CR */
	while (p[0] == '\r')	  /* blank lines */
		p += 2;
	sp = memchr(p, ' ', (size_t)(end - p));
	method_len = (size_t)(sp - p);
	/* TRACE echoes the head, values and all; CONNECT tunnels to
	 * wherever it names. */
	if (case_eq(p, method_len, "CONNECT") || case_eq(p, method_len, "TRACE") ||
	    case_eq(p, method_len, "TRACK"))
		return EGRESS_HTTP_METHOD;
	target = sp + 1;
	end = memchr(target, ' ', (size_t)(end - target));
	if (target[0] != '/' && !(end - target == 1 && target[0] == '*')) {
		/* Absolute-form: https://HOST[:443] and its path, nothing else. */
		const uint8_t *auth = target + 8, *slash;

		if (end - target < 8 || !case_eq(target, 8, "https://"))
			return EGRESS_HTTP_MISDIRECTED;
		slash = memchr(auth, '/', (size_t)(end - auth));
		if (!authority_is(auth, (size_t)((slash ? slash : end) - auth), host))
			return EGRESS_HTTP_MISDIRECTED;
	}
	for (size_t i = 0; i < h->nr_hdrs; i++) {
		const uint8_t *v = h->hdrs[i].val;
		size_t n = h->hdrs[i].val_len;

		if (!case_eq(h->hdrs[i].name, h->hdrs[i].name_len, "host"))
			continue;
		trim(&v, &n);
		if (++nr_host > 1 || !authority_is(v, n, host))
			return EGRESS_HTTP_MISDIRECTED;
	}
	return nr_host == 1 ? EGRESS_HTTP_OK : EGRESS_HTTP_MISDIRECTED;
}

static void head_reset(struct egress_http *h)
{
	if (h->head.len)
		explicit_bzero(h->head.data, h->head.len);
	h->head.len = 0;
	h->line_len = 0;
	h->lines = 0;
	h->cr = false;
	h->nr_hdrs = 0;
}

/* After a message's last byte: the next head, or no more HTTP. */
static void message_next(struct egress_http *h)
{
	h->headers_done = false;
	h->message_done = false;
	h->state = h->parser.upgrade ? ST_RAW : ST_HEAD;
}

/* Gather a head from buf; once whole, write it out rewritten. *used: the
 * bytes of buf taken. */
static enum egress_http_status head_take(struct egress_http *h, const uint8_t *buf, size_t len,
					 size_t *used, const struct egress_bindings *b,
					 struct egress_buf *out, egress_event_fn *fn, void *opaque)
{
	enum egress_http_status r = EGRESS_HTTP_OK, pr;
	bool end = false;
	size_t n, took;

	/* Our reading first, then http_parser's of the bytes it let
	 * through: each refuses a head at the same byte, however split. */
	for (n = 0; n < len && !end; n++) {
		if (h->head.len + n >= EGRESS_HTTP_HEAD_MAX) {
			r = EGRESS_HTTP_TOO_BIG;
			break;
		}
		r = head_byte(h, buf[n], &end);
		if (r != EGRESS_HTTP_OK)
			break;
	}
	egress_buf_append(&h->head, buf, n);
	pr = parse(h, buf, n, &took);
	if (pr != EGRESS_HTTP_OK)
		return pr;
	if (r != EGRESS_HTTP_OK)
		return r;
	/* Both readings end the head at the same byte. */
	if (h->headers_done != end || took != n)
		return EGRESS_HTTP_BAD;
	*used = n;
	if (!end)
		return EGRESS_HTTP_OK;
	r = head_rewrite(h, b, out, fn, opaque);
	head_reset(h);
	if (r != EGRESS_HTTP_OK)
		return r;
	if (h->message_done) {
		message_next(h);
	} else {
		h->state = ST_BODY;
		h->chunked = h->parser.flags & F_CHUNKED;
		memset(&h->ck, 0, sizeof(h->ck));
	}
	return EGRESS_HTTP_OK;
}

/* Pass a body's bytes on, up to its end. */
static enum egress_http_status body_take(struct egress_http *h, const uint8_t *buf, size_t len,
					 size_t *used, struct egress_buf *out)
{
	enum egress_http_status r = EGRESS_HTTP_OK, pr;
	size_t n = len, took;

	if (h->chunked)
		r = chunk_scan(&h->ck, buf, len, &n);
	pr = parse(h, buf, n, &took);
	if (pr != EGRESS_HTTP_OK)
		return pr;
	if (r != EGRESS_HTTP_OK)
		return r;
	/* A chunked body ends where both readings say it does. */
	if (h->chunked && (took != n || (h->ck.state == CK_DONE) != h->message_done))
		return EGRESS_HTTP_BAD;
	egress_buf_append(out, buf, took);
	*used = took;
	if (h->message_done)
		message_next(h);
	return EGRESS_HTTP_OK;
}

enum egress_http_status egress_http_feed(struct egress_http *h, const uint8_t *buf, size_t len,
					 size_t *used, const struct egress_bindings *b,
					 struct egress_buf *out, size_t room, egress_event_fn *fn,
					 void *opaque)
{
	enum egress_http_status r = EGRESS_HTTP_OK;
	size_t start = out->len, n;

	/* A step at a time (a head, a body's bytes, raw bytes), checking room
	 * before each: pipelined heads each grown by a value add up. */
	*used = 0;
	while (*used < len && out->len - start < room && r == EGRESS_HTTP_OK) {
		n = 0;
		switch (h->state) {
		case ST_HEAD:
			r = head_take(h, buf + *used, len - *used, &n, b, out, fn, opaque);
			break;
		case ST_BODY:
			r = body_take(h, buf + *used, len - *used, &n, out);
			break;
		case ST_RAW:
			egress_buf_append(out, buf + *used, len - *used);
			n = len - *used;
			break;
		case ST_FAILED:
			return h->failed;
		}
		if (r == EGRESS_HTTP_OK && n == 0) /* never: but never spin */
			r = EGRESS_HTTP_BAD;
		*used += n;
	}
	if (r != EGRESS_HTTP_OK) {
		head_reset(h);
		h->state = ST_FAILED;
		h->failed = r;
	}
	return h->state == ST_FAILED ? h->failed : EGRESS_HTTP_OK;
}

bool egress_http_in_head(const struct egress_http *h)
{
	return h->state == ST_HEAD && h->head.len > 0;
}

const char *egress_http_status_str(enum egress_http_status s)
{
	switch (s) {
	case EGRESS_HTTP_OK:
		return "ok";
	case EGRESS_HTTP_BAD:
		return "malformed request";
	case EGRESS_HTTP_TOO_BIG:
		return "request header fields too large";
	case EGRESS_HTTP_MISDIRECTED:
		return "a request for another host";
	case EGRESS_HTTP_METHOD:
		return "a method that echoes or tunnels";
	}
	return "unknown";
}

int egress_http_new(struct egress_http **out, gantry_error_t *err)
{
	struct egress_http *h;

	if (lazy_load(&http_lib, err) < 0)
		return gantry_error_prefix(err, "egress HTTP parser");
	h = xzalloc(sizeof(*h));
	sym_http_parser_init(&h->parser, HTTP_REQUEST);
	h->parser.data = h;
	h->state = ST_HEAD;
	*out = h;
	return 0;
}

void egress_http_free(struct egress_http *h)
{
	if (h == NULL)
		return;
	egress_buf_wipe_free(&h->head);
	explicit_bzero(h, sizeof(*h));
	free(h);
}
