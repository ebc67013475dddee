/* The supervisor's clients (see supervisor_priv.h): ctl.sock connections,
 * their request line, the agent frames of their sessions, and the guest's
 * stdio dials handed to the session they belong to. Sessions: a client's
 * EXEC gets a supervisor-wide id before it goes to the guest, and the
 * guest's answers go back under the client's own id. A stdio stream is
 * passed to its client as a descriptor: its bytes never pass through here. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "proto/files.h"
#include "sandbox/ctl.h"
#include "sandbox/process.h"
#include "secret/broker.h"
#include "supervisor/supervisor_priv.h"

bool sup_log_due(uint64_t *last)
{
	uint64_t now = now_ms();

	if (*last && now < *last + SUP_LOG_EVERY_MS)
		return false;
	*last = now;
	return true;
}

void client_drop(struct sup *s, struct client *c)
{
	sup_net_client_gone(s, c);
	sup_shares_client_gone(s, c);
	for (size_t i = 0; i < SUP_MAX_CLIENTS; i++)
		if (s->clients[i] == c)
			s->clients[i] = NULL;
	close(c->fd);
	outq_free(&c->q);
	client_secret_free(c);
	if (c->line)
		explicit_bzero(c->line, CTL_LINE_MAX); /* a value may have come behind a line */
	free(c->line);
	free(c->dec);
	free(c);
}

void client_hangup(struct sup *s, struct client *c)
{
	if (c->guest_id && !c->done) {
		struct proto_msg m = { .type = PROTO_SIGNAL };

		m.u.signal.id = c->guest_id;
		m.u.signal.signo = SIGHUP;
		sup_send_guest(s, &m, true);
	}
	client_drop(s, c);
}

int client_reply(struct client *c, bool ok, const char *error)
{
	json_t *j =
		ok ? json_pack("{s:b}", "ok", 1) : json_pack("{s:b,s:s}", "ok", 0, "error", error);
	char *text = json_dumps(j, JSON_COMPACT);
	cleanup_free char *line = NULL;
	int r;

	json_decref(j);
	if (text == NULL)
		return -1;
	xasprintf(&line, "%s\n", text);
	free(text);
	r = outq_send(&c->q, c->fd, line, strlen(line), -1);
	return r;
}

void client_reply_json(struct sup *s, struct client *c, json_t *j)
{
	cleanup_free char *text = json_dumps(j, JSON_COMPACT);
	cleanup_free char *line = NULL;

	json_decref(j);
	c->waiting = false;
	c->deadline = now_ms() + SUP_REQUEST_MS; /* for its next request line */
	xasprintf(&line, "%s\n", text ? text : "{\"ok\":false,\"error\":\"encode\"}");
	if (outq_send(&c->q, c->fd, line, strlen(line), -1) < 0)
		client_drop(s, c);
}

void client_answer(struct sup *s, struct client *c, const char *error)
{
	if (c == NULL)
		return;
	if (error)
		client_reply_json(s, c, json_pack("{s:b,s:s}", "ok", 0, "error", error));
	else
		client_reply_json(s, c, json_pack("{s:b}", "ok", 1));
}

void client_send(struct sup *s, struct client *c, const struct proto_msg *m, int fd)
{
	uint8_t frame[PROTO_MAX_FRAME];
	ssize_t len = proto_encode(m, frame, sizeof(frame));

	if (len < 0 || outq_send(&c->q, c->fd, frame, (size_t)len, fd) < 0) {
		log_info("a session's client %s: hung up on",
			 errno == ENOBUFS ? "does not read its answers" : "is gone");
		client_hangup(s, c);
	}
}

struct client *client_by_guest_id(struct sup *s, uint32_t id)
{
	/* Id 0 is no session's: clients get theirs with their EXEC. */
	if (id == 0)
		return NULL;
	for (size_t i = 0; i < SUP_MAX_CLIENTS; i++) {
		struct client *c = s->clients[i];

		if (c && c->session && c->guest_id == id)
			return c;
	}
	return NULL;
}

static bool client_frames(struct sup *s, struct client *c);

void client_line_done(struct client *c, size_t end)
{
	size_t rest = c->len - end - 1;

	memmove(c->line, c->line + end + 1, rest);
	c->len = rest;
}

static void ctl_status(struct sup *s, struct client *c, json_t *j, size_t end)
{
	json_t *r = json_pack("{s:b,s:s,s:i,s:s}", "ok", 1, "name", s->name, "pid", (int)getpid(),
			      "state", s->stopping ? "stopping" : s->frozen ? "paused" : "running");
	char *text = json_dumps(r, JSON_COMPACT);
	cleanup_free char *line = NULL;

	(void)j;
	xasprintf(&line, "%s\n", text ? text : "{}");
	free(text);
	json_decref(r);
	if (outq_send(&c->q, c->fd, line, strlen(line), -1) < 0) {
		client_drop(s, c);
	} else {
		client_line_done(c, end);
		c->deadline = now_ms() + SUP_REQUEST_MS;
	}
}

static void ctl_stop(struct sup *s, struct client *c, json_t *j, size_t end)
{
	bool save = json_is_true(json_object_get(j, "snapshot"));
	const char *why =
		save ? sup_pause_refused(s, false, json_is_true(json_object_get(j, "secrets"))) :
		       NULL;

	(void)end;
	if (why) {
		client_reply(c, false, why);
		client_drop(s, c);
		return;
	}
	c->stop_waiter = true;
	c->deadline = 0;
	if (save)
		sup_begin_pause(s);
	else
		sup_begin_stop(s, "asked to");
}

/* The connection becomes a session: what follows the line is frames. */
static void ctl_exec(struct sup *s, struct client *c, json_t *j, size_t end)
{
	size_t rest = c->len - end - 1;

	if (s->stopping || s->control < 0 || s->frozen) {
		client_reply(c, false, s->stopping ? "the sandbox is stopping" :
				       s->frozen   ? "the sandbox is paused: unpause it first" :
						     s->guest_gone);
		client_drop(s, c);
		return;
	}
	c->session = true;
	c->secrets = json_is_true(json_object_get(j, "secrets"));
	c->deadline = 0;
	c->dec = xmalloc(sizeof(*c->dec));
	proto_decoder_init(c->dec);
	if (rest)
		proto_decoder_push(c->dec, c->line + end + 1, rest);
	free(c->line);
	c->line = NULL;
	if (client_reply(c, true, NULL) < 0)
		client_drop(s, c);
	else if (rest && !client_frames(s, c))
		client_hangup(s, c);
}

/* Every request a client may make of the supervisor (ctl.h), each served
 * by its own handler: c's request line is end bytes, j parsed from it. */
static const struct ctl_op {
	const char *name;
	void (*serve)(struct sup *s, struct client *c, json_t *j, size_t end);
} ctl_ops[] = {
	{ CTL_OP_STATUS, ctl_status },
	{ CTL_OP_STOP, ctl_stop },
	{ CTL_OP_EXEC, ctl_exec },
	{ CTL_OP_PUBLISH, ctl_publish },
	{ CTL_OP_UNPUBLISH, ctl_unpublish },
	{ CTL_OP_PORTS, ctl_ports },
	{ CTL_OP_TRAFFIC, ctl_traffic },
	{ CTL_OP_NETPOLICY_SET, ctl_netpolicy_set },
	{ CTL_OP_NETPOLICY_GET, ctl_netpolicy_get },
	{ CTL_OP_SHARE_ADD, ctl_share_add },
	{ CTL_OP_SHARE_RM, ctl_share_rm },
	{ CTL_OP_SHARE_LS, ctl_share_ls },
	{ CTL_OP_SECRET_SET, ctl_secret_set },
	{ CTL_OP_SECRET_RM, ctl_secret_rm },
	{ CTL_OP_AUDIT, ctl_audit_tail },
	{ CTL_OP_SNAPSHOT, ctl_snapshot },
	{ CTL_OP_FREEZE, ctl_freeze },
};

static void client_request(struct sup *s, struct client *c, size_t end)
{
	json_error_t jerr;
	json_t *j = json_loadb(c->line, end, 0, &jerr);
	const char *op = json_string_value(json_object_get(j, "op"));
	size_t i;

	for (i = 0; op && i < ARRAY_SIZE(ctl_ops); i++)
		if (strcmp(op, ctl_ops[i].name) == 0)
			break;
	if (op == NULL || i == ARRAY_SIZE(ctl_ops)) {
		client_reply(c, false, op ? "unknown op" : "bad request");
		client_drop(s, c);
	} else {
		ctl_ops[i].serve(s, c, j, end);
	}
	json_decref(j);
}

/* c's EXEC does not go to the guest: ERROR, with why. */
static void exec_refused(struct sup *s, struct client *c, const char *why)
{
	struct proto_msg no = { .type = PROTO_ERROR };

	no.u.error.id = c->client_id;
	no.u.error.code = PROTO_ERR_RUNTIME;
	no.u.error.message = (char *)why;
	client_send(s, c, &no, -1);
	c->done = true;
}

/* The names e delivers to a session, one event. */
static void audit_delivered(struct sup *s, const struct secret_env *e)
{
	char names[sizeof(((struct audit_event *)0)->secret)];
	size_t len = 0;

	names[0] = '\0';
	for (size_t i = 0; e->envp[i] && len < sizeof(names); i++)
		len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%.*s", i ? "," : "",
					(int)strcspn(e->envp[i], "="), e->envp[i]);
	sup_audit(s, "deliver", "env", names, NULL, "to a session");
}

/* gantry-init's own file helper (proto/files.h), which needs no secret. */
static bool helper_session(const struct proto_msg *m)
{
	return m->u.exec.argc >= 2 && strcmp(m->u.exec.argv[0], PROTO_HELPER_PATH) == 0 &&
	       strcmp(m->u.exec.argv[1], PROTO_FILES_ARG) == 0;
}

/* A session's process gets the sandbox's secrets in its environment,
 * over any variable of their names, added here: its client never sees
 * them. A secret whose source fails now withholds the session (ERROR).
 * The file helper holds none. */
static bool send_exec(struct sup *s, struct client *c, struct proto_msg *m)
{
	char **env = m->u.exec.env, **with, **over = NULL;
	uint32_t envc = m->u.exec.envc, n = 0;
	gantry_error_t err = NULL;
	struct secret_env e;
	bool ok;

	if (s->secrets.n == 0 || helper_session(m))
		return sup_send_guest(s, m, false);
	if (secret_store_env(&s->secrets, &e, &err) < 0) {
		log_warn("a session withheld: %s", gantry_error_str(err));
		sup_audit(s, "withhold", "source", NULL, NULL, "%s", gantry_error_str(err));
		exec_refused(s, c, gantry_error_str(err));
		gantry_error_free(&err);
		return true;
	}
	if (secret_store_has_bound(&s->secrets))
		over = sandbox_env_overlay(e.envp, broker_git_env);
	with = sandbox_env_overlay(env, over ? over : e.envp);
	while (with[n])
		n++;
	m->u.exec.env = with;
	m->u.exec.envc = n;
	ok = sup_send_guest(s, m, false);
	if (ok) {
		if (e.envp[0])
			audit_delivered(s, &e);
	} else if (errno == EMSGSIZE) {
		static const char big[] = "the session's environment, its secrets in it, is larger "
					  "than a request carries (64 KiB in all, 32 KiB for one "
					  "variable)";

		sup_audit(s, "withhold", "size", NULL, NULL, "%s", big);
		exec_refused(s, c, big);
		ok = true;
	}
	m->u.exec.env = env;
	m->u.exec.envc = envc;
	free(with);
	free(over);
	secret_env_free(&e);
	return ok;
}

/* false: c is to be hung up on. */
static bool client_frame(struct sup *s, struct client *c, struct proto_msg *m)
{
	switch (m->type) {
	case PROTO_EXEC:
		if (c->guest_id)
			return false;
		c->client_id = m->u.exec.id;
		c->guest_id = ++s->next_id ? s->next_id : ++s->next_id;
		m->u.exec.id = c->guest_id;
		return send_exec(s, c, m);
	case PROTO_SIGNAL:
		if (c->guest_id && !c->done) {
			m->u.signal.id = c->guest_id;
			return sup_send_guest(s, m, false);
		}
		return true;
	case PROTO_RESIZE:
		if (c->guest_id && !c->done) {
			m->u.resize.id = c->guest_id;
			return sup_send_guest(s, m, false);
		}
		return true;
	default:
		return false;
	}
}

static void client_read_line(struct sup *s, struct client *c)
{
	ssize_t n = recv(c->fd, c->line + c->len, CTL_LINE_MAX - c->len, MSG_DONTWAIT);
	char *nl;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		client_drop(s, c);
		return;
	}
	c->len += (size_t)n;
	nl = memchr(c->line, '\n', c->len);
	if (nl)
		client_request(s, c, (size_t)(nl - c->line));
	else if (c->len == CTL_LINE_MAX)
		client_drop(s, c);
}

/* The whole frames buffered from c; false: c is to be hung up on. */
static bool client_frames(struct sup *s, struct client *c)
{
	struct proto_msg m;
	const char *why;
	bool ok = true;
	int k = 0;

	/* While the guest owes us reading, the rest waits in c's decoder
	 * (and then in its socket): the guest's queue stays near its mark. */
	while (ok && !sup_guest_busy(s) && (k = proto_decoder_next(c->dec, &m, &why)) > 0) {
		ok = client_frame(s, c, &m);
		proto_msg_free(&m);
	}
	c->backlog = ok && sup_guest_busy(s) && proto_decoder_pending(c->dec) > 0;
	return ok && k >= 0;
}

void client_backlog(struct sup *s, struct client *c)
{
	if (c->backlog && !sup_guest_busy(s) && !client_frames(s, c))
		client_hangup(s, c);
}

void client_event(struct sup *s, struct client *c, short revents)
{
	bool ok = true;
	ssize_t n;

	if ((revents & POLLOUT) && outq_flush(&c->q, c->fd) < 0) {
		client_hangup(s, c);
		return;
	}
	if (!(revents & (POLLIN | POLLHUP | POLLERR)))
		return;
	if (!c->session && c->value) {
		client_secret_value(s, c);
		return;
	}
	if (!c->session && c->discard) {
		client_secret_discard(s, c);
		return;
	}
	if (!c->session) {
		client_read_line(s, c);
		return;
	}
	n = proto_decoder_fill(c->dec, c->fd);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0)
		ok = client_frames(s, c);
	if (n <= 0 || !ok)
		client_hangup(s, c);
}

void clients_accept(struct sup *s)
{
	/* A burst is taken a few at a time: the loop has other work. */
	for (int i = 0; i < 16; i++) {
		struct client *c;
		size_t slot;
		int fd = accept4(s->ctl_listen, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (fd < 0)
			return;
		if (!unix_peer_is_us(fd)) {
			static const char no[] = "{\"ok\":false,\"error\":\"permission denied\"}\n";

			log_warn("refused a ctl.sock connection from another user");
			sup_audit(s, "ctl", "refused", NULL, NULL, "a peer of uid %ld",
				  unix_peer_uid(fd));
			(void)!send(fd, no, sizeof(no) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
			close(fd);
			continue;
		}
		for (slot = 0; slot < SUP_MAX_CLIENTS && s->clients[slot]; slot++)
			;
		if (slot == SUP_MAX_CLIENTS) {
			close(fd);
			continue;
		}
		c = xzalloc(sizeof(*c));
		c->fd = fd;
		c->line = xmalloc(CTL_LINE_MAX);
		c->deadline = now_ms() + SUP_REQUEST_MS;
		outq_init(&c->q, SUP_CLIENT_QUEUE);
		s->clients[slot] = c;
	}
}

/* The id a session's client gave its EXEC, when that EXEC never went to
 * the guest (it waited, held back, in the client's decoder or socket). */
static bool unsent_exec_id(struct client *c, uint32_t *id)
{
	struct proto_msg m;
	const char *why;
	bool found = false;

	if (proto_decoder_fill(c->dec, c->fd) < 0 && errno != EAGAIN && errno != EINTR)
		return false;
	while (!found && proto_decoder_next(c->dec, &m, &why) > 0) {
		if (m.type == PROTO_EXEC) {
			*id = m.u.exec.id;
			found = true;
		}
		proto_msg_free(&m);
	}
	return found;
}

void clients_guest_gone(struct sup *s, const char *why)
{
	for (size_t i = 0; i < SUP_MAX_CLIENTS; i++) {
		struct client *c = s->clients[i];
		struct proto_msg m = { .type = PROTO_ERROR };

		if (c == NULL || !c->session || c->done)
			continue;
		if (c->guest_id) {
			m.u.error.id = c->client_id;
		} else if (!unsent_exec_id(c, &m.u.error.id)) {
			/* Not even its EXEC is here: it learns from the hang-up. */
			client_drop(s, c);
			continue;
		}
		m.u.error.code = PROTO_ERR_RUNTIME;
		m.u.error.message = (char *)why;
		c->done = true;
		client_send(s, c, &m, -1);
	}
}

void clients_expire(struct sup *s, uint64_t now, uint64_t *wake)
{
	for (size_t i = 0; i < SUP_MAX_CLIENTS; i++) {
		struct client *c = s->clients[i];

		if (c == NULL)
			continue;
		if (c->deadline && now >= c->deadline) {
			client_drop(s, c); /* no request line in time */
			continue;
		}
		if (outq_stalled(&c->q, now, SUP_CLIENT_STALL_MS)) {
			log_info("a client took nothing for %d s: hung up on",
				 SUP_CLIENT_STALL_MS / 1000);
			client_hangup(s, c);
			continue;
		}
		if (c->deadline)
			*wake = MIN(*wake, c->deadline);
		if (outq_pending(&c->q))
			*wake = MIN(*wake, c->q.progress_at + SUP_CLIENT_STALL_MS);
	}
	for (size_t i = 0; i < SUP_MAX_STREAMS; i++) {
		struct stream_wait *w = &s->streams[i];

		if (w->fd < 0)
			continue;
		if (now >= w->deadline) {
			static uint64_t logged;

			if (sup_log_due(&logged))
				log_info("a guest stdio dial sent no STREAM frame in %d s: closed",
					 SUP_STREAM_READ_MS / 1000);
			close(w->fd);
			w->fd = -1;
			continue;
		}
		*wake = MIN(*wake, w->deadline);
	}
}

/* --- the guest's stdio dials ----------------------------------------------------------------- */

void streams_accept(struct sup *s)
{
	for (int i = 0; i < 16; i++) {
		struct stream_wait *w = NULL, *oldest = NULL;
		int fd = door_accept(s->stdio_listen);

		if (fd < 0 && errno == EPIPE)
			close_fd(&s->stdio_listen); /* its door is shut: no dial comes */
		if (fd < 0)
			return;
		for (size_t j = 0; j < SUP_MAX_STREAMS && !w; j++) {
			if (s->streams[j].fd < 0)
				w = &s->streams[j];
			else if (!oldest || s->streams[j].deadline < oldest->deadline)
				oldest = &s->streams[j];
		}
		if (w == NULL) {
			static uint64_t logged;

			/* Dials that say nothing cannot crowd out the ones that do. */
			if (sup_log_due(&logged))
				log_info("%d guest stdio dials wait for their STREAM frame: the "
					 "oldest is "
					 "closed",
					 SUP_MAX_STREAMS);
			close(oldest->fd);
			w = oldest;
		}
		*w = (struct stream_wait){ .fd = fd, .deadline = now_ms() + SUP_STREAM_READ_MS };
	}
}

void stream_event(struct sup *s, struct stream_wait *w)
{
	ssize_t n = recv(w->fd, w->frame + w->got, sizeof(w->frame) - w->got, MSG_DONTWAIT);
	struct proto_msg m;
	struct client *c;
	const char *why;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0)
		w->got += (size_t)n;
	if (n > 0 && w->got < sizeof(w->frame))
		return;
	if (n <= 0 || proto_decode(w->frame, sizeof(w->frame), &m, &why) < 0 ||
	    m.type != PROTO_STREAM) {
		static uint64_t logged;

		if (sup_log_due(&logged))
			log_info("a guest stdio stream without its STREAM frame: closed");
	} else if ((c = client_by_guest_id(s, m.u.stream.id)) == NULL || c->streamed) {
		static uint64_t logged;

		if (sup_log_due(&logged))
			log_info("a guest stdio stream for no session waiting for one: closed");
	} else {
		struct proto_msg out = { .type = PROTO_STREAM };

		out.u.stream.id = c->client_id;
		c->streamed = true;
		client_send(s, c, &out, w->fd);
	}
	close(w->fd);
	w->fd = -1;
}
