/* The manager API's HTTP side: libmicrohttpd (loaded when `gantry serve`
 * starts, a thread per connection, so a lifecycle call may block its own
 * connection and no other) on a Unix socket we bind ourselves: mode 0600,
 * one server per path (a lock beside it), and a peer of another UID is
 * hung up on before it is answered. Bodies are gathered up to
 * API_BODY_MAX; /v1/events streams from a subscriber's queue. */
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api_priv.h"
#include "common/lazy.h"
#include "common/log.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "sandbox/ctl.h"

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

/* A request's state across the handler's calls. */
struct conn_req {
	char *body;
	size_t len;
	bool too_big;
};

static bool peer_ok(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		sym_MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

	return ci && ctl_peer_ok(ci->connect_fd);
}

/* A new connection from a peer of another UID is shut at once: it gets
 * no answer and holds no slot longer than it takes to see the EOF. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	const union MHD_ConnectionInfo *ci;

	(void)cls;
	(void)socket_context;
	if (code != MHD_CONNECTION_NOTIFY_STARTED)
		return;
	ci = sym_MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci && !ctl_peer_ok(ci->connect_fd))
		shutdown(ci->connect_fd, SHUT_RDWR);
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct api_reply *r = cls;
	struct api_server *s = (struct api_server *)r->bytes;
	size_t n;

	(void)pos;
	n = api_sub_read(s, r->sse, buf, max);
	return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void sse_free(void *cls)
{
	struct api_reply *r = cls;

	api_sub_close((struct api_server *)r->bytes, r->sse);
	free(r);
}

static enum MHD_Result send_reply(struct api_server *s, struct MHD_Connection *c,
				  struct api_reply *r)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	char *text = NULL;

	if (r->sse) {
		struct api_reply *held = xmalloc(sizeof(*held));

		*held = *r;
		held->bytes = s;
		resp = sym_MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, held,
							     sse_free);
		sym_MHD_add_response_header(resp, "Cache-Control", "no-store");
	} else if (r->json || r->bytes == NULL) {
		text = r->json ? json_dumps(r->json, JSON_COMPACT) : NULL;
		if (text == NULL) {
			/* A backend's answer that JSON cannot hold. */
			text = xstrdup("{\"error\":\"the answer could not be made\"}");
			r->status = 500;
		}
		resp = sym_MHD_create_response_from_buffer(strlen(text), text,
							   MHD_RESPMEM_MUST_FREE);
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
	struct api_server *s = cls;
	struct conn_req *cr = *con_cls;
	struct api_reply r = { 0 };
	struct api_request req;
	enum MHD_Result ret;
	const char *cl;

	(void)version;
	if (cr == NULL) {
		if (!peer_ok(c))
			return MHD_NO;
		cr = xzalloc(sizeof(*cr));
		*con_cls = cr;
		cl = sym_MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
		if (cl && strtoull(cl, NULL, 10) > API_BODY_MAX) {
			/* Answered before the body is read; the connection then ends. */
			api_reply_error(&r, 413, "the body is over %u bytes", API_BODY_MAX);
			ret = send_reply(s, c, &r);
			json_decref(r.json);
			return ret;
		}
		return MHD_YES;
	}
	if (*upload_size) {
		if (cr->len + *upload_size > API_BODY_MAX) {
			cr->too_big = true;
		} else if (!cr->too_big) {
			cr->body = xrealloc(cr->body, cr->len + *upload_size);
			memcpy(cr->body + cr->len, upload, *upload_size);
			cr->len += *upload_size;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (cr->too_big) {
		api_reply_error(&r, 413, "the body is over %u bytes", API_BODY_MAX);
	} else {
		req = (struct api_request){
			.method = method,
			.path = url,
			.key = sym_MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							       "Idempotency-Key"),
			.body = cr->body,
			.len = cr->len,
		};
		api_route(s, &req, &r);
	}
	ret = send_reply(s, c, &r);
	json_decref(r.json);
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

int api_serve(const struct api_serve_opts *o, const struct api_backend *b, gantry_error_t *err)
{
	struct api_server *s = xzalloc(sizeof(*s));
	cleanup_close int lock = -1, fd = -1;
	struct MHD_Daemon *d = NULL;
	bool bound = false;
	struct pollfd p = { o->stop_fd, POLLIN, 0 };
	int ret = -1;

	s->b = b;
	s->keepalive_ms = o->keepalive_ms ? o->keepalive_ms : API_KEEPALIVE_MS;
	api_ops_init(s);
	if (lazy_load(&mhd_lib, err) < 0 || cancel_init(&s->cancel, err) < 0)
		goto out;
	if (lock_socket(o->socket, &lock, err) < 0 || (fd = unix_listen(o->socket, 64, err)) < 0)
		goto out;
	bound = true;
	d = sym_MHD_start_daemon(
		MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC, 0,
		NULL, NULL, handle, s, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
		(unsigned)API_CONNECTIONS_MAX, MHD_OPTION_CONNECTION_TIMEOUT, 120u,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_NOTIFY_COMPLETED,
		completed, s, MHD_OPTION_END);
	if (d == NULL) {
		gantry_error(err, 0, "cannot serve on `%s`: libmicrohttpd refused to start",
			     o->socket);
		goto out;
	}
	fd = -1; /* the daemon's now: it closes it when it stops */
	log_info("serving the manager API on %s", o->socket);
	if (o->ready_line) {
		printf("%s\n", o->ready_line);
		fflush(stdout);
	}
	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
	log_info("stopping: in-flight calls are cancelled");
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	pthread_cond_broadcast(&s->wake);
	pthread_mutex_unlock(&s->lock);
	cancel_fire(&s->cancel);
	sym_MHD_stop_daemon(d);
	ret = 0;
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
