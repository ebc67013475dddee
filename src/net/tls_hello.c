/* The server name of a TLS ClientHello (see tls_hello.h). The hello's
 * records are joined into one handshake message (at most TLS_HELLO_MAX
 * bytes), then walked field by field; running out of bytes is "more"
 * while the message is still coming and "bad" once it is whole. */
#include <stdbool.h>
#include <string.h>

#include "net/tls_hello.h"

#define REC_HANDSHAKE	22
#define REC_HDR		5
#define REC_MAX		(16384 + 2048) /* TLSCiphertext's bound; a plaintext's is lower */
#define HS_CLIENT_HELLO 1
#define EXT_SERVER_NAME 0
#define NAME_TYPE_HOST	0

struct cur {
	const uint8_t *p;
	size_t left;
};

static uint32_t get(const uint8_t *p, size_t n)
{
	uint32_t v = 0;

	for (size_t i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/* Take n bytes: false when fewer are left. */
static bool take(struct cur *c, size_t n, const uint8_t **out)
{
	if (c->left < n)
		return false;
	if (out)
		*out = c->p;
	c->p += n;
	c->left -= n;
	return true;
}

/* A length-prefixed vector (a width-byte length) as a cursor of its own. */
static bool vec(struct cur *c, size_t width, struct cur *out)
{
	const uint8_t *p;
	size_t n;

	if (!take(c, width, &p))
		return false;
	n = get(p, width);
	out->p = c->p;
	out->left = n;
	return take(c, n, NULL);
}

static bool name_ok(const uint8_t *p, size_t n, char *name)
{
	if (n && p[n - 1] == '.')
		n--; /* a fully qualified form */
	if (n == 0 || n > TLS_NAME_MAX || p[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		uint8_t ch = p[i];

		if (ch >= 'A' && ch <= 'Z')
			ch = (uint8_t)(ch - 'A' + 'a');
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
		      ch == '_' || ch == '.'))
			return false;
		if (ch == '.' && i && name[i - 1] == '.')
			return false;
		name[i] = (char)ch;
	}
	name[n] = '\0';
	return true;
}

/* The server_name extension's data. */
static enum tls_hello server_name(struct cur ext, char *name)
{
	struct cur list, host;
	const uint8_t *type;

	if (!vec(&ext, 2, &list) || ext.left)
		return TLS_HELLO_BAD;
	while (list.left) {
		if (!take(&list, 1, &type) || !vec(&list, 2, &host))
			return TLS_HELLO_BAD;
		if (type[0] == NAME_TYPE_HOST)
			return name_ok(host.p, host.left, name) ? TLS_HELLO_NAME : TLS_HELLO_BAD;
	}
	return TLS_HELLO_NO_NAME;
}

/* The ClientHello body so far (whole: all of it is here). */
static enum tls_hello hello_body(struct cur c, bool whole, char *name)
{
	enum tls_hello short_of = whole ? TLS_HELLO_BAD : TLS_HELLO_MORE;
	struct cur v, exts, ext;
	const uint8_t *type;

	/* legacy_version, random, session id, cipher suites, compression */
	if (!take(&c, 2 + 32, NULL) || !vec(&c, 1, &v) || v.left > 32 || !vec(&c, 2, &v) ||
	    !vec(&c, 1, &v))
		return short_of;
	if (c.left == 0)
		return whole ? TLS_HELLO_NO_NAME : TLS_HELLO_MORE; /* no extensions */
	if (c.left < 2)
		return short_of;
	/* Walk what came of them: a name found stands whatever follows, so
	 * the verdict is the same however the bytes were split. */
	exts.p = c.p + 2;
	exts.left = get(c.p, 2) < c.left - 2 ? get(c.p, 2) : c.left - 2;
	while (exts.left) {
		if (!take(&exts, 2, &type) || !vec(&exts, 2, &ext))
			return short_of;
		if (get(type, 2) == EXT_SERVER_NAME)
			return server_name(ext, name);
	}
	if (!whole)
		return TLS_HELLO_MORE;
	return get(c.p, 2) == c.left - 2 ? TLS_HELLO_NO_NAME : TLS_HELLO_BAD;
}

enum tls_hello tls_hello_name(const uint8_t *buf, size_t len, char *name)
{
	uint8_t hs[TLS_HELLO_MAX];
	size_t hs_len = 0, at = 0, hello_len;
	struct cur body;
	enum tls_hello r;
	bool partial = false, broken = false;

	if (len == 0)
		return TLS_HELLO_MORE;
	if (buf[0] != REC_HANDSHAKE || (len > 1 && buf[1] != 3))
		return TLS_HELLO_NOT_TLS;
	/* Join the records that came; a partial one gives what it has. A
	 * record that cannot be the hello's stops the joining (broken): what
	 * came before it still says what it says, and a hello it leaves
	 * unfinished is a bad one. */
	while (at < len && !partial && !broken) {
		size_t rec_len, n;

		if (buf[at] != REC_HANDSHAKE) {
			broken = true;
			break;
		}
		if (len - at < REC_HDR)
			break;
		rec_len = get(buf + at + 3, 2);
		if (buf[at + 1] != 3 || rec_len == 0 || rec_len > REC_MAX ||
		    (rec_len < len - at - REC_HDR ? rec_len : len - at - REC_HDR) >
			    sizeof(hs) - hs_len) {
			broken = true;
			break;
		}
		n = rec_len < len - at - REC_HDR ? rec_len : len - at - REC_HDR;
		memcpy(hs + hs_len, buf + at + REC_HDR, n);
		hs_len += n;
		at += REC_HDR + n;
		partial = n < rec_len;
		/* Enough for the message: the rest is not the hello's. */
		if (hs_len >= 4 && hs_len >= 4 + get(hs + 1, 3))
			break;
	}
	if (hs_len < 4)
		return broken || len >= TLS_HELLO_MAX ? TLS_HELLO_BAD : TLS_HELLO_MORE;
	if (hs[0] != HS_CLIENT_HELLO)
		return TLS_HELLO_BAD;
	hello_len = get(hs + 1, 3);
	if (hello_len > sizeof(hs) - 4)
		return TLS_HELLO_BAD;
	body.p = hs + 4;
	body.left = hs_len - 4 < hello_len ? hs_len - 4 : hello_len;
	r = hello_body(body, body.left == hello_len, name);
	/* Tiny records can spread a hello past what is read for one. */
	return r == TLS_HELLO_MORE && (broken || len >= TLS_HELLO_MAX) ? TLS_HELLO_BAD : r;
}

const char *tls_hello_str(enum tls_hello r)
{
	switch (r) {
	case TLS_HELLO_MORE:
		return "a partial ClientHello";
	case TLS_HELLO_NOT_TLS:
		return "not TLS";
	case TLS_HELLO_NAME:
		return "a server name";
	case TLS_HELLO_NO_NAME:
		return "a ClientHello without a server name";
	case TLS_HELLO_BAD:
	default:
		return "a malformed ClientHello";
	}
}
