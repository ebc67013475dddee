/* The network worker's start and end (see worker.h, worker_priv.h): its
 * command line, the DNS proxy's socket directory and its cleaner, signals,
 * the policy file, the confinement and the handshake, then the loop of
 * worker.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/files.h"
#include "common/json.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/util.h"
#include "confine/confine.h"
#include "net/spawn.h"
#include "net/worker.h"
#include "net/worker_priv.h"
#include "worker/worker.h"

struct args {
	int frame_fd, ctl_fd;
	struct sockaddr_in dns;
	bool have_dns;
	char **ports;
	int *port_fds; /* each port's host socket, bound by the caller; -1: none */
	size_t nr_ports;
	const char *policy;
	bool allow_local;
	struct sockaddr_in proxy[PROXY_IPS_MAX];
	size_t nr_proxy;
	bool proxy_enforce;
	int inject_fd;
	char **inject_hosts;
	size_t nr_inject;
	struct confine_opts confine; /* mode off: not confined */
};

static int parse_ip_port(const char *s, struct sockaddr_in *out)
{
	char ip[INET_ADDRSTRLEN];
	const char *colon = s ? strrchr(s, ':') : NULL;
	uint64_t port;

	if (colon == NULL || (size_t)(colon - s) >= sizeof(ip) ||
	    parse_u64(colon + 1, 65535, &port) < 0 || port == 0)
		return -1;
	memcpy(ip, s, (size_t)(colon - s));
	ip[colon - s] = '\0';
	*out = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	return inet_pton(AF_INET, ip, &out->sin_addr) == 1 ? 0 : -1;
}

static int load_filter(void *opaque, bool log, gantry_error_t *err)
{
	(void)opaque;
	return confine_filter_net(log, err);
}

static int own_arg(void *opaque, const char *opt, char **rest, int nr)
{
	struct args *a = opaque;
	const char *val = nr ? rest[0] : NULL;

	if (strcmp(opt, "--frame-fd") == 0)
		return parse_fd(val, &a->frame_fd) == 0 ? 2 : -1;
	if (strcmp(opt, "--ctl-fd") == 0)
		return parse_fd(val, &a->ctl_fd) == 0 ? 2 : -1;
	if (strcmp(opt, "--dns") == 0) {
		a->have_dns = true;
		return parse_ip_port(val, &a->dns) == 0 ? 2 : -1;
	}
	if (strcmp(opt, "-p") == 0 && val && a->nr_ports < MAX_FORWARDS) {
		a->port_fds[a->nr_ports] = -1;
		a->ports[a->nr_ports++] = rest[0];
		return 2;
	}
	if (strcmp(opt, "--bound-port") == 0 && nr >= 2 && a->nr_ports < MAX_FORWARDS &&
	    parse_fd(val, &a->port_fds[a->nr_ports]) == 0) {
		a->ports[a->nr_ports++] = rest[1];
		return 3;
	}
	if (strcmp(opt, "--policy") == 0 && val) {
		a->policy = rest[0];
		return 2;
	}
	if (strcmp(opt, "--allow-local-net") == 0) {
		a->allow_local = true;
		return 1;
	}
	/* Every proxy on one port. */
	if (strcmp(opt, "--proxy") == 0 && a->nr_proxy < PROXY_IPS_MAX &&
	    parse_ip_port(val, &a->proxy[a->nr_proxy]) == 0 &&
	    (a->nr_proxy == 0 || a->proxy[0].sin_port == a->proxy[a->nr_proxy].sin_port)) {
		a->nr_proxy++;
		return 2;
	}
	if (strcmp(opt, "--proxy-enforce") == 0) {
		a->proxy_enforce = true;
		return 1;
	}
	if (strcmp(opt, "--inject-fd") == 0)
		return parse_fd(val, &a->inject_fd) == 0 ? 2 : -1;
	if (strcmp(opt, "--inject-host") == 0 && val) {
		a->inject_hosts[a->nr_inject++] = rest[0];
		return 2;
	}
	return -1;
}

static int parse_args(int argc, char **argv, struct args *a)
{
	*a = (struct args){ .frame_fd = -1, .ctl_fd = -1, .inject_fd = -1 };
	a->ports = xzalloc(sizeof(char *) * ((size_t)argc + 1));
	a->port_fds = xzalloc(sizeof(int) * ((size_t)argc + 1));
	a->inject_hosts = xzalloc(sizeof(char *) * ((size_t)argc + 1));
	if (confine_args_with(&a->confine, argc, argv, own_arg, a) < 0)
		return -1;
	a->confine.role = "net";
	a->confine.host_net = true;
	a->confine.load_filter = load_filter;
	/* Root without a user namespace keeps the one capability a
	 * published port below 1024 needs. */
	a->confine.keep_bind_cap = geteuid() == 0 && !(a->confine.spawn.ns & CLONE_NEWUSER);
	return a->frame_fd >= 0 || a->confine.self_test ? 0 : -1;
}

static int nonblock(int fd, const char *what, gantry_error_t *err)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return gantry_error_errno(err, "%s", what);
	return 0;
}

/* Remove name in dir, whatever is there. */
static void unlinkat_in(const char *dir, const char *name)
{
	char path[PATH_MAX];

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) < sizeof(path))
		unlink(path);
}

/* A directory of the host's holds the DNS socket, and the filters will
 * not let us remove it: a child made now, before the layers, removes it
 * once we are gone (its end of a pipe we never write reads EOF, however we
 * end), and does nothing else. */
static int dns_dir_cleaner(struct worker *w, gantry_error_t *err)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return gantry_error_errno(err, "DNS proxy: pipe");
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return gantry_error_errno(err, "DNS proxy: fork");
	}
	if (pid == 0) {
		char c;

		signal(SIGINT, SIG_IGN); /* a Ctrl-C to the group: we go with the worker */
		signal(SIGTERM, SIG_IGN);
		if (dup2(p[0], 3) == 3)
			close_range(4, ~0U, 0);
		while (read(3, &c, 1) < 0 && errno == EINTR)
			;
		unlink(w->dns_path);
		unlinkat_in(w->dns_dir, "https.sock");
		rmdir(w->dns_dir);
		_exit(0);
	}
	close(p[0]);
	w->dns_cleaner = p[1];
	return 0;
}

/* The DNS proxy's Unix socket for TCP queries: in the worker's own root
 * when it has one (where libslirp finds it as /dns.sock once that is /),
 * else in a private directory. */
static int dns_socket_dir(struct worker *w, const struct args *a, gantry_error_t *err)
{
	const char *base = gantry_setting("XDG_RUNTIME_DIR");
	char *dir;

	if (confine_root_prepare(&a->confine)) {
		xasprintf(&w->dns_path, "%s/dns.sock", CONFINE_ROOT);
		w->dns_slirp_path = xstrdup("/dns.sock");
		return 0;
	}
	if (base == NULL || base[0] != '/' || access(base, W_OK) < 0)
		base = gantry_setting("TMPDIR");
	if (base == NULL || base[0] != '/' || access(base, W_OK) < 0)
		base = "/tmp";
	xasprintf(&dir, "%s/gantry-net-XXXXXX", base);
	if (mkdtemp(dir) == NULL) {
		free(dir);
		return gantry_error_errno(err, "DNS proxy: cannot make a directory in %s", base);
	}
	w->dns_dir = dir;
	xasprintf(&w->dns_path, "%s/dns.sock", dir);
	w->dns_slirp_path = xstrdup(w->dns_path);
	if (strlen(w->dns_path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return gantry_error(err, 0, "DNS proxy: socket path `%s` too long", w->dns_path);
	return a->confine.mode == CONFINE_OFF ? 0 : dns_dir_cleaner(w, err);
}

static int signals(struct worker *w, gantry_error_t *err)
{
	sigset_t set;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0 ||
	    (w->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0)
		return gantry_error_errno(err, "signalfd");
	return 0;
}

static int load_policy(const char *path, struct policy **out, gantry_error_t *err)
{
	cleanup_free char *buf = NULL;
	size_t len;

	*out = NULL;
	if (read_file_max(path, POLICY_FILE_MAX, &buf, &len, err) < 0)
		return -1;
	if (buf == NULL)
		return gantry_error(err, ENOENT, "policy `%s`", path);
	if (policy_parse(buf, len, path, out, err) < 0)
		return gantry_error_prefix(err, "policy `%s`", path);
	return 0;
}

/* The listener libslirp dials for HTTPS to the gateway, beside the DNS
 * proxy's socket (and gone with it). */
static int https_setup(struct worker *w, const struct args *a, gantry_error_t *err)
{
	char *slash = strrchr(w->dns_path, '/');
	cleanup_free char *dir = xstrndup(w->dns_path, (size_t)(slash - w->dns_path));
	const char *in_root = strrchr(w->dns_slirp_path, '/');
	cleanup_free char *path = NULL;

	w->inject_fd = a->inject_fd;
	w->inject_hosts = xzalloc((a->nr_inject + 1) * sizeof(char *));
	for (size_t i = 0; i < a->nr_inject; i++)
		w->inject_hosts[w->nr_inject++] = xstrdup(a->inject_hosts[i]);
	xasprintf(&path, "%s/https.sock", dir);
	w->https_listen =
		unix_listen(path, DNS_TCP_BACKLOG, err); /* as DNS's, for the same reason */
	if (w->https_listen < 0)
		return gantry_error_prefix(err, "HTTPS to the egress worker");
	if (nonblock(w->https_listen, "HTTPS listener", err) < 0 ||
	    nonblock(w->inject_fd, "egress worker's socket", err) < 0)
		return -1;
	/* libslirp dials it by the path it has in our root, as the DNS one. */
	xasprintf(&w->https_path, "%.*shttps.sock", (int)(in_root - w->dns_slirp_path + 1),
		  w->dns_slirp_path);
	w->filter.https = true;
	return 0;
}

static int setup(struct worker *w, const struct args *a, gantry_error_t *err)
{
	const struct dns_hooks hooks = { .opaque = w,
					 .udp_answer = worker_dns_answer,
					 .allow = worker_dns_allow,
					 .learn = worker_dns_learn,
					 .learned = worker_dns_learned,
					 .intercept = worker_dns_intercept,
					 .ttl_cap = POLICY_TTL_CAP };
	struct policy *policy = NULL;
	struct port_spec s;

	w->frame_fd = a->frame_fd;
	w->ctl_fd = a->ctl_fd;
	filter_init(&w->filter, now_ms());
	w->traffic = traffic_new();
	w->rx = xmalloc(NET_FRAME_MAX + 1);
	w->learned = learned_new();
	w->flows = flows_new();
	w->acks = ack_hold_new();
	for (size_t i = 0; i < a->nr_proxy; i++)
		w->proxy_ips[w->nr_proxy_ips++] = ntohl(a->proxy[i].sin_addr.s_addr);
	w->proxy_port = a->nr_proxy ? ntohs(a->proxy[0].sin_port) : 0;
	w->proxy_enforce = a->proxy_enforce && a->nr_proxy;
	if (a->policy && load_policy(a->policy, &policy, err) < 0)
		return -1;
	worker_policy_install(w, policy, a->allow_local);
	if (signals(w, err) < 0 || nonblock(w->frame_fd, "frame fd", err) < 0 ||
	    (w->ctl_fd >= 0 && nonblock(w->ctl_fd, "control fd", err) < 0))
		return -1;
	if (dns_socket_dir(w, a, err) < 0)
		return -1;
	if (a->inject_fd >= 0 && https_setup(w, a, err) < 0)
		return -1;
	if (dns_proxy_new(&w->dns, &hooks, a->have_dns ? &a->dns : NULL, a->have_dns ? 1 : 0,
			  w->dns_path, err) < 0)
		return gantry_error_prefix(err, "DNS proxy");
	if (w->dns_cleaner >= 0) /* it removes the socket once we are gone */
		dns_proxy_keep_path(w->dns);
	w->nat.send = worker_slirp_send;
	w->nat.opaque = w;
	if (nat_init(&w->nat, w->dns_slirp_path, err) < 0)
		return -1;
	if (w->https_path && nat_add_unix(&w->nat, w->https_path, 443, err) < 0)
		return -1;
	for (size_t i = 0; i < a->nr_ports; i++)
		if (worker_publish(w, a->ports[i], a->port_fds[i], &s, err) < 0)
			return -1;
	return 0;
}

static void teardown(struct worker *w)
{
	struct out_frame *f;
	struct forward *fw;

	nat_cleanup(&w->nat);
	if (w->dns)
		dns_proxy_free(w->dns);
	/* Where a cleaner waits, it removes them once we have exited. */
	if (w->dns_path && w->dns_cleaner < 0)
		unlink(w->dns_path);
	if (w->dns_dir && w->dns_cleaner < 0) {
		unlinkat_in(w->dns_dir, "https.sock");
		rmdir(w->dns_dir);
	}
	free(w->dns_path);
	free(w->dns_slirp_path);
	free(w->dns_dir);
	if (w->https_listen >= 0)
		close(w->https_listen);
	free(w->https_path);
	strv_free(w->inject_hosts);
	while ((f = w->out_head)) {
		w->out_head = f->next;
		free(f);
	}
	while ((fw = w->forwards)) {
		w->forwards = fw->next;
		free(fw);
	}
	if (w->traffic)
		traffic_free(w->traffic);
	policy_free(w->policy);
	if (w->learned)
		learned_free(w->learned);
	if (w->flows)
		flows_free(w->flows);
	ack_hold_free(w->acks);
	free(w->rx);
	free(w->fds);
}

/* The first message (worker/worker.h). */
static void handshake(int ctl_fd, const char *error, json_t *isolation)
{
	json_t *j = worker_ready_msg(error, isolation);
	cleanup_free char *s = NULL;

	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (ctl_fd >= 0 && s && send(ctl_fd, s, strlen(s), MSG_NOSIGNAL) < 0)
		log_warn("control socket: %s", strerror(errno));
}

/* After set-up, before anything from the guest is read: the layers of
 * confine.h, and the report. NULL with *err set when the mode is required
 * and a property does not hold. */
static json_t *confine(struct args *a, gantry_error_t *err)
{
	a->confine.nofile = NET_WORKER_NOFILE;
	return confine_run(&a->confine, err);
}

int net_worker_main(int argc, char **argv)
{
	static struct worker w = { .frame_fd = -1,
				   .ctl_fd = -1,
				   .sig_fd = -1,
				   .dns_cleaner = -1,
				   .inject_fd = -1,
				   .https_listen = -1 };
	gantry_error_t err = NULL;
	json_t *isolation;
	struct args a;
	int rc;

	log_init("net-worker", -1);
	/* Started by hand: started again as a sandbox starts it. */
	if ((rc = confine_self_test_again(argc, argv, NET_WORKER_ROLE,
					  CONFINE_ROOT_UNPRIVILEGED)) >= 0)
		return rc;
	if (parse_args(argc, argv, &a) < 0) {
		log_error("%s is for Gantry's own use: --frame-fd N [--ctl-fd N] [--dns IP:PORT] "
			  "[-p SPEC | --bound-port FD SPEC]... [--policy FILE] [--allow-local-net] "
			  "[--proxy IP:PORT]... [--proxy-enforce]",
			  NET_WORKER_ROLE);
		free(a.ports);
		free(a.port_fds);
		free(a.inject_hosts);
		return 2;
	}
	if (a.confine.self_test) {
		free(a.ports);
		free(a.port_fds);
		free(a.inject_hosts);
		a.confine.nofile = NET_WORKER_NOFILE;
		return confine_self_test(&a.confine);
	}
	if (setup(&w, &a, &err) < 0) {
		log_error("%s", gantry_error_str(err));
		handshake(a.ctl_fd, gantry_error_str(err), NULL);
		gantry_error_free(&err);
		teardown(&w);
		free(a.ports);
		free(a.port_fds);
		free(a.inject_hosts);
		return 1;
	}
	free(a.ports);
	free(a.port_fds);
	free(a.inject_hosts);
	isolation = confine(&a, &err);
	if (confine_root_prepare(&a.confine)) {
		/* The DNS socket is in our own root, which goes with us. */
		dns_proxy_keep_path(w.dns);
		free(w.dns_path);
		w.dns_path = NULL;
	}
	if (isolation == NULL && err) {
		log_error("%s", gantry_error_str(err));
		handshake(w.ctl_fd, gantry_error_str(err), NULL);
		gantry_error_free(&err);
		teardown(&w);
		return 1;
	}
	handshake(w.ctl_fd, NULL, isolation);
	json_decref(isolation);
	log_info("ready: %s/%d, gateway and DNS %s, host at %s", NET_GUEST_STR, NET_PREFIX,
		 NET_GATEWAY_STR, NET_HOST_STR);
	worker_loop(&w);
	teardown(&w);
	return 0;
}
