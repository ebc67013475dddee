/* The egress worker (see egress.h): its start, its channel, and each
 * connection's way from the guest's TLS to the host's, on one thread that
 * never blocks: every socket is in one poll set. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "confine/confine.h"
#include "egress/egress.h"
#include "egress/http.h"
#include "egress/resolve.h"
#include "egress/ssl.h"
#include "egress/tls.h"
#include "net/dns.h"
#include "net/policy.h"
#include "secret/store.h"
#include "worker/worker.h"

#define IO_CHUNK    (16 * 1024)
#define UP_HIGH	    (256 * 1024) /* rewritten bytes waiting for the host: read no more */
#define EVENTS_SEEN 8		 /* what one connection reported, not reported again */

/* One injected secret, as the owner last gave it. */
struct binding {
	char name[SECRET_NAME_MAX + 1];
	char **hosts;
	char *header, *format;
	char placeholder[SECRET_PLACEHOLDER_LEN + 1];
	const uint8_t *value; /* in the worker's value block; NULL: withheld */
	size_t len;
};

enum cstate { C_HELLO, C_LOOKUP, C_CONNECT, C_UPSHAKE, C_RELAY, C_REFUSE };

struct conn {
	bool used;
	enum cstate st;
	int gfd, ufd;
	struct egress_conn *g, *u;
	char host[DNS_NAME_MAX + 1];
	struct lookup lk;
	uint32_t ips[LOOKUP_ADDRS_MAX];
	size_t nr_ips, ip_at;
	uint64_t deadline, active;
	struct egress_http *http;
	struct egress_buf up; /* to the host: rewritten, may hold values (wiped) */
	size_t up_off;
	uint8_t down[IO_CHUNK]; /* to the guest, as the host sent it */
	size_t down_len, down_off;
	char *refusal; /* REFUSE: the answer the guest gets before the end */
	size_t refusal_len, refusal_off;
	short gwant, uwant;
	bool g_rd, u_rd; /* a read may find something: poll said so, or none was tried */
	bool g_eof, u_eof, u_closed;
	struct {
		int kind;
		char name[SECRET_NAME_MAX + 1];
	} seen[EVENTS_SEEN];
	size_t nr_seen;
};

struct egress {
	int chan, conn_fd, sig_fd;
	struct egress_tls *tls;
	struct sockaddr_in up[DNS_MAX_UPSTREAM];
	size_t nr_up;
	bool allow_local;
	struct policy_wall wall;
	struct binding *b;
	size_t nr_b;
	uint8_t *values; /* the arena block the values are in */
	size_t values_size;
	char **allowed; /* bound hosts the policy lets through now */
	struct conn conns[EGRESS_CONNS_MAX];
	size_t nr_conns;
	uint64_t events_lost;
	bool done;
};

/* ---- the audit --------------------------------------------------------- */

static void event(struct egress *e, const char *kind, const char *decision, const char *secret,
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
		event(e, "deliver", "inject", name, c->host, reason);
		break;
	case EGRESS_EV_MISPLACED:
		snprintf(reason, sizeof(reason),
			 "its placeholder in %s, not the header it is bound to: sent as it was",
			 header ? header : "a header");
		event(e, "withhold", "header", name, c->host, reason);
		break;
	case EGRESS_EV_FOREIGN:
		snprintf(reason, sizeof(reason),
			 "its placeholder sent to a host it is not bound to (in %s): sent as "
			 "it was",
			 header ? header : "a header");
		event(e, "withhold", "placeholder", name, c->host, reason);
		break;
	case EGRESS_EV_UNFIT:
		event(e, "withhold", "value", name, c->host,
		      "its value holds a line break or NUL, which no header may");
		break;
	}
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

static bool has_host(char *const *hosts, const char *host)
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
	ssize_t got;

	e->values = secret_alloc(n + 1);
	if (e->values == NULL)
		return gantry_error(err, ENOMEM, "no room in the secret arena");
	e->values_size = n + 1;
	if (poll(&p, 1, 1000) != 1)
		return gantry_error(err, ETIMEDOUT, "the values did not come");
	got = recv(e->chan, e->values, n + 1, MSG_DONTWAIT);
	if (got != (ssize_t)n)
		return gantry_error(err, EPROTO, "the values came short");
	return 0;
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

/* ---- connections ------------------------------------------------------- */

static void conn_end(struct egress *e, struct conn *c)
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
	log_info("%s: %d: %s", c->host[0] ? c->host : "(no name)", status, why);
}

static bool allowed(struct egress *e, const char *host)
{
	return has_host(e->allowed, host);
}

static void connect_next(struct egress *e, struct conn *c);

static void hello_done(struct egress *e, struct conn *c)
{
	gantry_error_t err = NULL;

	snprintf(c->host, sizeof(c->host), "%s", egress_conn_host(c->g));
	if (!allowed(e, c->host)) {
		event(e, "withhold", "policy", NULL, c->host,
		      "the egress policy does not let the sandbox reach it");
		refuse(c, 403, "the egress policy does not let this sandbox reach this host");
		return;
	}
	if (lookup_start(&c->lk, c->host, e->up, e->nr_up, &err) < 0) {
		refuse(c, 502, gantry_error_str(err));
		gantry_error_free(&err);
		return;
	}
	c->st = C_LOOKUP;
}

static void lookup_done(struct egress *e, struct conn *c)
{
	c->nr_ips = 0;
	for (size_t i = 0; i < c->lk.nr_ips; i++)
		if (e->allow_local || !policy_wall_hit(&e->wall, c->lk.ips[i]))
			c->ips[c->nr_ips++] = c->lk.ips[i];
	lookup_end(&c->lk);
	if (c->nr_ips == 0) {
		event(e, "withhold", "policy", NULL, c->host,
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
	(void)e;
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

		if (has_host(b->hosts, host) && b->value)
			v->bound[nb++] = eb;
		else
			v->foreign[nf++] = eb;
	}
	v->set = (struct egress_bindings){
		.bound = v->bound, .nr_bound = nb, .foreign = v->foreign, .nr_foreign = nf
	};
}

static void view_free(struct view *v)
{
	free(v->bound);
	free(v->foreign);
}

/* Move what can move, both ways, until nothing does: -1 when the
 * connection is over. */
static int relay(struct egress *e, struct conn *c)
{
	uint8_t buf[IO_CHUNK];
	gantry_error_t err = NULL;
	bool moved = true;
	ssize_t n;
	short ev;

	c->gwant = c->uwant = 0;
	while (moved) {
		moved = false;
		if (!c->g_eof && c->up.len - c->up_off < UP_HIGH && c->st == C_RELAY &&
		    (c->g_rd || egress_conn_pending(c->g))) {
			n = egress_conn_read(c->g, buf, sizeof(buf), &ev, &err);
			/* A short read took what there was: poll says when more comes
			 * (what OpenSSL holds back, egress_conn_pending does). */
			if (n > 0 && (size_t)n < sizeof(buf))
				c->g_rd = false;
			if (n > 0) {
				struct feed who = { e, c };
				struct view v;
				enum egress_http_status st;

				view_make(e, c->host, &v);
				st = egress_http_feed(c->http, buf, (size_t)n, &v.set, &c->up,
						      http_event, &who);
				view_free(&v);
				explicit_bzero(buf, (size_t)n);
				if (st == EGRESS_HTTP_TOO_BIG) {
					refuse(c, 431, "a request head larger than Gantry passes");
					return 0;
				}
				if (st != EGRESS_HTTP_OK) {
					refuse(c, 400, "a request Gantry cannot read as HTTP/1.1");
					return 0;
				}
				moved = true;
			} else if (n == 0) {
				c->g_eof = moved = true;
			} else if (n == EGRESS_AGAIN) {
				c->gwant |= ev;
				c->g_rd = false;
			} else {
				goto fail;
			}
		}
		if (c->up.len > c->up_off) {
			n = egress_conn_write(c->u, c->up.data + c->up_off, c->up.len - c->up_off,
					      &ev, &err);
			if (n > 0) {
				c->up_off += (size_t)n;
				if (c->up_off == c->up.len) {
					explicit_bzero(c->up.data, c->up.len);
					c->up.len = c->up_off = 0;
				}
				moved = true;
			} else if (n == EGRESS_AGAIN) {
				c->uwant |= ev;
			} else {
				goto fail;
			}
		}
		if (c->g_eof && c->up.len == 0 && !c->u_closed) {
			egress_conn_close(c->u);
			c->u_closed = true;
		}
		if (!c->u_eof && c->down_len == 0 && (c->u_rd || egress_conn_pending(c->u))) {
			n = egress_conn_read(c->u, c->down, sizeof(c->down), &ev, &err);
			if (n > 0 && (size_t)n < sizeof(c->down))
				c->u_rd = false;
			if (n > 0) {
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
	/* What is not read now waits for poll to say it is there. */
	if (!c->g_eof && c->up.len - c->up_off < UP_HIGH && c->st == C_RELAY)
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
static int conn_step(struct egress *e, struct conn *c, uint64_t now, short grev, short urev)
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
				event(e, "tls", "untrusted", NULL, c->host, gantry_error_str(err));
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
			return refusal_flush(c);
		}
		if (c->st == was && c->st != C_RELAY)
			return 0;
	}
}

/* A connection the network worker handed over. */
static void conn_take(struct egress *e)
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
			log_warn("%s: no secret is injected", gantry_error_str(err));
			bindings_free(e);
			gantry_error_free(&err);
		}
	} else if (op && strcmp(op, "allowed") == 0) {
		size_t nr;

		strv_free(e->allowed);
		e->allowed = NULL;
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
			if (!woke && (c->st == C_RELAY || now <= c->deadline))
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
	bool self_test;
};

static int parse_fd(const char *s, int *out)
{
	uint64_t v;

	if (s == NULL || parse_u64(s, INT_MAX, &v) < 0)
		return -1;
	*out = (int)v;
	return 0;
}

static int load_filter(void *opaque, bool log, gantry_error_t *err)
{
	(void)opaque;
	return confine_filter_egress(log, err);
}

static int parse_args(int argc, char **argv, struct args *a)
{
	*a = (struct args){ .chan = WORKER_CHAN, .conn_fd = -1, .trust_fd = -1 };
	a->hosts = xzalloc(sizeof(char *) * ((size_t)argc + 1));
	for (int i = 0; i < argc; i++) {
		const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		int n = confine_arg(&a->confine, opt, val);

		if (n < 0)
			return -1;
		if (n > 0)
			i += n - 1;
		else if (strcmp(opt, "--self-test") == 0)
			a->self_test = true;
		else if (strcmp(opt, "--conn-fd") == 0 && parse_fd(val, &a->conn_fd) == 0)
			i++;
		else if (strcmp(opt, "--chan-fd") == 0 && parse_fd(val, &a->chan) == 0)
			i++;
		else if (strcmp(opt, "--trust-fd") == 0 && parse_fd(val, &a->trust_fd) == 0)
			i++;
		else if (strcmp(opt, "--host") == 0 && val && a->nr_hosts < EGRESS_HOSTS_MAX)
			a->hosts[a->nr_hosts++] = argv[++i];
		else if (strcmp(opt, "--allow-local-net") == 0)
			a->allow_local = true;
		else
			return -1;
	}
	a->confine.role = "egress";
	a->confine.load_filter = load_filter;
	a->confine.nofile = EGRESS_WORKER_NOFILE;
	return (a->conn_fd >= 0 && a->trust_fd >= 0 && a->nr_hosts) || a->self_test ? 0 : -1;
}

/* The trust store, read whole from its descriptor. */
static int trust_read(int fd, char **out, size_t *len, gantry_error_t *err)
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
	if (trust_read(a->trust_fd, &trust, &len, err) < 0)
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
	if ((rc = confine_self_test_again(argc, argv, EGRESS_WORKER_ROLE, 0)) >= 0)
		return rc;
	if (parse_args(argc, argv, &a) < 0) {
		log_error("%s is for Gantry's own use: --conn-fd N --trust-fd N --host HOST... "
			  "[--chan-fd N] [--allow-local-net]",
			  EGRESS_WORKER_ROLE);
		free(a.hosts);
		return 2;
	}
	if (a.self_test) {
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
