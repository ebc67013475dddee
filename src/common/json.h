/* jansson helpers for every JSON document Gantry reads or writes (image
 * manifests and configs, the cache's metadata, sandbox.json): loading with
 * the limits every untrusted document gets, typed field access whose errors
 * name the field, and the NULL-terminated string vectors they fill. */
#ifndef GANTRY_COMMON_JSON_H
#define GANTRY_COMMON_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* Parse buf as one JSON value: duplicate keys and trailing bytes refused,
 * errors "<what>: invalid JSON at line N: reason" on one line. */
json_t *jsonh_load(const char *buf, size_t len, const char *what, gantry_error_t *err);

/* Copy string field key of obj into *out (NULL if absent or null); a value
 * of another type, or a missing field when required, is an error. */
int jsonh_string(json_t *obj, const char *key, bool required, char **out, gantry_error_t *err);
/* Integer field key of obj, 0 or more, into *out (left as it is when the
 * field is absent or null and not required). */
int jsonh_u64(json_t *obj, const char *key, bool required, uint64_t *out, gantry_error_t *err);
/* Array of strings (or null/absent: *out = NULL, *n = 0); *out is
 * NULL-terminated. */
int jsonh_strv(json_t *obj, const char *key, size_t max, char ***out, size_t *n,
	       gantry_error_t *err);
/* A JSON string, or null for NULL. */
json_t *jsonh_string_or_null(const char *s);
/* Build an array of strings. */
json_t *jsonh_from_strv(char *const *v, size_t n);

/* NULL-terminated string vectors (jsonh_strv's): free each and the array. */
void strv_free(char **v);
char **strv_dup(char *const *v, size_t n);

#endif
