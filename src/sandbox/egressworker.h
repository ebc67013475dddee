/* Starting and feeding the egress worker (egress/egress.h has what it is
 * and its protocol), the caller's side: a sandbox's machine starts it
 * beside the network worker when the sandbox has injected secrets; the
 * supervisor gives it their values, the hosts the policy lets through, and
 * reads its audit events. */
#ifndef GANTRY_SANDBOX_EGRESSWORKER_H
#define GANTRY_SANDBOX_EGRESSWORKER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"
#include "confine/confine.h"
#include "egress/egress.h"
#include "secret/store.h"

#define EGRESS_WORKER_READY_MS 10000

struct egress_worker {
	pid_t pid; /* -1: none, or reaped */
	int chan;
	int net_fd;	   /* the network worker's end for the connections, until it has it */
	char *ca_pem;	   /* the CA the guest trusts */
	json_t *isolation; /* its report */
};

#define EGRESS_WORKER_NONE ((struct egress_worker){ .pid = -1, .chan = -1, .net_fd = -1 })

/* The hosts the injected secrets among specs (secret/spec.h) are bound
 * to, each once (NULL-terminated; none: NULL). */
char **egress_hosts(char *const *specs, size_t n, size_t *nr_hosts);

/* Start it for hosts, its stderr on log_fd, and wait (bounded) until it
 * is confined and has made its CA. */
int egress_worker_start(struct egress_worker *w, char *const *hosts, size_t nr_hosts,
			bool allow_local, enum confine_mode mode, int log_fd, gantry_error_t *err);
/* The injected secrets of st, resolved now, and the bound hosts the
 * policy lets the sandbox reach (NULL-terminated). */
int egress_worker_bindings(struct egress_worker *w, struct secret_store *st, gantry_error_t *err);
int egress_worker_allowed(struct egress_worker *w, char *const *hosts, bool allow_local,
			  gantry_error_t *err);
/* What it sent (its channel readable): an event, or NULL (*eof: gone). */
json_t *egress_worker_recv(struct egress_worker *w, bool *eof);
/* The CA as gantry-init takes it: the certificate's base64, one line. */
char *egress_ca_cmdline(const char *pem);
void egress_worker_stop(struct egress_worker *w);

#endif
