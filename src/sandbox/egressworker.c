/* The egress worker, the caller's side (see egressworker.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "egress/egress.h"
#include "net/net.h"
#include "sandbox/egressworker.h"
#include "secret/spec.h"
#include "worker/worker.h"

#define CONN_FD	 WORKER_FIRST_FD
#define TRUST_FD (WORKER_FIRST_FD + 1)

static const char *const egress_env[] = { "GANTRY_LOG", CONFINE_SECCOMP_ENV, NET_DNS_ENV, "TZ",
					  NULL };

char **egress_hosts(char *const *specs, size_t n, size_t *nr_hosts)
{
	char **v = NULL;

	*nr_hosts = 0;
	for (size_t i = 0; i < n; i++) {
		struct secret_spec sp;

		if (secret_spec_parse(specs[i], &sp, NULL) < 0)
			continue;
		for (size_t k = 0; sp.inject && k < sp.nr_hosts; k++) {
			bool seen = false;

			for (size_t j = 0; j < *nr_hosts; j++)
				seen |= strcmp(v[j], sp.hosts[k]) == 0;
			if (seen || *nr_hosts == EGRESS_HOSTS_MAX)
				continue;
			v = xrealloc(v, (*nr_hosts + 2) * sizeof(*v));
			v[(*nr_hosts)++] = xstrdup(sp.hosts[k]);
			v[*nr_hosts] = NULL;
		}
		secret_spec_free(&sp);
	}
	return v;
}

int egress_worker_start(struct egress_worker *w, char *const *hosts, size_t nr_hosts,
			bool allow_local, enum confine_mode mode, int log_fd, gantry_error_t *err)
{
	cleanup_free const char **args = xzalloc((8 + 2 * nr_hosts) * sizeof(*args));
	char conn_arg[16], trust_arg[16];
	cleanup_close int trust = -1;
	int pair[2], fds[2], n = 0;
	json_t *ca;
	bool eof;

	*w = EGRESS_WORKER_NONE;
	snprintf(conn_arg, sizeof(conn_arg), "%d", CONN_FD);
	snprintf(trust_arg, sizeof(trust_arg), "%d", TRUST_FD);
	args[n++] = "--conn-fd";
	args[n++] = conn_arg;
	args[n++] = "--trust-fd";
	args[n++] = trust_arg;
	for (size_t i = 0; i < nr_hosts; i++) {
		args[n++] = "--host";
		args[n++] = hosts[i];
	}
	if (allow_local)
		args[n++] = "--allow-local-net";
	if ((trust = egress_trust_open(err)) < 0)
		return -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
		return gantry_error_errno(err, "egress worker: socketpair");
	w->net_fd = pair[0];
	fds[0] = pair[1];
	fds[1] = trust;
	if (worker_spawn(&(struct worker_spawn){ .role = EGRESS_WORKER_ROLE,
						 .what = "egress worker",
						 .mode = mode,
						 .extra_ns = CONFINE_ROOT_UNPRIVILEGED,
						 .env = egress_env,
						 .args = args,
						 .log_fd = log_fd,
						 .fds = fds,
						 .nr_fds = 2 },
			 &w->pid, &w->chan, err) < 0) {
		close(pair[1]);
		egress_worker_stop(w);
		return -1;
	}
	close(pair[1]);
	if (worker_wait_ready(&w->pid, w->chan, EGRESS_WORKER_READY_MS, "egress worker",
			      &w->isolation, err) < 0) {
		egress_worker_stop(w);
		return gantry_error_prefix(err, "egress worker");
	}
	ca = worker_recv_json(w->chan, EGRESS_WORKER_READY_MS, &eof);
	if (json_string_value(json_object_get(ca, "pem")) == NULL) {
		json_decref(ca);
		egress_worker_stop(w);
		return gantry_error(err, EPROTO, "egress worker: no CA came");
	}
	w->ca_pem = xstrdup(json_string_value(json_object_get(ca, "pem")));
	json_decref(ca);
	return 0;
}

int egress_worker_bindings(struct egress_worker *w, struct secret_store *st, gantry_error_t *err)
{
	char *block = NULL;
	size_t size, len;
	json_t *desc;
	int r = 0;

	if (w->pid < 0)
		return 0;
	if (secret_store_injected(st, &desc, &block, &size, &len, err) < 0)
		return -1;
	if (worker_send_json(w->chan,
			     json_pack("{s:s,s:o,s:I}", "op", "bindings", "secrets", desc, "bytes",
				       (json_int_t)len),
			     NULL, 0) < 0)
		r = gantry_error_errno(err, "egress worker: its secrets");
	for (size_t at = 0; r == 0 && at < len; at += EGRESS_VALUES_PIECE) {
		size_t n = MIN(len - at, (size_t)EGRESS_VALUES_PIECE);
		char *piece = secret_alloc(n + 1);

		if (piece == NULL) {
			r = gantry_error(err, ENOMEM, "no room in the secret arena");
			break;
		}
		piece[0] = 'V';
		memcpy(piece + 1, block + at, n);
		if (send(w->chan, piece, n + 1, MSG_NOSIGNAL) != (ssize_t)(n + 1))
			r = gantry_error_errno(err, "egress worker: its secrets");
		secret_free(piece, n + 1);
	}
	secret_free(block, size);
	return r;
}

int egress_worker_allowed(struct egress_worker *w, char *const *hosts, bool allow_local,
			  gantry_error_t *err)
{
	size_t n = 0;

	if (w->pid < 0)
		return 0;
	while (hosts && hosts[n])
		n++;
	if (worker_send_json(w->chan,
			     json_pack("{s:s,s:o,s:b}", "op", "allowed", "hosts",
				       jsonh_from_strv(hosts, n), "allowLocal", allow_local),
			     NULL, 0) < 0)
		return gantry_error_errno(err, "egress worker: the hosts it may reach");
	return 0;
}

json_t *egress_worker_recv(struct egress_worker *w, bool *eof)
{
	return worker_recv_json(w->chan, 0, eof);
}

char *egress_ca_cmdline(const char *pem)
{
	const char *b = strstr(pem, "-----BEGIN CERTIFICATE-----");
	const char *e = b ? strstr(b, "-----END CERTIFICATE-----") : NULL;
	char *out, *o;

	if (e == NULL)
		return NULL;
	b += strlen("-----BEGIN CERTIFICATE-----");
	o = out = xmalloc((size_t)(e - b) + 1);
	for (; b < e; b++)
		if (*b != '\n' && *b != '\r')
			*o++ = *b;
	*o = '\0';
	return out;
}

void egress_worker_stop(struct egress_worker *w)
{
	int status;

	if (w->chan >= 0)
		close(w->chan);
	if (w->net_fd >= 0)
		close(w->net_fd);
	if (w->pid > 0)
		worker_stop(&w->pid, &status);
	free(w->ca_pem);
	json_decref(w->isolation);
	*w = EGRESS_WORKER_NONE;
}
