/* `gantry __mcp-worker`: the MCP gateway confined (see gateway.h). It is
 * handed the door the guest's dials reach it through and the hosts' trust
 * store, loads libcurl and reads the nameservers while it may, and is
 * then confined: the host's network (it calls the remotes) but an empty
 * root, no file, its own seccomp filter. The remotes' secrets come on its
 * channel once it is. One thread: the guest's sessions are served in
 * turn, each message answered before the next is read.
 *
 *   gantry __mcp-worker --listen-fd N --trust-fd N [--remote SPEC]... [--fs] */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/door.h"
#include "common/log.h"
#include "common/util.h"
#include "confine/confine.h"
#include "egress/egress.h"
#include "image/lazylib.h"
#include "mcp/gateway.h"
#include "net/dns.h"
#include "worker/worker.h"

#define MCP_WORKER_NOFILE   256
#define MCP_SECRETS_WAIT_MS 10000

struct args {
	int chan, listen_fd, trust_fd;
	bool fs;
	char *specs[MCP_REMOTES_MAX];
	size_t nr_specs;
	struct confine_opts confine;
};

static int load_filter(void *opaque, bool log, gantry_error_t *err)
{
	(void)opaque;
	return confine_filter_mcp(log, err);
}

static int own_arg(void *opaque, const char *opt, char **rest, int nr)
{
	struct args *a = opaque;
	const char *val = nr ? rest[0] : NULL;

	if (strcmp(opt, "--listen-fd") == 0)
		return parse_fd(val, &a->listen_fd) == 0 ? 2 : -1;
	if (strcmp(opt, "--trust-fd") == 0)
		return parse_fd(val, &a->trust_fd) == 0 ? 2 : -1;
	if (strcmp(opt, "--remote") == 0 && val && a->nr_specs < MCP_REMOTES_MAX) {
		a->specs[a->nr_specs++] = rest[0];
		return 2;
	}
	if (strcmp(opt, "--fs") == 0) {
		a->fs = true;
		return 1;
	}
	return -1;
}

static int parse_args(int argc, char **argv, struct args *a)
{
	*a = (struct args){ .chan = WORKER_CHAN, .listen_fd = -1, .trust_fd = -1 };
	if (confine_args_with(&a->confine, argc, argv, own_arg, a) < 0)
		return -1;
	a->confine.role = "mcp";
	a->confine.host_net = true;
	a->confine.load_filter = load_filter;
	a->confine.nofile = MCP_WORKER_NOFILE;
	return (a->listen_fd >= 0 && a->trust_fd >= 0 && (a->nr_specs || a->fs)) ||
			       a->confine.self_test ?
		       0 :
		       -1;
}

struct worker {
	struct mcp_gateway g;
	struct mcp_net net;
	struct sockaddr_in up[DNS_MAX_UPSTREAM];
	char *trust;
	int listen, chan;
	struct mcp_session sessions[MCP_SESSIONS_MAX];
};

static int setup(struct worker *w, const struct args *a, gantry_error_t *err)
{
	size_t len;

	signal(SIGPIPE, SIG_IGN);
	/* Every library is loaded and every file read now. */
	if (lazy_curl(err) < 0 || egress_trust_read(a->trust_fd, &w->trust, &len, err) < 0 ||
	    dns_upstreams(w->up, &w->net.nr_up, err) < 0)
		return -1;
	w->net = (struct mcp_net){ .up = w->up,
				   .nr_up = w->net.nr_up,
				   .trust = w->trust,
				   .trust_len = len };
	mcp_gateway_init(&w->g);
	w->g.fs = a->fs; /* the guest does its work: no root or user here */
	for (size_t i = 0; i < a->nr_specs; i++) {
		if (mcp_remote_open(&w->g.remotes[i], a->specs[i], false, err) < 0)
			return -1;
		w->g.remotes[i].net = &w->net;
		w->g.n++;
	}
	w->listen = a->listen_fd;
	w->chan = a->chan;
	for (size_t i = 0; i < MCP_SESSIONS_MAX; i++)
		w->sessions[i].fd = -1;
	return 0;
}

/* The remotes' secrets, in their order: the caller's first message. */
static int take_secrets(struct worker *w, gantry_error_t *err)
{
	bool eof;
	json_t *m = worker_recv_json(w->chan, MCP_SECRETS_WAIT_MS, &eof), *v;
	size_t i;
	int r = 0;

	if (m == NULL || strcmp(json_string_value(json_object_get(m, "op")) ?: "", "secrets") != 0 ||
	    json_array_size(json_object_get(m, "remotes")) != w->g.n) {
		json_decref(m);
		return gantry_error(err, EPROTO, "no secrets came");
	}
	json_array_foreach(json_object_get(m, "remotes"), i, v)
		if (r == 0)
			r = mcp_remote_secrets_take(&w->g.remotes[i], v, err);
	json_decref(m);
	return r;
}

static void accept_one(struct worker *w)
{
	int fd = door_accept(w->listen);

	if (fd < 0 && errno == EPIPE)
		close_fd(&w->listen); /* the run is ending: no dial comes any more */
	if (fd < 0)
		return;
	for (size_t i = 0; i < MCP_SESSIONS_MAX; i++)
		if (w->sessions[i].fd < 0) {
			mcp_session_init(&w->sessions[i], fd);
			return;
		}
	log_info("more than %d sessions: one refused", MCP_SESSIONS_MAX);
	close(fd);
}

static void loop(struct worker *w)
{
	for (;;) {
		struct pollfd p[2 + MCP_SESSIONS_MAX];
		int n;

		p[0] = (struct pollfd){ .fd = w->chan, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = w->listen, .events = POLLIN };
		for (size_t i = 0; i < MCP_SESSIONS_MAX; i++)
			p[2 + i] = (struct pollfd){ .fd = w->sessions[i].fd, .events = POLLIN };
		n = poll(p, 2 + MCP_SESSIONS_MAX, MCP_IDLE_S * 1000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return;
		if (p[0].revents) {
			/* A renewed credential, or the caller hung up: the run is over. */
			bool eof = false;
			json_t *m = worker_recv_json(w->chan, 0, &eof);

			if (m == NULL && (eof || !(p[0].revents & POLLIN)))
				return;
			if (strcmp(json_string_value(json_object_get(m, "op")) ?: "", "auth") == 0)
				mcp_gateway_auth(&w->g, m);
			json_decref(m);
			continue;
		}
		if (n == 0) {
			/* Idle as long as the bound: every session ends. */
			for (size_t i = 0; i < MCP_SESSIONS_MAX; i++)
				if (w->sessions[i].fd >= 0)
					mcp_session_end(&w->sessions[i]);
			continue;
		}
		if (p[1].revents)
			accept_one(w);
		for (size_t i = 0; i < MCP_SESSIONS_MAX; i++)
			if (p[2 + i].revents && w->sessions[i].fd >= 0 &&
			    !mcp_session_step(&w->g, &w->sessions[i]))
				mcp_session_end(&w->sessions[i]);
	}
}

static void handshake(int chan, const char *error, json_t *isolation)
{
	if (worker_send_json(chan, worker_ready_msg(error, isolation), NULL, 0) < 0)
		log_warn("channel: %s", strerror(errno));
}

int mcp_worker_main(int argc, char **argv)
{
	static struct worker w;
	gantry_error_t err = NULL;
	json_t *isolation;
	struct args a;
	int rc;

	log_init("mcp-worker", -1);
	if ((rc = confine_self_test_again(argc, argv, MCP_WORKER_ROLE,
					  CONFINE_ROOT_UNPRIVILEGED)) >= 0)
		return rc;
	if (parse_args(argc, argv, &a) < 0) {
		log_error("%s is for Gantry's own use: --listen-fd N --trust-fd N --remote SPEC...",
			  MCP_WORKER_ROLE);
		return 2;
	}
	if (a.confine.self_test)
		return confine_self_test(&a.confine);
	if (setup(&w, &a, &err) < 0) {
		log_error("%s", gantry_error_str(err));
		handshake(a.chan, gantry_error_str(err), NULL);
		gantry_error_free(&err);
		return 1;
	}
	isolation = confine_run(&a.confine, &err);
	if (isolation == NULL && err) {
		log_error("%s", gantry_error_str(err));
		handshake(a.chan, gantry_error_str(err), NULL);
		gantry_error_free(&err);
		return 1;
	}
	handshake(a.chan, NULL, isolation);
	json_decref(isolation);
	if (take_secrets(&w, &err) < 0) {
		log_error("%s", gantry_error_str(err));
		gantry_error_free(&err);
		return 1;
	}
	log_info("ready: %zu remote%s", w.g.n, w.g.n == 1 ? "" : "s");
	loop(&w);
	mcp_gateway_free(&w.g);
	return 0;
}
