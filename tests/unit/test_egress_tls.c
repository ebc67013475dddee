/* Unit tests for src/egress/tls: the sandbox CA and its leaves as a
 * client sees them, the guest's side picking a leaf by SNI (unbound, no
 * and hostile names refused, hosts bound while handshakes go on), ALPN and
 * versions, the upstream side's verification against a trust store (the
 * right CA, an unrelated one, a certificate for another name), and data:
 * EGRESS_AGAIN both ways, pending bytes, close_notify and EOF, 1 MiB from
 * another thread; the upstream side resuming a host's session, and no
 * other host's, nor one that does not stand for its host (planted
 * through the store's internals, tls_priv.h). Everything over
 * socketpairs; the clients that egress does not make (no SNI, TLS 1.1,
 * other ALPN) and the servers that hand out tickets are OpenSSL's own,
 * through the test's own lazily loaded symbols. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/error.h"
#include "common/lazy.h"
#include "common/util.h"
#include "egress/ssl.h"
#include "egress/tls.h"
#include "egress/tls_priv.h"
#include "image/lazylib.h"

#define WAIT_MS	   10000
#define HOST	   "api.example.com"
#define CA_CN	   "/CN=Gantry sandbox CA "
#define CHUNK	   16384
#define BIG	   (1u << 20)
#define FILL_LIMIT (64u << 20) /* a socket buffer holds far less */

/* What the tests ask of OpenSSL beyond what egress/ssl.h lists. */
#define TEST_SSL_SYMS(X)                                                                           \
	X(SSL_CTX_set_security_level)                                                              \
	X(SSL_CTX_use_PrivateKey)                                                                  \
	X(SSL_CTX_use_certificate)                                                                 \
	X(SSL_get1_peer_certificate)                                                               \
	X(SSL_set_alpn_protos)

#define TEST_CRYPTO_SYMS(X)                                                                        \
	X(ASN1_STRING_length)                                                                      \
	X(ASN1_TIME_diff)                                                                          \
	X(X509_EXTENSION_get_critical)                                                             \
	X(X509_NAME_oneline)                                                                       \
	X(X509_check_ca)                                                                           \
	X(X509_cmp_current_time)                                                                   \
	X(X509_get_ext)                                                                            \
	X(X509_get_ext_by_NID)                                                                     \
	X(X509_get_extended_key_usage)                                                             \
	X(X509_get_key_usage)                                                                      \
	X(X509_get_pubkey)                                                                         \
	X(X509_verify)

TEST_SSL_SYMS(LAZY_DEFINE)
TEST_CRYPTO_SYMS(LAZY_DEFINE)
static const struct lazy_sym test_ssl_syms[] = { TEST_SSL_SYMS(LAZY_ENTRY) };
static const struct lazy_sym test_crypto_syms[] = { TEST_CRYPTO_SYMS(LAZY_ENTRY) };
static struct lazy_lib test_ssl_lib = LAZY_LIB("libssl.so.3", "libssl3", test_ssl_syms);
static struct lazy_lib test_crypto_lib = LAZY_LIB("libcrypto.so.3", "libssl3", test_crypto_syms);

static void must(int rc, gantry_error_t *err)
{
	if (rc < 0)
		fail_msg("%s", gantry_error_str(*err));
}

static void says(gantry_error_t *err, const char *what)
{
	assert_non_null(*err);
	if (strstr(gantry_error_str(*err), what) == NULL)
		fail_msg("`%s` does not say `%s`", gantry_error_str(*err), what);
	gantry_error_free(err);
}

static struct egress_tls *tls_new(const char *const *hosts, size_t n, const char *trust)
{
	struct egress_tls *t = NULL;
	gantry_error_t err = NULL;

	must(egress_tls_new(&t, hosts, n, trust, trust ? strlen(trust) : 0, &err), &err);
	return t;
}

static X509 *pem_cert(const char *pem)
{
	BIO *b = sym_BIO_new_mem_buf(pem, -1);
	X509 *x = sym_PEM_read_bio_X509(b, NULL, NULL, NULL);

	sym_BIO_free(b);
	assert_non_null(x);
	return x;
}

static bool ext_critical(X509 *x, int nid)
{
	int i = sym_X509_get_ext_by_NID(x, nid, -1);

	assert_true(i >= 0);
	return sym_X509_EXTENSION_get_critical(sym_X509_get_ext(x, i)) == 1;
}

/* One side of a handshake: a step of it, and the fd it waits on. */
typedef int (*step_fn)(void *p, short *events, gantry_error_t *err);

struct side {
	step_fn step;
	void *p;
	int fd;
	int rc;
	gantry_error_t err;
	pthread_t thread;
};

static int conn_step(void *p, short *events, gantry_error_t *err)
{
	return egress_conn_handshake(p, events, err);
}

static int raw_step(void *p, short *events, gantry_error_t *err)
{
	SSL *ssl = p;
	int r, e;

	sym_ERR_clear_error();
	r = sym_SSL_do_handshake(ssl);
	if (r == 1)
		return 1;
	e = sym_SSL_get_error(ssl, r);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		*events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
		return 0;
	}
	sym_ERR_clear_error();
	return gantry_error(err, 0, "OpenSSL's handshake failed (%d)", e);
}

static int wait_fd(int fd, short events, gantry_error_t *err)
{
	struct pollfd p = { .fd = fd, .events = events };
	int n = poll(&p, 1, WAIT_MS);

	if (n < 0 && errno != EINTR)
		return gantry_error_errno(err, "poll");
	return n == 0 ? gantry_error(err, ETIMEDOUT, "nothing came") : 0;
}

/* Step s to its end; a side that fails shuts its socket, so that the
 * other does not wait on it. */
static void *side_run(void *arg)
{
	struct side *s = arg;
	short events = 0;

	while ((s->rc = s->step(s->p, &events, &s->err)) == 0)
		if (wait_fd(s->fd, events, &s->err) < 0) {
			s->rc = -1;
			break;
		}
	if (s->rc < 0)
		shutdown(s->fd, SHUT_RDWR);
	return NULL;
}

/* Both sides at once: server in a thread of its own, client here. */
static void handshake(struct side *server, struct side *client)
{
	assert_int_equal(pthread_create(&server->thread, NULL, side_run, server), 0);
	side_run(client);
	assert_int_equal(pthread_join(server->thread, NULL), 0);
}

static void socket_pair(int fds[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds),
			 0);
}

/* A connection from an egress client (c's trust) to an egress server
 * (s's leaves) naming host: *sc and *cc, or NULL where its side failed
 * (its error in *serr, *cerr). */
struct pair {
	int fds[2];
	struct egress_conn *server, *client;
	gantry_error_t serr, cerr;
};

static bool pair_open(struct pair *p, struct egress_tls *s, struct egress_tls *c, const char *host)
{
	gantry_error_t err = NULL;
	struct side ss, cs;

	memset(p, 0, sizeof(*p));
	socket_pair(p->fds);
	must(egress_conn_server(s, p->fds[0], &p->server, &err), &err);
	must(egress_conn_client(c, p->fds[1], host, &p->client, &err), &err);
	ss = (struct side){ .step = conn_step, .p = p->server, .fd = p->fds[0] };
	cs = (struct side){ .step = conn_step, .p = p->client, .fd = p->fds[1] };
	handshake(&ss, &cs);
	p->serr = ss.err;
	p->cerr = cs.err;
	return ss.rc == 1 && cs.rc == 1;
}

static void pair_close(struct pair *p)
{
	egress_conn_free(p->server);
	egress_conn_free(p->client);
	close(p->fds[0]);
	close(p->fds[1]);
	gantry_error_free(&p->serr);
	gantry_error_free(&p->cerr);
}

/* OpenSSL's own client to an egress server. */
struct raw {
	const char *sni;  /* NULL: none */
	const char *alpn; /* wire form; NULL: none */
	size_t alpn_len;
	int max_version; /* 0: the default */
	/* out */
	int server_rc, client_rc;
	gantry_error_t serr;
	char host[EGRESS_HOST_MAX + 1];
	const char *server_alpn;
	char client_alpn[32];
	X509 *leaf;
};

static void raw_connect(struct egress_tls *t, struct raw *r)
{
	SSL_CTX *ctx = sym_SSL_CTX_new(sym_TLS_client_method());
	struct egress_conn *server = NULL;
	gantry_error_t err = NULL;
	struct side ss, cs;
	const unsigned char *a;
	unsigned int alen = 0;
	int fds[2];
	SSL *ssl;

	assert_non_null(ctx);
	if (r->max_version) {
		/* Low enough to be sent at all: the server is what must refuse. */
		sym_SSL_CTX_set_security_level(ctx, 0);
		sym_SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_VERSION, NULL);
		sym_SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MAX_PROTO_VERSION, r->max_version, NULL);
	}
	socket_pair(fds);
	must(egress_conn_server(t, fds[0], &server, &err), &err);
	ssl = sym_SSL_new(ctx);
	assert_non_null(ssl);
	assert_int_equal(sym_SSL_set_fd(ssl, fds[1]), 1);
	sym_SSL_set_connect_state(ssl);
	if (r->sni)
		assert_int_equal(sym_SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME,
					      TLSEXT_NAMETYPE_host_name, (void *)r->sni),
				 1);
	if (r->alpn)
		assert_int_equal(sym_SSL_set_alpn_protos(ssl, (const unsigned char *)r->alpn,
							 (unsigned int)r->alpn_len),
				 0);
	ss = (struct side){ .step = conn_step, .p = server, .fd = fds[0] };
	cs = (struct side){ .step = raw_step, .p = ssl, .fd = fds[1] };
	handshake(&ss, &cs);
	gantry_error_free(&cs.err);

	r->server_rc = ss.rc;
	r->client_rc = cs.rc;
	r->serr = ss.err;
	r->host[0] = '\0';
	if (egress_conn_host(server))
		snprintf(r->host, sizeof(r->host), "%s", egress_conn_host(server));
	r->server_alpn = egress_conn_alpn(server);
	sym_SSL_get0_alpn_selected(ssl, &a, &alen);
	snprintf(r->client_alpn, sizeof(r->client_alpn), "%.*s", (int)alen, alen ? (char *)a : "");
	r->leaf = cs.rc == 1 ? sym_SSL_get1_peer_certificate(ssl) : NULL;

	sym_SSL_free(ssl);
	sym_SSL_CTX_free(ctx);
	egress_conn_free(server);
	close(fds[0]);
	close(fds[1]);
}

static void raw_refused(struct egress_tls *t, const char *sni, const char *why)
{
	struct raw r = { .sni = sni };

	raw_connect(t, &r);
	assert_int_equal(r.server_rc, -1);
	assert_int_equal(r.client_rc, -1);
	assert_null(r.leaf);
	says(&r.serr, why);
}

static void test_ca(void **state)
{
	static const char *const hosts[] = { HOST };
	struct egress_tls *a = tls_new(hosts, 1, NULL), *b = tls_new(NULL, 0, NULL);
	const char *pem = egress_tls_ca_pem(a);
	X509 *ca = pem_cert(pem), *other = pem_cert(egress_tls_ca_pem(b));
	EVP_PKEY *pub = sym_X509_get_pubkey(ca);
	char cn[256], other_cn[256];
	int days = 0, secs = 0;

	(void)state;
	assert_non_null(strstr(pem, "-----BEGIN CERTIFICATE-----"));
	assert_null(strstr(pem, "PRIVATE"));
	/* A CA, for certificates and CRLs alone, both said critically. */
	assert_int_equal(sym_X509_check_ca(ca), 1);
	assert_int_equal(sym_X509_get_key_usage(ca), KU_KEY_CERT_SIGN | KU_CRL_SIGN);
	assert_true(ext_critical(ca, NID_basic_constraints));
	assert_true(ext_critical(ca, NID_key_usage));
	assert_int_equal(sym_X509_verify(ca, pub), 1);
	/* Valid now, from an hour ago for a year; a 16-byte serial. */
	assert_true(sym_X509_cmp_current_time(sym_X509_getm_notBefore(ca)) < 0);
	assert_int_equal(sym_ASN1_TIME_diff(&days, &secs, sym_X509_getm_notBefore(ca),
					    sym_X509_getm_notAfter(ca)),
			 1);
	assert_int_equal(days, 365);
	assert_int_equal(secs, 3600);
	assert_int_equal(sym_ASN1_STRING_length(sym_X509_get_serialNumber(ca)), 16);
	/* Named with an id of its own: another sandbox's CA is another. */
	sym_X509_NAME_oneline(sym_X509_get_subject_name(ca), cn, sizeof(cn));
	sym_X509_NAME_oneline(sym_X509_get_subject_name(other), other_cn, sizeof(other_cn));
	assert_int_equal(strncmp(cn, CA_CN, strlen(CA_CN)), 0);
	assert_int_equal(strlen(cn), strlen(CA_CN) + 8);
	assert_string_not_equal(cn, other_cn);
	assert_string_not_equal(pem, egress_tls_ca_pem(b));

	sym_EVP_PKEY_free(pub);
	sym_X509_free(ca);
	sym_X509_free(other);
	egress_tls_free(a);
	egress_tls_free(b);
}

/* The leaf an OpenSSL client gets for host, checked against the CA. */
static void leaf_for(struct egress_tls *t, const char *sni, const char *host)
{
	X509 *ca = pem_cert(egress_tls_ca_pem(t));
	EVP_PKEY *pub = sym_X509_get_pubkey(ca);
	struct raw r = { .sni = sni, .alpn = "\x02h2\x08http/1.1", .alpn_len = 12 };

	raw_connect(t, &r);
	if (r.server_rc != 1)
		fail_msg("%s", gantry_error_str(r.serr));
	assert_int_equal(r.client_rc, 1);
	assert_string_equal(r.host, host);
	assert_string_equal(r.server_alpn, "http/1.1");
	assert_string_equal(r.client_alpn, "http/1.1");
	assert_non_null(r.leaf);
	assert_int_equal(sym_X509_check_host(r.leaf, host, 0, 0, NULL), 1);
	assert_int_equal(sym_X509_check_host(r.leaf, "other.example.com", 0, 0, NULL), 0);
	assert_int_equal(sym_X509_verify(r.leaf, pub), 1);
	assert_int_equal(sym_X509_check_ca(r.leaf), 0);
	assert_true(sym_X509_get_extended_key_usage(r.leaf) & XKU_SSL_SERVER);
	assert_int_equal(sym_X509_get_key_usage(r.leaf), KU_DIGITAL_SIGNATURE);
	sym_X509_free(r.leaf);
	sym_EVP_PKEY_free(pub);
	sym_X509_free(ca);
}

static void test_server_leaf_and_alpn(void **state)
{
	/* Longer than a CN may be: named by its SAN alone. */
	static const char *const hosts[] = {
		HOST,
		"a-rather-long-label-to-pass-sixty-four-bytes.of-a-name.example.com",
	};
	struct egress_tls *t = tls_new(hosts, 2, NULL);
	struct raw r;

	(void)state;
	leaf_for(t, HOST, HOST);
	leaf_for(t, hosts[1], hosts[1]);
	/* Names are caseless. */
	leaf_for(t, "API.Example.COM", HOST);

	/* No http/1.1 offered: no ALPN at all, but a handshake. */
	r = (struct raw){ .sni = HOST, .alpn = "\x02h2", .alpn_len = 3 };
	raw_connect(t, &r);
	assert_int_equal(r.server_rc, 1);
	assert_null(r.server_alpn);
	assert_string_equal(r.client_alpn, "");
	sym_X509_free(r.leaf);
	r = (struct raw){ .sni = HOST };
	raw_connect(t, &r);
	assert_int_equal(r.server_rc, 1);
	assert_null(r.server_alpn);
	sym_X509_free(r.leaf);

	/* TLS 1.2 picks the leaf as 1.3 does; 1.1 is refused. */
	r = (struct raw){ .sni = HOST, .max_version = TLS1_2_VERSION };
	raw_connect(t, &r);
	assert_int_equal(r.server_rc, 1);
	assert_string_equal(r.host, HOST);
	sym_X509_free(r.leaf);
	r = (struct raw){ .sni = HOST, .max_version = TLS1_1_VERSION };
	raw_connect(t, &r);
	assert_int_equal(r.server_rc, -1);
	says(&r.serr, "TLS handshake with the guest: unsupported protocol");

	egress_tls_free(t);
}

/* The guest's side after the guest sent text (NULL: nothing) and closed. */
static void guest_says(struct egress_tls *t, const char *text, const char *why)
{
	struct egress_conn *c = NULL;
	gantry_error_t err = NULL;
	short events = 0;
	int fds[2], rc;

	socket_pair(fds);
	must(egress_conn_server(t, fds[0], &c, &err), &err);
	if (text)
		assert_int_equal(write(fds[1], text, strlen(text)), (ssize_t)strlen(text));
	shutdown(fds[1], SHUT_WR);
	while ((rc = egress_conn_handshake(c, &events, &err)) == 0)
		must(wait_fd(fds[0], events, &err), &err);
	assert_int_equal(rc, -1);
	says(&err, why);
	/* Failed is failed. */
	assert_int_equal(egress_conn_handshake(c, &events, &err), -1);
	says(&err, "it failed before");
	egress_conn_close(c);
	egress_conn_free(c);
	close(fds[0]);
	close(fds[1]);
}

static void test_server_refuses(void **state)
{
	static const char *const hosts[] = { HOST };
	struct egress_tls *t = tls_new(hosts, 1, NULL);
	struct raw r = { .sni = "\x1b[2Jevil.test" };

	(void)state;
	raw_refused(t, "unbound.example.com", "client named unbound host unbound.example.com");
	raw_refused(t, "example.com", "client named unbound host example.com");
	raw_refused(t, NULL, "client named no host (no SNI)");
	raw_refused(t, "10.0.0.1", "client named no valid host: `10.0.0.1`");
	/* A peer's bytes in the message are made safe. */
	raw_connect(t, &r);
	assert_int_equal(r.server_rc, -1);
	assert_null(strchr(gantry_error_str(r.serr), '\x1b'));
	says(&r.serr, "client named no valid host: `?[2Jevil.test`");

	/* No TLS at all, and no hello. */
	guest_says(t, "GET / HTTP/1.1\r\n\r\n", "TLS handshake with the guest: http request");
	guest_says(t, NULL, "TLS handshake with the guest: the peer closed the connection");
	egress_tls_free(t);
}

static void refused_host(struct egress_tls *t, const char *host, const char *why)
{
	gantry_error_t err = NULL;

	assert_int_equal(egress_tls_add_host(t, host, &err), -1);
	assert_true(gantry_error_is_usage(err));
	says(&err, why);
}

struct adder {
	struct egress_tls *t;
	int n;
	gantry_error_t err;
};

static void *add_hosts(void *arg)
{
	struct adder *a = arg;
	char name[64];

	for (int i = 0; i < a->n; i++) {
		snprintf(name, sizeof(name), "h%d.example.com", i);
		if (egress_tls_add_host(a->t, name, &a->err) < 0)
			break;
	}
	return NULL;
}

static void test_add_host(void **state)
{
	static const char *const hosts[] = { HOST };
	struct egress_tls *t = tls_new(hosts, 1, NULL);
	struct egress_tls *client = tls_new(NULL, 0, egress_tls_ca_pem(t));
	gantry_error_t err = NULL;
	struct adder a = { .t = t, .n = 32 };
	char long_name[300], long_label[80];
	pthread_t th;
	struct pair p;

	(void)state;
	raw_refused(t, "late.example.net", "client named unbound host late.example.net");
	must(egress_tls_add_host(t, "late.example.net", &err), &err);
	leaf_for(t, "late.example.net", "late.example.net");
	/* Bound already: nothing to do. */
	must(egress_tls_add_host(t, "late.example.net", &err), &err);
	must(egress_tls_add_host(t, HOST, &err), &err);

	refused_host(t, "10.0.0.1", "is an IP address");
	refused_host(t, "10.1", "is an IP address");
	refused_host(t, "0x7f.1", "is an IP address");
	refused_host(t, "1.0x7f", "is an IP address");
	refused_host(t, "::1", "is an IP address");
	refused_host(t, "example.123", "is an IP address");
	refused_host(t, "*.example.com", "is a wildcard");
	refused_host(t, "Api.example.com", "is not lowercase");
	refused_host(t, "a..example.com", "has an empty label");
	refused_host(t, "example.com.", "has an empty label");
	refused_host(t, "-a.example.com", "starts or ends with -");
	refused_host(t, "a_b.example.com", "has a character other than");
	refused_host(t, "a b.example.com", "has a character other than");
	refused_host(t, "", "is empty");
	memset(long_label, 'a', 64);
	strcpy(long_label + 64, ".com");
	refused_host(t, long_label, "has a label longer than 63 bytes");
	for (size_t i = 0; i < 254; i++)
		long_name[i] = i % 2 ? '.' : 'a';
	long_name[253] = 'a';
	long_name[254] = '\0';
	refused_host(t, long_name, "is longer than 253 bytes");
	/* The message quotes a caller's text made safe. */
	assert_int_equal(egress_tls_add_host(t, "a\nb", &err), -1);
	assert_null(strchr(gantry_error_str(err), '\n'));
	gantry_error_free(&err);

	/* Hosts bound while handshakes go on in this thread. */
	assert_int_equal(pthread_create(&th, NULL, add_hosts, &a), 0);
	for (int i = 0; i < 8; i++) {
		if (!pair_open(&p, t, client, HOST))
			fail_msg("%s / %s", gantry_error_str(p.serr), gantry_error_str(p.cerr));
		pair_close(&p);
	}
	assert_int_equal(pthread_join(th, NULL), 0);
	must(a.err ? -1 : 0, &a.err);
	assert_true(pair_open(&p, t, client, "h31.example.com"));
	assert_string_equal(egress_conn_host(p.server), "h31.example.com");
	pair_close(&p);

	egress_tls_free(client);
	egress_tls_free(t);
}

/* A self-signed certificate and its key, for name (and also, where not
 * NULL): its own trust anchor. */
static X509 *self_signed(const char *name, const char *also, EVP_PKEY **key)
{
	X509 *x = sym_X509_new();
	X509V3_CTX ctx;
	X509_EXTENSION *e;
	char san[256];

	*key = sym_EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	assert_non_null(*key);
	assert_int_equal(sym_X509_set_version(x, X509_VERSION_3), 1);
	assert_non_null(sym_X509_gmtime_adj(sym_X509_getm_notBefore(x), -60));
	assert_non_null(sym_X509_gmtime_adj(sym_X509_getm_notAfter(x), 3600));
	assert_int_equal(sym_X509_NAME_add_entry_by_txt(sym_X509_get_subject_name(x), "CN",
							MBSTRING_ASC, (const unsigned char *)name,
							-1, -1, 0),
			 1);
	assert_int_equal(sym_X509_set_issuer_name(x, sym_X509_get_subject_name(x)), 1);
	assert_int_equal(sym_X509_set_pubkey(x, *key), 1);
	memset(&ctx, 0, sizeof(ctx));
	sym_X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
	snprintf(san, sizeof(san), "DNS:%s%s%s", name, also ? ",DNS:" : "", also ? also : "");
	e = sym_X509V3_EXT_conf_nid(NULL, &ctx, NID_subject_alt_name, san);
	assert_non_null(e);
	assert_int_equal(sym_X509_add_ext(x, e, -1), 1);
	sym_X509_EXTENSION_free(e);
	assert_true(sym_X509_sign(x, *key, sym_EVP_sha256()) > 0);
	return x;
}

static char *cert_pem(X509 *x)
{
	BIO *b = sym_BIO_new(sym_BIO_s_mem());
	char *p, *out;
	long len;

	assert_int_equal(sym_PEM_write_bio_X509(b, x), 1);
	len = sym_BIO_ctrl(b, BIO_CTRL_INFO, 0, (char *)&p);
	out = xstrndup(p, (size_t)len);
	sym_BIO_free(b);
	return out;
}

/* An egress client of t to host at a server of ctx: the client's
 * handshake's result (its error in *cerr), and whether it resumed a
 * session. After a handshake the server sends a byte, which the client
 * reads (the TLS 1.3 tickets before it are read with it), then ends with
 * close_notify where notify says so, as the worker does. */
static int client_at(struct egress_tls *t, SSL_CTX *ctx, const char *host, bool notify,
		     bool *resumed, gantry_error_t *cerr)
{
	struct egress_conn *c = NULL;
	gantry_error_t err = NULL;
	struct side ss, cs;
	short events = 0;
	size_t put = 0;
	ssize_t n = -1;
	char b;
	int fds[2];
	SSL *ssl;

	socket_pair(fds);
	ssl = sym_SSL_new(ctx);
	assert_int_equal(sym_SSL_set_fd(ssl, fds[0]), 1);
	sym_SSL_set_accept_state(ssl);
	must(egress_conn_client(t, fds[1], host, &c, &err), &err);
	ss = (struct side){ .step = raw_step, .p = ssl, .fd = fds[0] };
	cs = (struct side){ .step = conn_step, .p = c, .fd = fds[1] };
	handshake(&ss, &cs);
	gantry_error_free(&ss.err);
	*cerr = cs.err;
	*resumed = egress_conn_resumed(c);
	if (cs.rc == 1 && ss.rc == 1) {
		if (sym_SSL_write_ex(ssl, "x", 1, &put) == 1)
			do
				n = egress_conn_read(c, &b, 1, &events, cerr);
			while (n == EGRESS_AGAIN && wait_fd(fds[1], events, cerr) == 0);
		if (n != 1 && *cerr == NULL)
			gantry_error(cerr, 0, "no byte after the handshake (%zd)", n);
		if (n != 1)
			cs.rc = -1;
		else if (notify)
			egress_conn_close(c);
	}
	egress_conn_free(c);
	sym_SSL_free(ssl);
	close(fds[0]);
	close(fds[1]);
	return cs.rc;
}

/* An OpenSSL server context showing x: it hands out tickets, and takes
 * those of its other connections (egress's guest side resumes nothing). */
static SSL_CTX *server_ctx(X509 *x, EVP_PKEY *key, int max_version)
{
	SSL_CTX *ctx = sym_SSL_CTX_new(sym_TLS_server_method());

	assert_non_null(ctx);
	assert_int_equal(sym_SSL_CTX_use_certificate(ctx, x), 1);
	assert_int_equal(sym_SSL_CTX_use_PrivateKey(ctx, key), 1);
	if (max_version)
		assert_int_equal(
			sym_SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MAX_PROTO_VERSION, max_version, NULL),
			1);
	return ctx;
}

/* An egress client of t to host at a server that shows x. */
static int client_to_raw(struct egress_tls *t, X509 *x, EVP_PKEY *key, const char *host,
			 gantry_error_t *cerr)
{
	SSL_CTX *ctx = server_ctx(x, key, 0);
	bool resumed;
	int rc = client_at(t, ctx, host, true, &resumed, cerr);

	sym_SSL_CTX_free(ctx);
	return rc;
}

static void test_upstream_trust(void **state)
{
	static const char *const hosts[] = { "upstream.test", "other.test" };
	/* real: the real host, its CA played by a sandbox's; lost: another. */
	struct egress_tls *real = tls_new(hosts, 2, NULL);
	struct egress_tls *lost = tls_new(NULL, 0, NULL);
	struct egress_tls *good = tls_new(NULL, 0, egress_tls_ca_pem(real));
	struct egress_tls *bad = tls_new(NULL, 0, egress_tls_ca_pem(lost));
	struct egress_tls *t = NULL;
	cleanup_free char *bundle = NULL, *wrong_pem = NULL, *garbled = NULL;
	gantry_error_t err = NULL;
	struct egress_conn *c = NULL;
	EVP_PKEY *key;
	X509 *wrong;
	struct pair p;
	char *at;

	(void)state;
	if (!pair_open(&p, real, good, "upstream.test"))
		fail_msg("%s / %s", gantry_error_str(p.serr), gantry_error_str(p.cerr));
	assert_string_equal(egress_conn_host(p.client), "upstream.test");
	assert_string_equal(egress_conn_host(p.server), "upstream.test");
	assert_string_equal(egress_conn_alpn(p.client), "http/1.1");
	assert_string_equal(egress_conn_alpn(p.server), "http/1.1");
	pair_close(&p);

	/* Another CA: refused with what the verifier said. */
	assert_false(pair_open(&p, real, bad, "upstream.test"));
	says(&p.cerr, "certificate of upstream.test not trusted: unable to get local issuer");
	pair_close(&p);

	/* A certificate the store trusts, but of another name. */
	wrong = self_signed("wrong.test", NULL, &key);
	wrong_pem = cert_pem(wrong);
	t = tls_new(NULL, 0, wrong_pem);
	assert_int_equal(client_to_raw(t, wrong, key, "wrong.test", &err), 1);
	assert_int_equal(client_to_raw(t, wrong, key, "upstream.test", &err), -1);
	says(&err, "certificate of upstream.test not trusted: hostname mismatch");
	egress_tls_free(t);
	sym_X509_free(wrong);
	sym_EVP_PKEY_free(key);

	/* A bundle: other PEM blocks skipped, every certificate trusted. */
	xasprintf(&bundle, "# a comment\n-----BEGIN FOO-----\nAAAA\n-----END FOO-----\n%s%s",
		  egress_tls_ca_pem(lost), egress_tls_ca_pem(real));
	t = tls_new(NULL, 0, bundle);
	assert_true(pair_open(&p, real, t, "other.test"));
	pair_close(&p);
	egress_tls_free(t);

	/* No certificate, a broken one: no context at all. */
	assert_int_equal(egress_tls_new(&t, NULL, 0, "nothing", 7, &err), -1);
	says(&err, "trust store: no PEM certificate in 7 bytes");
	garbled = xstrdup(egress_tls_ca_pem(real));
	at = strchr(garbled, '\n') + 10;
	memcpy(at, "!!!!", 4);
	assert_int_equal(egress_tls_new(&t, NULL, 0, garbled, strlen(garbled), &err), -1);
	says(&err, "trust store: certificate 1 is not valid");

	/* Without a store, and to an address: no upstream. */
	assert_int_equal(egress_conn_client(lost, 0, "upstream.test", &c, &err), -1);
	says(&err, "no trust store");
	assert_int_equal(egress_conn_client(good, 0, "192.0.2.1", &c, &err), -1);
	says(&err, "is an IP address");

	egress_tls_free(real);
	egress_tls_free(lost);
	egress_tls_free(good);
	egress_tls_free(bad);
}

#define RESUMERS     4 /* threads */
#define RESUMES_EACH 6

struct resumer {
	struct egress_tls *t;
	SSL_CTX *ctx;
	int n, done, resumed;
	gantry_error_t err;
};

static void *resume_many(void *arg)
{
	struct resumer *r = arg;
	bool resumed;

	for (int i = 0; i < r->n; i++) {
		if (client_at(r->t, r->ctx, "upstream.test", true, &resumed, &r->err) != 1)
			break;
		r->done++;
		r->resumed += resumed;
	}
	return NULL;
}

/* One round of test_upstream_resume's, the server at most max_version. */
static void resume_round(X509 *x, EVP_PKEY *key, const char *pem, int max_version)
{
	SSL_CTX *ctx = server_ctx(x, key, max_version);
	struct egress_tls *t = tls_new(NULL, 0, pem);
	struct resumer r[RESUMERS];
	gantry_error_t err = NULL;
	SSL_SESSION *s;
	pthread_t th[RESUMERS];
	bool resumed;
	int total = 0;

	/* A full handshake, then one that resumes its session. */
	must(client_at(t, ctx, "upstream.test", true, &resumed, &err), &err);
	assert_false(resumed);
	must(client_at(t, ctx, "upstream.test", true, &resumed, &err), &err);
	assert_true(resumed);
	/* Another name of the same server, which would take the first's
	 * ticket (TLS 1.3 does not tie one to a name): not offered it. */
	must(client_at(t, ctx, "other.test", true, &resumed, &err), &err);
	assert_false(resumed);
	must(client_at(t, ctx, "other.test", true, &resumed, &err), &err);
	assert_true(resumed);
	must(client_at(t, ctx, "upstream.test", true, &resumed, &err), &err);
	assert_true(resumed);

	/* A session that does not stand for the name it is offered under,
	 * as if the store had mixed up its hosts: the server resumes it,
	 * and OpenSSL would let it be (SSL_set1_host's name is checked
	 * against a certificate, which a resumption shows none of); egress
	 * fails it, and drops the session. */
	s = session_get1(t, "upstream.test");
	assert_non_null(s);
	session_put(t, "third.test", s);
	assert_int_equal(client_at(t, ctx, "third.test", true, &resumed, &err), -1);
	assert_false(resumed);
	says(&err, "certificate of third.test not trusted: hostname mismatch in the "
		   "resumed session");
	assert_null(session_get1(t, "third.test"));

	/* A connection that ends without close_notify (one that broke)
	 * spends the session it holds: the next one is a full handshake. */
	must(client_at(t, ctx, "other.test", false, &resumed, &err), &err);
	assert_true(resumed);
	must(client_at(t, ctx, "other.test", true, &resumed, &err), &err);
	assert_false(resumed);
	must(client_at(t, ctx, "other.test", true, &resumed, &err), &err);
	assert_true(resumed);

	/* Connections on several threads at once share the store (a full
	 * handshake first: upstream.test's session was third.test's too). */
	must(client_at(t, ctx, "upstream.test", true, &resumed, &err), &err);
	for (int i = 0; i < RESUMERS; i++) {
		r[i] = (struct resumer){ .t = t, .ctx = ctx, .n = RESUMES_EACH };
		assert_int_equal(pthread_create(&th[i], NULL, resume_many, &r[i]), 0);
	}
	for (int i = 0; i < RESUMERS; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		must(r[i].err ? -1 : 0, &r[i].err);
		assert_int_equal(r[i].done, RESUMES_EACH);
		total += r[i].resumed;
	}
	/* A TLS 1.2 session serves them all. A TLS 1.3 one is spent once a
	 * handshake that resumed it is done, until that connection's new
	 * tickets come: one that starts between makes a full handshake. */
	if (max_version == TLS1_2_VERSION)
		assert_int_equal(total, RESUMERS * RESUMES_EACH);
	else
		assert_true(total > 0);

	egress_tls_free(t);
	sym_SSL_CTX_free(ctx);
}

static void test_upstream_resume(void **state)
{
	cleanup_free char *pem = NULL;
	EVP_PKEY *key;
	X509 *x = self_signed("upstream.test", "other.test", &key);

	(void)state;
	pem = cert_pem(x);
	resume_round(x, key, pem, 0);
	resume_round(x, key, pem, TLS1_2_VERSION);
	sym_X509_free(x);
	sym_EVP_PKEY_free(key);
}

/* Exactly len bytes from c, waiting as it asks. */
static int read_all(struct egress_conn *c, int fd, unsigned char *buf, size_t len,
		    gantry_error_t *err)
{
	size_t got = 0;

	while (got < len) {
		short events = 0;
		ssize_t n = egress_conn_read(c, buf + got, len - got, &events, err);

		if (n == EGRESS_AGAIN) {
			if (wait_fd(fd, events, err) < 0)
				return -1;
			continue;
		}
		if (n <= 0)
			return n < 0 ? -1 : gantry_error(err, 0, "end after %zu bytes", got);
		got += (size_t)n;
	}
	return 0;
}

static int write_all(struct egress_conn *c, int fd, const unsigned char *buf, size_t len,
		     gantry_error_t *err)
{
	size_t put = 0;

	while (put < len) {
		short events = 0;
		ssize_t n = egress_conn_write(c, buf + put, MIN(len - put, CHUNK), &events, err);

		if (n == EGRESS_AGAIN) {
			if (wait_fd(fd, events, err) < 0)
				return -1;
			continue;
		}
		if (n < 0)
			return -1;
		put += (size_t)n;
	}
	return 0;
}

/* What c reads once only its end is left: 0, or what came instead. */
static ssize_t read_end(struct egress_conn *c, int fd, gantry_error_t *err)
{
	unsigned char b[64];
	short events = 0;
	ssize_t n;

	do
		n = egress_conn_read(c, b, sizeof(b), &events, err);
	while (n == EGRESS_AGAIN && wait_fd(fd, events, err) == 0);
	return n;
}

/* Bytes written to fd, not TLS, until it takes not one more. */
static size_t fill_socket(int fd)
{
	static const char junk[4096];
	size_t total = 0;
	ssize_t n;

	for (size_t len = sizeof(junk); len > 0; len /= 2)
		while ((n = write(fd, junk, len)) > 0)
			total += (size_t)n;
	assert_int_equal(errno, EAGAIN);
	return total;
}

static void drain_raw(int fd, size_t len)
{
	char b[4096];
	gantry_error_t err = NULL;
	ssize_t n;

	while (len > 0) {
		must(wait_fd(fd, POLLIN, &err), &err);
		n = read(fd, b, MIN(len, sizeof(b)));
		assert_true(n > 0);
		len -= (size_t)n;
	}
}

static unsigned char pattern(size_t i)
{
	return (unsigned char)(i * 131 + (i >> 9));
}

static void test_data(void **state)
{
	static const char *const hosts[] = { HOST };
	static const char req[] = "GET / HTTP/1.1\r\nHost: " HOST "\r\n\r\n";
	struct egress_tls *t = tls_new(hosts, 1, NULL);
	struct egress_tls *client = tls_new(NULL, 0, egress_tls_ca_pem(t));
	unsigned char buf[CHUNK], *out = xmalloc(CHUNK);
	gantry_error_t err = NULL;
	size_t put = 0, got = 0;
	short events = 0;
	struct pair p;
	ssize_t n;

	(void)state;
	assert_true(pair_open(&p, t, client, HOST));
	/* Nothing yet either way. */
	assert_int_equal(egress_conn_read(p.client, buf, sizeof(buf), &events, &err), EGRESS_AGAIN);
	assert_int_equal(events, POLLIN);
	assert_int_equal(egress_conn_read(p.server, buf, sizeof(buf), &events, &err), EGRESS_AGAIN);
	assert_false(egress_conn_pending(p.server));

	assert_int_equal(egress_conn_write(p.client, req, strlen(req), &events, &err),
			 (ssize_t)strlen(req));
	must(read_all(p.server, p.fds[0], buf, strlen(req), &err), &err);
	assert_memory_equal(buf, req, strlen(req));

	/* One record read in part: the rest waits in the connection. */
	for (size_t i = 0; i < 3000; i++)
		out[i] = pattern(i);
	must(write_all(p.server, p.fds[0], out, 3000, &err), &err);
	must(read_all(p.client, p.fds[1], buf, 10, &err), &err);
	assert_true(egress_conn_pending(p.client));
	must(read_all(p.client, p.fds[1], buf + 10, 2990, &err), &err);
	assert_false(egress_conn_pending(p.client));
	assert_memory_equal(buf, out, 3000);

	/* Write until the socket is full; then, the reader drained, the same
	 * bytes again go through. */
	for (;;) {
		for (size_t i = 0; i < CHUNK; i++)
			out[i] = pattern(put + i);
		n = egress_conn_write(p.server, out, CHUNK, &events, &err);
		if (n == EGRESS_AGAIN)
			break;
		assert_true(n > 0);
		put += (size_t)n;
		assert_true(put < FILL_LIMIT);
	}
	assert_int_equal(events, POLLOUT);
	while (n == EGRESS_AGAIN) {
		ssize_t r = egress_conn_read(p.client, buf, sizeof(buf), &events, &err);

		if (r == EGRESS_AGAIN) {
			n = egress_conn_write(p.server, out, CHUNK, &events, &err);
			continue;
		}
		assert_true(r > 0);
		for (ssize_t i = 0; i < r; i++)
			assert_int_equal(buf[i], pattern(got + (size_t)i));
		got += (size_t)r;
	}
	assert_true(n > 0);
	put += (size_t)n;
	while (got < put) {
		n = MIN(put - got, sizeof(buf));
		must(read_all(p.client, p.fds[1], buf, (size_t)n, &err), &err);
		for (ssize_t i = 0; i < n; i++)
			assert_int_equal(buf[i], pattern(got + (size_t)i));
		got += (size_t)n;
	}

	/* close_notify ends one direction: the other goes on. */
	assert_true(egress_conn_close(p.server));
	assert_int_equal(read_end(p.client, p.fds[1], &err), 0);
	assert_int_equal(egress_conn_write(p.server, req, 3, &events, &err), -1);
	says(&err, "TLS write to the guest (for " HOST "): after close_notify");
	assert_int_equal(egress_conn_write(p.client, "more", 4, &events, &err), 4);
	must(read_all(p.server, p.fds[0], buf, 4, &err), &err);
	assert_memory_equal(buf, "more", 4);
	assert_true(egress_conn_close(p.client));
	assert_int_equal(read_end(p.server, p.fds[0], &err), 0);
	pair_close(&p);

	/* A close_notify the socket cannot take yet goes out as it drains,
	 * from a read (which asks for POLLOUT meanwhile) or another close. */
	assert_true(pair_open(&p, t, client, HOST));
	put = fill_socket(p.fds[0]);
	assert_false(egress_conn_close(p.server));
	assert_int_equal(egress_conn_read(p.server, buf, sizeof(buf), &events, &err), EGRESS_AGAIN);
	assert_int_equal(events, POLLIN | POLLOUT);
	drain_raw(p.fds[1], put);
	assert_int_equal(egress_conn_read(p.server, buf, sizeof(buf), &events, &err), EGRESS_AGAIN);
	assert_int_equal(events, POLLIN);
	assert_true(egress_conn_close(p.server));
	assert_int_equal(read_end(p.client, p.fds[1], &err), 0);
	pair_close(&p);

	/* None behind an unfinished write: the connection stays sound. */
	assert_true(pair_open(&p, t, client, HOST));
	do
		n = egress_conn_write(p.server, out, CHUNK, &events, &err);
	while (n > 0);
	assert_int_equal(n, EGRESS_AGAIN);
	assert_true(egress_conn_close(p.server));
	assert_int_equal(egress_conn_read(p.server, buf, sizeof(buf), &events, &err), EGRESS_AGAIN);
	assert_int_equal(events, POLLIN);
	pair_close(&p);

	/* EOF without close_notify ends it as well. */
	assert_true(pair_open(&p, t, client, HOST));
	shutdown(p.fds[0], SHUT_WR);
	assert_int_equal(read_end(p.client, p.fds[1], &err), 0);
	pair_close(&p);

	free(out);
	egress_tls_free(client);
	egress_tls_free(t);
}

struct sender {
	struct egress_conn *c;
	int fd;
	unsigned char *buf;
	int rc;
	gantry_error_t err;
};

static void *send_big(void *arg)
{
	struct sender *s = arg;

	s->rc = write_all(s->c, s->fd, s->buf, BIG, &s->err);
	/* The socket may be full still: close_notify goes when it drains. */
	while (s->rc == 0 && !egress_conn_close(s->c))
		s->rc = wait_fd(s->fd, POLLOUT, &s->err);
	return NULL;
}

static void test_mib(void **state)
{
	static const char *const hosts[] = { HOST };
	struct egress_tls *t = tls_new(hosts, 1, NULL);
	struct egress_tls *client = tls_new(NULL, 0, egress_tls_ca_pem(t));
	unsigned char *in = xmalloc(BIG), *out = xmalloc(BIG);
	gantry_error_t err = NULL;
	struct sender s;
	struct pair p;
	pthread_t th;
	ssize_t n;

	(void)state;
	for (size_t i = 0; i < BIG; i++)
		out[i] = pattern(i);
	assert_true(pair_open(&p, t, client, HOST));
	s = (struct sender){ .c = p.server, .fd = p.fds[0], .buf = out };
	assert_int_equal(pthread_create(&th, NULL, send_big, &s), 0);
	must(read_all(p.client, p.fds[1], in, BIG, &err), &err);
	n = read_end(p.client, p.fds[1], &err);
	assert_int_equal(pthread_join(th, NULL), 0);
	must(s.rc, &s.err);
	assert_int_equal(n, 0);
	assert_memory_equal(in, out, BIG);

	/* And back, the other way, on the same connection. */
	s = (struct sender){ .c = p.client, .fd = p.fds[1], .buf = out };
	assert_int_equal(pthread_create(&th, NULL, send_big, &s), 0);
	memset(in, 0, BIG);
	must(read_all(p.server, p.fds[0], in, BIG, &err), &err);
	assert_int_equal(pthread_join(th, NULL), 0);
	must(s.rc, &s.err);
	assert_memory_equal(in, out, BIG);

	pair_close(&p);
	free(in);
	free(out);
	egress_tls_free(client);
	egress_tls_free(t);
}

/* meson's code for a test skipped. */
#define SKIP 77

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ca),
		cmocka_unit_test(test_server_leaf_and_alpn),
		cmocka_unit_test(test_server_refuses),
		cmocka_unit_test(test_add_host),
		cmocka_unit_test(test_upstream_trust),
		cmocka_unit_test(test_upstream_resume),
		cmocka_unit_test(test_data),
		cmocka_unit_test(test_mib),
	};
	gantry_error_t err = NULL;

	/* As the workers do: a peer gone while OpenSSL writes is EPIPE. */
	signal(SIGPIPE, SIG_IGN);
	if (egress_ssl_load(&err) < 0 || lazy_load(&test_ssl_lib, &err) < 0 ||
	    lazy_load(&test_crypto_lib, &err) < 0) {
		printf("skip: %s\n", gantry_error_str(err));
		gantry_error_free(&err);
		return SKIP;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
