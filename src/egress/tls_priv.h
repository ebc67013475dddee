/* The egress TLS's internals (see tls.h), shared by its files and
 * included by them only: cert.c makes the sandbox CA and the leaves,
 * session.c keeps the upstream side's sessions, tls.c the contexts and
 * the connections. */
#ifndef GANTRY_EGRESS_TLS_PRIV_H
#define GANTRY_EGRESS_TLS_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "egress/ssl.h"
#include "egress/tls.h"

#define NAME_SHOWN_MAX 80 /* bytes of a name quoted in an error */

struct egress_host {
	char name[EGRESS_HOST_MAX + 1];
	X509 *leaf;
	EVP_PKEY *key;
};

/* A host's most recent resumable upstream session; sess NULL: none. */
struct egress_session {
	char host[EGRESS_HOST_MAX + 1];
	SSL_SESSION *sess;
};

struct egress_tls {
	EVP_PKEY *ca_key;
	X509 *ca;
	char *ca_pem;
	SSL_CTX *server;
	SSL_CTX *client; /* NULL: no trust store, no upstream */
	/* hosts is read by the SNI callback of every handshake, and grows
	 * (egress_tls_add_host); an entry once added stays until the end. */
	pthread_rwlock_t lock;
	struct egress_host **hosts;
	size_t nr_hosts;
	/* Under lock as well: the upstream sessions, one a host, for at
	 * most EGRESS_TLS_HOSTS_MAX hosts; once full, a new host takes the
	 * entry at sessions_evict (each in turn). Room for sessions_room. */
	struct egress_session *sessions;
	size_t nr_sessions, sessions_room, sessions_evict;
};

/* tls.c */
int __attribute__((format(printf, 3, 4)))
ssl_fail(gantry_error_t *err, int status, const char *fmt, ...);

/* cert.c */
const char *host_invalid(const char *h);
int host_refuse(gantry_error_t *err, const char *h, const char *why);
int ca_new(struct egress_tls *t, gantry_error_t *err);
struct egress_host *host_new(struct egress_tls *t, const char *name, gantry_error_t *err);
void host_free(struct egress_host *h);

/* session.c */
/* Keep s (its reference is t's now) as host's session, freeing the one
 * it replaces. */
void session_put(struct egress_tls *t, const char *host, SSL_SESSION *s);
/* host's session, with a reference for the caller; NULL: none, or one
 * past its timeout or spent. */
SSL_SESSION *session_get1(struct egress_tls *t, const char *host);
/* Drop host's session (one that failed its check). */
void session_forget(struct egress_tls *t, const char *host);
/* A resumed handshake's session checked again for host, as a full one's
 * certificate is: NULL where it stands, otherwise why not. */
const char *session_unverified(SSL *ssl, const char *host);
void sessions_free(struct egress_tls *t);

#endif
