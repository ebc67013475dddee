/* Starting the network worker (see spawn.h): the gantry binary executed
 * afresh in its hidden role, in a session of its own (a Ctrl-C meant for
 * the guest's process must not take the link down), its stdin and stdout
 * /dev/null, stderr its log, fd 3 its end of the frame socketpair and fd 4
 * its end of the control socketpair. Executing (not only forking) keeps the
 * caller's threads and locks out of it. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/child.h"
#include "common/text.h"
#include "common/util.h"
#include "net/net.h"
#include "net/spawn.h"

#define WORKER_FRAME  3
#define WORKER_CTL    4
#define WORKER_LOWEST 16 /* the parent's fds sit above this before the dup2s */
#define WORKER_ERR    512

/* The arguments that tell a confined worker how it was started; filled
 * in after confine_fork, so they point at buffers made before it. */
struct spawn_args {
	char ns[24], userns[24];
};

/* Only async-signal-safe calls between fork and exec. */
static __attribute__((noreturn)) void worker_child(char *const argv[], int null, int logfd,
						   int frame, int ctl)
{
	setsid();
	if (dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(logfd, 2) < 0 ||
	    dup2(frame, WORKER_FRAME) < 0 || dup2(ctl, WORKER_CTL) < 0)
		child_fail("network worker", "dup2 failed");
	close_range(WORKER_CTL + 1, ~0U, 0);
	child_exec_self(argv, "network worker");
}

/* One message from fd by deadline: its length (MSG_TRUNC: the whole
 * length, which may exceed cap), 0 or -1 when the worker hung up or the
 * socket failed, -2 when nothing came in time. */
static ssize_t recv_within(int fd, char *buf, size_t cap, uint64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = now_ms();
		int r = now < deadline ? poll(&p, 1, (int)(deadline - now)) : 0;
		ssize_t n;

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			return -2;
		n = recv(fd, buf, cap, MSG_DONTWAIT | MSG_TRUNC);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		return n;
	}
}

/* The first message: {"ok":true}, or {"ok":false,"error":E}; EOF or
 * silence past the deadline are errors too. */
static int wait_first(struct net_worker *w, gantry_error_t *err)
{
	uint64_t deadline = now_ms() + NET_WORKER_READY_MS;
	char buf[32768];
	char why[64];
	json_error_t jerr;
	json_t *j;
	ssize_t n;
	int status = 0;

	n = recv_within(w->ctl_fd, buf, sizeof(buf) - 1, deadline);
	if (n == -2)
		return gantry_error(err, ETIMEDOUT, "the network worker was not ready in %d s",
				    NET_WORKER_READY_MS / 1000);
	if (n <= 0) {
		if (!child_reap_within(w->pid, 1000, &status)) {
			kill(w->pid, SIGKILL);
			child_reap_within(w->pid, 1000, &status);
		}
		w->pid = -1;
		child_describe_status(status, why, sizeof(why));
		return gantry_error(err, 0, "the network worker exited (%s) before it was ready",
				    why);
	}
	n = MIN(n, (ssize_t)sizeof(buf) - 1); /* cut short: no JSON, a bad message */
	buf[n] = '\0';
	j = json_loadb(buf, (size_t)n, 0, &jerr);
	if (json_is_true(json_object_get(j, "ok"))) {
		w->isolation = json_incref(json_object_get(j, "isolation"));
		json_decref(j);
		return 0;
	}
	{
		const char *e = json_string_value(json_object_get(j, "error"));
		cleanup_free char *shown =
			text_sanitized(e ? e : "a bad first message",
				       strlen(e ? e : "a bad first message"), WORKER_ERR);

		json_decref(j);
		return gantry_error(err, 0, "network worker: %s", shown);
	}
}

int net_worker_request(struct net_worker *w, json_t *req, json_t **answer, gantry_error_t *err)
{
	cleanup_free char *text = json_dumps(req, JSON_COMPACT);
	cleanup_free char *buf = xmalloc(NET_CTL_MSG_MAX + 1);
	uint64_t deadline = now_ms() + NET_WORKER_READY_MS;
	const char *e;
	json_t *j;
	ssize_t n;

	*answer = NULL;
	if (text == NULL)
		return gantry_error(err, ENOMEM, "network worker: encode a request");
	if (send(w->ctl_fd, text, strlen(text), MSG_NOSIGNAL) < 0)
		return gantry_error_errno(err, "network worker: send");
	n = recv_within(w->ctl_fd, buf, NET_CTL_MSG_MAX + 1, deadline);
	if (n == -2)
		return gantry_error(err, ETIMEDOUT, "the network worker did not answer");
	if (n <= 0 || n > NET_CTL_MSG_MAX)
		return gantry_error(err, 0, "the network worker hung up");
	j = json_loadb(buf, (size_t)n, 0, NULL);
	if (json_is_true(json_object_get(j, "ok"))) {
		*answer = j;
		return 0;
	}
	e = json_string_value(json_object_get(j, "error"));
	{
		cleanup_free char *shown = text_sanitized(e ? e : "refused",
							  strlen(e ? e : "refused"), WORKER_ERR);

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

int net_worker_spawn(struct net_worker *w, const struct net_worker_opts *o, int log_fd,
		     gantry_error_t *err)
{
	cleanup_free char **argv =
		xzalloc((16 + 2 * o->nr_ports + 2 * o->nr_proxy_ips) * sizeof(*argv));
	struct confine_spawn sp;
	struct spawn_args sa = { 0 };
	char proxies[NET_PROXY_IPS_MAX][INET_ADDRSTRLEN + 8];
	cleanup_close int null = -1, logfd = -1, frame_w = -1, ctl_w = -1;
	int frame[2], ctl[2], buf = NET_WORKER_SOCKBUF, n = 0;
	pid_t pid;

	*w = NET_WORKER_NONE;
	argv[n++] = "gantry";
	argv[n++] = NET_WORKER_ROLE;
	argv[n++] = "--frame-fd";
	argv[n++] = "3";
	argv[n++] = "--ctl-fd";
	argv[n++] = "4";
	for (size_t i = 0; i < o->nr_ports; i++) {
		argv[n++] = "-p";
		argv[n++] = o->ports[i];
	}
	for (size_t i = 0; i < o->nr_proxy_ips && i < NET_PROXY_IPS_MAX; i++) {
		struct in_addr a = { .s_addr = htonl(o->proxy_ips[i]) };
		char ip[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &a, ip, sizeof(ip));
		snprintf(proxies[i], sizeof(proxies[i]), "%s:%u", ip, o->proxy_port);
		argv[n++] = "--proxy";
		argv[n++] = proxies[i];
	}
	if (o->proxy_enforce && o->nr_proxy_ips)
		argv[n++] = "--proxy-enforce";
	argv[n++] = "--isolation";
	argv[n++] = (char *)confine_mode_name(o->isolation);
	argv[n++] = "--ns";
	argv[n++] = sa.ns;
	argv[n++] = "--userns-errno";
	argv[n++] = sa.userns;
	argv[n] = NULL;
	/* Everything the child needs is made here: between fork and exec
	 * nothing may allocate. */
	null = child_fd_above(open("/dev/null", O_RDWR | O_CLOEXEC), WORKER_LOWEST);
	logfd = child_fd_above(fcntl(log_fd, F_DUPFD_CLOEXEC, WORKER_LOWEST), WORKER_LOWEST);
	if (null < 0 || logfd < 0)
		return gantry_error_errno(err, "network worker: open its stdio");
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, frame) < 0)
		return gantry_error_errno(err, "network worker: socketpair");
	w->vmm_fd = child_fd_above(frame[0], WORKER_LOWEST);
	frame_w = child_fd_above(frame[1], WORKER_LOWEST);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0) {
		gantry_error_errno(err, "network worker: socketpair");
		goto fail;
	}
	w->ctl_fd = child_fd_above(ctl[0], WORKER_LOWEST);
	ctl_w = child_fd_above(ctl[1], WORKER_LOWEST);
	if (w->vmm_fd < 0 || frame_w < 0 || w->ctl_fd < 0 || ctl_w < 0) {
		gantry_error_errno(err, "network worker: fcntl");
		goto fail;
	}
	/* Room for bursts of 64 KiB frames each way; best effort, the
	 * kernel caps them at its rmem_max/wmem_max. */
	for (int i = 0; i < 2; i++) {
		int fd = i ? frame_w : w->vmm_fd;

		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	}
	if (fcntl(w->vmm_fd, F_SETFL, fcntl(w->vmm_fd, F_GETFL) | O_NONBLOCK) < 0) {
		gantry_error_errno(err, "network worker: fcntl");
		goto fail;
	}
	pid = confine_fork(o->isolation, 0, &sp);
	if (pid < 0) {
		gantry_error_errno(err, "network worker: fork");
		goto fail;
	}
	/* Both sides: the child says on its command line what it was given. */
	confine_spawn_format(&sp, sa.ns, sa.userns);
	if (pid == 0)
		worker_child(argv, null, logfd, frame_w, ctl_w);
	w->pid = pid;
	/* Only the worker holds its ends: its exit reads as EOF here. */
	close(steal_fd(&frame_w));
	close(steal_fd(&ctl_w));
	return 0;
fail:
	net_worker_stop(w);
	return -1;
}

int net_worker_ready(struct net_worker *w, const struct net_worker_opts *o, gantry_error_t *err)
{
	return wait_first(w, err) < 0 || give_policy(w, o, err) < 0 ? -1 : 0;
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
	if (w->pid > 0) {
		kill(w->pid, SIGTERM);
		if (!child_reap_within(w->pid, NET_WORKER_STOP_MS, &status)) {
			kill(w->pid, SIGKILL);
			child_reap_within(w->pid, NET_WORKER_STOP_MS, &status);
		}
	}
	*w = NET_WORKER_NONE;
}
