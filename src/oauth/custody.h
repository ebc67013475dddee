/* OAuth custody: the host logs in for the guest and keeps the refresh
 * token. A tool in the guest asks (`gantry-guest oauth login PROVIDER`,
 * over vsock to the run's host process); the host makes the PKCE pair and
 * the state, shows the provider's authorization URL for the user to open
 * on the host, takes the browser's callback on its own loopback listener,
 * exchanges the code at the provider's token endpoint, and stores the
 * tokens in $GANTRY_HOME/oauth-tokens.json (0600; the guest never sees
 * that directory). The guest gets the access token, with the refresh
 * token's place held by a sentinel (OAUTH_SENTINEL_PREFIX NAME) that is
 * worth nothing; `gantry-guest oauth token PROVIDER` gets a fresh access
 * token, the host refreshing it first when it has under
 * OAUTH_REFRESH_MARGIN_S left.
 *
 * Providers come from a table of Gantry's (codex, claude) and from the
 * user's ~/.config/gantry/oauth-providers.json, whose entries win. */
#ifndef GANTRY_OAUTH_CUSTODY_H
#define GANTRY_OAUTH_CUSTODY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define OAUTH_NAME_MAX	       32
#define OAUTH_PROVIDERS_MAX    32
#define OAUTH_ANSWER_MAX       (64 * 1024) /* a token endpoint's answer */
#define OAUTH_STORE_MAX	       (1024 * 1024)
#define OAUTH_LOGIN_TIMEOUT_S  600
#define OAUTH_HTTP_TIMEOUT_S   30
#define OAUTH_REFRESH_MARGIN_S 120
#define OAUTH_SENTINEL_PREFIX  "gantry-custody:"

struct oauth_provider {
	char *name;
	char *authorize; /* its authorization endpoint */
	char *token;	 /* its token endpoint */
	char *client_id;
	char *scope;  /* NULL: none asked */
	char *params; /* more of the authorization query, encoded; NULL: none */
	char *path;   /* the callback's path on localhost: "/auth/callback" */
	uint16_t port; /* the callback's registered port; 0: any free one */
	bool json;     /* the token endpoint takes JSON rather than a form */
};

struct oauth_custody {
	struct oauth_provider *providers;
	size_t nr;
	char *store; /* the tokens' file */
	pthread_mutex_t lock;
	bool login_busy; /* one login at a time */
};

/* The providers (Gantry's, then config's over them; config NULL or a
 * missing file: Gantry's only) and the store's path. A bad config is one
 * line naming the file and the entry. */
int oauth_custody_open(struct oauth_custody *c, const char *config, gantry_error_t *err);
void oauth_custody_close(struct oauth_custody *c);
const struct oauth_provider *oauth_provider_find(const struct oauth_custody *c,
						 const char *name);

/* Log in to name: the URL shown (show(opaque, URL); NULL: on this
 * process's stderr), the callback awaited until stop_fd is readable or
 * OAUTH_LOGIN_TIMEOUT_S pass, the code exchanged and the tokens stored.
 * *answer is the guest's JSON line (allocated). */
int oauth_custody_login(struct oauth_custody *c, const char *name, int stop_fd,
			void (*show)(void *opaque, const char *url), void *opaque, char **answer,
			gantry_error_t *err);
/* name's access token, refreshed first when it is about to expire. */
int oauth_custody_token(struct oauth_custody *c, const char *name, char **answer,
			gantry_error_t *err);
/* The same, only the access token's value and when it expires (Unix
 * seconds; 0: not known), for a host-side user: the MCP gateway's
 * auth=custody:NAME. */
int oauth_custody_access(struct oauth_custody *c, const char *name, char **token,
			 int64_t *expires_at, gantry_error_t *err);

/* Pure, for the tests and the fuzzer. */
/* A providers document into *out (*nr entries; oauth_providers_free). */
int oauth_providers_parse(const char *buf, size_t len, struct oauth_provider **out, size_t *nr,
			  gantry_error_t *err);
void oauth_providers_free(struct oauth_provider *p, size_t nr);
/* Gantry's providers, then config's (NULL or missing: none), one of the
 * file's replacing Gantry's of its name. */
int oauth_providers_load(const char *config, struct oauth_provider **out, size_t *nr,
			 gantry_error_t *err);
/* A browser's request head (up to its blank line) to the callback at
 * path with state: 1 with *code (allocated), 0 when it is not for us (a
 * wrong path, no or another state: answered 404 and awaited on), -1 with
 * err when the provider sent an error. */
int oauth_callback_parse(const char *head, const char *path, const char *state, char **code,
			 gantry_error_t *err);
/* Query parameter key of the qlen bytes of query q (no '?'), decoded
 * ('+' a space, %XX a byte); NULL when absent or when it decodes to a
 * NUL. Allocated. */
char *oauth_query_param(const char *q, size_t qlen, const char *key);
/* A provider name: [A-Za-z0-9][A-Za-z0-9._-]{0,31}. */
bool oauth_name_valid(const char *s);
/* An endpoint Gantry will call: https://, or http:// to 127.0.0.1,
 * [::1] or localhost. */
bool oauth_url_valid(const char *url);

#endif
