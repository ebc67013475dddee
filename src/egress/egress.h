/* The egress worker: `gantry __egress-worker`, a sandbox's injector of
 * secrets into the HTTPS requests its workload sends to the hosts they
 * are bound to (secret/spec.h: NAME@HOST,inject). Started as every worker
 * is (worker/worker.h), beside the network worker, only for a sandbox
 * with injected secrets, and confined as it is, with no file system.
 *
 * The path of a request: the guest's DNS answers the gateway's address
 * for a bound host (net/dns.h: intercept); its TLS connection to .1:443
 * goes from libslirp to the network worker, which hands the socket over
 * here (one SCM_RIGHTS message a connection on the socket given at birth).
 * Here the guest's TLS ends with a leaf for the name it asked for, signed
 * by a CA made at start whose key never leaves this process (tls.h); the
 * host is looked up (resolve.h) and reached over TLS verified against the
 * host's trust store, given at birth; the guest's requests go on through
 * the HTTP rewriter (http.h), which puts the real value where the
 * placeholder was. A request this worker cannot pass is answered with an
 * HTTP error that says why, from Gantry.
 *
 * The channel, one JSON object a message: after its ready message the
 * worker sends {"op":"ca","pem":PEM}, the CA the guest is to trust. The
 * owner sends {"op":"bindings","secrets":[...],"bytes":N} (the secrets
 * as secret_store_injected describes them), then the N bytes of their
 * values in messages of "V" and at most EGRESS_VALUES_PIECE of them; and
 * {"op":"allowed","hosts":[...],"allowLocal":B}, the bound hosts the
 * egress policy lets the sandbox reach now (none until it comes) and
 * whether local addresses are let through. The worker sends
 * {"op":"event","kind","decision","secret", "host","reason"} for the audit: a value injected, a
 * placeholder seen going where its secret is not bound, a host refused and why. */
#ifndef GANTRY_EGRESS_EGRESS_H
#define GANTRY_EGRESS_EGRESS_H

#include <stddef.h>

#include "common/error.h"

#define EGRESS_WORKER_ROLE "__egress-worker"
#define EGRESS_WORKER_LOG  "worker-egress.log"

#define EGRESS_HOSTS_MAX     64
#define EGRESS_CONNS_MAX     128	       /* connections at once; more wait in the socket */
#define EGRESS_SETUP_MS	     15000	       /* handshake, look-up, connect, upstream handshake */
#define EGRESS_IDLE_MS	     (15 * 60000)      /* a relay with nothing either way */
#define EGRESS_TRUST_MAX     (8 * 1024 * 1024) /* the trust store's PEM */
#define EGRESS_WORKER_NOFILE 1024
#define EGRESS_VALUES_PIECE  (32 * 1024) /* the values' bytes in one message */

int egress_worker_main(int argc, char **argv);
/* Where a worker finds the hosts' trust store: the variable OpenSSL
 * reads, else Debian's bundle (ca-certificates). */
#define EGRESS_TRUST_ENV     "SSL_CERT_FILE"
#define EGRESS_TRUST_DEFAULT "/etc/ssl/certs/ca-certificates.crt"
/* The hosts' trust store, opened for a worker that reads it before it is
 * confined (EGRESS_TRUST_ENV, else EGRESS_TRUST_DEFAULT). */
int egress_trust_open(gantry_error_t *err);
/* The trust store, read whole from fd (closed), at most EGRESS_TRUST_MAX. */
int egress_trust_read(int fd, char **out, size_t *len, gantry_error_t *err);

#endif
