/* What the egress TLS tests share (test_egress_tls.c,
 * test_egress_tls_upstream.c): the OpenSSL functions they call beyond
 * what egress/ssl.h lists, loaded lazily as egress loads its own; checks
 * of a call's error; a handshake of two sides stepped to their ends, the
 * server's on a thread of its own, over a socketpair; a connection between
 * an egress client and an egress server; and what main does before the
 * tests. Include after <cmocka.h>. */
#ifndef GANTRY_TESTS_UNIT_EGRESS_TLS_RIG_H
#define GANTRY_TESTS_UNIT_EGRESS_TLS_RIG_H

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/error.h"
#include "common/lazy.h"
#include "common/util.h"
#include "egress/ssl.h"
#include "egress/tls.h"
#include "image/lazylib.h"

#define WAIT_MS 10000

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

static int handshake_step(void *p, short *events, gantry_error_t *err)
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
	ss = (struct side){ .step = handshake_step, .p = p->server, .fd = p->fds[0] };
	cs = (struct side){ .step = handshake_step, .p = p->client, .fd = p->fds[1] };
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

/* meson's code for a test skipped. */
#define SKIP 77

/* What main does before the tests: a peer gone while OpenSSL writes is
 * EPIPE, as in the workers, and libssl and libcrypto are loaded. False,
 * the reason printed, where they cannot be. */
static bool tls_test_ready(void)
{
	gantry_error_t err = NULL;

	signal(SIGPIPE, SIG_IGN);
	if (egress_ssl_load(&err) < 0 || lazy_load(&test_ssl_lib, &err) < 0 ||
	    lazy_load(&test_crypto_lib, &err) < 0) {
		printf("skip: %s\n", gantry_error_str(err));
		gantry_error_free(&err);
		return false;
	}
	return true;
}

#endif
