/* Small jansson helpers shared by the image JSON parsers: loading with the
 * limits every untrusted document gets, and typed field access whose errors
 * name the field. */
#ifndef GANTRY_IMAGE_OCIJSON_H
#define GANTRY_IMAGE_OCIJSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* Parse buf as one JSON value: duplicate keys and trailing bytes refused,
 * errors "<what>: invalid JSON at line N: reason". */
json_t *ocijson_load(const char *buf, size_t len, const char *what, gantry_error_t *err);

/* Copy string field key of obj into *out (NULL if absent or null); a value
 * of another type, or a missing field when required, is an error. */
int ocijson_string(json_t *obj, const char *key, bool required, char **out, gantry_error_t *err);
/* Array of strings (or null/absent: *out = NULL, *n = 0); *out is
 * NULL-terminated. */
int ocijson_strv(json_t *obj, const char *key, size_t max, char ***out, size_t *n,
		 gantry_error_t *err);
/* Build an array of strings. */
json_t *ocijson_from_strv(char *const *v, size_t n);
/* Make an error that quotes image content one line: control characters
 * become '?'. Returns -1. */
int ocijson_one_line(gantry_error_t *err);
/* Replace each byte that is not part of valid UTF-8 with '?', so text from
 * an image (its /etc/passwd) can be stored as a JSON string. */
void ocijson_sanitize_utf8(char *s);
void strv_free(char **v);
char **strv_dup(char *const *v, size_t n);

#endif
