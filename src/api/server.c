/* The manager API's HTTP side: libmicrohttpd (loaded when `gantry serve`
 * starts, a thread per connection, so a lifecycle call may block its own
 * connection and no other) on a Unix socket we bind ourselves: mode 0600,
 * one server per path (a lock beside it), and a peer of another UID is
 * hung up on before it is answered. Bodies are gathered up to
 * API_BODY_MAX (API_BODIES_MAX for all at once); /v1/events streams from
 * a subscriber's queue. On TCP, a connection that has not yet sent a
 * whole request head (whose token is not yet seen) is one of at most
 * API_PENDING_MAX: a new one ends the oldest, so clients without the
 * token cannot hold the listener's slots by sending slowly. */
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api_priv.h"
#include "api/e2b.h"
#include "common/lazy.h"
#include "common/log.h"
#include "common/unixsock.h"
#include "common/util.h"

#define MHD_SYMS(X)                                                                                \
	X(MHD_start_daemon)                                                                        \
	X(MHD_stop_daemon)                                                                         \
	X(MHD_create_response_from_buffer)                                                         \
	X(MHD_create_response_from_callback)                                                       \
	X(MHD_add_response_header)                                                                 \
	X(MHD_queue_response)                                                                      \
	X(MHD_destroy_response)                                                                    \
	X(MHD_lookup_connection_value)                                                             \
	X(MHD_get_connection_info)

MHD_SYMS(LAZY_DEFINE)
static const struct lazy_sym mhd_syms[] = { MHD_SYMS(LAZY_ENTRY) };
static struct lazy_lib mhd_lib = LAZY_LIB("libmicrohttpd.so.12", "libmicrohttpd12", mhd_syms);

_Static_assert(API_SUBSCRIBERS_MAX + E2B_STREAMS_MAX + API_PENDING_MAX + API_LIFECYCLE_MAX +
			       API_EXECS_MAX <
		       API_CONNECTIONS_MAX,
	       "a listener has room for every stream, pending head and call at once");

/* A TCP connection whose request head has not come yet. */
struct pending {
	struct MHD_Connection *c;
	int fd;
};

/* One listening socket: the Unix one (peers of our UID only) or a TCP
 * one (requests carry the token). */
struct listener {
	struct api_server *s;
	bool tcp;
	const char *token;
	pthread_mutex_t lock; /* TCP: pend */
	struct pending pend[API_PENDING_MAX]; /* oldest first */
	size_t nr_pend;
};

/* A request's state across the handler's calls. */
struct conn_req {
	char *body;
	size_t len;
	struct api_server *s; /* whose bodies count len, once a byte came */
};

/* n more bytes of request bodies held, if all of them stay within
 * API_BODIES_MAX: a body over it ends its connection. */
static bool bodies_take(struct api_server *s, size_t n)
{
	bool ok;

	pthread_mutex_lock(&s->lock);
	ok = n <= API_BODIES_MAX - s->bodies;
	if (ok)
		s->bodies += n;
	pthread_mutex_unlock(&s->lock);
	return ok;
}

/* a and b alike, in a time that does not say where they differ. */
static bool same_secret(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b);
	unsigned char d = n != m;

	for (size_t i = 0; i < n; i++)
		d |= (unsigned char)(a[i] ^ b[i % (m ? m : 1)]);
	return d == 0;
}

/* A TCP request carries the token: `Authorization: Bearer TOKEN`, or
 * `X-API-Key: TOKEN` as the E2B SDK sends its key. */
static bool token_ok(const struct listener *l, struct MHD_Connection *c)
{
	const char *v = sym_MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");

	if (v && strncasecmp(v, "Bearer ", 7) == 0 && same_secret(v + 7, l->token))
		return true;
	v = sym_MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-API-Key");
	if (v && same_secret(v, l->token))
		return true;
	/* The E2B SDK's envd calls carry the access token a create answered. */
	v = sym_MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Access-Token");
	return v && same_secret(v, l->token);
}

static const char *lookup(const struct api_request *req, bool query, const char *name)
{
	return sym_MHD_lookup_connection_value(
		req->conn, query ? MHD_GET_ARGUMENT_KIND : MHD_HEADER_KIND, name);
}

static bool peer_ok(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		sym_MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

	return ci && unix_peer_is_us(ci->connect_fd);
}

/* c is no longer waiting for its head (it came, or c ended). */
static void pending_done(struct listener *l, struct MHD_Connection *c)
{
	pthread_mutex_lock(&l->lock);
	for (size_t i = 0; i < l->nr_pend; i++) {
		if (l->pend[i].c != c)
			continue;
		memmove(&l->pend[i], &l->pend[i + 1], (l->nr_pend - i - 1) * sizeof(l->pend[0]));
		l->nr_pend--;
		break;
	}
	pthread_mutex_unlock(&l->lock);
}

/* A new TCP connection waits for its head among the last API_PENDING_MAX:
 * the oldest is shut for it (its fd is open until libmicrohttpd's CLOSED
 * notice, which takes the lock first). */
static void pending_add(struct listener *l, struct MHD_Connection *c, int fd)
{
	pthread_mutex_lock(&l->lock);
	if (l->nr_pend == API_PENDING_MAX) {
		shutdown(l->pend[0].fd, SHUT_RDWR);
		memmove(&l->pend[0], &l->pend[1], (l->nr_pend - 1) * sizeof(l->pend[0]));
		l->nr_pend--;
	}
	l->pend[l->nr_pend++] = (struct pending){ .c = c, .fd = fd };
	pthread_mutex_unlock(&l->lock);
}

/* A new connection from a peer of another UID is shut at once: it gets
 * no answer and holds no slot longer than it takes to see the EOF. One on
 * TCP is pending until its head comes. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct listener *l = cls;
	const union MHD_ConnectionInfo *ci;

	(void)socket_context;
	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (l->tcp)
			pending_done(l, c);
		return;
	}
	ci = sym_MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci == NULL)
		return;
	if (l->tcp)
		pending_add(l, c, ci->connect_fd);
	else if (!unix_peer_is_us(ci->connect_fd))
		shutdown(ci->connect_fd, SHUT_RDWR);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct api_stream *st = cls;
	size_t n;

	(void)pos;
	n = st->read(st, buf, max);
	return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_done(void *cls)
{
	struct api_stream *st = cls;

	st->done(st);
}

static enum MHD_Result send_reply(struct MHD_Connection *c, struct api_reply *r)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	char *text = NULL;

	if (r->stream) {
		resp = sym_MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read,
							     r->stream, stream_done);
		if (resp == NULL)
			r->stream->done(r->stream);
		else
			sym_MHD_add_response_header(resp, "Cache-Control", "no-store");
	} else if (r->owned) {
		resp = sym_MHD_create_response_from_buffer(r->len, r->owned, MHD_RESPMEM_MUST_FREE);
		if (resp)
			r->owned = NULL; /* the response's now */
	} else if (r->json || r->bytes == NULL) {
		text = r->json ? json_dumps(r->json, JSON_COMPACT) : NULL;
		if (text == NULL) {
			/* A backend's answer that JSON cannot hold. */
			text = xstrdup("{\"error\":\"the answer could not be made\"}");
			r->status = 500;
		}
		resp = sym_MHD_create_response_from_buffer(strlen(text), text,
							   MHD_RESPMEM_MUST_FREE);
		if (resp == NULL)
			free(text);
		r->type = "application/json";
	} else {
		resp = sym_MHD_create_response_from_buffer(r->len, (void *)r->bytes,
							   MHD_RESPMEM_PERSISTENT);
	}
	if (resp == NULL)
		return MHD_NO;
	if (r->type)
		sym_MHD_add_response_header(resp, "Content-Type", r->type);
	if (r->allow)
		sym_MHD_add_response_header(resp, "Allow", r->allow);
	ret = sym_MHD_queue_response(c, r->status, resp);
	sym_MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_size, void **con_cls)
{
	struct listener *l = cls;
	struct api_server *s = l->s;
	struct conn_req *cr = *con_cls;
	struct api_reply r = { 0 };
	struct api_request req;
	enum MHD_Result ret;
	const char *cl;

	(void)version;
	if (cr == NULL) {
		if (!l->tcp && !peer_ok(c))
			return MHD_NO;
		if (l->tcp)
			pending_done(l, c);
		cr = xzalloc(sizeof(*cr));
		*con_cls = cr;
		cl = sym_MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
		if (l->tcp && !token_ok(l, c)) {
			/* Answered before the body is read; the connection then ends. */
			api_reply_error(&r, 401,
					"this address takes the server's token "
					"(Authorization: Bearer TOKEN, or X-API-Key)");
			ret = send_reply(c, &r);
			json_decref(r.json);
			return ret;
		}
		if (cl && strtoull(cl, NULL, 10) > e2b_body_max(method, url)) {
			api_reply_error(&r, 413, "the body is over %zu bytes",
					e2b_body_max(method, url));
			ret = send_reply(c, &r);
			json_decref(r.json);
			return ret;
		}
		return MHD_YES;
	}
	if (*upload_size) {
		/* A body that says no length runs past the limit: the answer
		 * cannot be queued mid-upload, so the connection ends. */
		if (cr->len + *upload_size > e2b_body_max(method, url) ||
		    !bodies_take(s, *upload_size))
			return MHD_NO;
		cr->s = s;
		cr->body = xrealloc(cr->body, cr->len + *upload_size);
		memcpy(cr->body + cr->len, upload, *upload_size);
		cr->len += *upload_size;
		*upload_size = 0;
		return MHD_YES;
	}
	{
		const union MHD_ConnectionInfo *ci =
			sym_MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

		req = (struct api_request){
			.method = method,
			.path = url,
			.key = sym_MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							       "Idempotency-Key"),
			.body = cr->body,
			.len = cr->len,
			.lookup = lookup,
			.conn = c,
			.conn_fd = ci ? ci->connect_fd : -1,
		};
		api_route(s, &req, &r);
	}
	ret = send_reply(c, &r);
	json_decref(r.json);
	free(r.owned);
	return ret;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
		      enum MHD_RequestTerminationCode toe)
{
	struct conn_req *cr = *con_cls;

	(void)cls;
	(void)c;
	(void)toe;
	if (cr) {
		if (cr->s) {
			pthread_mutex_lock(&cr->s->lock);
			cr->s->bodies -= cr->len;
			pthread_mutex_unlock(&cr->s->lock);
		}
		free(cr->body);
		free(cr);
		*con_cls = NULL;
	}
}

/* One server per socket: an exclusive lock on PATH.lock, held while it
 * serves. */
static int lock_socket(const char *path, int *lock, gantry_error_t *err)
{
	cleanup_free char *lp = NULL;

	xasprintf(&lp, "%s.lock", path);
	*lock = open(lp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (*lock < 0)
		return gantry_error_errno(err, "open `%s`", lp);
	if (flock(*lock, LOCK_EX | LOCK_NB) < 0) {
		close_fd(lock);
		if (errno == EWOULDBLOCK)
			return gantry_error(err, 0, "another gantry serve listens on `%s`", path);
		return gantry_error_errno(err, "lock `%s`", lp);
	}
	return 0;
}

int api_token(const char *dir, char **out, gantry_error_t *err)
{
	cleanup_free char *path = NULL;
	cleanup_close int fd = -1;
	unsigned char raw[32];
	char hex[65] = "";
	struct stat st;
	ssize_t n;

	xasprintf(&path, "%s/manager.token", dir);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0) {
		if (getrandom(raw, sizeof(raw), 0) != sizeof(raw))
			return gantry_error_errno(err, "getrandom");
		for (size_t i = 0; i < sizeof(raw); i++)
			snprintf(hex + 2 * i, 3, "%02x", raw[i]);
		explicit_bzero(raw, sizeof(raw));
		if (write_full(fd, hex, 64) < 0 || write_full(fd, "\n", 1) < 0) {
			unlink(path);
			return gantry_error_errno(err, "write `%s`", path);
		}
	} else if (errno == EEXIST) {
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			return gantry_error_errno(err, "open `%s`", path);
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
		    (st.st_mode & 077))
			return gantry_error(
				err, 0,
				"`%s` must be a file of this user's that only it may read "
				"(chmod 600)",
				path);
		n = read(fd, hex, 64);
		if (n != 64 || strspn(hex, "0123456789abcdef") != 64)
			return gantry_error(err, 0,
					    "`%s` does not hold a token: remove it for a new one",
					    path);
	} else {
		return gantry_error_errno(err, "open `%s`", path);
	}
	*out = xstrdup(hex);
	explicit_bzero(hex, sizeof(hex));
	return 0;
}

int api_listen_parse(const char *spec, bool remote, struct sockaddr_in *sa, gantry_error_t *err)
{
	cleanup_free char *host = NULL;
	const char *colon = strrchr(spec, ':');
	uint64_t port;

	*sa = (struct sockaddr_in){ .sin_family = AF_INET };
	if (colon == NULL || parse_u64(colon + 1, 65535, &port) < 0 || port == 0)
		return gantry_error_usage(err, "listen `%s`: want HOST:PORT, as 127.0.0.1:3000",
					  spec);
	host = xstrndup(spec, (size_t)(colon - spec));
	if (*host == '\0' || strcmp(host, "localhost") == 0)
		sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		return gantry_error_usage(err, "listen `%s`: `%s` is not an IPv4 address", spec,
					  host);
	if (!remote && (ntohl(sa->sin_addr.s_addr) >> 24) != 127)
		return gantry_error_usage(err,
					  "listen `%s`: not a loopback address; -listen-remote "
					  "lets other machines reach the API (with the token)",
					  spec);
	sa->sin_port = htons((uint16_t)port);
	return 0;
}

static int tcp_listen(const char *spec, bool remote, gantry_error_t *err)
{
	struct sockaddr_in sa;
	int fd, one = 1;

	if (api_listen_parse(spec, remote, &sa, err) < 0)
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return gantry_error_errno(err, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
		gantry_error_errno(err, "listen on %s", spec);
		close(fd);
		return -1;
	}
	return fd;
}

/* libmicrohttpd decodes a URL and its query in place: %00 would cut one
 * short (`/v1/sandboxes/a%00x` naming `a`), so it stays as it came; the
 * rest is decoded (the query's %2F, a path's slashes). Returns the new
 * length. */
static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)(c | 0x20);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
	char *w = s;

	(void)cls;
	(void)c;
	for (const char *p = s; *p; p++) {
		int hi, lo;

		if (p[0] == '%' && p[1] && p[2] && (hi = hexval(p[1])) >= 0 &&
		    (lo = hexval(p[2])) >= 0 && (hi || lo)) {
			*w++ = (char)(hi << 4 | lo);
			p += 2;
		} else {
			*w++ = *p;
		}
	}
	*w = '\0';
	return (size_t)(w - s);
}

/* The daemon serving fd, which it owns from here on (it closes it when
 * it stops, and on some of its failures). */
static struct MHD_Daemon *daemon_on(int fd, struct listener *l)
{
	return sym_MHD_start_daemon(
		MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ITC, 0, NULL,
		NULL, handle, l, MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
		MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
		(unsigned)API_CONNECTIONS_MAX, MHD_OPTION_CONNECTION_TIMEOUT, 120u,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, l, MHD_OPTION_NOTIFY_COMPLETED,
		completed, l, MHD_OPTION_END);
}

int api_serve(const struct api_serve_opts *o, const struct api_backend *b, gantry_error_t *err)
{
	struct api_server *s = xzalloc(sizeof(*s));
	struct listener unix_l = { .s = s, .lock = PTHREAD_MUTEX_INITIALIZER },
			tcp_l = { .s = s, .tcp = true, .token = o->token,
				  .lock = PTHREAD_MUTEX_INITIALIZER };
	cleanup_close int lock = -1, fd = -1, tfd = -1;
	struct MHD_Daemon *d = NULL, *td = NULL;
	bool bound = false;
	struct pollfd p = { o->stop_fd, POLLIN, 0 };
	int ret = -1;

	s->cancel.fd = -1;
	s->b = b;
	s->token = o->token;
	s->keepalive_ms = o->keepalive_ms ? o->keepalive_ms : API_KEEPALIVE_MS;
	api_ops_init(s);
	if (o->listen && (o->token == NULL || strlen(o->token) < 32)) {
		gantry_error(err, 0,
			     "listen: a TCP listener needs a token of 32 characters or more");
		goto out;
	}
	if (lazy_load(&mhd_lib, err) < 0 || cancel_init(&s->cancel, err) < 0)
		goto out;
	if (lock_socket(o->socket, &lock, err) < 0 ||
	    (o->listen && (tfd = tcp_listen(o->listen, o->listen_remote, err)) < 0) ||
	    (fd = unix_listen(o->socket, 64, err)) < 0)
		goto out;
	bound = true;
	e2b_init(s);
	d = daemon_on(steal_fd(&fd), &unix_l);
	if (d && tfd >= 0)
		td = daemon_on(steal_fd(&tfd), &tcp_l);
	if (d == NULL || (o->listen && td == NULL)) {
		gantry_error(err, 0, "cannot serve on `%s`: libmicrohttpd refused to start",
			     d ? o->listen : o->socket);
		goto stop;
	}
	log_info("serving the manager API on %s%s%s", o->socket, o->listen ? " and " : "",
		 o->listen ? o->listen : "");
	if (o->ready_line) {
		printf("%s\n", o->ready_line);
		fflush(stdout);
	}
	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
	log_info("stopping: in-flight calls are cancelled");
	ret = 0;
stop:
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	pthread_cond_broadcast(&s->wake);
	pthread_mutex_unlock(&s->lock);
	cancel_fire(&s->cancel);
	if (td)
		sym_MHD_stop_daemon(td);
	if (d)
		sym_MHD_stop_daemon(d);
	e2b_stop(s);
out:
	/* The lock file stays: removing it could let two servers lock two
	 * files of one name. */
	if (bound)
		unlink(o->socket);
	cancel_destroy(&s->cancel);
	api_ops_destroy(s);
	free(s);
	return ret;
}
