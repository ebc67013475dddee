/* The agent protocol's frame codec (see agent.h): body fields in and out,
 * frame headers, and whole messages encoded and decoded. libc only (and the
 * text sanitiser, which needs nothing else): gantry-init links it
 * statically. Every length comes from the peer, so every read is checked
 * against what is left of the body and against the named bounds. Reading
 * and writing frames on file descriptors is stream.c's. */
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "proto/agent.h"

static void put_le(uint8_t *p, uint64_t v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* --- writer ---------------------------------------------------------------- */

void proto_writer_init(struct proto_writer *w, void *buf, size_t cap)
{
	w->buf = buf;
	w->cap = cap;
	w->len = PROTO_HDR_SIZE;
	w->overflow = cap < PROTO_HDR_SIZE;
}

static uint8_t *writer_take(struct proto_writer *w, size_t n)
{
	uint8_t *p;

	if (w->overflow || n > w->cap - w->len) {
		w->overflow = true;
		return NULL;
	}
	p = w->buf + w->len;
	w->len += n;
	return p;
}

void proto_put_u32(struct proto_writer *w, uint32_t v)
{
	uint8_t *p = writer_take(w, 4);

	if (p)
		put_le(p, v, 4);
}

void proto_put_u64(struct proto_writer *w, uint64_t v)
{
	uint8_t *p = writer_take(w, 8);

	if (p)
		put_le(p, v, 8);
}

void proto_put_bytes(struct proto_writer *w, const void *data, size_t n)
{
	uint8_t *p = writer_take(w, n);

	if (p && n)
		memcpy(p, data, n);
}

void proto_put_str(struct proto_writer *w, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n > PROTO_MAX_STRING) {
		w->overflow = true;
		return;
	}
	proto_put_u32(w, (uint32_t)n);
	proto_put_bytes(w, s, n);
}

void proto_put_strv(struct proto_writer *w, char *const *v, size_t n)
{
	if (n > PROTO_MAX_STRV) {
		w->overflow = true;
		return;
	}
	proto_put_u32(w, (uint32_t)n);
	for (size_t i = 0; i < n; i++)
		proto_put_str(w, v[i]);
}

ssize_t proto_writer_finish(struct proto_writer *w, uint16_t type)
{
	size_t body = w->len - PROTO_HDR_SIZE;

	if (w->overflow || body > proto_max_body(type))
		return -1;
	put_le(w->buf, body, 4);
	put_le(w->buf + 4, type, 2);
	put_le(w->buf + 6, 0, 2);
	return (ssize_t)w->len;
}

/* --- reader ------------------------------------------------------------------ */

void proto_reader_init(struct proto_reader *r, const void *body, size_t len)
{
	r->p = body;
	r->len = len;
	r->off = 0;
	r->err = NULL;
}

static int reader_fail(struct proto_reader *r, const char *why)
{
	if (r->err == NULL)
		r->err = why;
	return -1;
}

static const uint8_t *reader_take(struct proto_reader *r, size_t n)
{
	const uint8_t *p;

	if (r->err)
		return NULL;
	if (n > r->len - r->off) {
		reader_fail(r, "truncated body");
		return NULL;
	}
	p = r->p + r->off;
	r->off += n;
	return p;
}

int proto_get_u32(struct proto_reader *r, uint32_t *v)
{
	const uint8_t *p = reader_take(r, 4);

	if (p == NULL)
		return -1;
	*v = (uint32_t)get_le(p, 4);
	return 0;
}

int proto_get_u64(struct proto_reader *r, uint64_t *v)
{
	const uint8_t *p = reader_take(r, 8);

	if (p == NULL)
		return -1;
	*v = get_le(p, 8);
	return 0;
}

int proto_get_str(struct proto_reader *r, size_t max, char **s)
{
	const uint8_t *p;
	uint32_t n;
	char *out;

	*s = NULL;
	if (proto_get_u32(r, &n) < 0)
		return -1;
	if (n > max)
		return reader_fail(r, "string too long");
	p = reader_take(r, n);
	if (p == NULL)
		return -1;
	if (memchr(p, '\0', n))
		return reader_fail(r, "NUL inside a string");
	out = malloc((size_t)n + 1);
	if (out == NULL)
		return reader_fail(r, "out of memory");
	memcpy(out, p, n);
	out[n] = '\0';
	*s = out;
	return 0;
}

static void strv_free(char **v)
{
	if (v == NULL)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

int proto_get_strv(struct proto_reader *r, size_t max, char ***v, uint32_t *n)
{
	uint32_t count;
	char **out;

	*v = NULL;
	*n = 0;
	if (proto_get_u32(r, &count) < 0)
		return -1;
	if (count > max)
		return reader_fail(r, "too many strings");
	/* Each string takes at least its 4-byte length: a count the body
	 * cannot hold is refused before anything is allocated for it. */
	if (count > (r->len - r->off) / 4)
		return reader_fail(r, "truncated body");
	out = calloc((size_t)count + 1, sizeof(*out));
	if (out == NULL)
		return reader_fail(r, "out of memory");
	for (uint32_t i = 0; i < count; i++) {
		if (proto_get_str(r, PROTO_MAX_STRING, &out[i]) < 0) {
			strv_free(out);
			return -1;
		}
	}
	*v = out;
	*n = count;
	return 0;
}

int proto_reader_end(struct proto_reader *r)
{
	if (r->err)
		return -1;
	if (r->off != r->len)
		return reader_fail(r, "trailing bytes after the message");
	return 0;
}

/* --- frames -------------------------------------------------------------------- */

size_t proto_max_body(uint16_t type)
{
	switch (type) {
	case PROTO_HELLO:
	case PROTO_EXEC:
	case PROTO_STARTED:
	case PROTO_EXIT:
	case PROTO_ERROR:
	case PROTO_SIGNAL:
	case PROTO_RESIZE:
	case PROTO_SHUTDOWN:
	case PROTO_READY:
	case PROTO_STREAM:
	case PROTO_EOF:
	case PROTO_MOUNT:
	case PROTO_UNMOUNT:
	case PROTO_DONE:
	case PROTO_RENEW:
	case PROTO_RENEWED:
		return PROTO_MAX_CONTROL;
	case PROTO_STDIN:
	case PROTO_STDOUT:
	case PROTO_STDERR:
		return PROTO_MAX_DATA;
	default:
		return 0;
	}
}

const char *proto_type_name(uint16_t type)
{
	switch (type) {
	case PROTO_HELLO:
		return "HELLO";
	case PROTO_EXEC:
		return "EXEC";
	case PROTO_STARTED:
		return "STARTED";
	case PROTO_EXIT:
		return "EXIT";
	case PROTO_ERROR:
		return "ERROR";
	case PROTO_SIGNAL:
		return "SIGNAL";
	case PROTO_RESIZE:
		return "RESIZE";
	case PROTO_SHUTDOWN:
		return "SHUTDOWN";
	case PROTO_READY:
		return "READY";
	case PROTO_STREAM:
		return "STREAM";
	case PROTO_STDIN:
		return "STDIN";
	case PROTO_STDOUT:
		return "STDOUT";
	case PROTO_STDERR:
		return "STDERR";
	case PROTO_EOF:
		return "EOF";
	case PROTO_MOUNT:
		return "MOUNT";
	case PROTO_UNMOUNT:
		return "UNMOUNT";
	case PROTO_DONE:
		return "DONE";
	case PROTO_RENEW:
		return "RENEW";
	case PROTO_RENEWED:
		return "RENEWED";
	default:
		return "unknown";
	}
}

int proto_parse_header(const uint8_t hdr[PROTO_HDR_SIZE], uint16_t *type, uint32_t *len,
		       const char **why)
{
	uint32_t n = (uint32_t)get_le(hdr, 4);
	uint16_t t = (uint16_t)get_le(hdr + 4, 2);
	size_t max = proto_max_body(t);

	if (max == 0) {
		*why = "unknown frame type";
		return -1;
	}
	if (get_le(hdr + 6, 2) != 0) {
		*why = "reserved header flags set";
		return -1;
	}
	if (n > max) {
		*why = "frame body over its size limit";
		return -1;
	}
	*type = t;
	*len = n;
	return 0;
}

ssize_t proto_encode(const struct proto_msg *m, void *buf, size_t cap)
{
	struct proto_writer w;

	proto_writer_init(&w, buf, cap);
	switch (m->type) {
	case PROTO_HELLO:
		proto_put_u32(&w, m->u.hello.version);
		proto_put_u64(&w, m->u.hello.uptime_ms);
		proto_put_u32(&w, m->u.hello.ncpus);
		proto_put_str(&w, m->u.hello.kernel);
		break;
	case PROTO_EXEC: {
		const struct proto_exec *e = &m->u.exec;

		if (e->id == 0 || e->argc == 0 || (e->flags & ~PROTO_EXEC_ALL) ||
		    e->ngids > PROTO_MAX_GIDS || e->nrlimits > PROTO_MAX_RLIMITS)
			return -1;
		proto_put_u32(&w, e->id);
		proto_put_strv(&w, e->argv, e->argc);
		proto_put_strv(&w, e->env, e->envc);
		proto_put_str(&w, e->cwd);
		proto_put_u32(&w, e->uid);
		proto_put_u32(&w, e->gid);
		proto_put_u32(&w, e->ngids);
		for (uint32_t i = 0; i < e->ngids; i++)
			proto_put_u32(&w, e->gids[i]);
		proto_put_u32(&w, e->flags);
		proto_put_u32(&w, e->rows);
		proto_put_u32(&w, e->cols);
		if (e->flags & PROTO_EXEC_RLIMITS) {
			proto_put_u32(&w, e->nrlimits);
			for (uint32_t i = 0; i < e->nrlimits; i++) {
				proto_put_u32(&w, e->rlimits[i].resource);
				proto_put_u64(&w, e->rlimits[i].soft);
				proto_put_u64(&w, e->rlimits[i].hard);
			}
		}
		if (e->flags & PROTO_EXEC_CAPS)
			for (int i = 0; i < PROTO_CAPS_SETS; i++)
				proto_put_u64(&w, e->caps[i]);
		break;
	}
	case PROTO_STARTED:
		proto_put_u32(&w, m->u.started.id);
		proto_put_u32(&w, m->u.started.pid);
		break;
	case PROTO_EXIT:
		if (m->u.exit.signaled ? (m->u.exit.code == 0 || m->u.exit.code > PROTO_MAX_SIGNAL)
				       : m->u.exit.code > 255)
			return -1;
		proto_put_u32(&w, m->u.exit.id);
		proto_put_u32(&w, m->u.exit.signaled);
		proto_put_u32(&w, m->u.exit.code);
		break;
	case PROTO_ERROR:
		proto_put_u32(&w, m->u.error.id);
		proto_put_u32(&w, m->u.error.code);
		proto_put_str(&w, m->u.error.message);
		break;
	case PROTO_READY:
		proto_put_str(&w, m->u.ready.message);
		break;
	case PROTO_SIGNAL:
		if (m->u.signal.signo == 0 || m->u.signal.signo > PROTO_MAX_SIGNAL)
			return -1;
		proto_put_u32(&w, m->u.signal.id);
		proto_put_u32(&w, m->u.signal.signo);
		break;
	case PROTO_RESIZE:
		proto_put_u32(&w, m->u.resize.id);
		proto_put_u32(&w, m->u.resize.rows);
		proto_put_u32(&w, m->u.resize.cols);
		break;
	case PROTO_SHUTDOWN:
		if (m->u.shutdown.status > 255)
			return -1;
		proto_put_u32(&w, m->u.shutdown.status);
		break;
	case PROTO_STREAM:
		proto_put_u32(&w, m->u.stream.id);
		break;
	case PROTO_STDIN:
	case PROTO_STDOUT:
	case PROTO_STDERR:
		if (m->u.data.len == 0 || m->u.data.len > PROTO_MAX_DATA)
			return -1;
		proto_put_bytes(&w, m->u.data.data, m->u.data.len);
		break;
	case PROTO_EOF:
		if (m->u.eof.fd > 2)
			return -1;
		proto_put_u32(&w, m->u.eof.fd);
		break;
	case PROTO_MOUNT:
	case PROTO_UNMOUNT: {
		bool mnt = m->type == PROTO_MOUNT;

		if (m->u.mount.id == 0 || m->u.mount.path == NULL ||
		    strlen(m->u.mount.path) > PROTO_MAX_PATH ||
		    (mnt && (m->u.mount.tag == NULL || strlen(m->u.mount.tag) > PROTO_MAX_TAG ||
			     (m->u.mount.flags & ~PROTO_MOUNT_ALL))))
			return -1;
		proto_put_u32(&w, m->u.mount.id);
		if (mnt) {
			proto_put_u32(&w, m->u.mount.flags);
			proto_put_str(&w, m->u.mount.tag);
		}
		proto_put_str(&w, m->u.mount.path);
		break;
	}
	case PROTO_DONE:
		proto_put_u32(&w, m->u.done.id);
		proto_put_u32(&w, m->u.done.error);
		proto_put_str(&w, m->u.done.message);
		break;
	case PROTO_RENEW:
		if (m->u.renew.nr_shares > PROTO_MAX_SHARES ||
		    (m->u.renew.hostname && strlen(m->u.renew.hostname) > PROTO_MAX_TAG * 2) ||
		    (m->u.renew.ca && strlen(m->u.renew.ca) > PROTO_MAX_CA) ||
		    (m->u.renew.config && strlen(m->u.renew.config) > PROTO_MAX_CONFIG))
			return -1;
		proto_put_u64(&w, m->u.renew.time_ns);
		for (size_t i = 0; i < PROTO_RENEW_WORDS; i++)
			proto_put_u64(&w, m->u.renew.entropy[i]);
		proto_put_str(&w, m->u.renew.hostname);
		proto_put_strv(&w, m->u.renew.shares, m->u.renew.nr_shares);
		/* Last, and only when there is one: a guest from before them
		 * takes a RENEW without (the CA then goes, empty or not,
		 * before a config). */
		if ((m->u.renew.ca && *m->u.renew.ca) || (m->u.renew.config && *m->u.renew.config))
			proto_put_str(&w, m->u.renew.ca ? m->u.renew.ca : "");
		if (m->u.renew.config && *m->u.renew.config)
			proto_put_str(&w, m->u.renew.config);
		break;
	case PROTO_RENEWED:
		if (m->u.renewed.flags & ~PROTO_RENEWED_ALL)
			return -1;
		proto_put_u32(&w, m->u.renewed.flags);
		proto_put_str(&w, m->u.renewed.message);
		break;
	default:
		return -1;
	}
	return proto_writer_finish(&w, m->type);
}

/* A string meant to be shown or logged (HELLO's kernel, READY's and ERROR's
 * message): sanitised here, once, so no reader of a decoded message sees
 * the peer's control bytes or invalid UTF-8. EXEC's strings are not text
 * for display and stay exact. */
static int get_text(struct proto_reader *r, char **s)
{
	if (proto_get_str(r, PROTO_MAX_STRING, s) < 0)
		return -1;
	text_sanitize(*s, 0);
	return 0;
}

/* Each resource at most once, each soft limit within its hard one. */
static int decode_rlimits(struct proto_reader *r, struct proto_exec *e)
{
	uint32_t n, seen = 0;

	if (proto_get_u32(r, &n) < 0)
		return -1;
	if (n > PROTO_MAX_RLIMITS)
		return reader_fail(r, "too many resource limits");
	e->rlimits = calloc(n ? n : 1, sizeof(*e->rlimits));
	if (e->rlimits == NULL)
		return reader_fail(r, "out of memory");
	for (e->nrlimits = 0; e->nrlimits < n; e->nrlimits++) {
		struct proto_rlimit *l = &e->rlimits[e->nrlimits];

		if (proto_get_u32(r, &l->resource) < 0 || proto_get_u64(r, &l->soft) < 0 ||
		    proto_get_u64(r, &l->hard) < 0)
			return -1;
		if (l->resource >= PROTO_MAX_RLIMITS || (seen & (1u << l->resource)))
			return reader_fail(r, "a bad or repeated resource limit");
		if (l->soft > l->hard)
			return reader_fail(r, "a soft limit over its hard one");
		seen |= 1u << l->resource;
	}
	return 0;
}

static int decode_exec(struct proto_reader *r, struct proto_exec *e)
{
	if (proto_get_u32(r, &e->id) < 0 ||
	    proto_get_strv(r, PROTO_MAX_STRV, &e->argv, &e->argc) < 0 ||
	    proto_get_strv(r, PROTO_MAX_STRV, &e->env, &e->envc) < 0 ||
	    proto_get_str(r, PROTO_MAX_STRING, &e->cwd) < 0 || proto_get_u32(r, &e->uid) < 0 ||
	    proto_get_u32(r, &e->gid) < 0 || proto_get_u32(r, &e->ngids) < 0)
		return -1;
	if (e->ngids > PROTO_MAX_GIDS) {
		e->ngids = 0;
		return reader_fail(r, "too many groups");
	}
	if (e->ngids > (r->len - r->off) / 4) {
		e->ngids = 0;
		return reader_fail(r, "truncated body");
	}
	e->gids = calloc(e->ngids ? e->ngids : 1, sizeof(*e->gids));
	if (e->gids == NULL) {
		e->ngids = 0;
		return reader_fail(r, "out of memory");
	}
	for (uint32_t i = 0; i < e->ngids; i++)
		proto_get_u32(r, &e->gids[i]);
	if (proto_get_u32(r, &e->flags) < 0 || proto_get_u32(r, &e->rows) < 0 ||
	    proto_get_u32(r, &e->cols) < 0)
		return -1;
	if (e->flags & ~PROTO_EXEC_ALL)
		return reader_fail(r, "unknown EXEC flags");
	if ((e->flags & PROTO_EXEC_RLIMITS) && decode_rlimits(r, e) < 0)
		return -1;
	for (int i = 0; (e->flags & PROTO_EXEC_CAPS) && i < PROTO_CAPS_SETS; i++)
		if (proto_get_u64(r, &e->caps[i]) < 0)
			return -1;
	if (e->id == 0)
		return reader_fail(r, "session id 0");
	if (e->argc == 0)
		return reader_fail(r, "empty argv");
	return 0;
}

static int decode_body(struct proto_reader *r, struct proto_msg *m)
{
	uint32_t v;

	switch (m->type) {
	case PROTO_HELLO:
		if (proto_get_u32(r, &m->u.hello.version) < 0 ||
		    proto_get_u64(r, &m->u.hello.uptime_ms) < 0 ||
		    proto_get_u32(r, &m->u.hello.ncpus) < 0 || get_text(r, &m->u.hello.kernel) < 0)
			return -1;
		return 0;
	case PROTO_EXEC:
		return decode_exec(r, &m->u.exec);
	case PROTO_STARTED:
		return proto_get_u32(r, &m->u.started.id) < 0 ? -1
							      : proto_get_u32(r, &m->u.started.pid);
	case PROTO_EXIT:
		if (proto_get_u32(r, &m->u.exit.id) < 0 || proto_get_u32(r, &v) < 0 ||
		    proto_get_u32(r, &m->u.exit.code) < 0)
			return -1;
		if (v > 1)
			return reader_fail(r, "bad EXIT kind");
		m->u.exit.signaled = v;
		if (v ? (m->u.exit.code == 0 || m->u.exit.code > PROTO_MAX_SIGNAL)
		      : m->u.exit.code > 255)
			return reader_fail(r, "EXIT code out of range");
		return 0;
	case PROTO_ERROR:
		if (proto_get_u32(r, &m->u.error.id) < 0 ||
		    proto_get_u32(r, &m->u.error.code) < 0 || get_text(r, &m->u.error.message) < 0)
			return -1;
		return 0;
	case PROTO_READY:
		return get_text(r, &m->u.ready.message);
	case PROTO_SIGNAL:
		if (proto_get_u32(r, &m->u.signal.id) < 0 ||
		    proto_get_u32(r, &m->u.signal.signo) < 0)
			return -1;
		if (m->u.signal.signo == 0 || m->u.signal.signo > PROTO_MAX_SIGNAL)
			return reader_fail(r, "bad signal number");
		return 0;
	case PROTO_RESIZE:
		if (proto_get_u32(r, &m->u.resize.id) < 0 ||
		    proto_get_u32(r, &m->u.resize.rows) < 0 ||
		    proto_get_u32(r, &m->u.resize.cols) < 0)
			return -1;
		return 0;
	case PROTO_SHUTDOWN:
		if (proto_get_u32(r, &m->u.shutdown.status) < 0)
			return -1;
		if (m->u.shutdown.status > 255)
			return reader_fail(r, "SHUTDOWN status out of range");
		return 0;
	case PROTO_STREAM:
		return proto_get_u32(r, &m->u.stream.id);
	case PROTO_STDIN:
	case PROTO_STDOUT:
	case PROTO_STDERR:
		if (r->len == 0)
			return reader_fail(r, "empty data frame");
		m->u.data.data = r->p;
		m->u.data.len = r->len;
		r->off = r->len;
		return 0;
	case PROTO_EOF:
		if (proto_get_u32(r, &m->u.eof.fd) < 0)
			return -1;
		if (m->u.eof.fd > 2)
			return reader_fail(r, "bad EOF fd");
		return 0;
	case PROTO_MOUNT:
		if (proto_get_u32(r, &m->u.mount.id) < 0 || proto_get_u32(r, &m->u.mount.flags) < 0 ||
		    proto_get_str(r, PROTO_MAX_TAG, &m->u.mount.tag) < 0 ||
		    proto_get_str(r, PROTO_MAX_PATH, &m->u.mount.path) < 0)
			return -1;
		if (m->u.mount.flags & ~PROTO_MOUNT_ALL)
			return reader_fail(r, "unknown MOUNT flags");
		return m->u.mount.id ? 0 : reader_fail(r, "request id 0");
	case PROTO_UNMOUNT:
		if (proto_get_u32(r, &m->u.mount.id) < 0 ||
		    proto_get_str(r, PROTO_MAX_PATH, &m->u.mount.path) < 0)
			return -1;
		return m->u.mount.id ? 0 : reader_fail(r, "request id 0");
	case PROTO_DONE:
		if (proto_get_u32(r, &m->u.done.id) < 0 || proto_get_u32(r, &m->u.done.error) < 0 ||
		    get_text(r, &m->u.done.message) < 0)
			return -1;
		return 0;
	case PROTO_RENEW:
		if (proto_get_u64(r, &m->u.renew.time_ns) < 0)
			return -1;
		for (size_t i = 0; i < PROTO_RENEW_WORDS; i++)
			if (proto_get_u64(r, &m->u.renew.entropy[i]) < 0)
				return -1;
		if (proto_get_str(r, PROTO_MAX_TAG * 2, &m->u.renew.hostname) < 0 ||
		    proto_get_strv(r, PROTO_MAX_SHARES, &m->u.renew.shares,
				   &m->u.renew.nr_shares) < 0)
			return -1;
		if (r->off == r->len)
			m->u.renew.ca = strdup("");
		else if (proto_get_str(r, PROTO_MAX_CA, &m->u.renew.ca) < 0)
			return -1;
		else if (!*m->u.renew.ca && r->off == r->len)
			return reader_fail(r, "an empty CA with no config after it");
		if (r->off == r->len)
			m->u.renew.config = strdup("");
		else if (proto_get_str(r, PROTO_MAX_CONFIG, &m->u.renew.config) < 0)
			return -1;
		else if (!*m->u.renew.config)
			return reader_fail(r, "an empty config");
		return m->u.renew.ca && m->u.renew.config ? 0 : -1;
	case PROTO_RENEWED:
		if (proto_get_u32(r, &m->u.renewed.flags) < 0 ||
		    get_text(r, &m->u.renewed.message) < 0)
			return -1;
		return m->u.renewed.flags & ~PROTO_RENEWED_ALL ? reader_fail(r, "unknown flags")
							      : 0;
	default:
		return reader_fail(r, "unknown frame type");
	}
}

int proto_decode(const void *frame, size_t len, struct proto_msg *m, const char **why)
{
	const uint8_t *p = frame;
	struct proto_reader r;
	uint32_t body;
	uint16_t type;

	memset(m, 0, sizeof(*m));
	if (len < PROTO_HDR_SIZE) {
		*why = "truncated header";
		return -1;
	}
	if (proto_parse_header(p, &type, &body, why) < 0)
		return -1;
	if (len - PROTO_HDR_SIZE < body) {
		*why = "truncated body";
		return -1;
	}
	if (len - PROTO_HDR_SIZE > body) {
		*why = "trailing bytes after the frame";
		return -1;
	}
	m->type = type;
	proto_reader_init(&r, p + PROTO_HDR_SIZE, body);
	if (decode_body(&r, m) < 0 || proto_reader_end(&r) < 0) {
		*why = r.err ? r.err : "malformed body";
		proto_msg_free(m);
		return -1;
	}
	return 0;
}

void proto_msg_free(struct proto_msg *m)
{
	switch (m->type) {
	case PROTO_HELLO:
		free(m->u.hello.kernel);
		break;
	case PROTO_EXEC:
		strv_free(m->u.exec.argv);
		strv_free(m->u.exec.env);
		free(m->u.exec.cwd);
		free(m->u.exec.gids);
		free(m->u.exec.rlimits);
		break;
	case PROTO_ERROR:
		free(m->u.error.message);
		break;
	case PROTO_READY:
		free(m->u.ready.message);
		break;
	case PROTO_MOUNT:
	case PROTO_UNMOUNT:
		free(m->u.mount.tag);
		free(m->u.mount.path);
		break;
	case PROTO_DONE:
		free(m->u.done.message);
		break;
	case PROTO_RENEW:
		free(m->u.renew.hostname);
		strv_free(m->u.renew.shares);
		free(m->u.renew.ca);
		free(m->u.renew.config);
		break;
	case PROTO_RENEWED:
		free(m->u.renewed.message);
		break;
	default:
		break;
	}
	memset(m, 0, sizeof(*m));
}
