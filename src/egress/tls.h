/* The TLS of the egress worker, the proxy that puts a sandbox's
 * host-bound secrets into its HTTPS requests. The guest's connections to
 * a bound host end here: the worker answers as that host with a leaf
 * certificate made for it, signed by a CA made for the sandbox when it
 * starts (its private key in this process's memory alone, never written;
 * the guest is given the CA certificate to trust), and opens its own
 * connection to the real host, verified against the host's trust store.
 * This module owns that CA, the leaves, the two OpenSSL contexts and the
 * upstream side's sessions, and wraps each side of a connection (struct
 * egress_conn); the HTTP relayed between them is another module's.
 *
 * Every connection is a non-blocking socket that its caller polls: calls
 * that would block return EGRESS_AGAIN (or 0 from the handshake) with the
 * poll events to wait for. A connection is used by one thread at a time,
 * the egress_tls by all at once; the process ignores SIGPIPE (the
 * workers do), as OpenSSL writes with write(). Errors are one line fit
 * for a log and the audit; what they quote of a peer is sanitised. */
#ifndef GANTRY_EGRESS_TLS_H
#define GANTRY_EGRESS_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"

#define EGRESS_AGAIN	     (-2)
#define EGRESS_HOST_MAX	     253  /* a DNS name's longest */
#define EGRESS_TLS_HOSTS_MAX 4096 /* bound hosts: every secret's (256) of 16 */

struct egress_tls;

/* One sandbox's TLS: a CA (EC P-256, CN "Gantry sandbox CA <8 hex
 * digits>", CA:TRUE and keyCertSign|cRLSign, both critical, valid from an
 * hour ago for a year, a random serial), a leaf signed by it for each of
 * the nr_hosts hosts (valid names: egress_tls_add_host), the context that
 * answers the guest and the one that calls the real hosts. The guest's
 * side picks the leaf by the ClientHello's server name (SNI); a name that
 * is not bound, or none, fails the handshake with an unrecognized_name
 * alert. ALPN: "http/1.1" where the client offers it, otherwise none. The
 * upstream side offers ALPN "http/1.1" and verifies the peer against
 * trust, trust_len bytes of PEM certificates (a CA bundle the caller read:
 * the worker has no file system), other PEM blocks skipped; trust NULL
 * and trust_len 0: no upstream connections (egress_conn_client fails).
 * TLS 1.2 and 1.3 only, no renegotiation. The guest's side resumes no
 * session; the upstream side keeps each host's most recent resumable
 * one (at most EGRESS_TLS_HOSTS_MAX hosts) and offers it on the next
 * connection to that host name, and to no other. */
int egress_tls_new(struct egress_tls **out, const char *const *hosts, size_t nr_hosts,
		   const char *trust, size_t trust_len, gantry_error_t *err);
/* Bind one more host, while handshakes go on in other threads: a
 * lowercase DNS name (labels of a-z, 0-9 and -, at most 253 bytes, no
 * trailing dot); IP addresses and wildcards are refused (secrets are bound
 * to names). A host bound already: 0, nothing done. */
int egress_tls_add_host(struct egress_tls *t, const char *host, gantry_error_t *err);
/* The CA certificate, PEM: public, the guest's to trust. As long as t. */
const char *egress_tls_ca_pem(const struct egress_tls *t);
/* After every connection made from t is freed. The keys are freed (and
 * OpenSSL zeroes an EC private key as it frees it); NULL: nothing. */
void egress_tls_free(struct egress_tls *t);

struct egress_conn;

/* One TLS endpoint on fd, a connected, non-blocking stream socket that the
 * caller keeps and closes after egress_conn_free. The guest's side: */
int egress_conn_server(struct egress_tls *t, int fd, struct egress_conn **out, gantry_error_t *err);
/* The real host's side: host (a name as egress_tls_add_host takes) is
 * sent as SNI and must be what the peer's certificate names. */
int egress_conn_client(struct egress_tls *t, int fd, const char *host, struct egress_conn **out,
		       gantry_error_t *err);
/* Step the handshake: 1 done, 0 not yet (wait for *events: POLLIN or
 * POLLOUT), -1 failed (err says why: "client named unbound host x.test",
 * "certificate of api.example.com not trusted: self-signed
 * certificate"). */
int egress_conn_handshake(struct egress_conn *c, short *events, gantry_error_t *err);
/* The guest's side: the bound host its SNI named (NULL before the
 * handshake chose one); the upstream side: its host. */
const char *egress_conn_host(const struct egress_conn *c);
/* Whether the handshake is done and resumed a session (the upstream
 * side's, from an earlier connection to its host); false before. */
bool egress_conn_resumed(const struct egress_conn *c);
/* What ALPN agreed on once the handshake is done: "http/1.1", or NULL
 * where it agreed on nothing (HTTP/1.1 all the same). */
const char *egress_conn_alpn(const struct egress_conn *c);
/* Up to len (> 0) decrypted bytes: their count, 0 at the end of the
 * stream (the peer's close_notify, or EOF without it: the HTTP framing
 * tells a cut message), -1 on an error (err), EGRESS_AGAIN when it would
 * block (wait for *events: POLLIN, POLLOUT, or both while a close_notify
 * of egress_conn_close's waits to go out, which reads send). */
ssize_t egress_conn_read(struct egress_conn *c, void *buf, size_t len, short *events,
			 gantry_error_t *err);
/* Write up to len bytes: the count written, which may be less than len, -1
 * or EGRESS_AGAIN as egress_conn_read. After EGRESS_AGAIN call again with
 * the same bytes first (at the same or another address) and at least as
 * many. */
ssize_t egress_conn_write(struct egress_conn *c, const void *buf, size_t len, short *events,
			  gantry_error_t *err);
/* Whether decrypted bytes wait in c to be read (a read will not block):
 * poll() on fd does not see them. */
bool egress_conn_pending(const struct egress_conn *c);
/* Send close_notify without blocking (once the handshake is done; not
 * after an error, nor after a write that returned EGRESS_AGAIN and was not
 * finished): whether it went out, or cannot. false: it waits in c for
 * the socket; another call after POLLOUT, or egress_conn_read, sends it.
 * Reading goes on after it (TLS's close_notify ends one direction);
 * writing does not. */
bool egress_conn_close(struct egress_conn *c);
/* NULL: nothing. fd stays open. */
void egress_conn_free(struct egress_conn *c);

#endif
