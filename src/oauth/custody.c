/* OAuth custody's flows (see custody.h): the login's PKCE pair, state,
 * callback and exchange, the refresh, and the tokens' file. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/files.h"
#include "common/json.h"
#include "common/log.h"
#include "common/text.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "image/digest.h"
#include "image/lazylib.h"
#include "oauth/custody.h"
#include "proto/base64.h"

#define CALLBACK_HEAD_MAX 8192
#define CALLBACK_READ_MS  5000
#define CALLBACK_PORT_TRIES 8 /* picks of a free port free on both loopbacks */

static const char logged_in[] =
	"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nConnection: close\r\n\r\n"
	"<!doctype html><title>Logged in</title><p>Logged in. Gantry keeps the login on this "
	"machine; you can close this tab.</p>\n";
static const char not_found[] =
	"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
static const char refused[] = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n"
			      "Connection: close\r\n\r\nThe login was refused.\n";

int oauth_custody_open(struct oauth_custody *c, const char *config, gantry_error_t *err)
{
	cleanup_free char *home = NULL;

	*c = (struct oauth_custody){ .lock = PTHREAD_MUTEX_INITIALIZER };
	if (gantry_home(&home, err) < 0 ||
	    oauth_providers_load(config, &c->providers, &c->nr, err) < 0)
		return -1;
	xasprintf(&c->store, "%s/oauth-tokens.json", home);
	return 0;
}

void oauth_custody_close(struct oauth_custody *c)
{
	oauth_providers_free(c->providers, c->nr);
	free(c->store);
	*c = (struct oauth_custody){ 0 };
}

const struct oauth_provider *oauth_provider_find(const struct oauth_custody *c,
						 const char *name)
{
	for (size_t i = 0; i < c->nr; i++)
		if (strcmp(c->providers[i].name, name) == 0)
			return &c->providers[i];
	return NULL;
}

/* ---- the tokens' file -------------------------------------------------------------------- */

/* The store locked (a file beside it: the store itself is replaced by
 * each write), read: *doc an object. */
static int store_open(const struct oauth_custody *c, int *lock, json_t **doc, gantry_error_t *err)
{
	cleanup_free char *lockpath = NULL, *buf = NULL, *dir = xstrdup(c->store);
	char *slash = strrchr(dir, '/');
	size_t len = 0;

	if (slash)
		*slash = '\0';
	if (mkdir_p(dir, err) < 0)
		return -1;
	xasprintf(&lockpath, "%s.lock", c->store);
	*lock = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (*lock < 0)
		return gantry_error_errno(err, "`%s`", lockpath);
	while (flock(*lock, LOCK_EX) < 0)
		if (errno != EINTR)
			return gantry_error_errno(err, "lock `%s`", lockpath);
	if (read_file_max(c->store, OAUTH_STORE_MAX, &buf, &len, err) < 0)
		goto fail;
	*doc = buf ? jsonh_load(buf, len, c->store, err) : json_object();
	if (buf)
		explicit_bzero(buf, len);
	if (*doc == NULL)
		goto fail;
	if (!json_is_object(*doc)) {
		json_decref(*doc);
		gantry_error(err, 0, "%s: not an object of providers", c->store);
		goto fail;
	}
	return 0;
fail:
	close(*lock);
	*lock = -1;
	return -1;
}

static int store_write(const struct oauth_custody *c, json_t *doc, gantry_error_t *err)
{
	char *text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
	int r;

	if (text == NULL)
		return gantry_error(err, ENOMEM, "cannot write the tokens");
	r = write_file_atomic(c->store, text, strlen(text), 0600, err);
	explicit_bzero(text, strlen(text));
	free(text);
	return r;
}

static void store_close(int lock, json_t *doc)
{
	json_decref(doc);
	if (lock >= 0)
		close(lock);
}

/* ---- HTTP -------------------------------------------------------------------------------- */

struct body {
	char *buf;
	size_t len;
	bool over;
};

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	size_t len = size * n;

	if (b->len + len > OAUTH_ANSWER_MAX) {
		b->over = true;
		return 0;
	}
	b->buf = xrealloc(b->buf, b->len + len + 1);
	memcpy(b->buf + b->len, data, len);
	b->len += len;
	b->buf[b->len] = '\0';
	return len;
}

/* "a=b&..." of pairs k[i]=v[i], each value percent-encoded; or the JSON
 * object of them. */
static char *encode_body(const struct oauth_provider *p, const char *const *k,
			 const char *const *v, size_t n)
{
	json_t *o;
	char *s = NULL, *e;

	if (p->json) {
		o = json_object();
		for (size_t i = 0; i < n; i++)
			json_object_set_new(o, k[i], json_string(v[i]));
		s = json_dumps(o, JSON_COMPACT);
		json_decref(o);
		return s;
	}
	for (size_t i = 0; i < n; i++) {
		char *t;

		e = sym_curl_easy_escape(NULL, v[i], 0);
		xasprintf(&t, "%s%s%s=%s", s ? s : "", s ? "&" : "", k[i], e ? e : "");
		sym_curl_free(e);
		if (s)
			explicit_bzero(s, strlen(s));
		free(s);
		s = t;
	}
	return s;
}

/* POST the pairs to p's token endpoint: 0 with *answer its JSON object, or
 * -1 with a line saying why (the provider's error and description,
 * sanitised). */
static int token_post(const struct oauth_provider *p, const char *const *k,
		      const char *const *v, size_t n, json_t **answer, gantry_error_t *err)
{
	struct curl_slist *hdrs = NULL;
	struct body b = { 0 };
	char errbuf[CURL_ERROR_SIZE] = "";
	cleanup_free char *body = NULL;
	long status = 0;
	CURLcode rc;
	CURL *h;
	int ret = -1;

	*answer = NULL;
	if (lazy_curl(err) < 0)
		return -1;
	body = encode_body(p, k, v, n);
	h = sym_curl_easy_init();
	if (h == NULL || body == NULL) {
		if (h)
			sym_curl_easy_cleanup(h);
		return gantry_error(err, ENOMEM, "%s: cannot start a request", p->name);
	}
	hdrs = sym_curl_slist_append(hdrs, p->json ? "Content-Type: application/json" :
						     "Content-Type: application/x-www-form-urlencoded");
	hdrs = sym_curl_slist_append(hdrs, "Accept: application/json");
	sym_curl_easy_setopt(h, CURLOPT_URL, p->token);
	sym_curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	sym_curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	sym_curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	/* The user's proxy is taken for the provider, never for loopback. */
	sym_curl_easy_setopt(h, CURLOPT_NOPROXY, "localhost,127.0.0.1,::1");
	sym_curl_easy_setopt(h, CURLOPT_USERAGENT, "gantry-oauth/" GANTRY_VERSION);
	sym_curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
	sym_curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)OAUTH_HTTP_TIMEOUT_S);
	sym_curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	sym_curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	sym_curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	sym_curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	sym_curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	sym_curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	rc = sym_curl_easy_perform(h);
	sym_curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	explicit_bzero(body, strlen(body));
	if (b.over) {
		gantry_error(err, E2BIG, "%s: the token endpoint's answer is over 64 KiB", p->name);
	} else if (rc != CURLE_OK) {
		gantry_error(err, EIO, "%s: %s", p->name,
			     *errbuf ? text_sanitize(errbuf, 200) : sym_curl_easy_strerror(rc));
	} else {
		json_t *j = b.buf ? json_loadb(b.buf, b.len, 0, NULL) : NULL;

		if (status == 200 && json_is_object(j)) {
			*answer = j;
			ret = 0;
		} else {
			json_t *e = json_is_object(j) ? json_object_get(j, "error") : NULL;
			json_t *d = json_is_object(j) ? json_object_get(j, "error_description") :
							NULL;
			cleanup_free char *es = json_is_string(e) ? xstrdup(json_string_value(e)) :
								    NULL;
			cleanup_free char *ds = json_is_string(d) ? xstrdup(json_string_value(d)) :
								    NULL;

			gantry_error(err, EACCES, "%s: the token endpoint answered HTTP %ld%s%s%s%s",
				     p->name, status, es ? ": " : "", es ? text_sanitize(es, 64) : "",
				     ds ? ": " : "", ds ? text_sanitize(ds, 200) : "");
			json_decref(j);
		}
	}
	if (b.buf)
		explicit_bzero(b.buf, b.len);
	free(b.buf);
	sym_curl_slist_free_all(hdrs);
	sym_curl_easy_cleanup(h);
	return ret;
}

/* The stored entry from a token endpoint's answer; old (may be NULL)
 * keeps its refresh token when the answer brings none. */
static json_t *entry_from(const struct oauth_provider *p, json_t *answer, json_t *old,
			  gantry_error_t *err)
{
	json_t *access = json_object_get(answer, "access_token");
	json_t *refresh = json_object_get(answer, "refresh_token");
	json_t *id = json_object_get(answer, "id_token");
	json_t *type = json_object_get(answer, "token_type");
	json_t *in = json_object_get(answer, "expires_in"), *e;
	json_int_t life = json_is_integer(in) ? json_integer_value(in) : 3600;

	if (!json_is_string(access) || json_string_length(access) == 0 ||
	    json_string_length(access) > 16384) {
		gantry_error(err, EPROTO, "%s: the token endpoint gave no access token", p->name);
		return NULL;
	}
	if (life <= 0 || life > 366LL * 86400)
		life = 3600;
	e = json_pack("{s:O,s:s,s:I}", "access_token", access, "token_type",
		      json_is_string(type) ? json_string_value(type) : "Bearer", "expires_at",
		      (json_int_t)time(NULL) + life);
	if (json_is_string(refresh))
		json_object_set(e, "refresh_token", refresh);
	else if (old && json_is_string(json_object_get(old, "refresh_token")))
		json_object_set(e, "refresh_token", json_object_get(old, "refresh_token"));
	if (json_is_string(id))
		json_object_set(e, "id_token", id);
	else if (old && json_is_string(json_object_get(old, "id_token")))
		json_object_set(e, "id_token", json_object_get(old, "id_token"));
	return e;
}

/* The guest's line: the entry without its refresh token, a sentinel in
 * its place. */
static char *guest_answer(const char *name, json_t *entry)
{
	json_t *a = json_deep_copy(entry);
	char sentinel[sizeof(OAUTH_SENTINEL_PREFIX) + OAUTH_NAME_MAX];
	char *s;

	snprintf(sentinel, sizeof(sentinel), OAUTH_SENTINEL_PREFIX "%s", name);
	json_object_set_new(a, "provider", json_string(name));
	json_object_set_new(a, "refresh_token", json_string(sentinel));
	s = json_dumps(a, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(a);
	return s;
}

/* ---- login -------------------------------------------------------------------------------- */

static char *random_b64url(size_t n)
{
	unsigned char raw[64];
	char *out = xmalloc(b64_encoded_len(n, B64_URL) + 1);

	if (n > sizeof(raw) || getrandom(raw, n, 0) != (ssize_t)n)
		abort(); /* the kernel's RNG does not fail for 64 bytes */
	b64_encode(raw, n, out, B64_URL);
	explicit_bzero(raw, sizeof(raw));
	return out;
}

/* S256: base64url(sha256(verifier)). */
static int pkce_challenge(const char *verifier, char out[64], gantry_error_t *err)
{
	char hex[DIGEST_STR_MAX];
	unsigned char raw[32];
	const char *h;

	if (sha256_buf(verifier, strlen(verifier), hex, err) < 0)
		return -1;
	h = digest_hex(hex);
	for (size_t i = 0; i < 32; i++) {
		unsigned int v;

		sscanf(h + 2 * i, "%2x", &v);
		raw[i] = (unsigned char)v;
	}
	b64_encode(raw, sizeof(raw), out, B64_URL);
	return 0;
}

/* The login's callback listeners, on 127.0.0.1 and on [::1] at the same
 * port: a browser tries either for "localhost", and a port held by
 * another process on one of them would hand that process the callback
 * (or end the login). lfd[1] is -1 where the host has no IPv6 loopback. */
static int callback_listen(const struct oauth_provider *p, uint16_t *port, int lfd[2],
			   gantry_error_t *err)
{
	for (int tries = 0; tries < CALLBACK_PORT_TRIES; tries++) {
		*port = p->port;
		lfd[0] = loopback_listen(AF_INET, port);
		if (lfd[0] < 0)
			return gantry_error_errno(err, "%s: the login's callback port 127.0.0.1:%u",
						  p->name, p->port);
		lfd[1] = loopback_listen(AF_INET6, port);
		if (lfd[1] >= 0 || errno == EADDRNOTAVAIL || errno == EAFNOSUPPORT)
			return 0;
		close(lfd[0]);
		/* A port the kernel picked, taken on [::1]: another pick. */
		if (errno != EADDRINUSE || p->port)
			break;
	}
	lfd[0] = lfd[1] = -1;
	return gantry_error_errno(err, "%s: the login's callback port [::1]:%u", p->name, *port);
}

/* One browser connection's head, up to its blank line, bounded in size
 * and time: 0, or -1 (closed, too long, too slow). */
static int read_head(int fd, char *buf, size_t cap)
{
	uint64_t deadline = now_ms() + CALLBACK_READ_MS;
	size_t got = 0;

	while (got < cap - 1) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		uint64_t now = now_ms();
		ssize_t n;

		if (now >= deadline || poll(&pf, 1, (int)(deadline - now)) <= 0)
			return -1;
		n = recv(fd, buf + got, cap - 1 - got, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
		buf[got] = '\0';
		if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
			return 0;
	}
	return -1;
}

/* Wait for the browser's callback with state: *code, or -1 (the provider
 * refused, the wait ended, the run stops). */
static int await_code(const int lfd[2], int stop_fd, const struct oauth_provider *p,
		      const char *state, char **code, gantry_error_t *err)
{
	uint64_t deadline = now_ms() + OAUTH_LOGIN_TIMEOUT_S * 1000ULL;
	char *head = xmalloc(CALLBACK_HEAD_MAX);
	int r = -1;

	for (;;) {
		struct pollfd pf[3] = { { .fd = stop_fd, .events = POLLIN },
					{ .fd = lfd[0], .events = POLLIN },
					{ .fd = lfd[1], .events = POLLIN } };
		uint64_t now = now_ms();
		int conn, got;

		if (now >= deadline) {
			gantry_error(err, ETIMEDOUT, "%s: no login within %d minutes", p->name,
				     OAUTH_LOGIN_TIMEOUT_S / 60);
			break;
		}
		/* A negative fd is left out by poll. */
		if (poll(pf, 3, (int)(deadline - now)) < 0 && errno != EINTR) {
			gantry_error_errno(err, "poll");
			break;
		}
		if (pf[0].revents) {
			gantry_error(err, ECANCELED, "%s: the run ended before the login", p->name);
			break;
		}
		if (!pf[1].revents && !pf[2].revents)
			continue;
		conn = accept4(pf[1].revents ? lfd[0] : lfd[1], NULL, NULL, SOCK_CLOEXEC);
		if (conn < 0)
			continue;
		if (read_head(conn, head, CALLBACK_HEAD_MAX) < 0) {
			close(conn);
			continue;
		}
		got = oauth_callback_parse(head, p->path, state, code, err);
		if (got == 0) {
			(void)!write(conn, not_found, sizeof(not_found) - 1);
			close(conn);
			continue;
		}
		if (got > 0)
			(void)!write(conn, logged_in, sizeof(logged_in) - 1);
		else
			(void)!write(conn, refused, sizeof(refused) - 1);
		close(conn);
		r = got > 0 ? 0 : -1;
		break;
	}
	free(head);
	return r;
}

static int store_entry(struct oauth_custody *c, const char *name, json_t *entry,
		       gantry_error_t *err)
{
	json_t *doc = NULL;
	int lock = -1, r;

	if (store_open(c, &lock, &doc, err) < 0)
		return -1;
	json_object_set(doc, name, entry);
	r = store_write(c, doc, err);
	store_close(lock, doc);
	return r;
}

int oauth_custody_login(struct oauth_custody *c, const char *name, int stop_fd,
			void (*show)(void *opaque, const char *url), void *opaque, char **answer,
			gantry_error_t *err)
{
	const struct oauth_provider *p = oauth_provider_find(c, name);
	cleanup_free char *verifier = NULL, *state = NULL, *redirect = NULL, *url = NULL;
	cleanup_free char *code = NULL;
	cleanup_free char *e_client = NULL, *e_redirect = NULL, *e_scope = NULL;
	char challenge[64];
	json_t *tok = NULL, *entry = NULL;
	uint16_t port = 0;
	int lfd[2] = { -1, -1 }, r = -1;

	*answer = NULL;
	if (p == NULL)
		return gantry_error(err, ENOENT, "no OAuth provider `%s`", name);
	pthread_mutex_lock(&c->lock);
	if (c->login_busy) {
		pthread_mutex_unlock(&c->lock);
		return gantry_error(err, EBUSY, "%s: a login is already under way", name);
	}
	c->login_busy = true;
	pthread_mutex_unlock(&c->lock);
	if (lazy_curl(err) < 0 || callback_listen(p, &port, lfd, err) < 0)
		goto out;
	verifier = random_b64url(48);
	state = random_b64url(24);
	if (pkce_challenge(verifier, challenge, err) < 0)
		goto out;
	xasprintf(&redirect, "http://localhost:%u%s", port, p->path);
	e_client = sym_curl_easy_escape(NULL, p->client_id, 0);
	e_redirect = sym_curl_easy_escape(NULL, redirect, 0);
	e_scope = p->scope ? sym_curl_easy_escape(NULL, p->scope, 0) : NULL;
	xasprintf(&url,
		  "%s%sresponse_type=code&client_id=%s&redirect_uri=%s%s%s"
		  "&code_challenge=%s&code_challenge_method=S256&state=%s%s%s",
		  p->authorize, strchr(p->authorize, '?') ? "&" : "?", e_client ? e_client : "",
		  e_redirect ? e_redirect : "", e_scope ? "&scope=" : "", e_scope ? e_scope : "",
		  challenge, state, p->params ? "&" : "", p->params ? p->params : "");
	if (show)
		show(opaque, url);
	else
		log_always("OAuth custody: to log in to %s for the sandbox, open %s", name, url);
	r = await_code(lfd, stop_fd, p, state, &code, err);
	close_fd(&lfd[0]);
	close_fd(&lfd[1]);
	if (r < 0)
		goto out;
	r = -1;
	{
		const char *k[] = { "grant_type",   "code",	     "redirect_uri",
				    "client_id",    "code_verifier", "state" };
		const char *v[] = { "authorization_code", code, redirect, p->client_id, verifier,
				    state };

		/* A form carries no state (the JSON flavour of Claude's wants it). */
		if (token_post(p, k, v, p->json ? 6 : 5, &tok, err) < 0)
			goto out;
	}
	entry = entry_from(p, tok, NULL, err);
	if (entry == NULL || store_entry(c, name, entry, err) < 0)
		goto out;
	*answer = guest_answer(name, entry);
	if (*answer == NULL) {
		gantry_error(err, ENOMEM, "%s: cannot write the answer", name);
		goto out;
	}
	log_always("OAuth custody: logged in to %s; the refresh token stays on this host", name);
	r = 0;
out:
	close_fd(&lfd[0]);
	close_fd(&lfd[1]);
	if (verifier)
		explicit_bzero(verifier, strlen(verifier));
	sym_curl_free(e_client);
	sym_curl_free(e_redirect);
	sym_curl_free(e_scope);
	e_client = e_redirect = e_scope = NULL;
	json_decref(tok);
	json_decref(entry);
	pthread_mutex_lock(&c->lock);
	c->login_busy = false;
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* name's entry, refreshed when it has under the margin left: *entry. */
static int current(struct oauth_custody *c, const char *name, json_t **entry,
		   gantry_error_t *err)
{
	const struct oauth_provider *p = oauth_provider_find(c, name);
	json_t *doc = NULL, *e, *tok = NULL, *fresh;
	json_int_t at;
	int lock = -1, r = -1;

	*entry = NULL;
	if (p == NULL)
		return gantry_error(err, ENOENT, "no OAuth provider `%s`", name);
	if (store_open(c, &lock, &doc, err) < 0)
		return -1;
	e = json_object_get(doc, name);
	if (!json_is_object(e) || !json_is_string(json_object_get(e, "access_token"))) {
		gantry_error(err, ENOENT, "%s: not logged in (`gantry-guest oauth login %s` inside)",
			     name, name);
		goto out;
	}
	at = json_integer_value(json_object_get(e, "expires_at"));
	if (at - (json_int_t)time(NULL) > OAUTH_REFRESH_MARGIN_S) {
		*entry = json_incref(e);
		r = 0;
		goto out;
	}
	if (!json_is_string(json_object_get(e, "refresh_token"))) {
		gantry_error(err, EKEYEXPIRED, "%s: the access token expired and there is no refresh "
					       "token: log in again",
			     name);
		goto out;
	}
	{
		const char *k[] = { "grant_type", "refresh_token", "client_id" };
		const char *v[] = { "refresh_token",
				    json_string_value(json_object_get(e, "refresh_token")),
				    p->client_id };

		if (token_post(p, k, v, 3, &tok, err) < 0) {
			gantry_error_prefix(err, "refresh");
			goto out;
		}
	}
	fresh = entry_from(p, tok, e, err);
	json_decref(tok);
	if (fresh == NULL)
		goto out;
	json_object_set(doc, name, fresh);
	if (store_write(c, doc, err) < 0) {
		json_decref(fresh);
		goto out;
	}
	*entry = fresh;
	r = 0;
out:
	store_close(lock, doc);
	return r;
}

int oauth_custody_token(struct oauth_custody *c, const char *name, char **answer,
			gantry_error_t *err)
{
	json_t *e;

	*answer = NULL;
	if (current(c, name, &e, err) < 0)
		return -1;
	*answer = guest_answer(name, e);
	json_decref(e);
	return *answer ? 0 : gantry_error(err, ENOMEM, "%s: cannot write the answer", name);
}

int oauth_custody_access(struct oauth_custody *c, const char *name, char **token,
			 int64_t *expires_at, gantry_error_t *err)
{
	json_t *e;

	*token = NULL;
	if (current(c, name, &e, err) < 0)
		return -1;
	*token = xstrdup(json_string_value(json_object_get(e, "access_token")));
	if (expires_at)
		*expires_at = json_integer_value(json_object_get(e, "expires_at"));
	json_decref(e);
	return 0;
}
