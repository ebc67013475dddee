/* Secret values, held in one arena of this process: a mapping locked in
 * RAM (where RLIMIT_MEMLOCK allows), left out of core dumps, zero pages in
 * a forked child (MADV_WIPEONFORK), with guard pages around it; every block
 * is zeroed when freed. A value is never in argv, the environment of a
 * host process, a file, a log or an error message: errors name the secret,
 * never its value.
 *
 * A store holds a sandbox's secrets by spec (spec.h), each value resolved
 * when it is used: from the caller's environment once, from a file or a
 * command again once its ttl has passed (60 s and 5 min unless given). A
 * source that fails withholds the secret (fails closed): the call that
 * wanted it fails, naming it. */
#ifndef GANTRY_SECRET_STORE_H
#define GANTRY_SECRET_STORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/error.h"
#include "secret/spec.h"

#define SECRETS_MAX	      256
#define SECRETS_BYTES_MAX     (1u << 20)  /* all values together */
#define SECRET_VALUE_MAX      (64u << 10) /* one from a file or a command */
#define SECRET_FILE_TTL_MS    60000
#define SECRET_CMD_TTL_MS     300000
#define SECRET_CMD_TIMEOUT_MS 10000
#define SECRET_PLACEHOLDER_LEN 47
#define SECRET_RETRY_MS	      10000 /* a command that failed is not run again sooner */

/* The arena: len bytes, or NULL when it is full. */
void *secret_alloc(size_t len);
/* Zero and give back what secret_alloc gave (p may be NULL). */
void secret_free(void *p, size_t len);
/* Whether the arena is locked in RAM (false: RLIMIT_MEMLOCK refused it). */
bool secret_arena_locked(void);

struct secret_entry {
	struct secret_spec spec;
	char *env;	     /* "NAME=VALUE" in the arena; NULL: not resolved */
	size_t env_size;     /* its block's size */
	uint64_t fetched_ms; /* when it was resolved (CLOCK_MONOTONIC) */
	uint64_t failed_ms;  /* when its command last failed; 0: it did not */
	bool reading;	     /* a thread reads its source now (the lock let go) */
	/* An injected one's stand-in in the environment, random, kept
	 * while the name is: "gantry-" and 40 hex digits. */
	char placeholder[SECRET_PLACEHOLDER_LEN + 1];
};

struct secret_store {
	pthread_mutex_t lock;
	pthread_cond_t read; /* an entry's source was read: its waiters look again */
	struct secret_entry *v;
	size_t n;
	size_t bytes; /* the values' sizes together */
};

void secret_store_init(struct secret_store *st);
void secret_store_free(struct secret_store *st);
/* Add spec (a later one of the same name replaces it). A secret from the
 * environment takes env_value, the caller's value of its name (NULL: not
 * set, an error). */
int secret_store_add(struct secret_store *st, const char *spec, const char *env_value,
		     gantry_error_t *err);
/* Add NAME with value (value_len bytes, no NUL): a -secret-file line. */
int secret_store_add_value(struct secret_store *st, const char *name, size_t name_len,
			   const char *value, size_t value_len, gantry_error_t *err);
/* Set the secret of spec now, or leave what there was: value (len bytes)
 * for one from the environment, none for the others; a file is read at
 * once, a command when the value is first used. */
int secret_store_put(struct secret_store *st, const char *spec, const char *value, size_t len,
		     gantry_error_t *err);
/* Drop the secret named name (its value zeroed); false: there was none. */
bool secret_store_remove(struct secret_store *st, const char *name);
/* A value handed over (secret_store_recv) takes the spec it was kept by,
 * a secret from the environment: its hosts and ttl. 1 when one did, 0
 * when there is none of that name to take it. */
int secret_store_adopt(struct secret_store *st, const char *spec, gantry_error_t *err);
/* Add every line of the dotenv at path (read into the arena only). */
int secret_store_add_dotenv(struct secret_store *st, const char *path, gantry_error_t *err);
/* Whether it holds a secret of that name. */
bool secret_store_has(struct secret_store *st, const char *name);
/* Whether it holds a secret bound to hosts for the git helper (not an
 * injected one). */
bool secret_store_has_bound(struct secret_store *st);
/* Whether it holds a secret injected at egress. */
bool secret_store_has_injected(struct secret_store *st);
/* The injected secrets, resolved now, as the egress worker takes them:
 * *desc an array of {"name","hosts","header","format","placeholder",
 * "length"} (a source that failed: no length, "error" instead), and their
 * values one after another in *block, an arena block of *size bytes
 * (NULL when none), *len of them used. */
int secret_store_injected(struct secret_store *st, json_t **desc, char **block, size_t *size,
			  size_t *len, gantry_error_t *err);
/* The names, NULL-terminated (strv_free). */
char **secret_store_names(struct secret_store *st);

/* Hand the values of the secrets from the environment or a dotenv (not
 * the file and command sources: the receiver reads those itself) over a
 * stream socket, and take them on the other end into st (as values):
 * frames of a u16 name length, the name, a u32 value length and the value,
 * ended by a u16 0. The receiver bounds everything it reads and gives up
 * after timeout_ms. */
int secret_store_send(struct secret_store *st, int fd, gantry_error_t *err);
int secret_store_recv(struct secret_store *st, int fd, int timeout_ms, gantry_error_t *err);

/* A host-bound secret's value, as the broker hands it out: in an arena
 * block of its own. */
struct secret_value {
	char name[SECRET_NAME_MAX + 1];
	char *value; /* NUL-terminated */
	size_t len, size;
};
/* The secret bound to host (match(pattern, host) for each of its hosts;
 * the first that matches), resolved now: 1 with *out, 0 when no secret is
 * bound to host, -1 when its source failed (err names it; out->name too). */
int secret_store_for_host(struct secret_store *st, const char *host,
			  bool (*match)(const char *pattern, const char *host),
			  struct secret_value *out, gantry_error_t *err);
void secret_value_free(struct secret_value *v);

/* What a process's environment gets: every secret not bound to hosts,
 * resolved now, and each injected one's placeholder, as NAME=VALUE strings in one arena block of
 * its own. */
struct secret_env {
	char **envp; /* NULL-terminated; the strings are in block */
	char *block;
	size_t size;
};
int secret_store_env(struct secret_store *st, struct secret_env *out, gantry_error_t *err);
void secret_env_free(struct secret_env *e);

#endif
