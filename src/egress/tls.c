/* The egress worker's TLS: the two contexts and both sides of a proxied
 * connection (see tls.h); the sandbox CA and its leaves are cert.c's, the
 * upstream sessions session.c's. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/util.h"
#include "egress/ssl.h"
#include "egress/tls.h"
#include "egress/tls_priv.h"

#define REASONS_MAX	 3 /* OpenSSL errors quoted in one message */
#define MSG_MAX		 512
#define ALPN_HTTP11	 "http/1.1"
#define ALPN_HTTP11_WIRE "\x08" ALPN_HTTP11 /* ALPN's list: a length byte, the name */

struct egress_conn {
	struct egress_tls *t;
	SSL *ssl;
	bool server;
	bool up;			/* the handshake is done */
	bool broken;			/* a fatal error: no more I/O, no close_notify */
	bool closed;			/* close_notify sent or on its way */
	bool close_pending;		/* close_notify waits in OpenSSL for the socket */
	bool write_pending;		/* a record of a write that returned EGRESS_AGAIN */
	const char *host;		/* server: a bound entry's name, once the SNI chose it */
	char name[EGRESS_HOST_MAX + 1]; /* client: its host */
	char refused[EGRESS_HOST_MAX + NAME_SHOWN_MAX + 64]; /* why the SNI callback refused */
};

/* OpenSSL's reasons for the failure, from this thread's queue, which is
 * left empty: "" where it has none. */
static void ssl_reasons(char *buf, size_t size)
{
	unsigned long e;
	size_t at = 0, n = 0;

	buf[0] = '\0';
	while ((e = sym_ERR_get_error()) != 0) {
		char one[256];
		const char *r;

		if (n++ >= REASONS_MAX || at >= size)
			continue;
		r = sym_ERR_reason_error_string(e);
		if (r == NULL) {
			sym_ERR_error_string_n(e, one, sizeof(one));
			r = one;
		}
		at += (size_t)snprintf(buf + at, size - at, "%s%s", at ? "; " : "", r);
	}
}

/* gantry_error with fmt's message and ": <OpenSSL's reasons>" where the
 * queue holds any. */
int __attribute__((format(printf, 3, 4)))
ssl_fail(gantry_error_t *err, int status, const char *fmt, ...)
{
	char msg[MSG_MAX], why[MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ssl_reasons(why, sizeof(why));
	if (why[0])
		return gantry_error(err, status, "%s: %s", msg, why);
	return gantry_error(err, status, "%s", msg);
}

/* Under t->lock. */
static struct egress_host *host_find(struct egress_tls *t, const char *name)
{
	for (size_t i = 0; i < t->nr_hosts; i++)
		if (strcmp(t->hosts[i]->name, name) == 0)
			return t->hosts[i];
	return NULL;
}

/* The servername callback: the leaf of the bound host the ClientHello
 * names. Called for every ClientHello, with an SNI or without. */
static int sni_pick(SSL *ssl, int *alert, void *arg)
{
	struct egress_conn *c = sym_SSL_get_ex_data(ssl, 0);
	const char *sni = sym_SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	char name[EGRESS_HOST_MAX + 1];
	struct egress_host *h;
	size_t len;
	bool ok;

	(void)arg;
	*alert = SSL_AD_UNRECOGNIZED_NAME;
	if (c == NULL)
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	if (sni == NULL) {
		snprintf(c->refused, sizeof(c->refused), "client named no host (no SNI)");
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	}
	/* DNS names are caseless; the bound ones are lowercase. */
	len = strnlen(sni, EGRESS_HOST_MAX + 1);
	for (size_t i = 0; i < len && i < EGRESS_HOST_MAX; i++)
		name[i] = (sni[i] >= 'A' && sni[i] <= 'Z') ? (char)(sni[i] - 'A' + 'a') : sni[i];
	name[MIN(len, (size_t)EGRESS_HOST_MAX)] = '\0';
	if (len > EGRESS_HOST_MAX || host_invalid(name)) {
		cleanup_free char *shown =
			text_sanitized(sni, MIN(len, NAME_SHOWN_MAX + 1), NAME_SHOWN_MAX);

		snprintf(c->refused, sizeof(c->refused), "client named no valid host: `%s`", shown);
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	}

	pthread_rwlock_rdlock(&c->t->lock);
	h = host_find(c->t, name);
	/* The SSL takes references: the leaf outlives the lock. */
	ok = h && sym_SSL_use_certificate(ssl, h->leaf) == 1 &&
	     sym_SSL_use_PrivateKey(ssl, h->key) == 1;
	pthread_rwlock_unlock(&c->t->lock);
	if (h == NULL) {
		snprintf(c->refused, sizeof(c->refused), "client named unbound host %s", name);
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	}
	if (!ok) {
		*alert = SSL_AD_INTERNAL_ERROR;
		snprintf(c->refused, sizeof(c->refused), "cannot use the certificate of %s", name);
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	}
	c->host = h->name;
	return SSL_TLSEXT_ERR_OK;
}

/* "http/1.1" where the client offers it; otherwise no ALPN at all, rather
 * than a protocol the relay does not speak. in is the client's list,
 * which OpenSSL checked is well-formed; walked within inlen regardless. */
static int alpn_pick(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		     const unsigned char *in, unsigned int inlen, void *arg)
{
	const size_t want = sizeof(ALPN_HTTP11) - 1;

	(void)ssl;
	(void)arg;
	for (unsigned int i = 0; i < inlen;) {
		unsigned int n = in[i];

		if (n == 0 || n > inlen - i - 1)
			break;
		if (n == want && memcmp(in + i + 1, ALPN_HTTP11, want) == 0) {
			*out = in + i + 1;
			*outlen = (unsigned char)n;
			return SSL_TLSEXT_ERR_OK;
		}
		i += 1 + n;
	}
	return SSL_TLSEXT_ERR_NOACK;
}

/* What both contexts share. */
static int ctx_setup(SSL_CTX *ctx, gantry_error_t *err)
{
	/* SSL_CTX_set_min_proto_version */
	if (sym_SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL) != 1)
		return ssl_fail(err, 0, "cannot require TLS 1.2");
	/* EOF without close_notify ends a stream as close_notify does (HTTP's
	 * framing tells a cut message); a peer's renegotiation is refused. */
	sym_SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION |
					     SSL_OP_NO_COMPRESSION);
	/* SSL_CTX_set_mode: a relay writes what it can of its buffer and
	 * moves on; an idle connection's buffers go back. */
	sym_SSL_CTX_ctrl(ctx, SSL_CTRL_MODE,
			 SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
				 SSL_MODE_RELEASE_BUFFERS,
			 NULL);
	return 0;
}

static int server_ctx_new(struct egress_tls *t, gantry_error_t *err)
{
	t->server = sym_SSL_CTX_new(sym_TLS_server_method());
	if (t->server == NULL)
		return ssl_fail(err, 0, "cannot make the TLS server context");
	if (ctx_setup(t->server, err) < 0)
		return -1;
	/* No resumption: a session made under one host's SNI must not resume
	 * under another's, and the guest is a socket away. */
	sym_SSL_CTX_set_options(t->server, SSL_OP_NO_TICKET);
	if (sym_SSL_CTX_set_num_tickets(t->server, 0) != 1)
		return ssl_fail(err, 0, "cannot turn off session tickets");
	/* SSL_CTX_set_session_cache_mode */
	sym_SSL_CTX_ctrl(t->server, SSL_CTRL_SET_SESS_CACHE_MODE, SSL_SESS_CACHE_OFF, NULL);
	/* SSL_CTX_set_tlsext_servername_callback */
	if (sym_SSL_CTX_callback_ctrl(t->server, SSL_CTRL_SET_TLSEXT_SERVERNAME_CB,
				      (void (*)(void))sni_pick) != 1)
		return ssl_fail(err, 0, "cannot set the SNI callback");
	sym_SSL_CTX_set_alpn_select_cb(t->server, alpn_pick, NULL);
	return 0;
}

/* No prompt on a terminal for an encrypted block. */
static int no_password(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

/* Every certificate of the PEM text into store. */
static int trust_load(X509_STORE *store, const char *trust, size_t len, gantry_error_t *err)
{
	size_t n = 0;
	unsigned long e, bad = 0;
	BIO *b;
	X509 *x;

	if (len > INT_MAX)
		return gantry_error_usage(err, "trust store: %zu bytes, more than %d", len,
					  INT_MAX);
	b = sym_BIO_new_mem_buf(trust, (int)len);
	if (b == NULL)
		return ssl_fail(err, 0, "trust store");
	while ((x = sym_PEM_read_bio_X509(b, NULL, no_password, NULL)) != NULL) {
		int ok = sym_X509_STORE_add_cert(store, x) == 1;

		sym_X509_free(x);
		if (!ok) {
			sym_BIO_free(b);
			return ssl_fail(err, 0, "trust store: cannot add certificate %zu", n + 1);
		}
		n++;
	}
	sym_BIO_free(b);
	/* The loop ends at the text's end (no start line) or at a block it
	 * cannot read: that one fails the whole store. */
	while ((e = sym_ERR_get_error()) != 0)
		if (!(ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE) &&
		    bad == 0)
			bad = e;
	if (bad) {
		const char *r = sym_ERR_reason_error_string(bad);

		return gantry_error_usage(err, "trust store: certificate %zu is not valid: %s",
					  n + 1, r ? r : "unknown error");
	}
	if (n == 0)
		return gantry_error_usage(err, "trust store: no PEM certificate in %zu bytes", len);
	return 0;
}

/* The client context's new-session callback: a TLS 1.3 ticket, read
 * after the handshake, or a TLS 1.2 handshake's end. 1: t keeps s. */
static int session_keep(SSL *ssl, SSL_SESSION *s)
{
	struct egress_conn *c = sym_SSL_get_ex_data(ssl, 0);

	/* Only a verified connection gets this far; a resumed one whose
	 * session failed its check is broken. */
	if (c == NULL || c->server || c->broken || !sym_SSL_SESSION_is_resumable(s))
		return 0;
	session_put(c->t, c->name, s);
	return 1;
}

static int client_ctx_new(struct egress_tls *t, const char *trust, size_t trust_len,
			  gantry_error_t *err)
{
	t->client = sym_SSL_CTX_new(sym_TLS_client_method());
	if (t->client == NULL)
		return ssl_fail(err, 0, "cannot make the TLS client context");
	if (ctx_setup(t->client, err) < 0)
		return -1;
	/* The caller's trust store and nothing else: no default paths. */
	sym_SSL_CTX_set_verify(t->client, SSL_VERIFY_PEER, NULL);
	if (trust_load(sym_SSL_CTX_get_cert_store(t->client), trust, trust_len, err) < 0)
		return -1;
	/* 0 is success here. */
	if (sym_SSL_CTX_set_alpn_protos(t->client, (const unsigned char *)ALPN_HTTP11_WIRE,
					sizeof(ALPN_HTTP11_WIRE) - 1) != 0)
		return ssl_fail(err, 0, "cannot set ALPN");
	/* SSL_CTX_set_session_cache_mode: sessions go to session_keep and
	 * from there to session.c's store, keyed by host, never to
	 * OpenSSL's. */
	sym_SSL_CTX_ctrl(t->client, SSL_CTRL_SET_SESS_CACHE_MODE,
			 SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE, NULL);
	sym_SSL_CTX_sess_set_new_cb(t->client, session_keep);
	return 0;
}

int egress_tls_new(struct egress_tls **out, const char *const *hosts, size_t nr_hosts,
		   const char *trust, size_t trust_len, gantry_error_t *err)
{
	struct egress_tls *t;

	if (nr_hosts > EGRESS_TLS_HOSTS_MAX)
		return gantry_error_usage(err, "%zu hosts, more than %d", nr_hosts,
					  EGRESS_TLS_HOSTS_MAX);
	if (trust == NULL && trust_len > 0)
		return gantry_error(err, EINVAL, "trust store of %zu bytes at NULL", trust_len);
	if (egress_ssl_load(err) < 0)
		return -1;
	t = xzalloc(sizeof(*t));
	pthread_rwlock_init(&t->lock, NULL);
	sym_ERR_clear_error();
	if (ca_new(t, err) < 0 || server_ctx_new(t, err) < 0 ||
	    (trust && client_ctx_new(t, trust, trust_len, err) < 0))
		goto fail;
	for (size_t i = 0; i < nr_hosts; i++)
		if (egress_tls_add_host(t, hosts[i], err) < 0)
			goto fail;
	*out = t;
	return 0;
fail:
	egress_tls_free(t);
	return -1;
}

int egress_tls_add_host(struct egress_tls *t, const char *host, gantry_error_t *err)
{
	const char *why = host_invalid(host);
	struct egress_host *h;
	bool known, full;

	if (why)
		return host_refuse(err, host, why);
	pthread_rwlock_rdlock(&t->lock);
	known = host_find(t, host) != NULL;
	pthread_rwlock_unlock(&t->lock);
	if (known)
		return 0;

	/* A key and a signature: made outside the lock that handshakes take. */
	sym_ERR_clear_error();
	h = host_new(t, host, err);
	if (h == NULL)
		return -1;
	pthread_rwlock_wrlock(&t->lock);
	known = host_find(t, host) != NULL; /* by another thread meanwhile */
	full = !known && t->nr_hosts >= EGRESS_TLS_HOSTS_MAX;
	if (!known && !full) {
		t->hosts = xrealloc(t->hosts, (t->nr_hosts + 1) * sizeof(*t->hosts));
		t->hosts[t->nr_hosts++] = steal_pointer(&h);
	}
	pthread_rwlock_unlock(&t->lock);
	host_free(h);
	if (full)
		return gantry_error_usage(err, "host %s: already %d hosts bound", host,
					  EGRESS_TLS_HOSTS_MAX);
	return 0;
}

const char *egress_tls_ca_pem(const struct egress_tls *t)
{
	return t->ca_pem;
}

void egress_tls_free(struct egress_tls *t)
{
	if (t == NULL)
		return;
	sessions_free(t);
	sym_SSL_CTX_free(t->server);
	sym_SSL_CTX_free(t->client);
	for (size_t i = 0; i < t->nr_hosts; i++)
		host_free(t->hosts[i]);
	free(t->hosts);
	sym_X509_free(t->ca);
	sym_EVP_PKEY_free(t->ca_key);
	free(t->ca_pem);
	pthread_rwlock_destroy(&t->lock);
	free(t);
}

static struct egress_conn *conn_new(struct egress_tls *t, SSL_CTX *ctx, int fd, gantry_error_t *err)
{
	struct egress_conn *c = xzalloc(sizeof(*c));

	c->t = t;
	sym_ERR_clear_error();
	c->ssl = sym_SSL_new(ctx);
	/* SSL_set_app_data: the SNI callback's way back to c. */
	if (c->ssl == NULL || sym_SSL_set_ex_data(c->ssl, 0, c) != 1 ||
	    sym_SSL_set_fd(c->ssl, fd) != 1) {
		ssl_fail(err, 0, "cannot make a TLS connection");
		egress_conn_free(c);
		return NULL;
	}
	return c;
}

int egress_conn_server(struct egress_tls *t, int fd, struct egress_conn **out, gantry_error_t *err)
{
	struct egress_conn *c = conn_new(t, t->server, fd, err);

	if (c == NULL)
		return -1;
	c->server = true;
	sym_SSL_set_accept_state(c->ssl);
	*out = c;
	return 0;
}

int egress_conn_client(struct egress_tls *t, int fd, const char *host, struct egress_conn **out,
		       gantry_error_t *err)
{
	const char *why = host_invalid(host);
	struct egress_conn *c;
	SSL_SESSION *s;

	if (why)
		return host_refuse(err, host, why);
	if (t->client == NULL)
		return gantry_error(err, 0, "TLS to %s: no trust store to verify it with", host);
	c = conn_new(t, t->client, fd, err);
	if (c == NULL)
		return -1;
	snprintf(c->name, sizeof(c->name), "%s", host);
	c->host = c->name;
	sym_SSL_set_connect_state(c->ssl);
	/* SSL_set_tlsext_host_name; then the name the certificate must have,
	 * whole: no partial wildcard (f*.example.com). */
	if (sym_SSL_ctrl(c->ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
			 c->name) != 1 ||
	    sym_SSL_set1_host(c->ssl, c->name) != 1) {
		ssl_fail(err, 0, "TLS to %s: cannot set its name", host);
		egress_conn_free(c);
		return -1;
	}
	sym_SSL_set_hostflags(c->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	/* This host's last session, if the server takes it again: made under
	 * the same SNI and verified for the same name. A session it cannot
	 * take means a full handshake. */
	s = session_get1(t, c->name);
	if (s && sym_SSL_set_session(c->ssl, s) != 1)
		sym_ERR_clear_error();
	sym_SSL_SESSION_free(s);
	*out = c;
	return 0;
}

/* Who c talks to, for messages: "the guest (for api.example.com)",
 * "api.example.com". */
static const char *conn_peer(const struct egress_conn *c, char *buf, size_t size)
{
	if (!c->server)
		return c->host;
	if (c->host == NULL)
		return "the guest";
	snprintf(buf, size, "the guest (for %s)", c->host);
	return buf;
}

/* A failed call (SSL_get_error's e): c is broken; err says why. */
static int conn_fail(struct egress_conn *c, int e, const char *what, gantry_error_t *err)
{
	int saved = errno;
	char buf[EGRESS_HOST_MAX + 32];
	const char *peer = conn_peer(c, buf, sizeof(buf));

	c->broken = true;
	if (e == SSL_ERROR_SYSCALL && saved != 0) {
		sym_ERR_clear_error();
		return gantry_error(err, saved, "%s %s", what, peer);
	}
	if (e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN) {
		sym_ERR_clear_error();
		return gantry_error(err, 0, "%s %s: the peer closed the connection", what, peer);
	}
	return ssl_fail(err, 0, "%s %s", what, peer);
}

/* -1 where c may not read (or write: writing) now. */
static int conn_unusable(const struct egress_conn *c, bool writing, gantry_error_t *err)
{
	const char *what = writing ? "TLS write to" : "TLS read from";
	char buf[EGRESS_HOST_MAX + 32];

	if (c->broken)
		return gantry_error(err, 0, "%s %s: the connection failed before", what,
				    conn_peer(c, buf, sizeof(buf)));
	if (!c->up)
		return gantry_error(err, 0, "%s %s: before the handshake", what,
				    conn_peer(c, buf, sizeof(buf)));
	if (writing && c->closed)
		return gantry_error(err, 0, "%s %s: after close_notify", what,
				    conn_peer(c, buf, sizeof(buf)));
	return 0;
}

int egress_conn_handshake(struct egress_conn *c, short *events, gantry_error_t *err)
{
	char buf[EGRESS_HOST_MAX + 32];
	const char *why;
	long verify;
	int r, e;

	if (c->up)
		return 1;
	if (c->broken)
		return gantry_error(err, 0, "TLS handshake with %s: it failed before",
				    conn_peer(c, buf, sizeof(buf)));
	sym_ERR_clear_error();
	errno = 0;
	r = sym_SSL_do_handshake(c->ssl);
	/* A resumed handshake verified nothing itself: its session must
	 * stand for the host as a certificate would; one that does not is
	 * dropped. */
	if (r == 1 && !c->server && sym_SSL_session_reused(c->ssl) == 1 &&
	    (why = session_unverified(c->ssl, c->name)) != NULL) {
		c->broken = true;
		session_forget(c->t, c->name);
		sym_ERR_clear_error();
		return gantry_error(err, 0, "certificate of %s not trusted: %s", c->host, why);
	}
	if (r == 1) {
		c->up = true;
		return 1;
	}
	e = sym_SSL_get_error(c->ssl, r);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		*events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
		return 0;
	}
	/* The SNI callback's reason and the verifier's say more than the
	 * alert that followed. */
	if (c->server && c->refused[0]) {
		c->broken = true;
		sym_ERR_clear_error();
		return gantry_error(err, 0, "%s", c->refused);
	}
	verify = c->server ? X509_V_OK : sym_SSL_get_verify_result(c->ssl);
	if (verify != X509_V_OK) {
		c->broken = true;
		sym_ERR_clear_error();
		return gantry_error(err, 0, "certificate of %s not trusted: %s", c->host,
				    sym_X509_verify_cert_error_string(verify));
	}
	return conn_fail(c, e, "TLS handshake with", err);
}

const char *egress_conn_host(const struct egress_conn *c)
{
	return c->host;
}

bool egress_conn_resumed(const struct egress_conn *c)
{
	return c->up && sym_SSL_session_reused(c->ssl) == 1;
}

const char *egress_conn_alpn(const struct egress_conn *c)
{
	const unsigned char *p = NULL;
	unsigned int len = 0;

	sym_SSL_get0_alpn_selected(c->ssl, &p, &len);
	if (len == sizeof(ALPN_HTTP11) - 1 && memcmp(p, ALPN_HTTP11, len) == 0)
		return ALPN_HTTP11;
	return NULL;
}

/* Send close_notify, or the rest of it: whether it is out (or nothing is
 * left to try). Only while the alert is pending: SSL_shutdown once it is
 * out would read, for the peer's, records meant for egress_conn_read. */
static bool close_flush(struct egress_conn *c)
{
	int r;

	if (!c->close_pending || c->broken)
		return true;
	sym_ERR_clear_error();
	r = sym_SSL_shutdown(c->ssl);
	if (r < 0 && sym_SSL_get_error(c->ssl, r) == SSL_ERROR_WANT_WRITE) {
		sym_ERR_clear_error();
		return false;
	}
	c->close_pending = false;
	sym_ERR_clear_error();
	return true;
}

ssize_t egress_conn_read(struct egress_conn *c, void *buf, size_t len, short *events,
			 gantry_error_t *err)
{
	size_t n = 0;
	int e;

	if (conn_unusable(c, false, err) < 0)
		return -1;
	/* A half-closed connection's reader finishes its close_notify. */
	close_flush(c);
	sym_ERR_clear_error();
	errno = 0;
	if (sym_SSL_read_ex(c->ssl, buf, len, &n) == 1)
		return (ssize_t)n;
	e = sym_SSL_get_error(c->ssl, 0);
	switch (e) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		*events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
		if (c->close_pending)
			*events |= POLLOUT;
		return EGRESS_AGAIN;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		/* EOF, where SSL_OP_IGNORE_UNEXPECTED_EOF did not say so. */
		if (errno == 0)
			return 0;
		break;
	}
	return conn_fail(c, e, "TLS read from", err);
}

ssize_t egress_conn_write(struct egress_conn *c, const void *buf, size_t len, short *events,
			  gantry_error_t *err)
{
	size_t n = 0;
	int e;

	if (conn_unusable(c, true, err) < 0)
		return -1;
	if (len == 0)
		return 0;
	sym_ERR_clear_error();
	errno = 0;
	if (sym_SSL_write_ex(c->ssl, buf, len, &n) == 1) {
		c->write_pending = false;
		return (ssize_t)n;
	}
	e = sym_SSL_get_error(c->ssl, 0);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		c->write_pending = true;
		*events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
		return EGRESS_AGAIN;
	}
	return conn_fail(c, e, "TLS write to", err);
}

bool egress_conn_pending(const struct egress_conn *c)
{
	return c->up && !c->broken && sym_SSL_pending(c->ssl) > 0;
}

bool egress_conn_close(struct egress_conn *c)
{
	/* Never after a fatal error: OpenSSL forbids it. Nor behind an
	 * unfinished record: only the write's retry may send that, and an
	 * alert behind it fails the connection. */
	if (c->up && !c->broken && !c->closed && !c->write_pending) {
		c->closed = true;
		c->close_pending = true;
	}
	return close_flush(c);
}

void egress_conn_free(struct egress_conn *c)
{
	if (c == NULL)
		return;
	sym_SSL_free(c->ssl);
	free(c);
}
