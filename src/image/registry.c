/* Distribution API v2 over libcurl (see registry.h). One easy handle per
 * registry on a multi handle: the multi interface lets registry_pull run
 * the transfer only as far as the reader needs. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/json.h"
#include "common/util.h"
#include "image/http.h"
#include "image/lazylib.h"
#include "image/registry.h"
#include "image/registry_host.h"

#define USER_AGENT "gantry/0.1"

int registry_open(const char *registry, const char *repository, const char *insecure,
		  struct registry *r, gantry_error_t *err)
{
	const char *host = registry_api_host(registry);

	if (lazy_curl(err) < 0)
		return -1;
	*r = (struct registry){ .insecure = insecure };
	r->name = xstrdup(registry);
	r->repository = xstrdup(repository);
	xasprintf(&r->base, "%s://%s", registry_plain_http(host, insecure) ? "http" : "https",
		  host);
	r->multi = sym_curl_multi_init();
	r->easy = sym_curl_easy_init();
	if (r->multi == NULL || r->easy == NULL) {
		registry_close(r);
		return gantry_error(err, 0, "registry %s: cannot set up libcurl", registry);
	}
	return 0;
}

void registry_close(struct registry *r)
{
	if (r->easy)
		sym_curl_easy_cleanup(r->easy);
	if (r->multi)
		sym_curl_multi_cleanup(r->multi);
	creds_free(&r->creds);
	free(r->name);
	free(r->repository);
	free(r->base);
	if (r->authz)
		explicit_bzero(r->authz, strlen(r->authz));
	free(r->authz);
	*r = (struct registry){ 0 };
}

void registry_set_creds(struct registry *r, const char *user, const char *pass)
{
	creds_free(&r->creds);
	r->creds.user = xstrdup(user);
	r->creds.pass = xstrdup(pass);
	r->creds.source = xstrdup("the given credentials");
	r->creds_loaded = true;
}

/* ---- one HTTP exchange ---- */

static size_t on_header(char *line, size_t size, size_t n, void *arg)
{
	struct registry_resp *s = arg;

	http_head_line(&s->head, line, size * n);
	return size * n;
}

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	struct registry_resp *s = arg;
	bool ok = s->head.status >= 200 && s->head.status < 300;

	n *= size;
	if (!ok && s->len + n > REGISTRY_ERROR_BODY_MAX) {
		s->overflow = true; /* only the start of an error body is kept */
		return n;
	}
	if (ok && s->len > 0 && s->len + n > REGISTRY_STREAM_BUF) {
		s->paused = true;
		return CURL_WRITEFUNC_PAUSE;
	}
	if (s->len + n + 1 > s->cap) {
		s->cap = MAX(s->cap * 2, s->len + n + 1);
		s->buf = xrealloc(s->buf, s->cap);
	}
	memcpy(s->buf + s->len, data, n);
	s->len += n;
	s->buf[s->len] = '\0';
	return n;
}

static int resp_step(struct registry_resp *s, gantry_error_t *err)
{
	CURLM *m = s->reg->multi;
	CURLMsg *msg;
	int running, q;
	CURLMcode mc = sym_curl_multi_perform(m, &running);

	if (mc != CURLM_OK)
		return gantry_error(err, 0, "libcurl: %s", sym_curl_multi_strerror(mc));
	while ((msg = sym_curl_multi_info_read(m, &q)) != NULL) {
		if (msg->msg == CURLMSG_DONE) {
			s->done = true;
			s->result = msg->data.result;
		}
	}
	return 0;
}

enum resp_until {
	UNTIL_HEADERS,
	UNTIL_DATA,
	UNTIL_DONE, /* the whole body buffered, or as much as is kept */
};

static bool resp_ready(const struct registry_resp *s, enum resp_until until)
{
	switch (until) {
	case UNTIL_HEADERS:
		return s->head.done;
	case UNTIL_DATA:
		return s->len > 0;
	case UNTIL_DONE:
		return s->paused || s->overflow;
	}
	return true;
}

static int resp_wait(struct registry_resp *s, enum resp_until until, gantry_error_t *err)
{
	struct curl_waitfd cancel = { .fd = cancel_fd(s->reg->cancel), .events = CURL_WAIT_POLLIN };

	for (;;) {
		if (cancel_check(s->reg->cancel, err) < 0 || resp_step(s, err) < 0)
			return -1;
		if (s->done || resp_ready(s, until))
			return 0;
		sym_curl_multi_poll(s->reg->multi, &cancel, cancel.fd >= 0, 1000, NULL);
	}
}

/* url as errors show it: scheme://host/path. A signed URL's query (a
 * blob store's signature) and any user:password stay out of messages. */
static char *url_shown(const char *url)
{
	CURLU *u = sym_curl_url();
	char *s = NULL, *out;

	if (u && sym_curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    sym_curl_url_set(u, CURLUPART_QUERY, NULL, 0) == CURLUE_OK &&
	    sym_curl_url_set(u, CURLUPART_FRAGMENT, NULL, 0) == CURLUE_OK &&
	    sym_curl_url_set(u, CURLUPART_USER, NULL, 0) == CURLUE_OK &&
	    sym_curl_url_set(u, CURLUPART_PASSWORD, NULL, 0) == CURLUE_OK &&
	    sym_curl_url_get(u, CURLUPART_URL, &s, 0) == CURLUE_OK) {
		out = xstrdup(s);
	} else {
		/* Not a URL curl can parse: keep what precedes any query. */
		out = strndup(url, strcspn(url, "?#@"));
		if (out == NULL)
			abort();
	}
	sym_curl_free(s);
	sym_curl_url_cleanup(u);
	return out;
}

static int transfer_error(struct registry_resp *s, const char *url, gantry_error_t *err)
{
	cleanup_free char *shown = url_shown(url);

	return gantry_error(err, 0, "GET %s: %s", shown,
			    s->errbuf[0] ? s->errbuf : sym_curl_easy_strerror(s->result));
}

void registry_resp_end(struct registry_resp *s)
{
	if (s->started) {
		sym_curl_multi_remove_handle(s->reg->multi, s->reg->easy);
		s->started = false;
	}
	http_head_reset(&s->head);
	free(s->buf);
	s->buf = NULL;
	s->len = s->cap = 0;
	s->handed = s->paused = s->done = s->overflow = false;
}

/* Send GET url and wait for the final response's headers. */
static int resp_start(struct registry_resp *s, const char *url, const char *accept,
		      const char *authz, gantry_error_t *err)
{
	CURL *h = s->reg->easy;
	struct curl_slist *hdrs = NULL;
	cleanup_free char *acc = NULL;
	int ret;

	sym_curl_easy_reset(h);
	s->head.status = 0;
	s->errbuf[0] = '\0';
	s->head.length = -1;
	if (accept) {
		xasprintf(&acc, "Accept: %s", accept);
		hdrs = sym_curl_slist_append(hdrs, acc);
	}
	if (authz)
		hdrs = sym_curl_slist_append(hdrs, authz);
	sym_curl_easy_setopt(h, CURLOPT_URL, url);
	sym_curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	sym_curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	sym_curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	sym_curl_easy_setopt(h, CURLOPT_USERAGENT, USER_AGENT);
	sym_curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, (long)REGISTRY_CONNECT_SECONDS);
	sym_curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	sym_curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)REGISTRY_STALL_SECONDS);
	sym_curl_easy_setopt(h, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
	sym_curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	sym_curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	sym_curl_easy_setopt(h, CURLOPT_HEADERDATA, s);
	sym_curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	sym_curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
	sym_curl_easy_setopt(h, CURLOPT_ERRORBUFFER, s->errbuf);
	sym_curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 256L * 1024L);
	if (sym_curl_multi_add_handle(s->reg->multi, h) != CURLM_OK) {
		cleanup_free char *shown = url_shown(url);

		sym_curl_slist_free_all(hdrs);
		return gantry_error(err, 0, "GET %s: cannot start", shown);
	}
	s->started = true;
	ret = resp_wait(s, UNTIL_HEADERS, err);
	/* libcurl has sent the headers by now and keeps no pointer to them. */
	sym_curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	sym_curl_slist_free_all(hdrs);
	if (ret < 0)
		return -1;
	if (!s->head.done)
		return transfer_error(s, url, err);
	return 0;
}

ssize_t registry_pull(void *arg, const void **buf, gantry_error_t *err)
{
	struct registry_resp *s = arg;

	if (s->handed) {
		s->len = 0;
		s->handed = false;
		if (s->paused) {
			s->paused = false;
			sym_curl_easy_pause(s->reg->easy, CURLPAUSE_CONT);
		}
	}
	if (s->len == 0 && !s->done && resp_wait(s, UNTIL_DATA, err) < 0)
		return -1;
	if (s->len == 0) {
		if (s->result != CURLE_OK) {
			char *url = NULL;

			sym_curl_easy_getinfo(s->reg->easy, CURLINFO_EFFECTIVE_URL, &url);
			return transfer_error(s, url ? url : "?", err);
		}
		return 0;
	}
	*buf = s->buf;
	s->handed = true;
	return (ssize_t)s->len;
}

/* ---- URLs ---- */

/* scheme and host[:port] of url; 0 on success. */
static int url_origin(const char *url, char **scheme, char **hostport)
{
	CURLU *u = sym_curl_url();
	char *host = NULL, *port = NULL;
	int ret = -1;

	*scheme = *hostport = NULL;
	if (u && sym_curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    sym_curl_url_get(u, CURLUPART_SCHEME, scheme, 0) == CURLUE_OK &&
	    sym_curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
		if (sym_curl_url_get(u, CURLUPART_PORT, &port, 0) == CURLUE_OK)
			xasprintf(hostport, "%s:%s", host, port);
		else
			*hostport = xstrdup(host);
		ret = 0;
	}
	sym_curl_free(host);
	sym_curl_free(port);
	sym_curl_url_cleanup(u);
	return ret;
}

/* Credentials go only to the registry's own scheme, host and port. */
static bool same_origin(const struct registry *r, const char *url)
{
	size_t n = strlen(r->base);

	return strncmp(url, r->base, n) == 0 && (url[n] == '/' || url[n] == '\0');
}

/* https anywhere; plain http only to hosts that may have it. */
static int check_url(const struct registry *r, const char *url, const char *what,
		     gantry_error_t *err)
{
	char *scheme, *host;
	int ret = 0;

	if (url_origin(url, &scheme, &host) < 0)
		ret = gantry_error(err, 0, "%s: bad URL", what);
	else if (strcasecmp(scheme, "https") != 0 &&
		 !(strcasecmp(scheme, "http") == 0 && registry_plain_http(host, r->insecure) &&
		   strncmp(r->base, "http://", 7) == 0))
		/* Plain HTTP only where the registry itself is plain: an HTTPS
		 * registry may not send us (and a realm our credentials) to
		 * a service on this host's loopback. */
		ret = gantry_error(err, 0,
				   "%s: refusing %s to %s (plain HTTP only for loopback "
				   "registries and those in " REGISTRY_INSECURE_ENV ", from one)",
				   what, scheme, host);
	sym_curl_free(scheme);
	free(host);
	return ret;
}

/* ---- authentication ---- */

static int load_creds(struct registry *r, gantry_error_t *err)
{
	if (r->creds_loaded)
		return 0;
	if (creds_lookup(r->name, &r->creds, err) < 0)
		return -1;
	r->creds_loaded = true;
	return 0;
}

static char *basic_header(const struct registry_creds *c)
{
	cleanup_free char *b64 = creds_basic(c->user, c->pass);
	char *h;

	xasprintf(&h, "Authorization: Basic %s", b64);
	explicit_bzero(b64, strlen(b64));
	return h;
}

static void set_authz(struct registry *r, char *h)
{
	if (r->authz)
		explicit_bzero(r->authz, strlen(r->authz));
	free(r->authz);
	r->authz = h;
}

static char *token_url(const struct registry *r, const struct http_challenge *c, bool ping)
{
	CURL *h = r->easy;
	char *svc = c->service ? sym_curl_easy_escape(h, c->service, 0) : NULL;
	char *scope = NULL, *url, *own = NULL;

	if (c->scope)
		scope = sym_curl_easy_escape(h, c->scope, 0);
	else if (!ping) {
		xasprintf(&own, "repository:%s:pull", r->repository);
		scope = sym_curl_easy_escape(h, own, 0);
	}
	xasprintf(&url, "%s%sservice=%s%s%s", c->realm, strchr(c->realm, '?') ? "&" : "?",
		  svc ? svc : "", scope ? "&scope=" : "", scope ? scope : "");
	sym_curl_free(svc);
	sym_curl_free(scope);
	free(own);
	return url;
}

static int token_fetch(struct registry *r, const struct http_challenge *c, bool ping,
		       gantry_error_t *err)
{
	cleanup_free char *url = NULL, *basic = NULL, *authz = NULL;
	struct registry_resp s = { .reg = r };
	json_t *j = NULL;
	const char *tok;
	int ret = -1;

	if (c->realm == NULL)
		return gantry_error(err, 0, "registry %s: Bearer challenge without a realm",
				    r->name);
	if (check_url(r, c->realm, "token realm", err) < 0)
		return -1;
	url = token_url(r, c, ping);
	if (r->creds.user)
		basic = basic_header(&r->creds);
	if (resp_start(&s, url, NULL, basic, err) < 0)
		goto out;
	if (resp_wait(&s, UNTIL_DONE, err) < 0)
		goto out;
	if (s.paused) {
		ret = gantry_error(err, 0, "%s: the token service's answer is too large", r->name);
		goto out;
	}
	if (s.result != CURLE_OK && s.head.status == 200) {
		ret = transfer_error(&s, c->realm, err);
		goto out;
	}
	if ((s.head.status == 401 || s.head.status == 403) && r->creds.user == NULL) {
		ret = gantry_error(err, 0,
				   "%s: authentication required (HTTP %ld from the token service): "
				   "run `gantry image login %s`",
				   r->name, s.head.status, r->name);
		goto out;
	}
	if (s.head.status == 401 || s.head.status == 403) {
		ret = gantry_error(
			err, 0, "%s: wrong credentials from %s (HTTP %ld from the token service)",
			r->name, r->creds.source, s.head.status);
		goto out;
	}
	if (s.head.status != 200) {
		ret = gantry_error(err, 0, "%s: token service answered HTTP %ld", r->name,
				   s.head.status);
		goto out;
	}
	j = json_loadb(s.buf ? s.buf : "", s.len, 0, NULL);
	tok = json_string_value(json_object_get(j, "token"));
	if (tok == NULL || *tok == '\0')
		tok = json_string_value(json_object_get(j, "access_token"));
	if (tok == NULL || *tok == '\0' || strpbrk(tok, "\r\n")) {
		ret = gantry_error(err, 0, "%s: the token service sent no token", r->name);
		goto out;
	}
	xasprintf(&authz, "Authorization: Bearer %s", tok);
	set_authz(r, steal_pointer(&authz));
	ret = 0;
out:
	json_decref(j);
	if (s.buf)
		explicit_bzero(s.buf, s.len);
	registry_resp_end(&s);
	return ret;
}

/* Answer a 401's challenge: a Bearer token, or Basic credentials. */
static int authenticate(struct registry *r, const char *challenge, bool ping, gantry_error_t *err)
{
	struct http_challenge c;
	int ret;

	if (load_creds(r, err) < 0)
		return -1;
	http_challenge_parse(challenge ? challenge : "", &c);
	if (strcasecmp(c.scheme, "Bearer") == 0) {
		ret = token_fetch(r, &c, ping, err);
	} else if (strcasecmp(c.scheme, "Basic") == 0) {
		if (r->creds.user == NULL)
			ret = gantry_error(err, 0,
					   "%s: authentication required (HTTP 401): run `gantry "
					   "image login %s`",
					   r->name, r->name);
		else {
			set_authz(r, basic_header(&r->creds));
			ret = 0;
		}
	} else {
		ret = gantry_error(err, 0, "%s: HTTP 401 with an unknown challenge `%.40s`",
				   r->name, challenge ? challenge : "");
		gantry_error_sanitize(err, 0);
	}
	http_challenge_free(&c);
	return ret;
}

/* ---- requests ---- */

/* The registry's own words from an error body: {"errors":[{"code","message"}]}. */
static char *registry_says(const struct registry_resp *s)
{
	json_t *j = s->buf ? json_loadb(s->buf, s->len, 0, NULL) : NULL;
	json_t *e = json_array_get(json_object_get(j, "errors"), 0);
	const char *msg = json_string_value(json_object_get(e, "message"));
	char *out = NULL;

	if (msg && *msg)
		xasprintf(&out, ": %.200s", msg);
	json_decref(j);
	return out ? out : xstrdup("");
}

static int status_error(struct registry *r, struct registry_resp *s, const char *what,
			gantry_error_t *err)
{
	cleanup_free char *says = registry_says(s);

	if (s->head.status == 404)
		gantry_error(err, 0, "%s not found (HTTP 404%s)", what, says);
	else if (s->head.status == 401 && r->creds.user)
		gantry_error(err, 0, "%s: wrong credentials from %s (HTTP 401%s)", r->name,
			     r->creds.source, says);
	else if (s->head.status == 401)
		gantry_error(err, 0,
			     "%s: authentication required (HTTP 401): run `gantry image login "
			     "%s`",
			     r->name, r->name);
	else if (s->head.status == 403)
		gantry_error(err, 0, "%s: access denied (HTTP 403%s)", what, says);
	else
		gantry_error(err, 0, "%s: HTTP %ld%s", what, s->head.status, says);
	return gantry_error_sanitize(err, 0);
}

static bool is_redirect(long status)
{
	return status == 301 || status == 302 || status == 303 || status == 307 ||
	       status == 308;
}

static int request(struct registry *r, const char *path, const char *accept, const char *what,
		   bool ping, struct registry_resp *s, gantry_error_t *err)
{
	cleanup_free char *url = NULL;
	bool retried = false; /* one fresh authentication per request */
	int hops = 0;

	*s = (struct registry_resp){ .reg = r, .head.length = -1 };
	xasprintf(&url, "%s%s", r->base, path);
	for (;;) {
		bool own = same_origin(r, url);
		char *next = NULL;

		if (resp_start(s, url, accept, own ? r->authz : NULL, err) < 0)
			goto fail;
		if (s->head.status == 401 && own && !retried) {
			/* No token yet, or one that expired or lacks this scope:
			 * answer the new challenge and ask once more. */
			cleanup_free char *ch =
				s->head.challenge ? xstrdup(s->head.challenge) : NULL;

			registry_resp_end(s);
			set_authz(r, NULL);
			if (authenticate(r, ch, ping, err) < 0)
				return -1;
			retried = true;
			continue;
		}
		if (!is_redirect(s->head.status))
			break;
		if (++hops > REGISTRY_MAX_REDIRECTS) {
			gantry_error(err, 0, "%s: more than %d redirects (a redirect loop?)", what,
				     REGISTRY_MAX_REDIRECTS);
			goto fail;
		}
		sym_curl_easy_getinfo(r->easy, CURLINFO_REDIRECT_URL, &next);
		if (next == NULL) {
			gantry_error(err, 0, "%s: HTTP %ld without a Location", what,
				     s->head.status);
			goto fail;
		}
		free(url);
		url = xstrdup(next);
		registry_resp_end(s);
		if (check_url(r, url, what, err) < 0)
			return -1;
	}
	if (s->head.status >= 200 && s->head.status < 300)
		return 0;
	/* Read what the registry said (a bounded error body). */
	if (resp_wait(s, UNTIL_DONE, err) == 0)
		status_error(r, s, what, err);
fail:
	registry_resp_end(s);
	return -1;
}

int registry_get(struct registry *r, const char *kind, const char *object, const char *accept,
		 const char *what, struct registry_resp *resp, gantry_error_t *err)
{
	cleanup_free char *path = NULL;

	xasprintf(&path, "/v2/%s/%s/%s", r->repository, kind, object);
	return request(r, path, accept, what, false, resp, err);
}

int registry_ping(struct registry *r, gantry_error_t *err)
{
	struct registry_resp s;

	if (request(r, "/v2/", NULL, r->name, true, &s, err) < 0)
		return -1;
	registry_resp_end(&s);
	return 0;
}
