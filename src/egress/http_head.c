/* The egress proxy's HTTP/1.x head writer (see http_priv.h): a whole
 * head, split by http.c, written out with the bound secrets' values in
 * place of their placeholders, inside Basic credentials too, and with the
 * headers of the secrets with a format that the request lacks. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "common/util.h"
#include "egress/http_priv.h"

/* Where a head's rewriting goes: out, or (NULL) nowhere, only counted,
 * to learn its size before a byte of a value is written. */
struct writer {
	struct egress_buf *out;
	size_t len;
	egress_event_fn *fn;
	void *opaque;
	const struct egress_bindings *b;
	size_t *sel; /* room for b->nr_bound indexes */
};

static void put(struct writer *w, const void *p, size_t n)
{
	if (w->out)
		egress_buf_append(w->out, p, n);
	w->len = n > SIZE_MAX - w->len ? SIZE_MAX : w->len + n;
}

static void put_str(struct writer *w, const char *s)
{
	put(w, s, strlen(s));
}

/* Events name a header by its token characters, cut short. */
static void event(struct writer *w, enum egress_event_kind kind, const struct egress_binding *e,
		  const uint8_t *header, size_t header_len)
{
	char name[EGRESS_HTTP_NAME_MAX + 1];
	size_t n = MIN(header_len, (size_t)EGRESS_HTTP_NAME_MAX);

	if (w->out == NULL || w->fn == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		name[i] = is_tchar(header[i]) ? (char)header[i] : '_';
	name[n] = '\0';
	w->fn(w->opaque, kind, e->name ? e->name : "", name);
}

static size_t placeholder_len(const struct egress_binding *e)
{
	size_t n = e->placeholder ? strlen(e->placeholder) : 0;

	return n >= EGRESS_HTTP_PLACEHOLDER_MIN ? n : 0;
}

/* A value that cannot end a line or a C string early in the server's
 * reading of the head. */
static bool value_fits(const struct egress_binding *e)
{
	if (e->value == NULL)
		return e->value_len == 0;
	return memchr(e->value, '\r', e->value_len) == NULL &&
	       memchr(e->value, '\n', e->value_len) == NULL &&
	       memchr(e->value, '\0', e->value_len) == NULL;
}

/* Whether header name carries credentials: Authorization,
 * Proxy-Authorization, or a name ending in -key, -token or -secret
 * (x-api-key, x-goog-api-key, private-token, ...). A secret without
 * header= goes into these alone: servers echo others (Origin, a request
 * id, CORS preflight's Access-Control-Request-Headers) back to the guest. */
static bool credential_header(const uint8_t *name, size_t n)
{
	static const char *const ends[] = { "-key", "-token", "-secret" };

	if (case_eq(name, n, "authorization") || case_eq(name, n, "proxy-authorization"))
		return true;
	for (size_t i = 0; i < ARRAY_SIZE(ends); i++) {
		size_t l = strlen(ends[i]);

		if (n > l && case_eq(name + n - l, l, ends[i]))
			return true;
	}
	return false;
}

/* Which bound secrets go into the value v of header name (their indexes
 * in w->sel; how many), with an event for each placeholder v holds. */
static size_t pick(struct writer *w, const uint8_t *name, size_t name_len, const uint8_t *v,
		   size_t n)
{
	const struct egress_bindings *b = w->b;
	size_t nr = 0, pl;

	for (size_t i = 0; i < b->nr_bound; i++) {
		const struct egress_binding *e = &b->bound[i];

		pl = placeholder_len(e);
		if (pl == 0 || memmem(v, n, e->placeholder, pl) == NULL)
			continue;
		if (e->header ? !case_eq(name, name_len, e->header)
			      : !credential_header(name, name_len)) {
			event(w, EGRESS_EV_MISPLACED, e, name, name_len);
		} else if (!value_fits(e)) {
			event(w, EGRESS_EV_UNFIT, e, name, name_len);
		} else {
			w->sel[nr++] = i;
			event(w, EGRESS_EV_INJECT, e, name, name_len);
		}
	}
	for (size_t i = 0; i < b->nr_foreign; i++) {
		const struct egress_binding *e = &b->foreign[i];

		pl = placeholder_len(e);
		if (pl && memmem(v, n, e->placeholder, pl))
			event(w, EGRESS_EV_FOREIGN, e, name, name_len);
	}
	return nr;
}

/* v with the placeholders of the nr picked secrets replaced, in one pass:
 * a value put in is never searched again. */
static void substitute(struct writer *w, const uint8_t *v, size_t n, size_t nr)
{
	size_t i = 0, from = 0;

	while (i < n) {
		const struct egress_binding *e = NULL;
		size_t pl = 0;

		for (size_t k = 0; k < nr && e == NULL; k++) {
			const struct egress_binding *c = &w->b->bound[w->sel[k]];

			pl = strlen(c->placeholder);
			if (pl <= n - i && memcmp(v + i, c->placeholder, pl) == 0)
				e = c;
		}
		if (e == NULL) {
			i++;
			continue;
		}
		put(w, v + from, i - from);
		put(w, e->value, e->value_len);
		i += pl;
		from = i;
	}
	put(w, v + from, n - from);
}

static const char b64_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_val(uint8_t c)
{
	const char *p = c ? strchr(b64_chars, c) : NULL;

	return p ? (int)(p - b64_chars) : -1;
}

/* The credentials of a value "Basic <base64>" (RFC 7617), OWS around:
 * their offset and length in v; false where v is no such value. */
static bool basic_find(const uint8_t *v, size_t n, size_t *off, size_t *len)
{
	size_t i = 0, j;

	while (i < n && is_ows(v[i]))
		i++;
	if (n - i < 6 || !case_eq(v + i, 5, "basic") || v[i + 5] != ' ')
		return false;
	for (i += 5; i < n && v[i] == ' ';)
		i++;
	for (j = i; j < n && (b64_val(v[j]) >= 0 || v[j] == '=');)
		j++;
	*off = i;
	*len = j - i;
	while (j < n && is_ows(v[j]))
		j++;
	return j == n && *len > 0 && *len % 4 == 0;
}

/* Strict base64 (padded, no stray bits) into out (3 * n / 4 bytes): the
 * decoded length, or -1. */
static ssize_t b64_decode(const uint8_t *in, size_t n, uint8_t *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i += 4) {
		int d[4];
		size_t pad = 0;

		for (int k = 0; k < 4; k++) {
			d[k] = b64_val(in[i + k]);
			if (in[i + k] == '=' && i + 4 == n && k >= 2) {
				pad++;
				d[k] = 0;
			} else if (d[k] < 0 || pad) {
				return -1;
			}
		}
		if ((pad == 1 && (d[2] & 3)) || (pad == 2 && (d[1] & 15)))
			return -1;
		out[o++] = (uint8_t)(d[0] << 2 | d[1] >> 4);
		if (pad < 2)
			out[o++] = (uint8_t)(d[1] << 4 | d[2] >> 2);
		if (pad < 1)
			out[o++] = (uint8_t)(d[2] << 6 | d[3]);
	}
	return (ssize_t)o;
}

static void b64_put(struct writer *w, const uint8_t *in, size_t n)
{
	uint8_t q[4];

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;

		if (i + 1 < n)
			v |= (uint32_t)in[i + 1] << 8;
		if (i + 2 < n)
			v |= in[i + 2];
		q[0] = (uint8_t)b64_chars[v >> 18 & 63];
		q[1] = (uint8_t)b64_chars[v >> 12 & 63];
		q[2] = i + 1 < n ? (uint8_t)b64_chars[v >> 6 & 63] : '=';
		q[3] = i + 2 < n ? (uint8_t)b64_chars[v & 63] : '=';
		put(w, q, 4);
	}
	explicit_bzero(q, sizeof(q));
}

/* An Authorization value with Basic credentials: the placeholder is
 * inside their base64 (git sends a token as a password), and goes in in
 * the password alone (servers show user names back). false where v is no
 * such value. */
static bool basic_write(struct writer *w, const struct header *hd)
{
	struct egress_buf plain = { 0 }, sub = { 0 };
	struct writer sw = *w;
	size_t off, len, nr, user;
	const uint8_t *colon;
	ssize_t n;

	if (!case_eq(hd->name, hd->name_len, "authorization") &&
	    !case_eq(hd->name, hd->name_len, "proxy-authorization"))
		return false;
	if (!basic_find(hd->val, hd->val_len, &off, &len))
		return false;
	egress_buf_reserve(&plain, len / 4 * 3);
	n = b64_decode(hd->val + off, len, plain.data);
	if (n < 0) {
		egress_buf_wipe_free(&plain);
		return false;
	}
	plain.len = (size_t)n;
	colon = memchr(plain.data, ':', plain.len);
	user = colon ? (size_t)(colon - plain.data) + 1 : plain.len;
	nr = pick(w, hd->name, hd->name_len, plain.data + user, plain.len - user);
	if (nr == 0) {
		put(w, hd->val, hd->val_len);
	} else {
		/* The credentials with the value in them, counted, then
		 * (where w writes) made and encoded. */
		sw.out = NULL;
		sw.len = user;
		substitute(&sw, plain.data + user, plain.len - user, nr);
		put(w, hd->val, off);
		if (w->out == NULL) {
			put(w, NULL, sw.len / 3 * 4 + (sw.len % 3 ? 4 : 0));
		} else {
			sw.out = &sub;
			sw.len = 0;
			put(&sw, plain.data, user);
			substitute(&sw, plain.data + user, plain.len - user, nr);
			b64_put(w, sub.data, sub.len);
		}
		put(w, hd->val + off + len, hd->val_len - off - len);
	}
	egress_buf_wipe_free(&sub);
	egress_buf_wipe_free(&plain);
	return true;
}

/* A format with one "%s" and "%%" for '%', nothing that ends a line. */
static bool format_fits(const char *f)
{
	size_t nr_s = 0;

	for (; *f; f++) {
		if (*f == '\r' || *f == '\n')
			return false;
		if (*f != '%')
			continue;
		f++;
		if (*f == 's')
			nr_s++;
		else if (*f != '%')
			return false;
	}
	return nr_s == 1;
}

static void format_put(struct writer *w, const struct egress_binding *e)
{
	for (const char *f = e->format; *f; f++) {
		if (*f != '%') {
			put(w, f, 1);
		} else if (*++f == 's') {
			put(w, e->value, e->value_len);
		} else {
			put(w, f, 1);
		}
	}
}

/* A header name we may write: a token, as long as events show. */
static bool name_fits(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > EGRESS_HTTP_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_tchar((uint8_t)name[i]))
			return false;
	return true;
}

static bool has_header(const struct egress_http *h, const char *name)
{
	for (size_t i = 0; i < h->nr_hdrs; i++)
		if (case_eq(h->hdrs[i].name, h->hdrs[i].name_len, name))
			return true;
	return false;
}

/* The headers of the secrets with a format that the request lacks. */
static void added_write(struct writer *w, const struct egress_http *h)
{
	const struct egress_bindings *b = w->b;
	size_t nr_added = 0;

	for (size_t i = 0; i < b->nr_bound; i++) {
		const struct egress_binding *e = &b->bound[i];
		const uint8_t *name = (const uint8_t *)e->header;
		bool taken = false;

		if (e->format == NULL || e->header == NULL || has_header(h, e->header))
			continue;
		/* One header for each name: the first secret's. */
		for (size_t k = 0; k < nr_added && !taken; k++)
			taken = case_eq(name, strlen(e->header), b->bound[w->sel[k]].header);
		if (taken)
			continue;
		if (!value_fits(e) || !format_fits(e->format) || !name_fits(e->header)) {
			event(w, EGRESS_EV_UNFIT, e, name, strlen(e->header));
			continue;
		}
		put_str(w, e->header);
		put_str(w, ": ");
		format_put(w, e);
		put_str(w, "\r\n");
		w->sel[nr_added++] = i;
		event(w, EGRESS_EV_INJECT, e, name, strlen(e->header));
	}
}

static void head_write(struct writer *w, const struct egress_http *h)
{
	put(w, h->head.data, h->pre_len);
	for (size_t i = 0; i < h->nr_hdrs; i++) {
		const struct header *hd = &h->hdrs[i];
		size_t nr;

		put(w, hd->name, hd->name_len + 1); /* and the colon */
		if (!basic_write(w, hd)) {
			nr = pick(w, hd->name, hd->name_len, hd->val, hd->val_len);
			substitute(w, hd->val, hd->val_len, nr);
		}
		put_str(w, "\r\n");
	}
	added_write(w, h);
	put_str(w, "\r\n");
}

/* The whole head in h->head, rewritten into out. */
enum egress_http_status head_rewrite(struct egress_http *h, const struct egress_bindings *b,
				     struct egress_buf *out, egress_event_fn *fn, void *opaque)
{
	static const struct egress_bindings none;
	enum egress_http_status r;
	struct writer w = { .fn = fn, .opaque = opaque, .b = b ? b : &none };

	r = head_split(h);
	if (r == EGRESS_HTTP_OK && w.b->host)
		r = head_route(h, w.b->host);
	if (r != EGRESS_HTTP_OK)
		return r;
	w.sel = xmalloc(w.b->nr_bound * sizeof(*w.sel));
	/* Counted first: a head refused for its size puts out no value and
	 * reports no event. */
	head_write(&w, h);
	if (w.len > EGRESS_HTTP_HEAD_OUT_MAX) {
		r = EGRESS_HTTP_TOO_BIG;
	} else {
		egress_buf_reserve(out, w.len);
		w.out = out;
		w.len = 0;
		head_write(&w, h);
	}
	free(w.sel);
	return r;
}
