/* The egress worker's connections (see egress.h, worker_priv.h): the
 * guest's TLS, the host's policy, look-up, connection and TLS, then the
 * relay, requests through the HTTP rewriter and answers as they come;
 * or an HTTP error from Gantry that says why not. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "egress/worker_priv.h"

struct feed {
	struct egress *e;
	struct conn *c;
};

/* The rewriter's findings, once per connection for each secret and kind. */
static void http_event(void *opaque, enum egress_event_kind kind, const char *name,
		       const char *header)
{
	struct conn *c = ((struct feed *)opaque)->c;
	struct egress *e = ((struct feed *)opaque)->e;
	char reason[160];

	for (size_t i = 0; i < c->nr_seen; i++)
		if (c->seen[i].kind == (int)kind && strcmp(c->seen[i].name, name) == 0)
			return;
	if (c->nr_seen < EVENTS_SEEN) {
		c->seen[c->nr_seen].kind = (int)kind;
		snprintf(c->seen[c->nr_seen++].name, sizeof(c->seen[0].name), "%s", name);
	}
	switch (kind) {
	case EGRESS_EV_INJECT:
		snprintf(reason, sizeof(reason), "injected in %s", header ? header : "a header");
		egress_event(e, "deliver", "inject", name, c->host, reason);
		break;
	case EGRESS_EV_MISPLACED:
		snprintf(reason, sizeof(reason),
			 "its placeholder in %s, not the header it is bound to: sent as it was",
			 header ? header : "a header");
		egress_event(e, "withhold", "header", name, c->host, reason);
		break;
	case EGRESS_EV_FOREIGN:
		snprintf(reason, sizeof(reason),
			 "its placeholder sent to a host it is not bound to (in %s): sent as "
			 "it was",
			 header ? header : "a header");
		egress_event(e, "withhold", "placeholder", name, c->host, reason);
		break;
	case EGRESS_EV_UNFIT:
		egress_event(e, "withhold", "value", name, c->host,
			     "its value holds a line break or NUL, which no header may");
		break;
	}
}

/* ---- connections ------------------------------------------------------- */

void conn_end(struct egress *e, struct conn *c)
{
	if (c->g) {
		egress_conn_close(c->g);
		egress_conn_free(c->g);
	}
	if (c->u) {
		if (!c->u_closed)
			egress_conn_close(c->u);
		egress_conn_free(c->u);
	}
	if (c->gfd >= 0)
		close(c->gfd);
	if (c->ufd >= 0)
		close(c->ufd);
	lookup_end(&c->lk);
	if (c->http)
		egress_http_free(c->http);
	egress_buf_wipe_free(&c->up);
	explicit_bzero(c->in, sizeof(c->in));
	explicit_bzero(c->down, sizeof(c->down));
	free(c->refusal);
	memset(c, 0, sizeof(*c));
	c->gfd = c->ufd = -1;
	e->nr_conns--;
}

/* The guest is answered status (an HTTP error from Gantry, saying why),
 * then the connection ends. */
static void refuse(struct conn *c, int status, const char *why)
{
	static const char *const reasons[] = { [400] = "Bad Request",
					       [403] = "Forbidden",
					       [405] = "Method Not Allowed",
					       [421] = "Misdirected Request",
					       [431] = "Request Header Fields Too Large",
					       [502] = "Bad Gateway",
					       [504] = "Gateway Timeout" };
	cleanup_free char *body = NULL;

	xasprintf(&body, "gantry: %s\n", why);
	free(c->refusal);
	c->refusal_len = (size_t)xasprintf(&c->refusal,
					   "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n"
					   "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
					   status, reasons[status], strlen(body), body);
	c->refusal_off = 0;
	c->st = C_REFUSE;
	/* A guest that does not read it does not keep the slot. */
	c->deadline = now_ms() + REFUSAL_MS;
	log_info("%s: %d: %s", c->host[0] ? c->host : "(no name)", status, why);
}

/* The same in the relay (0), where an answer of the host's may be half
 * written to the guest: then the connection just ends (-1). */
static int refuse_in_relay(struct conn *c, int status, const char *why)
{
	if (c->down_len) {
		log_info("%s: %d: %s (the connection cut)", c->host, status, why);
		return -1;
	}
	refuse(c, status, why);
	return 0;
}

static bool allowed(struct egress *e, const char *host)
{
	return egress_has_host(e->allowed, host);
}

static void connect_next(struct egress *e, struct conn *c);

static void lookup_done(struct egress *e, struct conn *c);

static void hello_done(struct egress *e, struct conn *c)
{
	gantry_error_t err = NULL;

	snprintf(c->host, sizeof(c->host), "%s", egress_conn_host(c->g));
	if (!allowed(e, c->host)) {
		egress_event(e, "withhold", "policy", NULL, c->host,
			     "the egress policy does not let the sandbox reach it");
		refuse(c, 403, "the egress policy does not let this sandbox reach this host");
		return;
	}
	for (size_t i = 0; i < EGRESS_HOSTS_MAX; i++) {
		if (strcmp(e->known[i].host, c->host) != 0 || e->known[i].until < now_ms())
			continue;
		memcpy(c->lk.ips, e->known[i].ips, sizeof(c->lk.ips));
		c->lk.nr_ips = e->known[i].nr_ips;
		c->lk.ttl = 0; /* known: not kept again */
		lookup_done(e, c);
		return;
	}
	if (lookup_start(&c->lk, c->host, e->up, e->nr_up, &err) < 0) {
		refuse(c, 502, gantry_error_str(err));
		gantry_error_free(&err);
		return;
	}
	c->st = C_LOOKUP;
}

/* Keep what the look-up found for the next connection to its host: in
 * its own slot, else an expired one, else the one that expires first. */
static void lookup_keep(struct egress *e, const struct conn *c)
{
	size_t slot = 0;

	for (size_t i = 0; i < EGRESS_HOSTS_MAX; i++) {
		if (strcmp(e->known[i].host, c->host) == 0) {
			slot = i;
			break;
		}
		if (e->known[i].until < e->known[slot].until)
			slot = i;
	}
	snprintf(e->known[slot].host, sizeof(e->known[slot].host), "%s", c->host);
	memcpy(e->known[slot].ips, c->lk.ips, sizeof(c->lk.ips));
	e->known[slot].nr_ips = c->lk.nr_ips;
	e->known[slot].until = now_ms() + (uint64_t)MIN(c->lk.ttl, LOOKUP_KEEP_S) * 1000;
}

static void lookup_done(struct egress *e, struct conn *c)
{
	if (c->lk.ttl)
		lookup_keep(e, c);
	c->nr_ips = 0;
	for (size_t i = 0; i < c->lk.nr_ips; i++)
		if (e->allow_local || !policy_wall_hit(&e->wall, c->lk.ips[i]))
			c->ips[c->nr_ips++] = c->lk.ips[i];
	lookup_end(&c->lk);
	if (c->nr_ips == 0) {
		egress_event(e, "withhold", "policy", NULL, c->host,
			     "it resolves only to local addresses");
		refuse(c, 403, "this host resolves only to local addresses");
		return;
	}
	c->ip_at = 0;
	connect_next(e, c);
}

static void connect_next(struct egress *e, struct conn *c)
{
	(void)e;
	while (c->ip_at < c->nr_ips) {
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_port = htons(443),
					 .sin_addr.s_addr = htonl(c->ips[c->ip_at++]) };

		if (c->ufd >= 0)
			close(c->ufd);
		c->ufd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (c->ufd < 0)
			break;
		/* Request and answer each in one go: no wait for an ACK. */
		setsockopt(c->ufd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
		if (connect(c->ufd, (struct sockaddr *)&a, sizeof(a)) == 0 ||
		    errno == EINPROGRESS) {
			c->st = C_CONNECT;
			c->uwant = POLLOUT;
			return;
		}
	}
	refuse(c, 502, "cannot connect to the host");
}

static void connected(struct egress *e, struct conn *c)
{
	gantry_error_t err = NULL;
	int soerr = 0;
	socklen_t sl = sizeof(soerr);

	if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
		connect_next(e, c);
		return;
	}
	if (egress_conn_client(e->tls, c->ufd, c->host, &c->u, &err) < 0) {
		refuse(c, 502, gantry_error_str(err));
		gantry_error_free(&err);
		return;
	}
	c->st = C_UPSHAKE;
}

static void upshake_done(struct egress *e, struct conn *c)
{
	gantry_error_t err = NULL;

	if (egress_http_new(&c->http, &err) < 0) {
		refuse(c, 502, gantry_error_str(err));
		gantry_error_free(&err);
		return;
	}
	for (size_t i = 0; i < e->nr_b; i++)
		if (e->b[i].value == NULL && egress_has_host(e->b[i].hosts, c->host))
			egress_event(e, "withhold", "source", e->b[i].name, c->host,
				     "its source failed: its placeholder goes as it is");
	c->st = C_RELAY;
	c->g_rd = c->u_rd = true;
}

/* The bindings of c's host, and the others' placeholders. */
struct view {
	struct egress_binding *bound, *foreign;
	struct egress_bindings set;
};

static void view_make(struct egress *e, const char *host, struct view *v)
{
	size_t nb = 0, nf = 0;

	v->bound = xzalloc((e->nr_b + 1) * sizeof(*v->bound));
	v->foreign = xzalloc((e->nr_b + 1) * sizeof(*v->foreign));
	for (size_t i = 0; i < e->nr_b; i++) {
		const struct binding *b = &e->b[i];
		struct egress_binding eb = { .name = b->name,
					     .placeholder = b->placeholder,
					     .value = b->value,
					     .value_len = b->len,
					     .header = b->header,
					     .format = b->format };

		if (!egress_has_host(b->hosts, host))
			v->foreign[nf++] = eb;
		else if (b->value) /* else withheld: said once, in upshake_done */
			v->bound[nb++] = eb;
	}
	v->set = (struct egress_bindings){ .bound = v->bound,
					   .nr_bound = nb,
					   .foreign = v->foreign,
					   .nr_foreign = nf,
					   .host = host };
}

static void view_free(struct view *v)
{
	free(v->bound);
	free(v->foreign);
}

/* The rewritten bytes the host has yet to take. */
static size_t up_pending(const struct conn *c)
{
	return c->up.len - c->up_off;
}

static void in_drop(struct conn *c)
{
	explicit_bzero(c->in, c->in_len);
	c->in_len = c->in_off = 0;
}

/* The answer to a request the rewriter refused (0), or the end (-1). */
static int refuse_request(struct conn *c, enum egress_http_status st)
{
	switch (st) {
	case EGRESS_HTTP_TOO_BIG:
		return refuse_in_relay(c, 431, "a request head larger than Gantry passes");
	case EGRESS_HTTP_MISDIRECTED:
		return refuse_in_relay(c, 421,
				       "a request for another host than the connection's (its "
				       "Host header or target)");
	case EGRESS_HTTP_METHOD:
		return refuse_in_relay(c, 405, "CONNECT, TRACE and TRACK are not passed");
	default:
		return refuse_in_relay(c, 400, "a request Gantry cannot read as HTTP/1.1");
	}
}

/* Rewrite the guest's held bytes into up while it is under UP_HIGH: what
 * is left waits for the host to take some, then goes with no new byte
 * from the guest. 1: fed; 0: refused; -1: over. */
static int up_feed(struct egress *e, struct conn *c)
{
	struct feed who = { e, c };
	enum egress_http_status st;
	struct view v;
	size_t used;

	/* The policy may have changed since the hello. */
	if (!allowed(e, c->host)) {
		in_drop(c);
		return refuse_in_relay(
			c, 403, "the egress policy no longer lets this sandbox reach this host");
	}
	view_make(e, c->host, &v);
	st = egress_http_feed(c->http, c->in + c->in_off, c->in_len - c->in_off, &used, &v.set,
			      &c->up, UP_HIGH - up_pending(c), http_event, &who);
	view_free(&v);
	c->in_off += used;
	if (c->in_off == c->in_len || st != EGRESS_HTTP_OK)
		in_drop(c);
	return st == EGRESS_HTTP_OK ? 1 : refuse_request(c, st);
}

/* Move what can move, both ways, until nothing does: -1 when the
 * connection is over. */
static int relay(struct egress *e, struct conn *c)
{
	gantry_error_t err = NULL;
	bool moved = true;
	size_t budget = RELAY_BUDGET;
	ssize_t n;
	short ev;
	int r;

	c->gwant = c->uwant = 0;
	c->busy = false;
	while (moved) {
		moved = false;
		if (budget == 0) { /* the others' turn: poll at once, and on */
			c->busy = true;
			break;
		}
		/* Read only once what was read is rewritten. */
		if (!c->g_eof && c->in_len == 0 && up_pending(c) < UP_HIGH && c->st == C_RELAY &&
		    (c->g_rd || egress_conn_pending(c->g))) {
			n = egress_conn_read(c->g, c->in, sizeof(c->in), &ev, &err);
			/* A short read took what there was: poll says when more comes
			 * (what OpenSSL holds back, egress_conn_pending does). */
			if (n > 0 && (size_t)n < sizeof(c->in))
				c->g_rd = false;
			if (n > 0) {
				budget -= MIN(budget, (size_t)n);
				c->in_len = (size_t)n;
				c->in_off = 0;
			} else if (n == 0) {
				c->g_eof = moved = true;
			} else if (n == EGRESS_AGAIN) {
				c->gwant |= ev;
				c->g_rd = false;
			} else {
				goto fail;
			}
		}
		if (c->in_len && up_pending(c) < UP_HIGH) {
			r = up_feed(e, c);
			if (r <= 0)
				return r;
			moved = true;
		}
		if (c->up.len > c->up_off) {
			n = egress_conn_write(c->u, c->up.data + c->up_off, c->up.len - c->up_off,
					      &ev, &err);
			if (n > 0) {
				c->up_off += (size_t)n;
				if (c->up_off == c->up.len) {
					explicit_bzero(c->up.data, c->up.len);
					c->up.len = c->up_off = 0;
				} else if (c->up_off >= UP_COMPACT && c->up_off >= up_pending(c)) {
					/* Past half: a byte is moved no more often than
					 * one is sent. It zeroes what it drops. */
					egress_buf_consume(&c->up, c->up_off);
					c->up_off = 0;
				}
				moved = true;
			} else if (n == EGRESS_AGAIN) {
				c->uwant |= ev;
			} else {
				goto fail;
			}
		}
		if (c->g_eof && c->in_len == 0 && c->up.len == 0 &&
		    (!c->u_closed || c->u_closing)) {
			/* Its close_notify may wait for room: POLLOUT, then again. */
			c->u_closing = !egress_conn_close(c->u);
			c->u_closed = true;
			if (c->u_closing)
				c->uwant |= POLLOUT;
		}
		if (!c->u_eof && c->down_len == 0 && (c->u_rd || egress_conn_pending(c->u))) {
			n = egress_conn_read(c->u, c->down, sizeof(c->down), &ev, &err);
			if (n > 0 && (size_t)n < sizeof(c->down))
				c->u_rd = false;
			if (n > 0) {
				budget -= MIN(budget, (size_t)n);
				c->down_len = (size_t)n;
				c->down_off = 0;
				moved = true;
			} else if (n == 0) {
				c->u_eof = moved = true;
			} else if (n == EGRESS_AGAIN) {
				c->uwant |= ev;
				c->u_rd = false;
			} else {
				goto fail;
			}
		}
		if (c->down_len) {
			n = egress_conn_write(c->g, c->down + c->down_off,
					      c->down_len - c->down_off, &ev, &err);
			if (n > 0) {
				c->down_off += (size_t)n;
				if (c->down_off == c->down_len)
					c->down_len = c->down_off = 0;
				moved = true;
			} else if (n == EGRESS_AGAIN) {
				c->gwant |= ev;
			} else {
				goto fail;
			}
		}
		if (moved)
			c->active = now_ms();
	}
	/* What is not read now waits for poll to say it is there; what is
	 * held, for the host to take some of up (POLLOUT, from the write). */
	if (!c->g_eof && c->in_len == 0 && up_pending(c) < UP_HIGH && c->st == C_RELAY)
		c->gwant |= POLLIN;
	if (!c->u_eof && c->down_len == 0)
		c->uwant |= POLLIN;
	if (c->u_eof && c->down_len == 0)
		return -1; /* the host is done: so are we */
	if (c->g_eof && c->u_closed && c->u_eof)
		return -1;
	return 0;
fail:
	gantry_error_free(&err);
	return -1;
}

/* Write the refusal, then end. -1: over. */
static int refusal_flush(struct conn *c)
{
	gantry_error_t err = NULL;
	short ev = 0;
	ssize_t n;

	c->gwant = c->uwant = 0;
	while (c->refusal_off < c->refusal_len) {
		n = egress_conn_write(c->g, c->refusal + c->refusal_off,
				      c->refusal_len - c->refusal_off, &ev, &err);
		if (n == EGRESS_AGAIN) {
			c->gwant = ev;
			return 0;
		}
		if (n <= 0) {
			gantry_error_free(&err);
			return -1;
		}
		c->refusal_off += (size_t)n;
	}
	return -1;
}

/* One step of c, after its fds' poll or its deadline: -1 when over. */
int conn_step(struct egress *e, struct conn *c, uint64_t now, short grev, short urev)
{
	gantry_error_t err = NULL;
	int r;

	if (grev & (POLLIN | POLLHUP | POLLERR))
		c->g_rd = true;
	if (urev & (POLLIN | POLLHUP | POLLERR))
		c->u_rd = true;
	for (;;) {
		enum cstate was = c->st;

		switch (c->st) {
		case C_HELLO:
			r = egress_conn_handshake(c->g, &c->gwant, &err);
			if (r < 0) {
				log_info("guest TLS: %s", gantry_error_str(err));
				gantry_error_free(&err);
				return -1;
			}
			if (r == 0)
				return now > c->deadline ? -1 : 0;
			hello_done(e, c);
			break;
		case C_LOOKUP:
			if (now > c->deadline) {
				refuse(c, 504, "no nameserver answered in time");
				break;
			}
			r = lookup_step(&c->lk, now, &err);
			if (r < 0) {
				refuse(c, 502, gantry_error_str(err));
				gantry_error_free(&err);
			} else if (r == 0) {
				return 0;
			} else {
				lookup_done(e, c);
			}
			break;
		case C_CONNECT:
			if (now > c->deadline) {
				refuse(c, 504, "the host did not answer in time");
				break;
			}
			if (urev == 0)
				return 0;
			connected(e, c);
			break;
		case C_UPSHAKE:
			r = egress_conn_handshake(c->u, &c->uwant, &err);
			if (r < 0) {
				egress_event(e, "tls", "untrusted", NULL, c->host,
					     gantry_error_str(err));
				refuse(c, 502, gantry_error_str(err));
				gantry_error_free(&err);
			} else if (r == 0) {
				if (now > c->deadline)
					refuse(c, 504, "the host's TLS did not finish in time");
				else
					return 0;
			} else {
				upshake_done(e, c);
			}
			break;
		case C_RELAY:
			if (relay(e, c) < 0)
				return -1;
			if (c->st == C_RELAY)
				return 0;
			break;
		case C_REFUSE:
			return now > c->deadline ? -1 : refusal_flush(c);
		}
		/* What poll said was of the state before. */
		grev = urev = 0;
		if (c->st == was && c->st != C_RELAY)
			return 0;
	}
}

/* A connection the network worker handed over. */
void conn_take(struct egress *e)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	char one;
	struct iovec iov = { .iov_base = &one, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	gantry_error_t err = NULL;
	struct cmsghdr *cm;
	struct conn *c = NULL;
	int fd = -1;
	ssize_t n;

	n = recvmsg(e->conn_fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n == 0) {
		log_info("the network worker hung up: stopping");
		e->done = true;
		return;
	}
	if (n < 0)
		return;
	cm = CMSG_FIRSTHDR(&msg);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
	    cm->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	if (fd < 0)
		return;
	for (size_t i = 0; i < EGRESS_CONNS_MAX && c == NULL; i++)
		if (!e->conns[i].used)
			c = &e->conns[i];
	if (c == NULL || egress_conn_server(e->tls, fd, &c->g, &err) < 0) {
		if (err)
			log_warn("%s", gantry_error_str(err));
		gantry_error_free(&err);
		close(fd);
		return;
	}
	c->used = true;
	c->gfd = fd;
	c->ufd = -1;
	c->lk.fd = -1;
	c->st = C_HELLO;
	c->deadline = now_ms() + EGRESS_SETUP_MS;
	c->active = now_ms();
	e->nr_conns++;
	if (conn_step(e, c, now_ms(), 0, 0) < 0)
		conn_end(e, c);
}
