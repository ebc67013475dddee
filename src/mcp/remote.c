/* A remote MCP server over streamable HTTP (see remote.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/util.h"
#include "egress/resolve.h"
#include "image/lazylib.h"
#include "mcp/frame.h"
#include "mcp/remote.h"

#define REDACTED "[redacted]"

struct body {
	char *buf;
	size_t len;
	bool over;
};

struct request {
	const struct mcp_remote *r;
	struct body body;
	char *content_type, *session;
	bool refused; /* a dial the SSRF check refused */
};

static char *take_env(const char *name, gantry_error_t *err)
{
	char *v = getenv(name), *copy;

	if (v == NULL || *v == '\0') {
		gantry_error_opt(err, "mcp_remotes", ": the variable %s is not set", name);
		return NULL;
	}
	copy = xstrdup(v);
	explicit_bzero(v, strlen(v));
	unsetenv(name);
	return copy;
}

int mcp_remote_open(struct mcp_remote *r, const char *spec, bool from_env, gantry_error_t *err)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->lock, NULL);
	pthread_mutex_init(&r->secrets_lock, NULL);
	r->next_id = 1;
	if (mcp_remote_spec_parse(spec, &r->spec, err) < 0)
		return -1;
	if (!from_env)
		return 0;
	if (r->spec.auth != MCP_AUTH_NONE && r->spec.auth != MCP_AUTH_CUSTODY) {
		/* The same variable may be a credential and a redaction. */
		r->auth = take_env(r->spec.auth_secret, err);
		if (r->auth == NULL)
			return -1;
		r->redact[r->nr_redact++] = xstrdup(r->auth);
	}
	for (size_t i = 0; i < r->spec.nr_redact; i++) {
		char *v;

		if (r->spec.auth_secret && strcmp(r->spec.redact[i], r->spec.auth_secret) == 0)
			continue;
		v = take_env(r->spec.redact[i], err);
		if (v == NULL)
			return -1;
		r->redact[r->nr_redact++] = v;
	}
	return 0;
}

json_t *mcp_remote_secrets_json(const struct mcp_remote *r)
{
	json_t *redact = json_array();

	/* The credential, when there is one, is the first redaction too. */
	for (size_t i = r->auth ? 1 : 0; i < r->nr_redact; i++)
		json_array_append_new(redact, json_string(r->redact[i]));
	return json_pack("{s:s?,s:o}", "auth", r->auth, "redact", redact);
}

int mcp_remote_secrets_take(struct mcp_remote *r, json_t *j, gantry_error_t *err)
{
	const char *auth = json_string_value(json_object_get(j, "auth"));
	json_t *redact = json_object_get(j, "redact"), *v;
	size_t i;

	if ((r->spec.auth != MCP_AUTH_NONE) != (auth != NULL) || !json_is_array(redact) ||
	    json_array_size(redact) > MCP_REDACT_MAX)
		return gantry_error(err, EPROTO, "%s: its secrets do not match its spec", r->spec.id);
	if (auth) {
		r->auth = xstrdup(auth);
		r->redact[r->nr_redact++] = xstrdup(auth);
	}
	json_array_foreach(redact, i, v)
		if (json_is_string(v))
			r->redact[r->nr_redact++] = xstrdup(json_string_value(v));
	return 0;
}

void mcp_remote_close(struct mcp_remote *r)
{
	if (r->auth) {
		explicit_bzero(r->auth, strlen(r->auth));
		free(r->auth);
	}
	for (size_t i = 0; i < r->nr_redact; i++) {
		explicit_bzero(r->redact[i], strlen(r->redact[i]));
		free(r->redact[i]);
	}
	free(r->session);
	mcp_remote_spec_free(&r->spec);
	pthread_mutex_destroy(&r->lock);
	pthread_mutex_destroy(&r->secrets_lock);
	memset(r, 0, sizeof(*r));
}

void mcp_remote_auth_renew(struct mcp_remote *r, const char *value)
{
	pthread_mutex_lock(&r->secrets_lock);
	if (r->auth && strcmp(r->auth, value) != 0) {
		/* The old credential's copy at redact[0] becomes the kept one. */
		if (r->prev_kept) {
			char *old = r->redact[--r->nr_redact];

			explicit_bzero(old, strlen(old));
			free(old);
		}
		r->redact[r->nr_redact++] = r->redact[0];
		r->prev_kept = true;
		r->redact[0] = xstrdup(value);
		explicit_bzero(r->auth, strlen(r->auth));
		free(r->auth);
		r->auth = xstrdup(value);
	}
	pthread_mutex_unlock(&r->secrets_lock);
}

char *mcp_redact(struct mcp_remote *r, const char *text)
{
	/* Each value as it stands and JSON-escaped (as it is inside a JSON
	 * string): the patterns, each of 4 bytes or more (a shorter one is
	 * no secret, and would wreck the text). */
	char *pat[2 * (MCP_REDACT_MAX + 2)];
	size_t plen[2 * (MCP_REDACT_MAX + 2)], np = 0, len = strlen(text), cap = len + 1, at = 0;
	char *out = xmalloc(cap);

	/* A renewal (another thread, where the gateway is not confined)
	 * changes the list. */
	pthread_mutex_lock(&r->secrets_lock);
	for (size_t i = 0; i < r->nr_redact; i++) {
		json_t *j = json_string(r->redact[i]);
		char *enc = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;

		json_decref(j);
		if (enc && strlen(enc) >= 2) {
			enc[strlen(enc) - 1] = '\0'; /* the quotes off */
			memmove(enc, enc + 1, strlen(enc));
		}
		if (enc && strlen(enc) >= 4 && strcmp(enc, r->redact[i]) != 0) {
			pat[np] = enc;
			plen[np++] = strlen(enc);
		} else {
			free(enc);
		}
		if (strlen(r->redact[i]) >= 4) {
			pat[np] = xstrdup(r->redact[i]);
			plen[np++] = strlen(r->redact[i]);
		}
	}
	pthread_mutex_unlock(&r->secrets_lock);
	/* One pass: at each place the first value found there is replaced,
	 * and the scan goes on after it, never into what it put. */
	for (size_t i = 0; i < len;) {
		size_t k;

		for (k = 0; k < np; k++)
			if (plen[k] <= len - i && memcmp(text + i, pat[k], plen[k]) == 0)
				break;
		if (k < np) {
			if (at + sizeof(REDACTED) > cap)
				out = xrealloc(out, cap = 2 * cap + sizeof(REDACTED));
			memcpy(out + at, REDACTED, sizeof(REDACTED) - 1);
			at += sizeof(REDACTED) - 1;
			i += plen[k];
			continue;
		}
		if (at + 2 > cap)
			out = xrealloc(out, cap = 2 * cap + 2);
		out[at++] = text[i++];
	}
	out[at] = '\0';
	for (size_t k = 0; k < np; k++) {
		explicit_bzero(pat[k], plen[k]);
		free(pat[k]);
	}
	return out;
}

/* ---- HTTP -------------------------------------------------------------------------------- */

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	struct request *q = arg;
	size_t len = size * n;

	if (q->body.len + len > MCP_FRAME_MAX) {
		q->body.over = true;
		return 0; /* ends the transfer */
	}
	q->body.buf = xrealloc(q->body.buf, q->body.len + len + 1);
	memcpy(q->body.buf + q->body.len, data, len);
	q->body.len += len;
	q->body.buf[q->body.len] = '\0';
	return len;
}

static char *header_value(const char *line, size_t len, const char *name)
{
	size_t nl = strlen(name);
	const char *v;

	if (len <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
		return NULL;
	v = line + nl + 1;
	while (v < line + len && (*v == ' ' || *v == '\t'))
		v++;
	while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == '\n' || line[len - 1] == ' '))
		len--;
	return v < line + len ? xstrndup(v, (size_t)(line + len - v)) : xstrdup("");
}

static size_t on_header(char *line, size_t size, size_t n, void *arg)
{
	struct request *q = arg;
	size_t len = size * n;
	char *v;

	if ((v = header_value(line, len, "Content-Type")) != NULL) {
		free(q->content_type);
		q->content_type = v;
	} else if ((v = header_value(line, len, "Mcp-Session-Id")) != NULL) {
		free(q->session);
		q->session = v;
	}
	return len;
}

/* The SSRF check, at each dial, on the address libcurl resolved. */
static curl_socket_t on_open(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct request *q = arg;

	(void)purpose;
	if (mcp_addr_refused(&a->addr, q->r->spec.loopback)) {
		q->refused = true;
		return CURL_SOCKET_BAD;
	}
	/* Protocol 0 (TCP for a stream), as the confined gateway's filter
	 * allows sockets. */
	return socket(a->family, a->socktype | SOCK_CLOEXEC, 0);
}

/* The JSON-RPC message with id in an SSE stream: its events' data lines. */
static json_t *sse_find(const char *text, json_int_t id)
{
	const char *p = text;
	char *data = NULL;
	size_t dlen = 0;
	json_t *found = NULL;

	while (*p && found == NULL) {
		size_t n = strcspn(p, "\n");
		const char *line = p;
		size_t len = n;

		p += n + (p[n] == '\n');
		if (len && line[len - 1] == '\r')
			len--;
		if (len == 0) { /* the event ends */
			if (data) {
				json_t *m = json_loadb(data, dlen, 0, NULL);

				if (m && json_integer_value(json_object_get(m, "id")) == id &&
				    (json_object_get(m, "result") || json_object_get(m, "error")))
					found = m;
				else
					json_decref(m);
				free(data);
				data = NULL;
				dlen = 0;
			}
			continue;
		}
		if (len >= 5 && strncmp(line, "data:", 5) == 0) {
			const char *v = line + 5 + (len > 5 && line[5] == ' ');
			size_t vl = (size_t)(line + len - v);

			data = xrealloc(data, dlen + vl + 2);
			if (dlen)
				data[dlen++] = '\n';
			memcpy(data + dlen, v, vl);
			dlen += vl;
			data[dlen] = '\0';
		}
	}
	if (found == NULL && data) {
		json_t *m = json_loadb(data, dlen, 0, NULL);

		if (m && json_integer_value(json_object_get(m, "id")) == id)
			found = m;
		else
			json_decref(m);
	}
	free(data);
	return found;
}

/* The confined gateway's own look-up of the URL's host (a name), its
 * first address the check lets through pinned for libcurl ("HOST:PORT:IP"),
 * so that the address checked is the one dialed. NULL: the host is an
 * address already, or there is no mcp_net. */
static int pin_address(struct mcp_remote *r, struct curl_slist **pins, gantry_error_t *err)
{
	CURLU *u = sym_curl_url();
	char *host = NULL, *port = NULL, *scheme = NULL, pin[512], ip[INET_ADDRSTRLEN];
	struct in_addr probe4;
	struct in6_addr probe6;
	struct lookup l;
	int ret = -1, step = 0;

	if (r->net == NULL || r->net->nr_up == 0)
		return 0;
	if (u == NULL || sym_curl_url_set(u, CURLUPART_URL, r->spec.url, 0) != CURLUE_OK ||
	    sym_curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    sym_curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) {
		gantry_error(err, EINVAL, "%s: its URL does not parse", r->spec.id);
		goto out;
	}
	if (sym_curl_url_get(u, CURLUPART_PORT, &port, 0) != CURLUE_OK)
		port = NULL;
	if (inet_pton(AF_INET, host, &probe4) == 1 || host[0] == '[' ||
	    inet_pton(AF_INET6, host, &probe6) == 1) {
		ret = 0; /* an address: checked at the dial */
		goto out;
	}
	if (lookup_start(&l, host, r->net->up, r->net->nr_up, err) < 0)
		goto out;
	while ((step = lookup_step(&l, now_ms(), err)) == 0) {
		struct pollfd p = { .fd = l.fd, .events = POLLIN };
		uint64_t now = now_ms();

		poll(&p, 1, now < l.deadline ? (int)(l.deadline - now) : 0);
	}
	lookup_end(&l);
	if (step < 0)
		goto out;
	for (size_t i = 0; i < l.nr_ips; i++) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(l.ips[i]) };

		if (mcp_addr_refused((struct sockaddr *)&sa, r->spec.loopback))
			continue;
		inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
		snprintf(pin, sizeof(pin), "%s:%s:%s", host,
			 port ? port : strcmp(scheme, "https") == 0 ? "443" : "80", ip);
		*pins = sym_curl_slist_append(*pins, pin);
		ret = 0;
		goto out;
	}
	gantry_error(err, EACCES, "%s: %s resolves to a private, link-local or metadata address "
				  "only",
		     r->spec.id, host);
out:
	sym_curl_free(host);
	sym_curl_free(port);
	sym_curl_free(scheme);
	sym_curl_url_cleanup(u);
	return ret;
}

/* POST one message; *reply the response to id (NULL for a notification). */
static int post(struct mcp_remote *r, json_t *msg, json_int_t id, json_t **reply,
		gantry_error_t *err)
{
	struct request q = { .r = r };
	struct curl_slist *hdrs = NULL;
	cleanup_free char *body = json_dumps(msg, JSON_COMPACT);
	cleanup_free char *auth = NULL, *sess = NULL;
	char errbuf[CURL_ERROR_SIZE] = "";
	long status = 0;
	CURLcode rc;
	CURL *h;
	int ret = -1;

	struct curl_slist *pins = NULL;

	*reply = NULL;
	if (lazy_curl(err) < 0 || pin_address(r, &pins, err) < 0)
		return -1;
	h = sym_curl_easy_init();
	if (h == NULL || body == NULL) {
		sym_curl_slist_free_all(pins);
		return gantry_error(err, ENOMEM, "%s: cannot start a request", r->spec.id);
	}
	if (pins)
		sym_curl_easy_setopt(h, CURLOPT_RESOLVE, pins);
	if (r->net && r->net->trust) {
		struct curl_blob blob = { .data = (void *)r->net->trust,
					  .len = r->net->trust_len,
					  .flags = CURL_BLOB_NOCOPY };

		sym_curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
		sym_curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
	}
	hdrs = sym_curl_slist_append(hdrs, "Content-Type: application/json");
	hdrs = sym_curl_slist_append(hdrs, "Accept: application/json, text/event-stream");
	hdrs = sym_curl_slist_append(hdrs, "MCP-Protocol-Version: " MCP_PROTOCOL_VERSION);
	if (r->session) {
		xasprintf(&sess, "Mcp-Session-Id: %s", r->session);
		hdrs = sym_curl_slist_append(hdrs, sess);
	}
	pthread_mutex_lock(&r->secrets_lock);
	if (r->spec.auth == MCP_AUTH_BEARER || r->spec.auth == MCP_AUTH_CUSTODY)
		xasprintf(&auth, "Authorization: Bearer %s", r->auth);
	else if (r->spec.auth == MCP_AUTH_HEADER)
		xasprintf(&auth, "%s: %s", r->spec.header, r->auth);
	pthread_mutex_unlock(&r->secrets_lock);
	if (auth)
		hdrs = sym_curl_slist_append(hdrs, auth);
	sym_curl_easy_setopt(h, CURLOPT_URL, r->spec.url);
	sym_curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	sym_curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	sym_curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	sym_curl_easy_setopt(h, CURLOPT_PROXY, "");
	sym_curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	sym_curl_easy_setopt(h, CURLOPT_USERAGENT, "gantry-mcp-gateway/" GANTRY_VERSION);
	sym_curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
	sym_curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)MCP_REMOTE_TIMEOUT_S);
	sym_curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	sym_curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	sym_curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	sym_curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	sym_curl_easy_setopt(h, CURLOPT_HEADERDATA, &q);
	sym_curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	sym_curl_easy_setopt(h, CURLOPT_WRITEDATA, &q);
	sym_curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, on_open);
	sym_curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, &q);
	sym_curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	rc = sym_curl_easy_perform(h);
	sym_curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	if (auth)
		explicit_bzero(auth, strlen(auth));
	if (q.refused) {
		gantry_error(err, EACCES, "%s: refused to dial a private, link-local or metadata "
					  "address",
			     r->spec.id);
	} else if (q.body.over) {
		gantry_error(err, E2BIG, "%s: an answer longer than 1 MiB", r->spec.id);
	} else if (rc != CURLE_OK) {
		gantry_error(err, EIO, "%s: %s", r->spec.id,
			     *errbuf ? errbuf : sym_curl_easy_strerror(rc));
	} else if (id < 0) {
		ret = status >= 200 && status < 300 ? 0 :
						      gantry_error(err, EIO, "%s: HTTP %ld",
								   r->spec.id, status);
	} else if (status == 404 && r->session) {
		/* The remote ended the session: the next call starts another. */
		free(r->session);
		r->session = NULL;
		r->ready = false;
		gantry_error(err, EIO, "%s: its session ended (HTTP 404); asked again, it starts "
				       "anew",
			     r->spec.id);
	} else if (status != 200) {
		gantry_error(err, EIO, "%s: HTTP %ld", r->spec.id, status);
	} else {
		if (q.content_type && strncasecmp(q.content_type, "text/event-stream", 17) == 0)
			*reply = q.body.buf ? sse_find(q.body.buf, id) : NULL;
		else if (q.body.buf)
			*reply = json_loadb(q.body.buf, q.body.len, 0, NULL);
		if (*reply == NULL || !json_is_object(*reply))
			gantry_error(err, EPROTO, "%s: no JSON-RPC answer to request %lld", r->spec.id,
				     (long long)id);
		else
			ret = 0;
		if (ret < 0) {
			json_decref(*reply);
			*reply = NULL;
		}
	}
	if (ret == 0 && q.session && r->session == NULL)
		r->session = steal_pointer(&q.session);
	sym_curl_slist_free_all(hdrs);
	sym_curl_slist_free_all(pins);
	sym_curl_easy_cleanup(h);
	free(q.body.buf);
	free(q.content_type);
	free(q.session);
	return ret;
}

static int request(struct mcp_remote *r, const char *method, json_t *params, json_t **result,
		   json_t **error, gantry_error_t *err)
{
	json_int_t id = r->next_id++;
	json_t *msg = json_pack("{s:s,s:I,s:s}", "jsonrpc", "2.0", "id", id, "method", method);
	json_t *reply = NULL;
	int ret;

	if (params)
		json_object_set(msg, "params", params);
	ret = post(r, msg, id, &reply, err);
	json_decref(msg);
	if (ret < 0)
		return -1;
	*result = json_incref(json_object_get(reply, "result"));
	*error = *result ? NULL : json_incref(json_object_get(reply, "error"));
	json_decref(reply);
	if (*result == NULL && *error == NULL)
		return gantry_error(err, EPROTO, "%s: an answer without result or error",
				    r->spec.id);
	return 0;
}

static int initialize(struct mcp_remote *r, gantry_error_t *err)
{
	json_t *params = json_pack("{s:s,s:{},s:{s:s,s:s}}", "protocolVersion",
				   MCP_PROTOCOL_VERSION, "capabilities", "clientInfo", "name",
				   "gantry-mcp-gateway", "version", GANTRY_VERSION);
	json_t *result = NULL, *error = NULL, *note, *reply = NULL;
	int ret;

	/* A session half made before (its notification failed) is not
	 * resumed. */
	free(r->session);
	r->session = NULL;
	ret = request(r, "initialize", params, &result, &error, err);

	json_decref(params);
	if (ret == 0 && error) {
		cleanup_free char *e = json_dumps(error, JSON_COMPACT);
		cleanup_free char *shown = e ? mcp_redact(r, e) : NULL;

		ret = gantry_error(err, EPROTO, "%s: initialize refused: %.200s", r->spec.id,
				   shown ? shown : "?");
	}
	json_decref(result);
	json_decref(error);
	if (ret < 0)
		return -1;
	note = json_pack("{s:s,s:s}", "jsonrpc", "2.0", "method", "notifications/initialized");
	ret = post(r, note, -1, &reply, err);
	json_decref(note);
	json_decref(reply);
	if (ret == 0)
		r->ready = true;
	return ret;
}

int mcp_remote_call(struct mcp_remote *r, const char *method, json_t *params, json_t **result,
		    json_t **error, gantry_error_t *err)
{
	int ret;

	*result = *error = NULL;
	pthread_mutex_lock(&r->lock);
	ret = r->ready ? 0 : initialize(r, err);
	if (ret == 0)
		ret = request(r, method, params, result, error, err);
	pthread_mutex_unlock(&r->lock);
	return ret;
}
