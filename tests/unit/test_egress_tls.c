/* Unit tests for src/egress/tls, first part: the sandbox CA and its
 * leaves as a client sees them, the guest's side picking a leaf by SNI
 * (unbound, no and hostile names refused, hosts bound while handshakes go
 * on), ALPN and versions, and data: EGRESS_AGAIN both ways, pending bytes,
 * close_notify and EOF, 1 MiB from another thread; the worker's relay
 * (conn.c) between two such connections, given a burst of requests that
 * each get a long value: bounded while the host does not read, all of it,
 * in order, as it does. Everything over socketpairs; the clients that
 * egress does not make (no SNI, TLS 1.1, other ALPN) are OpenSSL's own,
 * through the test's own lazily loaded symbols (egress_tls_rig.h). The
 * upstream side is in test_egress_tls_upstream.c. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "egress/worker_priv.h"
#include "egress_tls_rig.h"

#define HOST	   "api.example.com"
#define CA_CN	   "/CN=Gantry sandbox CA "
#define CHUNK	   16384
#define BIG	   (1u << 20)
#define FILL_LIMIT (64u << 20) /* a socket buffer holds far less */

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
	ss = (struct side){ .step = handshake_step, .p = server, .fd = fds[0] };
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

#define BURST_VALUE (64 * 1024) /* SECRET_VALUE_MAX */
/* A request of the burst, but for its blank line. */
#define BURST_REQ "GET /%04zu HTTP/1.1\r\nHost: " HOST "\r\n"

/* What the host got, checked against the burst's requests, in order. */
struct burst {
	const uint8_t *value;
	struct egress_buf want; /* the request being received */
	size_t want_off, got;	/* got: the requests begun */
};

static void burst_take(struct burst *b, const uint8_t *p, size_t n)
{
	char line[128];
	size_t m;

	for (size_t k = 0; k < n; k += m) {
		if (b->want_off == b->want.len) {
			b->want.len = b->want_off = 0;
			snprintf(line, sizeof(line), BURST_REQ "Authorization: Bearer ", b->got++);
			egress_buf_append(&b->want, line, strlen(line));
			egress_buf_append(&b->want, b->value, BURST_VALUE);
			egress_buf_append(&b->want, "\r\n\r\n", 4);
		}
		m = MIN(n - k, b->want.len - b->want_off);
		assert_memory_equal(p + k, b->want.data + b->want_off, m);
		b->want_off += m;
	}
}

/* The worker's one connection, in the relay from guest pair g to host
 * pair u, with b bound to HOST. */
static struct conn *relay_open(struct egress *e, struct pair *g, struct pair *u, struct binding *b,
			       char **hosts)
{
	struct conn *c = &e->conns[0];
	gantry_error_t err = NULL;

	e->chan = -1; /* its events are counted lost */
	e->b = b;
	e->nr_b = 1;
	e->allowed = hosts;
	e->nr_conns = 1;
	*c = (struct conn){ .used = true,
			    .st = C_RELAY,
			    .g = g->server,
			    .gfd = g->fds[0],
			    .u = u->client,
			    .ufd = u->fds[1],
			    .lk.fd = -1,
			    .g_rd = true,
			    .u_rd = true };
	snprintf(c->host, sizeof(c->host), "%s", HOST);
	must(egress_http_new(&c->http, &err), &err);
	/* conn_end closes and frees them. */
	g->server = u->client = NULL;
	g->fds[0] = u->fds[1] = -1;
	return c;
}

static size_t up_waiting(const struct conn *c)
{
	return c->up.len - c->up_off;
}

/* One TLS record of pipelined minimal requests, a 64 KiB value added to
 * each by a format (23 MB in all): while the host reads nothing, what
 * waits for it stays within a head of UP_HIGH, the rest of the record is
 * held and nothing the relay waits for is ready (it does not spin); as
 * the host reads, the held requests go on with no more from the guest (it
 * does not stall), each rewritten once, in order. */
static void test_relay_burst(void **state)
{
	static const char *const names[] = { HOST };
	static char host[] = HOST, header[] = "Authorization", format[] = "Bearer %s";
	struct egress_tls *t = tls_new(names, 1, NULL);
	struct egress_tls *client = tls_new(NULL, 0, egress_tls_ca_pem(t));
	struct egress *e = xzalloc(sizeof(*e));
	uint8_t *value = xmalloc(BURST_VALUE);
	char *hosts[] = { host, NULL }, in[16380];
	struct binding b = { .name = "BIG",
			     .hosts = hosts,
			     .header = header,
			     .format = format,
			     .placeholder = "gantry-ph-big",
			     .value = value,
			     .len = BURST_VALUE };
	struct burst got = { .value = value };
	unsigned char buf[CHUNK];
	size_t len = 0, nr = 0;
	gantry_error_t err = NULL;
	struct pollfd fds[2];
	struct pair g, u;
	struct conn *c;
	short ev = 0;
	ssize_t n;

	(void)state;
	memset(value, 'v', BURST_VALUE);
	while (sizeof(in) - len > 64)
		len += (size_t)snprintf(in + len, sizeof(in) - len, BURST_REQ "\r\n", nr++);
	assert_true(pair_open(&g, t, client, HOST));
	assert_true(pair_open(&u, t, client, HOST));
	c = relay_open(e, &g, &u, &b, hosts);
	must(write_all(g.client, g.fds[1], (const unsigned char *)in, len, &err), &err);

	assert_int_equal(conn_step(e, c, now_ms(), POLLIN, 0), 0);
	assert_true(c->in_len > c->in_off);
	assert_true(up_waiting(c) < UP_HIGH + EGRESS_HTTP_HEAD_OUT_MAX);
	assert_false(c->busy);
	assert_false(c->gwant & POLLIN);
	assert_true(c->uwant & POLLOUT);
	fds[0] = (struct pollfd){ .fd = c->gfd, .events = c->gwant };
	fds[1] = (struct pollfd){ .fd = c->ufd, .events = c->uwant };
	assert_int_equal(poll(fds, 2, 0), 0);

	/* The host reads; the relay steps as the worker's loop steps it. */
	for (;;) {
		while ((n = egress_conn_read(u.server, buf, sizeof(buf), &ev, &err)) > 0)
			burst_take(&got, buf, (size_t)n);
		assert_int_equal(n, EGRESS_AGAIN);
		if (got.got == nr && got.want_off == got.want.len)
			break;
		fds[0] = (struct pollfd){ .fd = c->gfd, .events = c->gwant };
		fds[1] = (struct pollfd){ .fd = c->ufd, .events = c->uwant };
		if (poll(fds, 2, c->busy ? 0 : WAIT_MS) == 0 && !c->busy)
			fail_msg("the relay stalled after %zu of %zu requests", got.got, nr);
		assert_int_equal(conn_step(e, c, now_ms(), fds[0].revents, fds[1].revents), 0);
		assert_true(up_waiting(c) < UP_HIGH + EGRESS_HTTP_HEAD_OUT_MAX);
	}
	/* All fed and sent: the guest's turn again. */
	assert_int_equal(c->in_len, 0);
	assert_int_equal(up_waiting(c), 0);
	assert_true(c->gwant & POLLIN);

	conn_end(e, c);
	pair_close(&g);
	pair_close(&u);
	egress_buf_wipe_free(&got.want);
	free(value);
	free(e);
	egress_tls_free(client);
	egress_tls_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ca),
		cmocka_unit_test(test_server_leaf_and_alpn),
		cmocka_unit_test(test_server_refuses),
		cmocka_unit_test(test_add_host),
		cmocka_unit_test(test_data),
		cmocka_unit_test(test_mib),
		cmocka_unit_test(test_relay_burst),
	};

	if (!tls_test_ready())
		return SKIP;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
