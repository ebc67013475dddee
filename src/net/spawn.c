/* Starting the network worker (see spawn.h) as every worker starts
 * (worker/worker.h): its channel, fd 3, is its control socket; fd 4 its end
 * of the frame socketpair; stderr its log. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/child.h"
#include "common/util.h"
#include "net/net.h"
#include "net/portspec.h"
#include "net/spawn.h"
#include "worker/worker.h"

#define NET_FRAME_FD WORKER_FIRST_FD /* the one descriptor given at birth */

/* What the worker keeps of our environment: its log level and seccomp
 * mode, its DNS upstream override, where its DNS socket may live without a
 * mount namespace, and the time zone of its log. */
static const char *const net_worker_env[] = {
	"GANTRY_LOG", CONFINE_SECCOMP_ENV, NET_DNS_ENV, "XDG_RUNTIME_DIR", "TMPDIR", "TZ", NULL
};

int net_worker_request(struct net_worker *w, json_t *req, json_t **answer, gantry_error_t *err)
{
	return net_worker_request_fd(w, req, -1, answer, err);
}

int net_worker_request_fd(struct net_worker *w, json_t *req, int fd, json_t **answer,
			  gantry_error_t *err)
{
	bool eof;
	json_t *j;

	*answer = NULL;
	j = worker_request(w->ctl_fd, &w->next_id, json_incref(req), fd >= 0 ? &fd : NULL,
			   fd >= 0 ? 1 : 0, NET_WORKER_READY_MS, &eof);
	if (j == NULL)
		return gantry_error(err, eof ? EPIPE : ETIMEDOUT, "the network worker %s",
				    eof ? "hung up" : "did not answer");
	if (json_is_true(json_object_get(j, "ok"))) {
		*answer = j;
		return 0;
	}
	{
		cleanup_free char *shown = worker_line(j, "error", "refused");

		json_decref(j);
		return gantry_error(err, 0, "%s", shown);
	}
}

/* The policy the worker is to start with. */
static int give_policy(struct net_worker *w, const struct net_worker_opts *o, gantry_error_t *err)
{
	json_t *req, *answer;
	int r;

	if (o->policy == NULL && !o->allow_local)
		return 0; /* its default */
	req = json_pack("{s:s, s:O?, s:b}", "op", NET_CTL_POLICY, "policy", o->policy, "allowLocal",
			o->allow_local);
	r = net_worker_request(w, req, &answer, err);
	json_decref(req);
	json_decref(answer);
	return r < 0 ? gantry_error_prefix(err, "network policy") : 0;
}

/* The published ports, each host socket bound here and handed over with
 * its publish: the worker, as root, holds no identity on the host and
 * could not bind a port below 1024 itself. */
static int give_ports(struct net_worker *w, const struct net_worker_opts *o, gantry_error_t *err)
{
	for (size_t i = 0; i < o->nr_ports; i++) {
		struct port_spec p;
		char canon[PORT_SPEC_MAX];
		json_t *req, *answer;
		int fd, r;

		if (port_spec_parse(o->ports[i], &p, err) < 0 || port_spec_bind(&p, &fd, err) < 0)
			return -1;
		port_spec_format(&p, canon);
		req = json_pack("{s:s, s:s}", "op", NET_CTL_PUBLISH, "spec", canon);
		r = net_worker_request_fd(w, req, fd, &answer, err);
		close(fd);
		json_decref(req);
		json_decref(answer);
		if (r < 0)
			return -1;
	}
	return 0;
}

int net_worker_spawn(struct net_worker *w, const struct net_worker_opts *o, int log_fd,
		     gantry_error_t *err)
{
	cleanup_free const char **args =
		xzalloc((10 + 2 * o->nr_proxy_ips + 2 * o->nr_inject) * sizeof(*args));
	char proxies[NET_PROXY_IPS_MAX][INET_ADDRSTRLEN + 8];
	char frame_arg[16], ctl_arg[16], inject_arg[16];
	int fds[2];
	cleanup_close int frame_w = -1;
	int frame[2], buf = NET_WORKER_SOCKBUF, n = 0;

	*w = NET_WORKER_NONE;
	snprintf(frame_arg, sizeof(frame_arg), "%d", NET_FRAME_FD);
	snprintf(ctl_arg, sizeof(ctl_arg), "%d", WORKER_CHAN);
	args[n++] = "--frame-fd";
	args[n++] = frame_arg;
	args[n++] = "--ctl-fd";
	args[n++] = ctl_arg;
	for (size_t i = 0; i < o->nr_proxy_ips && i < NET_PROXY_IPS_MAX; i++) {
		struct in_addr a = { .s_addr = htonl(o->proxy_ips[i]) };
		char ip[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &a, ip, sizeof(ip));
		snprintf(proxies[i], sizeof(proxies[i]), "%s:%u", ip, o->proxy_port);
		args[n++] = "--proxy";
		args[n++] = proxies[i];
	}
	if (o->proxy_enforce && o->nr_proxy_ips)
		args[n++] = "--proxy-enforce";
	if (o->nr_inject) {
		snprintf(inject_arg, sizeof(inject_arg), "%d", NET_FRAME_FD + 1);
		args[n++] = "--inject-fd";
		args[n++] = inject_arg;
		for (size_t i = 0; i < o->nr_inject; i++) {
			args[n++] = "--inject-host";
			args[n++] = o->inject_hosts[i];
		}
	}
	args[n] = NULL;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, frame) < 0)
		return gantry_error_errno(err, "network worker: socketpair");
	w->vmm_fd = frame[0];
	frame_w = frame[1];
	/* Room for bursts of 64 KiB frames each way; best effort, the
	 * kernel caps them at its rmem_max/wmem_max. */
	for (int i = 0; i < 2; i++) {
		setsockopt(frame[i], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
		setsockopt(frame[i], SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	}
	if (fcntl(w->vmm_fd, F_SETFL, fcntl(w->vmm_fd, F_GETFL) | O_NONBLOCK) < 0) {
		gantry_error_errno(err, "network worker: fcntl");
		goto fail;
	}
	fds[0] = frame_w;
	fds[1] = o->inject_fd;
	if (worker_spawn(&(struct worker_spawn){ .role = NET_WORKER_ROLE,
						 .what = "network worker",
						 .mode = o->isolation,
						 .extra_ns = CONFINE_ROOT_UNPRIVILEGED,
						 .env = o->env ? o->env : net_worker_env,
						 .args = args,
						 .log_fd = log_fd,
						 .fds = fds,
						 .nr_fds = o->nr_inject ? 2 : 1 },
			 &w->pid, &w->ctl_fd, err) < 0)
		goto fail;
	return 0;
fail:
	net_worker_stop(w);
	return -1;
}

int net_worker_ready(struct net_worker *w, const struct net_worker_opts *o, gantry_error_t *err)
{
	if (worker_wait_ready(&w->pid, w->ctl_fd, NET_WORKER_READY_MS, "network worker",
			      &w->isolation, err) < 0)
		return gantry_error_prefix(err, "network worker");
	return give_policy(w, o, err) < 0 || give_ports(w, o, err) < 0 ? -1 : 0;
}

int net_worker_start(struct net_worker *w, const struct net_worker_opts *o, int log_fd,
		     gantry_error_t *err)
{
	if (net_worker_spawn(w, o, log_fd, err) < 0)
		return -1;
	if (net_worker_ready(w, o, err) < 0) {
		net_worker_stop(w);
		return -1;
	}
	return 0;
}

void net_worker_stop(struct net_worker *w)
{
	int status;

	json_decref(w->isolation);
	if (w->vmm_fd >= 0)
		close(w->vmm_fd);
	if (w->ctl_fd >= 0)
		close(w->ctl_fd);
	worker_stop(&w->pid, &status);
	*w = NET_WORKER_NONE;
}
