/* The egress TLS's internals (see tls.h), shared by its two files and
 * included by tls.c and cert.c only: cert.c makes the sandbox CA and the
 * leaves, tls.c the contexts and the connections. */
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

#endif
