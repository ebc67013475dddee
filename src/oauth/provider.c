/* OAuth custody's providers (see custody.h): Gantry's table, the user's
 * file over it, and the pure checks the flows make. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/files.h"
#include "common/json.h"
#include "common/text.h"
#include "common/util.h"
#include "oauth/custody.h"

/* The public clients of the harnesses' own logins: their registered
 * callbacks, so that the provider takes the host's listener for theirs. */
static const struct oauth_provider builtin[] = {
	{ .name = "codex",
	  .authorize = "https://auth.openai.com/oauth/authorize",
	  .token = "https://auth.openai.com/oauth/token",
	  .client_id = "app_EMoamEEZ73f0CkXaXp7hrann",
	  .scope = "openid profile email offline_access",
	  .params = "id_token_add_organizations=true&codex_cli_simplified_flow=true",
	  .path = "/auth/callback",
	  .port = 1455 },
	{ .name = "claude",
	  .authorize = "https://claude.ai/oauth/authorize",
	  .token = "https://console.anthropic.com/v1/oauth/token",
	  .client_id = "9d1c250a-e61b-44d9-88ed-5944d1962f5e",
	  .scope = "org:create_api_key user:profile user:inference",
	  .path = "/callback",
	  .json = true },
};

bool oauth_name_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > OAUTH_NAME_MAX || !isalnum((unsigned char)s[0]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("._-", s[i]))
			return false;
	return true;
}

bool oauth_url_valid(const char *url)
{
	static const char *const loop[] = { "http://127.0.0.1", "http://[::1]",
					    "http://localhost" };
	size_t n;

	for (const char *p = url; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return false;
	if (strncasecmp(url, "https://", 8) == 0)
		return url[8] != '\0' && url[8] != '/' && !strchr(url, '@');
	for (size_t i = 0; i < ARRAY_SIZE(loop); i++) {
		n = strlen(loop[i]);
		if (strncasecmp(url, loop[i], n) == 0 && strchr(":/", url[n]) && url[n] != '\0')
			return !strchr(url, '@');
	}
	return false;
}

static void provider_free(struct oauth_provider *p)
{
	free(p->name);
	free(p->authorize);
	free(p->token);
	free(p->client_id);
	free(p->scope);
	free(p->params);
	free(p->path);
}

void oauth_providers_free(struct oauth_provider *p, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		provider_free(&p[i]);
	free(p);
}

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

static void provider_copy(struct oauth_provider *to, const struct oauth_provider *from)
{
	*to = (struct oauth_provider){ .name = xstrdup(from->name),
				       .authorize = xstrdup(from->authorize),
				       .token = xstrdup(from->token),
				       .client_id = xstrdup(from->client_id),
				       .scope = dup_or_null(from->scope),
				       .params = dup_or_null(from->params),
				       .path = xstrdup(from->path),
				       .port = from->port,
				       .json = from->json };
}

/* "k=v&..." from an object of strings, each part percent-encoded. */
static int params_encode(json_t *obj, char **out, gantry_error_t *err)
{
	const char *k;
	json_t *v;
	size_t len = 0;
	char *s = NULL;

	if (!json_is_object(obj))
		return gantry_error(err, 0, "`params` is not an object of strings");
	json_object_foreach (obj, k, v) {
		const char *parts[2] = { k, json_string_value(v) };

		if (!json_is_string(v)) {
			free(s);
			return gantry_error(err, 0, "a value of `params` is not a string");
		}
		for (int i = 0; i < 2; i++) {
			size_t n = strlen(parts[i]);

			s = xrealloc(s, len + 3 * n + 3);
			if (i == 0 && len)
				s[len++] = '&';
			for (size_t j = 0; j < n; j++) {
				unsigned char c = (unsigned char)parts[i][j];

				if (isalnum(c) || strchr("-._~", c))
					s[len++] = (char)c;
				else
					len += (size_t)sprintf(s + len, "%%%02X", c);
			}
			if (i == 0)
				s[len++] = '=';
			s[len] = '\0';
		}
	}
	*out = s;
	return 0;
}

static int provider_parse(const char *name, json_t *e, struct oauth_provider *p,
			  gantry_error_t *err)
{
	static const char *const keys[] = { "authorize",    "token",	    "clientId",
					     "scope",	    "params",	    "callbackPort",
					     "callbackPath", "tokenBody" };
	cleanup_free char *body = NULL;
	uint64_t port = 0;
	const char *k;
	json_t *v;

	*p = (struct oauth_provider){ .name = xstrdup(name) };
	if (!oauth_name_valid(name))
		return gantry_error(err, 0, "a provider's name must match "
					    "[A-Za-z0-9][A-Za-z0-9._-]{0,31}");
	if (!json_is_object(e))
		return gantry_error(err, 0, "not an object");
	json_object_foreach (e, k, v) {
		size_t i;

		for (i = 0; i < ARRAY_SIZE(keys) && strcmp(k, keys[i]) != 0; i++)
			;
		if (i == ARRAY_SIZE(keys)) {
			cleanup_free char *shown = xstrndup(k, 64);

			return gantry_error(err, 0, "unknown key `%s`", text_sanitize(shown, 40));
		}
	}
	if (jsonh_string(e, "authorize", true, &p->authorize, err) < 0 ||
	    jsonh_string(e, "token", true, &p->token, err) < 0 ||
	    jsonh_string(e, "clientId", true, &p->client_id, err) < 0 ||
	    jsonh_string(e, "scope", false, &p->scope, err) < 0 ||
	    jsonh_string(e, "callbackPath", false, &p->path, err) < 0 ||
	    jsonh_string(e, "tokenBody", false, &body, err) < 0 ||
	    jsonh_u64(e, "callbackPort", false, &port, err) < 0)
		return -1;
	if (json_object_get(e, "params") && params_encode(json_object_get(e, "params"), &p->params, err) < 0)
		return -1;
	if (!oauth_url_valid(p->authorize) || !oauth_url_valid(p->token))
		return gantry_error(err, 0, "its endpoints must be https://, or http:// to "
					    "127.0.0.1, [::1] or localhost");
	if (strchr(p->authorize, '#'))
		return gantry_error(err, 0, "`authorize` holds a fragment");
	if (port > 65535 || (port && port < 1024))
		return gantry_error(err, 0, "`callbackPort` must be 1024-65535, or 0 for any");
	p->port = (uint16_t)port;
	if (p->path == NULL)
		p->path = xstrdup("/callback");
	if (p->path[0] != '/' || strpbrk(p->path, "?# \t\r\n%"))
		return gantry_error(err, 0, "`callbackPath` must be a plain absolute path");
	if (body && strcmp(body, "json") != 0 && strcmp(body, "form") != 0)
		return gantry_error(err, 0, "`tokenBody` must be \"form\" or \"json\"");
	p->json = body && strcmp(body, "json") == 0;
	for (const char *c = p->client_id; *c; c++)
		if ((unsigned char)*c < ' ' || *c == 0x7f)
			return gantry_error(err, 0, "`clientId` holds a control character");
	return 0;
}

int oauth_providers_parse(const char *buf, size_t len, struct oauth_provider **out, size_t *nr,
			  gantry_error_t *err)
{
	json_t *doc = jsonh_load(buf, len, "the providers", err), *e;
	struct oauth_provider *p = NULL;
	const char *name;
	size_t n = 0;

	*out = NULL;
	*nr = 0;
	if (doc == NULL)
		return -1;
	if (!json_is_object(doc) || json_object_size(doc) > OAUTH_PROVIDERS_MAX) {
		json_decref(doc);
		return gantry_error(err, 0, "must be an object of at most %d providers by name",
				    OAUTH_PROVIDERS_MAX);
	}
	p = xzalloc((json_object_size(doc) + 1) * sizeof(*p));
	json_object_foreach (doc, name, e) {
		if (provider_parse(name, e, &p[n], err) < 0) {
			cleanup_free char *shown = xstrndup(name, 64);

			text_sanitize(shown, OAUTH_NAME_MAX + 4);
			oauth_providers_free(p, n + 1);
			json_decref(doc);
			return gantry_error_prefix(err, "provider `%s`", shown);
		}
		n++;
	}
	json_decref(doc);
	*out = p;
	*nr = n;
	return 0;
}

int oauth_providers_load(const char *config, struct oauth_provider **out, size_t *nr,
			 gantry_error_t *err)
{
	cleanup_free char *buf = NULL;
	struct oauth_provider *file = NULL, *all;
	size_t len = 0, nfile = 0, n = 0;

	if (config && read_file_max(config, 256 * 1024, &buf, &len, err) < 0)
		return -1;
	if (buf && oauth_providers_parse(buf, len, &file, &nfile, err) < 0)
		return gantry_error_prefix(err, "%s", config);
	all = xzalloc((ARRAY_SIZE(builtin) + nfile + 1) * sizeof(*all));
	for (size_t i = 0; i < ARRAY_SIZE(builtin); i++) {
		bool replaced = false;

		for (size_t j = 0; j < nfile; j++)
			replaced |= strcmp(file[j].name, builtin[i].name) == 0;
		if (!replaced)
			provider_copy(&all[n++], &builtin[i]);
	}
	for (size_t j = 0; j < nfile; j++)
		all[n++] = file[j];
	free(file);
	*out = all;
	*nr = n;
	return 0;
}

static int hexval(int c)
{
	return isdigit(c) ? c - '0' : isxdigit(c) ? (tolower(c) - 'a' + 10) : -1;
}

char *oauth_query_param(const char *q, size_t qlen, const char *key)
{
	size_t klen = strlen(key);

	for (size_t at = 0; at < qlen;) {
		size_t n = strcspn(q + at, "&");

		if (n > qlen - at)
			n = qlen - at;
		if (n > klen && strncmp(q + at, key, klen) == 0 && q[at + klen] == '=') {
			char *out = xmalloc(n - klen), *o = out;

			for (size_t i = at + klen + 1; i < at + n; i++) {
				if (q[i] == '%' && i + 2 < at + n && hexval(q[i + 1]) >= 0 &&
				    hexval(q[i + 2]) >= 0) {
					*o++ = (char)(hexval(q[i + 1]) * 16 + hexval(q[i + 2]));
					i += 2;
				} else {
					*o++ = q[i] == '+' ? ' ' : q[i];
				}
			}
			*o = '\0';
			if (strlen(out) != (size_t)(o - out)) {
				free(out);
				return NULL;
			}
			return out;
		}
		at += n + 1;
	}
	return NULL;
}

int oauth_callback_parse(const char *head, const char *path, const char *state, char **code,
			 gantry_error_t *err)
{
	const char *target, *q, *end;
	size_t plen = strlen(path), qlen;
	cleanup_free char *got_state = NULL, *error = NULL, *desc = NULL;

	*code = NULL;
	if (strncmp(head, "GET ", 4) != 0)
		return 0;
	target = head + 4;
	end = target + strcspn(target, " \r\n");
	if ((size_t)(end - target) < plen || strncmp(target, path, plen) != 0 ||
	    (target[plen] != '?' && target + plen != end))
		return 0;
	q = target + plen + (target[plen] == '?');
	qlen = (size_t)(end - q);
	got_state = oauth_query_param(q, qlen, "state");
	if (got_state == NULL || strcmp(got_state, state) != 0)
		return 0;
	error = oauth_query_param(q, qlen, "error");
	if (error) {
		desc = oauth_query_param(q, qlen, "error_description");
		return gantry_error(err, EACCES, "the provider refused the login: %.64s%s%.200s",
				    text_sanitize(error, 64), desc ? ": " : "",
				    desc ? text_sanitize(desc, 200) : "");
	}
	*code = oauth_query_param(q, qlen, "code");
	if (*code == NULL || **code == '\0' || strlen(*code) > 4096) {
		free(*code);
		*code = NULL;
		return gantry_error(err, EPROTO, "the provider's callback has no code");
	}
	return 1;
}
