/* The egress worker (see egress.h): its start, its channel, and each
 * connection's way from the guest's TLS to the host's, on one thread that
 * never blocks: every socket is in one poll set. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/json.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/util.h"
#include "confine/confine.h"
#include "egress/ssl.h"
#include "egress/worker_priv.h"
#include "worker/worker.h"

/* ---- the audit --------------------------------------------------------- */

void egress_event(struct egress *e, const char *kind, const char *decision, const char *secret,
		  const char *host, const char *reason)
{
	json_t *j =
		json_pack("{s:s,s:s,s:s,s:s?,s:s?,s:s?}", "op", "event", "kind", kind, "decision",
			  decision, "secret", secret, "host", host, "reason", reason);
	cleanup_free char *s = json_dumps(j, JSON_COMPACT);

	json_decref(j);
	if (s == NULL || send(e->chan, s, strlen(s), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		e->events_lost++;
}

/* ---- bindings ---------------------------------------------------------- */

static void bindings_free(struct egress *e)
{
	for (size_t i = 0; i < e->nr_b; i++) {
		strv_free(e->b[i].hosts);
		free(e->b[i].header);
		free(e->b[i].format);
	}
	free(e->b);
	e->b = NULL;
	e->nr_b = 0;
	secret_free(e->values, e->values_size);
	e->values = NULL;
	e->values_size = 0;
}

bool egress_has_host(char *const *hosts, const char *host)
{
	for (size_t i = 0; hosts && hosts[i]; i++)
		if (strcmp(hosts[i], host) == 0)
			return true;
	return false;
}

/* The next message on the channel, the values of a bindings message: n
 * bytes straight into the arena (the owner sends it right behind). */
static int values_recv(struct egress *e, size_t n, gantry_error_t *err)
{
	struct pollfd p = { .fd = e->chan, .events = POLLIN };
	uint8_t *piece = secret_alloc(EGRESS_VALUES_PIECE + 1);
	size_t got = 0;
	ssize_t r;
	int rc = 0;

	e->values = secret_alloc(n + 1);
	if (e->values == NULL || piece == NULL) {
		secret_free(piece, EGRESS_VALUES_PIECE + 1);
		return gantry_error(err, ENOMEM, "no room in the secret arena");
	}
	e->values_size = n + 1;
	/* Pieces of "V" and up to EGRESS_VALUES_PIECE bytes, back to back
	 * behind the bindings; anything else is not ours to take. */
	while (got < n && rc == 0) {
		if (poll(&p, 1, 1000) != 1) {
			rc = gantry_error(err, ETIMEDOUT, "the values did not come");
			break;
		}
		r = recv(e->chan, piece, EGRESS_VALUES_PIECE + 1, MSG_DONTWAIT);
		if (r < 2 || piece[0] != 'V' || (size_t)r - 1 > n - got)
			rc = gantry_error(err, EPROTO, "the values came malformed");
		else
			memcpy(e->values + got, piece + 1, (size_t)r - 1), got += (size_t)r - 1;
	}
	secret_free(piece, EGRESS_VALUES_PIECE + 1);
	return rc;
}

static int bindings_take(struct egress *e, json_t *j, gantry_error_t *err)
{
	json_t *list = json_object_get(j, "secrets"), *o;
	json_int_t bytes = json_integer_value(json_object_get(j, "bytes"));
	size_t i, at = 0;

	bindings_free(e);
	if (!json_is_array(list) || bytes < 0 || bytes > SECRETS_BYTES_MAX ||
	    json_array_size(list) > SECRETS_MAX)
		return gantry_error(err, EPROTO, "bindings: malformed");
	if (bytes && values_recv(e, (size_t)bytes, err) < 0)
		return -1;
	e->b = xzalloc((json_array_size(list) + 1) * sizeof(*e->b));
	json_array_foreach(list, i, o)
	{
		struct binding *b = &e->b[e->nr_b];
		const char *name = json_string_value(json_object_get(o, "name"));
		const char *ph = json_string_value(json_object_get(o, "placeholder"));
		json_t *len = json_object_get(o, "length");
		size_t nr;

		if (name == NULL || ph == NULL || strlen(name) > SECRET_NAME_MAX ||
		    strlen(ph) != SECRET_PLACEHOLDER_LEN)
			return gantry_error(err, EPROTO, "bindings: secret %zu malformed", i);
		snprintf(b->name, sizeof(b->name), "%s", name);
		snprintf(b->placeholder, sizeof(b->placeholder), "%s", ph);
		if (jsonh_strv(o, "hosts", SECRET_HOSTS_MAX, &b->hosts, &nr, err) < 0 ||
		    jsonh_string(o, "header", false, &b->header, err) < 0 ||
		    jsonh_string(o, "format", false, &b->format, err) < 0)
			return gantry_error_prefix(err, "bindings");
		if (json_is_integer(len) && json_integer_value(len) >= 0 &&
		    (size_t)json_integer_value(len) <= (size_t)bytes - at) {
			b->value = e->values + at;
			b->len = (size_t)json_integer_value(len);
			at += b->len;
		}
		e->nr_b++;
	}
	log_info("%zu injected secret%s", e->nr_b, e->nr_b == 1 ? "" : "s");
	return 0;
}

/* ---- the channel ------------------------------------------------------- */

static void chan_read(struct egress *e)
{
	gantry_error_t err = NULL;
	bool eof = false;
	json_t *j = worker_recv_json(e->chan, 0, &eof);
	const char *op;

	if (j == NULL) {
		if (eof) {
			log_info("the channel closed: stopping");
			e->done = true;
		}
		return;
	}
	op = json_string_value(json_object_get(j, "op"));
	if (op && strcmp(op, "bindings") == 0) {
		if (bindings_take(e, j, &err) < 0) {
			/* A message of the owner's may have gone with it: until
			 * the next, no host is reached either (fail closed). */
			log_warn("%s: no secret is injected, no host reached",
				 gantry_error_str(err));
			bindings_free(e);
			strv_free(e->allowed);
			e->allowed = NULL;
			gantry_error_free(&err);
		}
	} else if (op && strcmp(op, "allowed") == 0) {
		size_t nr;

		strv_free(e->allowed);
		e->allowed = NULL;
		e->allow_local = json_is_true(json_object_get(j, "allowLocal"));
		if (jsonh_strv(j, "hosts", EGRESS_HOSTS_MAX, &e->allowed, &nr, &err) < 0) {
			log_warn("allowed hosts: %s", gantry_error_str(err));
			gantry_error_free(&err);
		}
	}
	json_decref(j);
}

/* ---- the loop ---------------------------------------------------------- */

enum { FD_SIG, FD_CHAN, FD_CONN, FD_FIRST };

static void loop(struct egress *e)
{
	struct pollfd fds[FD_FIRST + 2 * EGRESS_CONNS_MAX];
	struct conn *who[2 * EGRESS_CONNS_MAX];

	while (!e->done) {
		size_t n = FD_FIRST;
		uint64_t now = now_ms(), next = now + 1000;
		int r;

		fds[FD_SIG] = (struct pollfd){ .fd = e->sig_fd, .events = POLLIN };
		fds[FD_CHAN] = (struct pollfd){ .fd = e->chan, .events = POLLIN };
		fds[FD_CONN] =
			(struct pollfd){ .fd = e->nr_conns < EGRESS_CONNS_MAX ? e->conn_fd : -1,
					 .events = POLLIN };
		for (size_t i = 0, left = e->nr_conns; i < EGRESS_CONNS_MAX && left; i++) {
			struct conn *c = &e->conns[i];
			int gfd = c->gfd, ufd = c->st == C_LOOKUP ? c->lk.fd : c->ufd;
			short uwant = c->st == C_LOOKUP ? POLLIN : c->uwant;

			if (!c->used)
				continue;
			left--;
			if (c->st != C_RELAY && c->deadline < next)
				next = c->deadline;
			if (c->st == C_LOOKUP && c->lk.deadline < next)
				next = c->lk.deadline; /* the next nameserver's turn */
			if (c->busy)
				next = now;
			fds[n] = (struct pollfd){ .fd = c->gwant ? gfd : -1, .events = c->gwant };
			who[n++ - FD_FIRST] = c;
			fds[n] = (struct pollfd){ .fd = uwant ? ufd : -1, .events = uwant };
			who[n++ - FD_FIRST] = c;
		}
		r = poll(fds, n, next > now ? (int)(next - now) : 0);
		if (r < 0 && errno != EINTR) {
			log_error("poll: %s", strerror(errno));
			return;
		}
		if (fds[FD_SIG].revents & POLLIN) {
			log_info("stopping on a signal");
			return;
		}
		if (fds[FD_CHAN].revents)
			chan_read(e);
		if (fds[FD_CONN].revents & (POLLIN | POLLHUP | POLLERR))
			conn_take(e);
		now = now_ms();
		for (size_t i = FD_FIRST; i + 1 < n; i += 2) {
			struct conn *c = who[i - FD_FIRST];
			bool woke = fds[i].revents || fds[i + 1].revents;

			if (!c->used)
				continue;
			if (!woke && c->st == C_RELAY && now - c->active > EGRESS_IDLE_MS) {
				conn_end(e, c);
				continue;
			}
			if (!woke && !c->busy &&
			    (c->st == C_RELAY ? true
					      : now <= c->deadline && (c->st != C_LOOKUP ||
								       now < c->lk.deadline)))
				continue;
			if (conn_step(e, c, now, fds[i].revents, fds[i + 1].revents) < 0)
				conn_end(e, c);
		}
	}
}

/* ---- start ------------------------------------------------------------- */

struct args {
	int chan, conn_fd, trust_fd;
	char **hosts;
	size_t nr_hosts;
	bool allow_local;
	struct confine_opts confine;
};

static int load_filter(void *opaque, bool log, gantry_error_t *err)
{
	(void)opaque;
	return confine_filter_egress(log, err);
}

static int own_arg(void *opaque, const char *opt, char **rest, int nr)
{
	struct args *a = opaque;
	const char *val = nr ? rest[0] : NULL;

	if (strcmp(opt, "--conn-fd") == 0)
		return parse_fd(val, &a->conn_fd) == 0 ? 2 : -1;
	if (strcmp(opt, "--chan-fd") == 0)
		return parse_fd(val, &a->chan) == 0 ? 2 : -1;
	if (strcmp(opt, "--trust-fd") == 0)
		return parse_fd(val, &a->trust_fd) == 0 ? 2 : -1;
	if (strcmp(opt, "--host") == 0 && val && a->nr_hosts < EGRESS_HOSTS_MAX) {
		a->hosts[a->nr_hosts++] = rest[0];
		return 2;
	}
	if (strcmp(opt, "--allow-local-net") == 0) {
		a->allow_local = true;
		return 1;
	}
	return -1;
}

static int parse_args(int argc, char **argv, struct args *a)
{
	*a = (struct args){ .chan = WORKER_CHAN, .conn_fd = -1, .trust_fd = -1 };
	a->hosts = xzalloc(sizeof(char *) * ((size_t)argc + 1));
	if (confine_args_with(&a->confine, argc, argv, own_arg, a) < 0)
		return -1;
	a->confine.role = "egress";
	a->confine.host_net = true;
	a->confine.load_filter = load_filter;
	a->confine.nofile = EGRESS_WORKER_NOFILE;
	return (a->conn_fd >= 0 && a->trust_fd >= 0 && a->nr_hosts) || a->confine.self_test ? 0
											    : -1;
}

int egress_trust_open(gantry_error_t *err)
{
	/* A setting: the caller's, as its front end resolved them. */
	const char *path = gantry_setting(EGRESS_TRUST_ENV);
	int fd;

	if (path == NULL)
		path = EGRESS_TRUST_DEFAULT;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return gantry_error_errno(err,
					  "the hosts' trust store `%s` (%s, else Debian's "
					  "ca-certificates)",
					  path, EGRESS_TRUST_ENV);
	return fd;
}

int egress_trust_read(int fd, char **out, size_t *len, gantry_error_t *err)
{
	size_t cap = 256 * 1024;
	ssize_t n;

	*out = xmalloc(cap + 1);
	*len = 0;
	while ((n = read(fd, *out + *len, cap - *len)) > 0) {
		*len += (size_t)n;
		if (*len == cap) {
			if (cap >= EGRESS_TRUST_MAX)
				return gantry_error(err, EFBIG, "the trust store is over %d MiB",
						    EGRESS_TRUST_MAX >> 20);
			cap *= 2;
			*out = xrealloc(*out, cap + 1);
		}
	}
	if (n < 0)
		return gantry_error_errno(err, "the trust store");
	(*out)[*len] = '\0';
	close(fd);
	return 0;
}

static int setup(struct egress *e, const struct args *a, gantry_error_t *err)
{
	cleanup_free char *trust = NULL;
	struct egress_http *probe = NULL;
	sigset_t set;
	size_t len;

	e->chan = a->chan;
	e->conn_fd = a->conn_fd;
	e->allow_local = a->allow_local;
	/* The arena is mapped and locked now, while mlock may be called. */
	secret_free(secret_alloc(1), 1);
	for (size_t i = 0; i < EGRESS_CONNS_MAX; i++)
		e->conns[i].gfd = e->conns[i].ufd = -1;
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0 ||
	    (e->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0)
		return gantry_error_errno(err, "signalfd");
	/* Every library is loaded now: the confined worker opens no file. */
	if (egress_ssl_load(err) < 0 || egress_http_new(&probe, err) < 0)
		return -1;
	egress_http_free(probe);
	if (egress_trust_read(a->trust_fd, &trust, &len, err) < 0)
		return -1;
	if (egress_tls_new(&e->tls, (const char *const *)a->hosts, a->nr_hosts, trust, len, err) <
	    0)
		return -1;
	if (dns_upstreams(e->up, &e->nr_up, err) < 0)
		return -1;
	policy_wall_host_addrs(&e->wall);
	return 0;
}

static void handshake(int chan, const char *error, json_t *isolation)
{
	json_t *j = worker_ready_msg(error, isolation);

	if (worker_send_json(chan, j, NULL, 0) < 0)
		log_warn("channel: %s", strerror(errno));
}

int egress_worker_main(int argc, char **argv)
{
	static struct egress e = { .chan = -1, .conn_fd = -1, .sig_fd = -1 };
	gantry_error_t err = NULL;
	json_t *isolation;
	struct args a;
	int rc;

	log_init("egress-worker", -1);
	if ((rc = confine_self_test_again(argc, argv, EGRESS_WORKER_ROLE,
					  CONFINE_ROOT_UNPRIVILEGED)) >= 0)
		return rc;
	if (parse_args(argc, argv, &a) < 0) {
		log_error("%s is for Gantry's own use: --conn-fd N --trust-fd N --host HOST... "
			  "[--chan-fd N] [--allow-local-net]",
			  EGRESS_WORKER_ROLE);
		free(a.hosts);
		return 2;
	}
	if (a.confine.self_test) {
		free(a.hosts);
		return confine_self_test(&a.confine);
	}
	if (setup(&e, &a, &err) < 0) {
		log_error("%s", gantry_error_str(err));
		handshake(a.chan, gantry_error_str(err), NULL);
		gantry_error_free(&err);
		free(a.hosts);
		return 1;
	}
	isolation = confine_run(&a.confine, &err);
	if (isolation == NULL && err) {
		log_error("%s", gantry_error_str(err));
		handshake(a.chan, gantry_error_str(err), NULL);
		gantry_error_free(&err);
		free(a.hosts);
		return 1;
	}
	handshake(a.chan, NULL, isolation);
	json_decref(isolation);
	worker_send_json(a.chan,
			 json_pack("{s:s,s:s}", "op", "ca", "pem", egress_tls_ca_pem(e.tls)), NULL,
			 0);
	log_info("ready: HTTPS to %zu bound host%s", a.nr_hosts, a.nr_hosts == 1 ? "" : "s");
	free(a.hosts);
	loop(&e);
	for (size_t i = 0; i < EGRESS_CONNS_MAX; i++)
		if (e.conns[i].used)
			conn_end(&e, &e.conns[i]);
	bindings_free(&e);
	strv_free(e.allowed);
	egress_tls_free(e.tls);
	return 0;
}
