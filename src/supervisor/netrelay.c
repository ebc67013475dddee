/* The supervisor and the network worker (see supervisor_priv.h): ctl.sock
 * ops relayed over the worker's control socket without the loop ever
 * waiting on it, the live list of published ports, network-traffic.json
 * refreshed every SUP_TRAFFIC_MS, and a worker that dies: the guest's link
 * goes down, the sandbox runs on, daemon.log says so. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/child.h"
#include "common/files.h"
#include "common/json.h"
#include "common/log.h"
#include "common/text.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "net/net.h"
#include "net/policy.h"
#include "sandbox/ctl.h"
#include "supervisor/supervisor_priv.h"

#define NET_ERROR_MAX 512 /* of an error line the worker sends */
#define NET_GONE      "the network worker is gone: the guest's network link is down"

static const char *const op_names[] = {
	[NET_OP_PUBLISH] = NET_CTL_PUBLISH,	    [NET_OP_UNPUBLISH] = NET_CTL_UNPUBLISH,
	[NET_OP_TRAFFIC] = NET_CTL_TRAFFIC,	    [NET_OP_POLICY] = NET_CTL_POLICY,
	[NET_OP_POLICY_SHOW] = NET_CTL_POLICY_SHOW,
};

static void req_release(struct net_req *r)
{
	json_decref(r->policy);
	r->policy = NULL;
	if (r->has_fd)
		close(r->fd);
	r->has_fd = false;
}

void sup_net_init(struct sup *s, int ctl, char *const *live, size_t n)
{
	struct sup_net *net = &s->net;

	net->ctl = ctl;
	net->live = strv_dup(live, n);
	net->nr_live = n;
	memset(net->ephemeral, 0, sizeof(net->ephemeral));
	net->next_traffic = now_ms() + SUP_TRAFFIC_MS;
	if (net->msg == NULL)
		net->msg = xmalloc(NET_CTL_MSG_MAX + 1);
}

void sup_net_free(struct sup *s)
{
	strv_free(s->net.live);
	free(s->net.msg);
	s->net.live = NULL;
	s->net.msg = NULL;
	s->net.nr_live = 0;
}

/* --- answers to clients ---------------------------------------------------------------------- */

static void reply_ports(struct sup *s, struct client *c)
{
	json_t *a = json_array();

	for (size_t i = 0; i < s->net.nr_live; i++)
		json_array_append_new(a, json_pack("{s:s,s:b}", "spec", s->net.live[i], "ephemeral",
						   s->net.ephemeral[i]));
	client_reply_json(s, c, json_pack("{s:b,s:o}", "ok", 1, "ports", a));
}

void sup_net_client_gone(struct sup *s, struct client *c)
{
	if (s->net.sent.c == c)
		s->net.sent.c = NULL;
	for (size_t i = 0; i < s->net.queued; i++)
		if (s->net.queue[i].c == c)
			s->net.queue[i].c = NULL;
}

/* --- the live list --------------------------------------------------------------------------- */

static void live_add(struct sup_net *net, const char *spec, bool ephemeral)
{
	if (ports_add(&net->live, &net->nr_live, spec, NULL) == 0)
		net->ephemeral[net->nr_live - 1] = ephemeral;
}

static void live_remove(struct sup_net *net, size_t i)
{
	ports_remove(net->live, &net->nr_live, i);
	memmove(net->ephemeral + i, net->ephemeral + i + 1,
		(net->nr_live - i) * sizeof(net->ephemeral[0]));
}

static ssize_t live_find(struct sup_net *net, const char *spec)
{
	struct port_spec p;

	if (port_spec_parse(spec, &p, NULL) < 0)
		return -1;
	return ports_find(net->live, net->nr_live, &p);
}

/* What the worker did, kept: the live list, and (not ephemeral)
 * sandbox.json. The error, when saving failed. */
static int apply(struct sup *s, const struct net_req *r, gantry_error_t *err)
{
	struct sup_net *net = &s->net;
	struct sandbox *sb = &s->sb;
	struct port_spec p;
	ssize_t at;

	port_spec_parse(r->spec, &p, NULL);
	if (r->op == NET_OP_PUBLISH) {
		live_add(net, r->spec, r->ephemeral);
		if (r->ephemeral || ports_find(sb->ports, sb->nr_ports, &p) >= 0)
			return 0;
		if (ports_add(&sb->ports, &sb->nr_ports, r->spec, err) < 0)
			return -1;
	} else {
		at = live_find(net, r->spec);
		if (at >= 0)
			live_remove(net, (size_t)at);
		at = ports_find(sb->ports, sb->nr_ports, &p);
		if (r->ephemeral || at < 0)
			return 0;
		ports_remove(sb->ports, &sb->nr_ports, (size_t)at);
	}
	return sandbox_save(".", sb, err);
}

/* --- network-traffic.json -------------------------------------------------------------------- */

/* The snapshot, written only when it differs from the last one written:
 * an idle sandbox does not rewrite the file every SUP_TRAFFIC_MS. */
static void traffic_write(json_t *traffic)
{
	static char *last; /* one sandbox per supervisor */
	gantry_error_t err = NULL;
	char now[32];
	time_t t = time(NULL);
	struct tm tm;
	char *text, *same;

	if (!json_is_object(traffic))
		return;
	same = json_dumps(traffic, JSON_COMPACT | JSON_SORT_KEYS);
	if (same && last && strcmp(same, last) == 0) {
		free(same);
		return;
	}
	strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
	json_object_set_new(traffic, "updated", json_string(now));
	text = json_dumps(traffic, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (text && write_file_atomic(NET_TRAFFIC_FILE, text, strlen(text), 0600, &err) < 0) {
		static uint64_t logged;

		if (sup_log_due(&logged))
			log_warn("%s", gantry_error_str(err));
		gantry_error_free(&err);
		free(same);
		same = NULL; /* try again next time */
	}
	free(text);
	free(last);
	last = same;
}

/* --- the worker's control socket ------------------------------------------------------------- */

/* It hung up or broke: the requests waiting get an error, and it is
 * reaped (sup_net_tick) before the link's end is logged. */
static void net_gone(struct sup *s)
{
	struct sup_net *net = &s->net;

	if (net->ctl < 0)
		return;
	close(net->ctl);
	net->ctl = -1;
	s->m.net_worker.ctl_fd = -1;
	if (net->sent.op != NET_OP_NONE)
		client_answer(s, net->sent.c, NET_GONE);
	req_release(&net->sent);
	net->sent.op = NET_OP_NONE;
	for (size_t i = 0; i < net->queued; i++) {
		client_answer(s, net->queue[i].c, NET_GONE);
		req_release(&net->queue[i]);
	}
	net->queued = 0;
	net->reap = true;
	net->reap_deadline = now_ms() + SUP_NET_REAP_MS;
}

static void net_reap(struct sup *s, uint64_t now)
{
	struct net_worker *w = &s->m.net_worker;
	char how[64];
	int status;
	pid_t r;

	if (w->pid <= 0) {
		s->net.reap = false;
		log_warn("network worker exited: the guest's network link is down");
		machine_worker_gone(&s->m, "net", "not ours to wait for",
				    "the guest's network link is down");
		return;
	}
	r = waitpid(w->pid, &status, WNOHANG);
	if (r == 0) {
		/* It closed its socket but lives on: it is of no use now. */
		if (now >= s->net.reap_deadline)
			kill(w->pid, SIGKILL);
		return;
	}
	if (r < 0)
		snprintf(how, sizeof(how), "not ours to wait for");
	else
		child_describe_status(status, how, sizeof(how));
	w->pid = -1;
	s->net.reap = false;
	log_warn("network worker exited (%s): the guest's network link is down", how);
	sup_audit(s, "worker", "exited", NULL, NULL, "network worker: %s", how);
	machine_worker_gone(&s->m, "net", how, "the guest's network link is down");
}

/* Send r; false when the socket has no room now (try again later). */
static bool net_send(struct sup *s, struct net_req *r)
{
	json_t *j = r->op == NET_OP_TRAFFIC || r->op == NET_OP_POLICY_SHOW
			    ? json_pack("{s:s}", "op", op_names[r->op])
		    : r->op == NET_OP_POLICY
			    ? json_pack("{s:s,s:O?,s:b}", "op", op_names[r->op], "policy",
					r->policy, "allowLocal", r->allow_local)
			    : json_pack("{s:s,s:s}", "op", op_names[r->op], "spec", r->spec);
	cleanup_free char *text = json_dumps(j, JSON_COMPACT);
	ssize_t n;

	json_decref(j);
	if (text == NULL)
		return false;
	if (r->has_fd)
		n = unix_send_fd(s->net.ctl, text, strlen(text), r->fd,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
	else
		n = send(s->net.ctl, text, strlen(text), MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0 && (errno == EAGAIN || errno == EINTR || errno == ENOBUFS))
		return false;
	if (n < 0) {
		net_gone(s);
		return false;
	}
	if (r->has_fd)
		close(r->fd); /* the worker's now */
	r->has_fd = false;
	s->net.sent = *r;
	s->net.sent.deadline = now_ms() + SUP_NET_MS;
	return true;
}

void sup_net_tick(struct sup *s, uint64_t now, uint64_t *wake)
{
	struct sup_net *net = &s->net;

	if (net->reap) {
		net_reap(s, now);
		if (net->reap)
			*wake = MIN(*wake, now + 50);
	}
	if (net->ctl < 0)
		return;
	if (net->sent.op != NET_OP_NONE && net->sent.c && now >= net->sent.deadline) {
		/* Its answer still comes first: the request stays outstanding. */
		client_answer(s, net->sent.c, "the network worker did not answer in time");
		net->sent.c = NULL;
	}
	for (size_t i = 0; i < net->queued;) {
		if (now < net->queue[i].deadline) {
			i++;
			continue;
		}
		client_answer(s, net->queue[i].c, "the network worker is busy: try again");
		req_release(&net->queue[i]);
		memmove(net->queue + i, net->queue + i + 1,
			(--net->queued - i) * sizeof(net->queue[0]));
	}
	if (net->sent.op == NET_OP_NONE && net->queued) {
		if (net_send(s, &net->queue[0]))
			memmove(net->queue, net->queue + 1, --net->queued * sizeof(net->queue[0]));
		else if (net->ctl >= 0)
			*wake = MIN(*wake, now + 10);
	}
	if (net->ctl >= 0 && net->sent.op == NET_OP_NONE && !net->queued &&
	    now >= net->next_traffic) {
		struct net_req r = { .op = NET_OP_TRAFFIC };

		net->next_traffic = now + SUP_TRAFFIC_MS;
		net_send(s, &r);
	}
	if (net->ctl < 0)
		return;
	if (net->sent.op != NET_OP_NONE && net->sent.c)
		*wake = MIN(*wake, net->sent.deadline);
	for (size_t i = 0; i < net->queued; i++)
		*wake = MIN(*wake, net->queue[i].deadline);
	if (net->sent.op == NET_OP_NONE)
		*wake = MIN(*wake, net->next_traffic);
}

/* The worker's answer to a policy swap or show. A swap in force is saved
 * before the client hears of it; a swap refused leaves both as they were. */
static void policy_answer(struct sup *s, const struct net_req *r, json_t *j)
{
	gantry_error_t err = NULL;
	json_t *prev;

	if (!json_is_true(json_object_get(j, "ok"))) {
		const char *e = json_string_value(json_object_get(j, "error"));
		cleanup_free char *shown =
			text_sanitized(e ? e : "refused", strlen(e ? e : "refused"), NET_ERROR_MAX);

		client_answer(s, r->c, shown);
		return;
	}
	if (r->op == NET_OP_POLICY_SHOW) {
		if (r->c)
			client_reply_json(s, r->c, json_incref(j));
		return;
	}
	prev = s->sb.net_policy;
	s->sb.net_policy = r->policy ? json_incref(r->policy) : NULL;
	s->sb.allow_local_net = r->allow_local;
	sup_egress_allowed(s);
	sup_audit(s, "policy", "changed", NULL, NULL, "%s egress policy%s in force",
		  r->policy ? "the user's" : "the default",
		  r->allow_local ? ", local network allowed" : "");
	log_info("egress policy %s%s in force (generation %lld, %lld flows cut)",
		 r->policy ? "from the user" : "default",
		 r->allow_local ? ", local network allowed" : "",
		 (long long)json_integer_value(json_object_get(j, "generation")),
		 (long long)json_integer_value(json_object_get(j, "cut")));
	if (sandbox_save(".", &s->sb, &err) < 0) {
		cleanup_free char *msg = NULL;

		xasprintf(&msg, "in force, but not saved: %s", gantry_error_str(err));
		log_warn("%s", msg);
		client_answer(s, r->c, msg);
		gantry_error_free(&err);
		json_decref(prev);
		return;
	}
	json_decref(prev);
	if (r->c)
		client_reply_json(s, r->c,
				  json_pack("{s:b,s:O?,s:O?}", "ok", 1, "generation",
					    json_object_get(j, "generation"), "cut",
					    json_object_get(j, "cut")));
}

/* The worker's events since the last snapshot (guest-made text: bounded
 * and sanitised by sup_audit) into the audit. */
static void audit_events(struct sup *s, json_t *events)
{
	size_t i;
	json_t *e;

	json_array_foreach(events, i, e)
	{
		const char *kind = json_string_value(json_object_get(e, "kind"));
		const char *decision = json_string_value(json_object_get(e, "decision"));
		const char *host = json_string_value(json_object_get(e, "host"));
		const char *reason = json_string_value(json_object_get(e, "reason"));

		if (i == NET_EVENTS_MAX + 1)
			break;
		if (kind && decision)
			sup_audit_guest(s, kind, decision, NULL, host && host[0] ? host : NULL,
					"%s", reason ? reason : "");
	}
}

/* The answer to the request outstanding. */
static void net_answer(struct sup *s, json_t *j)
{
	struct net_req r = s->net.sent;
	gantry_error_t err = NULL;

	s->net.sent.op = NET_OP_NONE;
	s->net.sent.policy = NULL; /* r owns it now */
	if (r.op == NET_OP_POLICY || r.op == NET_OP_POLICY_SHOW) {
		policy_answer(s, &r, j);
		req_release(&r);
		return;
	}
	if (!json_is_true(json_object_get(j, "ok"))) {
		const char *e = json_string_value(json_object_get(j, "error"));
		cleanup_free char *shown =
			text_sanitized(e ? e : "refused", strlen(e ? e : "refused"), NET_ERROR_MAX);

		if (r.op != NET_OP_TRAFFIC || r.c)
			log_info("network worker: %s %s: %s", op_names[r.op], r.spec, shown);
		client_answer(s, r.c, shown);
		return;
	}
	if (r.op == NET_OP_TRAFFIC) {
		audit_events(s, json_object_get(j, "events"));
		traffic_write(json_object_get(j, "traffic"));
		client_answer(s, r.c, NULL);
		return;
	}
	log_info("%s %s%s", r.op == NET_OP_PUBLISH ? "published" : "unpublished", r.spec,
		 r.ephemeral ? " (ephemeral)" : "");
	if (apply(s, &r, &err) < 0) {
		cleanup_free char *msg = NULL;

		xasprintf(&msg, "done, but not saved: %s", gantry_error_str(err));
		log_warn("%s", msg);
		client_answer(s, r.c, msg);
		gantry_error_free(&err);
		return;
	}
	client_answer(s, r.c, NULL);
}

void sup_net_event(struct sup *s)
{
	struct sup_net *net = &s->net;

	/* A few messages a round: the loop has other work. */
	for (int k = 0; k < 4 && net->ctl >= 0; k++) {
		ssize_t n = recv(net->ctl, net->msg, NET_CTL_MSG_MAX + 1, MSG_DONTWAIT | MSG_TRUNC);
		json_error_t jerr;
		json_t *j;

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			net_gone(s);
			return;
		}
		j = n <= NET_CTL_MSG_MAX ? json_loadb(net->msg, (size_t)n, 0, &jerr) : NULL;
		if (net->sent.op == NET_OP_NONE || !json_is_object(j)) {
			static uint64_t logged;

			/* Its answers would no longer match our requests. */
			if (sup_log_due(&logged))
				log_warn("network worker: %s on its control socket: cut off",
					 j ? "a message nobody asked for" : "a bad message");
			json_decref(j);
			if (s->m.net_worker.pid > 0)
				kill(s->m.net_worker.pid, SIGKILL);
			net_gone(s);
			return;
		}
		net_answer(s, j);
		json_decref(j);
	}
}

/* --- ctl.sock ops ---------------------------------------------------------------------------- */

/* Check spec against the live list, and bind a publish's host socket; a
 * refusal is answered here. */
static bool net_check(struct sup *s, struct client *c, struct net_req *r, const char *spec)
{
	gantry_error_t err = NULL;
	struct port_spec p;
	ssize_t at;

	if (spec == NULL || port_spec_parse(spec, &p, &err) < 0) {
		client_answer(s, c, err ? gantry_error_str(err) : "no spec");
		gantry_error_free(&err);
		return false;
	}
	at = p.host_port ? ports_find(s->net.live, s->net.nr_live, &p) : -1;
	port_spec_format(&p, r->spec);
	if (r->op == NET_OP_PUBLISH && at >= 0) {
		cleanup_free char *msg = NULL;

		xasprintf(&msg, "%s is already published (as %s)", r->spec, s->net.live[at]);
		client_answer(s, c, msg);
		return false;
	}
	if (r->op == NET_OP_PUBLISH) {
		if (port_spec_bind(&p, &r->fd, &err) < 0) {
			client_answer(s, c, gantry_error_str(err));
			gantry_error_free(&err);
			return false;
		}
		r->has_fd = true;
		port_spec_format(&p, r->spec); /* a zero host port chosen */
		return true;
	}
	if (r->op == NET_OP_UNPUBLISH && (at < 0 || strcmp(s->net.live[at], r->spec) != 0)) {
		cleanup_free char *msg = NULL;

		xasprintf(&msg, "%s is not published on sandbox `%s`", r->spec, s->name);
		client_answer(s, c, msg);
		return false;
	}
	return true;
}

/* Every network request: c waits for its answer; false when it has it
 * already (no network; none to ask, where worker says it needs one). */
static bool net_begin(struct sup *s, struct client *c, size_t end, bool worker)
{
	client_line_done(c, end);
	c->waiting = true;
	c->deadline = 0;
	if (!s->sb.net) {
		client_answer(s, c, "the sandbox has no network (it was started without one)");
		return false;
	}
	if (worker && s->net.ctl < 0) {
		client_answer(s, c, NET_GONE);
		return false;
	}
	return true;
}

/* r for the worker, sent in its turn. */
static void net_queue(struct sup *s, struct client *c, struct net_req *r)
{
	if (s->net.queued == SUP_NET_QUEUE) {
		client_answer(s, c, "the network worker is busy: try again");
		req_release(r);
		return;
	}
	r->c = c;
	r->deadline = now_ms() + SUP_NET_MS;
	s->net.queue[s->net.queued++] = *r;
}

void ctl_ports(struct sup *s, struct client *c, json_t *req, size_t end)
{
	(void)req;
	if (net_begin(s, c, end, false))
		reply_ports(s, c);
}

void ctl_traffic(struct sup *s, struct client *c, json_t *req, size_t end)
{
	struct net_req r = { .op = NET_OP_TRAFFIC };

	(void)req;
	if (net_begin(s, c, end, true))
		net_queue(s, c, &r);
}

void ctl_netpolicy_get(struct sup *s, struct client *c, json_t *req, size_t end)
{
	struct net_req r = { .op = NET_OP_POLICY_SHOW };

	(void)req;
	if (net_begin(s, c, end, true))
		net_queue(s, c, &r);
}

void ctl_netpolicy_set(struct sup *s, struct client *c, json_t *req, size_t end)
{
	struct net_req r = { .op = NET_OP_POLICY };
	json_t *pj = json_object_get(req, "policy");

	if (!net_begin(s, c, end, true))
		return;
	r.allow_local = json_is_true(json_object_get(req, "allowLocal"));
	if (pj && !json_is_null(pj)) {
		gantry_error_t err = NULL;
		struct policy *p;

		if (policy_from_json(pj, &p, &err) < 0) {
			gantry_error_prefix(&err, "policy");
			client_answer(s, c, gantry_error_str(err));
			gantry_error_free(&err);
			return;
		}
		r.policy = policy_to_json(p);
		policy_free(p);
	}
	net_queue(s, c, &r);
}

static void net_port(struct sup *s, struct client *c, json_t *req, size_t end, enum net_op op)
{
	struct net_req r = { .op = op };

	if (!net_begin(s, c, end, true))
		return;
	r.ephemeral = json_is_true(json_object_get(req, "ephemeral"));
	if (net_check(s, c, &r, json_string_value(json_object_get(req, "spec"))))
		net_queue(s, c, &r);
}

void ctl_publish(struct sup *s, struct client *c, json_t *req, size_t end)
{
	net_port(s, c, req, end, NET_OP_PUBLISH);
}

void ctl_unpublish(struct sup *s, struct client *c, json_t *req, size_t end)
{
	net_port(s, c, req, end, NET_OP_UNPUBLISH);
}

/* --- the end --------------------------------------------------------------------------------- */

void sup_net_final(struct sup *s)
{
	uint64_t deadline = now_ms() + 2 * SUP_TRAFFIC_MS;
	bool asked = false;

	for (size_t i = 0; i < s->net.queued; i++)
		req_release(&s->net.queue[i]);
	s->net.queued = 0;
	while (s->net.ctl >= 0 && now_ms() < deadline) {
		struct pollfd p = { .fd = s->net.ctl, .events = POLLIN };
		uint64_t now = now_ms();

		if (s->net.sent.op == NET_OP_NONE) {
			struct net_req r = { .op = NET_OP_TRAFFIC };

			if (asked)
				return; /* its answer is written */
			asked = net_send(s, &r);
			if (!asked && s->net.ctl >= 0)
				usleep(10000);
			continue;
		}
		if (poll(&p, 1, (int)(deadline - now)) > 0)
			sup_net_event(s);
	}
}
