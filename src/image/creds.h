/* Registry credentials, looked up the way Docker does and then in our own
 * file: Docker's config.json ($DOCKER_CONFIG/config.json, else
 * ~/.docker/config.json) through its per-registry credential helper
 * (credHelpers), its default store (credsStore) and its inline auths; then
 * $GANTRY_HOME/credentials.json (0600), which `gantry image login` writes.
 * Values are never printed; only where they came from. */
#ifndef GANTRY_IMAGE_CREDS_H
#define GANTRY_IMAGE_CREDS_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

#define CREDS_FILE "credentials.json"
/* Bigger config files or helper answers are not credentials. */
#define CREDS_JSON_MAX (1u << 20)
/* Docker's key for Docker Hub in config.json and for its helpers. */
#define CREDS_HUB_KEY "https://index.docker.io/v1/"
/* A credential helper that has not answered by then is killed. */
#define CREDS_HELPER_SECONDS 30
/* docker-credential-NAME: NAME at most this long. */
#define CREDS_HELPER_NAME_MAX 64

struct registry_creds {
	char *user;
	char *pass;
	char *source; /* "Docker config `...`", "credential helper docker-credential-x", ... */
};

/* 1 and *out filled when some source has credentials for registry (a
 * normalized host[:port], see registry_normalize), 0 when none has, -1
 * when a source exists but cannot be read. */
int creds_lookup(const char *registry, struct registry_creds *out, gantry_error_t *err);
void creds_free(struct registry_creds *c);
/* Where creds_lookup would look first with success, without the value:
 * *source is NULL when no source has any. */
int creds_source(const char *registry, char **source, gantry_error_t *err);
/* Registries any source names (Docker's auths and credHelpers, our file),
 * normalized, sorted, without repeats; NULL-terminated. */
int creds_registries(char ***out, size_t *n, gantry_error_t *err);

/* Our own file: store (0600, atomically) and erase, each under a lock on
 * "credentials.json.lock" and removing what a killed save left. Every key
 * that names registry is replaced or removed; *removed says whether there
 * was one. */
int creds_store(const char *registry, const char *user, const char *pass, gantry_error_t *err);
int creds_erase(const char *registry, bool *removed, gantry_error_t *err);
/* Path of our own file; caller frees. */
int creds_file(char **path, gantry_error_t *err);

/* base64("user:pass"), the form of config.json's "auth" and of HTTP Basic
 * authorization; caller frees. */
char *creds_basic(const char *user, const char *pass);

#endif
