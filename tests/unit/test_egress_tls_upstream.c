/* Unit tests for src/egress/tls, second part: the upstream side. Its
 * verification against a trust store (the right CA, an unrelated one, a
 * certificate for another name, a bundle, stores with no or a broken
 * certificate), and resuming a host's session, and no other host's, nor
 * one that does not stand for its host (planted through the store's
 * internals, tls_priv.h), with connections on several threads at once.
 * Everything over socketpairs; the servers, which hand out tickets, are
 * OpenSSL's own, through the test's own lazily loaded symbols
 * (egress_tls_rig.h). The CA, the guest's side and data are in
 * test_egress_tls.c. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "egress/tls_priv.h"
#include "egress_tls_rig.h"

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
	cs = (struct side){ .step = handshake_step, .p = c, .fd = fds[1] };
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_upstream_trust),
		cmocka_unit_test(test_upstream_resume),
	};

	if (!tls_test_ready())
		return SKIP;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
