/* The upstream side's TLS sessions (see tls_priv.h): each host's most
 * recent resumable one, which the next connection to that host offers to
 * skip the full handshake (~2 ms). Kept here rather than in OpenSSL's
 * cache (the client context stores nothing itself) so that the key is the
 * host name: both the SNI a session was made under and the name its
 * certificate was verified for, and so the one a connection must have to
 * be offered it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "egress/tls_priv.h"

#define SESSIONS_ROOM_FIRST 16

/* Under t->lock. */
static struct egress_session *session_find(struct egress_tls *t, const char *host)
{
	for (size_t i = 0; i < t->nr_sessions; i++)
		if (strcmp(t->sessions[i].host, host) == 0)
			return &t->sessions[i];
	return NULL;
}

/* Under t->lock, held for writing: host's entry, made if need be. */
static struct egress_session *session_entry(struct egress_tls *t, const char *host)
{
	struct egress_session *e = session_find(t, host);

	if (e)
		return e;
	if (t->nr_sessions < EGRESS_TLS_HOSTS_MAX) {
		if (t->nr_sessions == t->sessions_room) {
			t->sessions_room =
				t->sessions_room ? 2 * t->sessions_room : SESSIONS_ROOM_FIRST;
			t->sessions =
				xrealloc(t->sessions, t->sessions_room * sizeof(*t->sessions));
		}
		e = &t->sessions[t->nr_sessions++];
		e->sess = NULL;
	} else {
		/* Full: the entries give way in turn, in the order made. */
		e = &t->sessions[t->sessions_evict];
		t->sessions_evict = (t->sessions_evict + 1) % EGRESS_TLS_HOSTS_MAX;
	}
	snprintf(e->host, sizeof(e->host), "%s", host);
	return e;
}

void session_put(struct egress_tls *t, const char *host, SSL_SESSION *s)
{
	struct egress_session *e;
	SSL_SESSION *old;

	pthread_rwlock_wrlock(&t->lock);
	e = session_entry(t, host);
	old = e->sess;
	e->sess = s;
	pthread_rwlock_unlock(&t->lock);
	sym_SSL_SESSION_free(old);
}

/* Whether s may be offered: within its timeout (OpenSSL's own cache
 * would have dropped it; a TLS 1.3 ticket's lifetime OpenSSL checks as
 * well), and not spent. OpenSSL spends a TLS 1.3 session once a
 * handshake that resumed it is done (a ticket is for one use: that
 * connection's new tickets take its place here), and any session whose
 * connection is freed without close_notify sent (one that broke). */
static bool session_usable(const SSL_SESSION *s)
{
	long age = (long)time(NULL) - sym_SSL_SESSION_get_time(s);

	return sym_SSL_SESSION_is_resumable(s) && age >= 0 && age < sym_SSL_SESSION_get_timeout(s);
}

SSL_SESSION *session_get1(struct egress_tls *t, const char *host)
{
	struct egress_session *e;
	SSL_SESSION *s = NULL;

	pthread_rwlock_rdlock(&t->lock);
	e = session_find(t, host);
	if (e && e->sess && session_usable(e->sess) && sym_SSL_SESSION_up_ref(e->sess) == 1)
		s = e->sess;
	pthread_rwlock_unlock(&t->lock);
	return s;
}

void session_forget(struct egress_tls *t, const char *host)
{
	struct egress_session *e;
	SSL_SESSION *old = NULL;

	pthread_rwlock_wrlock(&t->lock);
	e = session_find(t, host);
	if (e)
		old = steal_pointer(&e->sess);
	pthread_rwlock_unlock(&t->lock);
	sym_SSL_SESSION_free(old);
}

/* A resumed handshake shows no certificate: the session carries the one
 * of the full handshake it came from, and that handshake's verdict. Both
 * must hold for host, with the flags egress_conn_client gives OpenSSL's
 * own check. */
const char *session_unverified(SSL *ssl, const char *host)
{
	long verify = sym_SSL_get_verify_result(ssl);
	X509 *peer = sym_SSL_get0_peer_certificate(ssl);

	if (verify != X509_V_OK)
		return sym_X509_verify_cert_error_string(verify);
	if (peer == NULL)
		return "no certificate in the resumed session";
	if (sym_X509_check_host(peer, host, 0, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS, NULL) != 1)
		return "hostname mismatch in the resumed session";
	return NULL;
}

void sessions_free(struct egress_tls *t)
{
	for (size_t i = 0; i < t->nr_sessions; i++)
		sym_SSL_SESSION_free(t->sessions[i].sess);
	free(t->sessions);
}
