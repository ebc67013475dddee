/* The network worker's egress policy, published ports and control socket
 * (see worker_priv.h): policies put in force and flows they cut, the DNS
 * proxy's hooks into the policy, forwards added and removed live, and
 * the JSON requests of the control socket. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/json.h"
#include "common/log.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "net/frame.h"
#include "net/worker_priv.h"
#include "worker/worker.h"

/* --- the egress policy ------------------------------------------------ */

/* Flow f's TCP connection ended both ways: the frames queued for the
 * guest dropped, a RST to the guest (where it has heard from the far end)
 * and one into libslirp, which closes its host socket. */
void worker_flow_reset(struct worker *w, struct flow *f)
{
	uint8_t buf[FRAME_L4 + TCP_HLEN];
	uint32_t seq = f->remote_next;
	bool purged = worker_out_purge(w, &f->key, &seq);
	size_t n;

	ack_hold_drop(w->acks, &f->key);
	flow_hello_drop(w->flows, f);
	if (f->key.proto != NET_PROTO_TCP || f->closed)
		return;
	if (f->remote_seq || purged) {
		n = frame_tcp_rst_flow(buf, sizeof(buf), true, f->key.remote, f->key.rport,
				       f->key.gport, seq, f->guest_next);
		worker_to_guest(w, NULL, buf, n);
	}
	if (f->guest_seq) {
		n = frame_tcp_rst_flow(buf, sizeof(buf), false, f->key.remote, f->key.rport,
				       f->key.gport, f->guest_next, f->remote_next);
		nat_input(&w->nat, buf, n);
	}
	/* And at what libslirp last acknowledged, should the guest have sent
	 * past its window (where that RST would be ignored). */
	if (f->guest_seq && f->remote_acked && f->remote_ack != f->guest_next) {
		n = frame_tcp_rst_flow(buf, sizeof(buf), false, f->key.remote, f->key.rport,
				       f->key.gport, f->remote_ack, f->remote_next);
		nat_input(&w->nat, buf, n);
	}
}

/* End flow f for good: reset, and kept a while as a tombstone. */
void worker_flow_cut(struct worker *w, struct flow *f, const char *why)
{
	char ip[INET_ADDRSTRLEN];
	struct in_addr a = { .s_addr = htonl(f->key.remote) };

	worker_flow_reset(w, f);
	f->cut = true;
	f->until_ms = now_ms() + FLOW_CUT_MS;
	traffic_policy(w->traffic, f->key.remote, f->key.proto, f->key.rport, why, time(NULL));
	inet_ntop(AF_INET, &a, ip, sizeof(ip));
	log_info("flow %s/%u -> %s:%u cut: %s", net_proto_name(f->key.proto), f->key.gport, ip,
		 f->key.rport, why);
}

void worker_event(struct worker *w, const char *kind, const char *decision, const char *host,
		  const char *reason)
{
	if (w->events == NULL)
		w->events = json_array();
	if (json_array_size(w->events) >= NET_EVENTS_MAX) {
		w->events_lost++;
		return;
	}
	json_array_append_new(w->events,
			      json_pack("{s:s,s:s,s:s,s:s}", "kind", kind, "decision", decision,
					"host", host ? host : "", "reason", reason ? reason : ""));
}

struct rejudge {
	struct worker *w;
	uint64_t now;
	unsigned cut;
};

static void rejudge(void *opaque, struct flow *f)
{
	struct rejudge *r = opaque;
	struct worker *w = r->w;
	struct policy_verdict pv;
	char why[TRAFFIC_WHY_MAX];

	if (f->inbound || f->cut)
		return;
	pv = policy_judge(w->policy, &w->wall, w->learned, f->key.remote, f->key.proto,
			  f->key.rport, r->now);
	f->generation = w->generation;
	f->verdict = pv;
	if (pv.allow)
		return;
	policy_verdict_str(&pv, w->learned, f->key.remote, r->now, why, sizeof(why));
	worker_flow_cut(w, f, why);
	r->cut++;
}

/* Make p (NULL: the default) the policy in force, at once: what was
 * learned for names it still allows stays, every flow is judged again
 * and those it denies are cut. Returns how many were. */
unsigned worker_policy_install(struct worker *w, struct policy *p, bool allow_local)
{
	struct rejudge r = { .w = w, .now = now_ms() };

	if (p == NULL)
		p = policy_default(false);
	if (allow_local)
		p->allow_local = true;
	if (w->nr_proxy_ips)
		policy_add_proxy(p, w->proxy_ips, w->nr_proxy_ips, w->proxy_port, w->proxy_enforce);
	policy_free(w->policy);
	w->policy = p;
	w->allow_local = allow_local;
	w->generation++;
	policy_wall_host_addrs(&w->wall);
	learned_retain(w->learned, p, r.now);
	flows_each(w->flows, rejudge, &r);
	worker_backpressure(w);
	log_info("egress policy %llu in force: default %s, %zu rules, %zu+%zu domains%s; %u flows "
		 "cut",
		 (unsigned long long)w->generation, p->default_allow ? "allow" : "deny",
		 p->nr_rules, p->nr_allow, p->nr_resolve,
		 p->allow_local ? ", local network allowed" : "", r.cut);
	return r.cut;
}

bool worker_dns_allow(void *opaque, const struct dns_question *q)
{
	struct worker *w = opaque;
	enum policy_dns d = policy_dns_name(w->policy, q->name);

	traffic_dns(w->traffic, q->name, q->qtype,
		    d == POLICY_DNS_REFUSE  ? "refused"
		    : d == POLICY_DNS_LEARN ? "learned"
					    : "resolved",
		    time(NULL));
	if (d == POLICY_DNS_REFUSE && now_ms() - w->dns_logged >= DROP_LOG_GAP_MS) {
		log_info("DNS query for `%s` refused: not allowed by the policy", q->name);
		w->dns_logged = now_ms();
	}
	return d != POLICY_DNS_REFUSE;
}

bool worker_dns_learn(void *opaque, const struct dns_question *q)
{
	struct worker *w = opaque;

	return policy_dns_name(w->policy, q->name) == POLICY_DNS_LEARN;
}

void worker_dns_learned(void *opaque, const struct dns_question *q, const char *owner,
			struct in_addr ip, uint32_t ttl)
{
	struct worker *w = opaque;

	(void)owner;
	/* The policy may have changed while the query was out. */
	if (policy_dns_name(w->policy, q->name) == POLICY_DNS_LEARN)
		learned_add(w->learned, ntohl(ip.s_addr), q->name, ttl, now_ms());
}

/* The policy in force and what it keeps; the learned addresses cut to
 * SHOW_LEARNED_MAX, so the answer fits one control message. */
static json_t *policy_show(struct worker *w)
{
	json_t *learned = learned_json(w->learned, now_ms());
	size_t total = json_array_size(learned);

	while (json_array_size(learned) > SHOW_LEARNED_MAX)
		json_array_remove(learned, json_array_size(learned) - 1);
	return json_pack("{s:b, s:o, s:b, s:I, s:o, s:I, s:{s:i, s:i}}", "ok", 1, "policy",
			 policy_to_json(w->policy), "allowLocal", w->allow_local, "generation",
			 (json_int_t)w->generation, "learned", learned, "learned_total",
			 (json_int_t)total, "flows", "tcp",
			 (int)flows_count(w->flows, NET_PROTO_TCP), "udp",
			 (int)flows_count(w->flows, NET_PROTO_UDP));
}

/* --- published ports ------------------------------------------------- */

/* "127.0.0.1:8080/tcp": how errors name a forward. */
static void bind_str(const struct port_spec *s, char *buf, size_t len)
{
	char ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &s->host_ip, ip, sizeof(ip));
	snprintf(buf, len, "%s:%u/%s", ip, s->host_port, s->udp ? "udp" : "tcp");
}

static struct forward **forward_find(struct worker *w, const struct port_spec *s)
{
	struct forward **p;

	for (p = &w->forwards; *p; p = &(*p)->next)
		if (port_spec_same_bind(&(*p)->spec, s))
			break;
	return p;
}

/* fd: the host socket, bound by the caller, taken over in any case; -1:
 * bound here. */
int worker_publish(struct worker *w, const char *text, int fd, struct port_spec *out,
		   gantry_error_t *err)
{
	cleanup_close int bound = fd;
	struct port_spec s;
	struct forward *f;
	char name[PORT_SPEC_MAX + 8];

	if (port_spec_parse(text, &s, err) < 0)
		return -1;
	if (s.host_port == 0 && bound < 0 && port_spec_pick(&s, err) < 0)
		return -1;
	bind_str(&s, name, sizeof(name));
	if (bound >= 0 && !port_socket_bound(bound, s.udp, s.host_ip, s.host_port))
		return gantry_error(err, 0, "port %s: the socket handed over is not bound there",
				    name);
	if (*forward_find(w, &s))
		return gantry_error(err, 0, "port %s: already published", name);
	if (w->nr_forwards >= MAX_FORWARDS)
		return gantry_error(err, 0, "port %s: too many published ports", name);
	bound = -1; /* nat_forward_add's now */
	if (nat_forward_add(&w->nat, s.udp, s.host_ip, s.host_port, s.guest_port, fd) < 0) {
		if (errno == EADDRINUSE)
			return gantry_error(err, 0, "port %s: address in use", name);
		return gantry_error_errno(err, "port %s", name);
	}
	f = xzalloc(sizeof(*f));
	f->spec = s;
	f->next = w->forwards;
	w->forwards = f;
	w->nr_forwards++;
	*out = s;
	log_info("published %s to guest port %u%s", name, s.guest_port,
		 fd >= 0 ? " (its socket bound for us)" : "");
	return 0;
}

struct unpublished {
	struct worker *w;
	const struct port_spec *s;
};

static void cut_inbound(void *opaque, struct flow *f)
{
	struct unpublished *u = opaque;

	if (f->inbound && !f->cut && f->key.gport == u->s->guest_port &&
	    (f->key.proto == NET_PROTO_UDP) == u->s->udp)
		worker_flow_cut(u->w, f, "port unpublished");
}

static int unpublish(struct worker *w, const char *text, gantry_error_t *err)
{
	struct port_spec s;
	struct forward **p, *f;
	char name[PORT_SPEC_MAX + 8];

	if (port_spec_parse(text, &s, err) < 0)
		return -1;
	bind_str(&s, name, sizeof(name));
	p = forward_find(w, &s);
	if (*p == NULL || nat_forward_remove(&w->nat, s.udp, s.host_ip, s.host_port) < 0)
		return gantry_error(err, 0, "port %s: not published", name);
	f = *p;
	*p = f->next;
	free(f);
	w->nr_forwards--;
	log_info("unpublished %s", name);
	/* Its connections go too, unless another forward still leads to the
	 * same guest port (an inbound flow does not say which one it came by). */
	if (!worker_published(w, s.udp ? NET_PROTO_UDP : NET_PROTO_TCP, s.guest_port)) {
		struct unpublished u = { .w = w, .s = &s };

		flows_each(w->flows, cut_inbound, &u);
	}
	return 0;
}

/* --- the control socket ---------------------------------------------- */

/* One answer, one message; a supervisor that does not take it in a while
 * loses it rather than stalling the guest's network. */
static void ctl_send(struct worker *w, json_t *answer)
{
	cleanup_free char *s = json_dumps(answer, JSON_COMPACT);
	struct pollfd p = { .fd = w->ctl_fd, .events = POLLOUT };
	uint64_t deadline = now_ms() + CTL_SEND_MS;
	ssize_t n;

	json_decref(answer);
	if (s == NULL)
		return;
	for (;;) {
		n = send(w->ctl_fd, s, strlen(s), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n >= 0)
			return;
		if (errno == EINTR)
			continue;
		if ((errno != EAGAIN && errno != EWOULDBLOCK) || now_ms() >= deadline ||
		    poll(&p, 1, (int)(deadline - now_ms())) < 0) {
			log_warn("control answer not sent: %s", strerror(errno));
			return;
		}
	}
}

static json_t *ctl_error(gantry_error_t *err)
{
	json_t *j = json_pack("{s:b, s:s}", "ok", 0, "error", gantry_error_str(*err));

	gantry_error_free(err);
	return j;
}

/* One request; fd (or -1) came with it, for a publish: its host socket. */
static json_t *ctl_op(struct worker *w, json_t *req, int fd)
{
	cleanup_free char *op = NULL, *spec = NULL;
	gantry_error_t err = NULL;
	struct port_spec s;
	char canon[PORT_SPEC_MAX];

	if (!json_is_object(req)) {
		gantry_error(&err, 0, "request: not a JSON object");
		return ctl_error(&err);
	}
	if (jsonh_string(req, "op", true, &op, &err) < 0)
		return ctl_error(&err);
	if (strcmp(op, NET_CTL_TRAFFIC) == 0) {
		json_t *events = w->events ? w->events : json_array();

		w->events = NULL;
		if (w->events_lost)
			json_array_append_new(events, json_pack("{s:s,s:s,s:s}", "kind", "events",
								"decision", "lost", "reason",
								"more events than were kept"));
		w->events_lost = 0;
		return json_pack("{s:b,s:o,s:o}", "ok", 1, "traffic", traffic_json(w->traffic),
				 "events", events);
	}
	if (strcmp(op, NET_CTL_POLICY_SHOW) == 0)
		return policy_show(w);
	if (strcmp(op, NET_CTL_POLICY) == 0) {
		json_t *pj = json_object_get(req, "policy");
		struct policy *p = NULL;
		unsigned cut;

		if (pj && !json_is_null(pj) && policy_from_json(pj, &p, &err) < 0) {
			gantry_error_prefix(&err, "policy");
			return ctl_error(&err);
		}
		cut = worker_policy_install(w, p, json_is_true(json_object_get(req, "allowLocal")));
		return json_pack("{s:b, s:I, s:i}", "ok", 1, "generation",
				 (json_int_t)w->generation, "cut", (int)cut);
	}
	if (strcmp(op, NET_CTL_PUBLISH) != 0 && strcmp(op, NET_CTL_UNPUBLISH) != 0) {
		gantry_error(&err, 0, "unknown op `%.40s`", op);
		gantry_error_sanitize(&err, 200);
		return ctl_error(&err);
	}
	if (jsonh_string(req, "spec", true, &spec, &err) < 0) {
		close_fd(&fd);
		return ctl_error(&err);
	}
	if (strcmp(op, NET_CTL_UNPUBLISH) == 0) {
		if (unpublish(w, spec, &err) < 0)
			return ctl_error(&err);
		return json_pack("{s:b}", "ok", 1);
	}
	if (worker_publish(w, spec, fd, &s, &err) < 0)
		return ctl_error(&err);
	port_spec_format(&s, canon);
	return json_pack("{s:b, s:s}", "ok", 1, "spec", canon);
}

static json_t *ctl_request(struct worker *w, const char *buf, size_t len, int fd)
{
	gantry_error_t err = NULL;
	json_t *req = jsonh_load(buf, len, "request", &err), *answer;
	const char *op;

	if (req == NULL) {
		close_fd(&fd);
		return ctl_error(&err);
	}
	op = json_string_value(json_object_get(req, "op"));
	if (op == NULL || strcmp(op, NET_CTL_PUBLISH) != 0)
		close_fd(&fd); /* a socket comes with a publish only */
	answer = worker_answer_to(req, ctl_op(w, req, fd));
	json_decref(req);
	return answer;
}

void worker_read_ctl(struct worker *w)
{
	cleanup_free char *buf = NULL;
	gantry_error_t err = NULL;
	size_t nr_fds = 0;
	int fd = -1;
	ssize_t n;
	char c;

	/* The message's length first (MSG_TRUNC), so the buffer fits it. */
	n = recv(w->ctl_fd, &c, 1, MSG_DONTWAIT | MSG_PEEK | MSG_TRUNC);
	if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	if (n <= 0) {
		if (n < 0)
			log_error("control socket: %s", strerror(errno));
		else
			log_info("control socket closed: stopping");
		w->done = true;
		return;
	}
	if (n > NET_CTL_MSG_MAX) {
		recv(w->ctl_fd, &c, 1, MSG_DONTWAIT);
		gantry_error(&err, 0, "request over %d bytes", NET_CTL_MSG_MAX);
		ctl_send(w, ctl_error(&err));
		return;
	}
	buf = xmalloc((size_t)n);
	n = unix_recv_fds(w->ctl_fd, buf, (size_t)n, &fd, 1, &nr_fds, MSG_DONTWAIT);
	if (n <= 0) {
		if (nr_fds)
			close(fd);
		return;
	}
	ctl_send(w, ctl_request(w, buf, (size_t)n, nr_fds ? fd : -1));
}
