/* jansson helpers for the image parsers (see ocijson.h). */
#include <stdint.h>
#include <string.h>

#include "common/util.h"
#include "image/ocijson.h"

json_t *ocijson_load(const char *buf, size_t len, const char *what, gantry_error_t *err)
{
	json_error_t je;
	json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);

	if (j == NULL) {
		gantry_error(err, 0, "%s: invalid JSON at line %d: %.120s", what, je.line, je.text);
		ocijson_one_line(err); /* jansson quotes the input */
	}
	return j;
}

int ocijson_string(json_t *obj, const char *key, bool required, char **out, gantry_error_t *err)
{
	json_t *v = json_object_get(obj, key);

	*out = NULL;
	if (v == NULL || json_is_null(v)) {
		if (required)
			return gantry_error(err, 0, "missing `%s`", key);
		return 0;
	}
	if (!json_is_string(v))
		return gantry_error(err, 0, "`%s` is not a string", key);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return gantry_error(err, 0, "`%s` holds a NUL byte", key);
	*out = xstrdup(json_string_value(v));
	return 0;
}

int ocijson_strv(json_t *obj, const char *key, size_t max, char ***out, size_t *n,
		 gantry_error_t *err)
{
	json_t *v = json_object_get(obj, key), *s;
	char **r;
	size_t i;

	*out = NULL;
	*n = 0;
	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_array(v))
		return gantry_error(err, 0, "`%s` is not an array", key);
	if (json_array_size(v) > max)
		return gantry_error(err, 0, "`%s` has more than %zu entries", key, max);
	r = xzalloc((json_array_size(v) + 1) * sizeof(*r));
	json_array_foreach(v, i, s)
	{
		if (!json_is_string(s) || strlen(json_string_value(s)) != json_string_length(s)) {
			strv_free(r);
			return gantry_error(err, 0, "`%s` holds something other than a string",
					    key);
		}
		r[i] = xstrdup(json_string_value(s));
	}
	*out = r;
	*n = json_array_size(v);
	return 0;
}

json_t *ocijson_from_strv(char *const *v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

int ocijson_one_line(gantry_error_t *err)
{
	if (err == NULL || *err == NULL || (*err)->msg == NULL)
		return -1;
	for (char *p = (*err)->msg; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return -1;
}

/* Length of the valid UTF-8 sequence at p, or 0 (as jansson judges:
 * no overlong forms, no surrogates, nothing above U+10FFFF). */
static size_t utf8_len(const unsigned char *p)
{
	uint32_t cp;
	size_t n;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4, cp = p[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

void ocijson_sanitize_utf8(char *s)
{
	unsigned char *p = (unsigned char *)s;

	while (*p) {
		size_t n = utf8_len(p);

		if (n == 0)
			*p++ = '?';
		else
			p += n;
	}
}

void strv_free(char **v)
{
	if (v == NULL)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

char **strv_dup(char *const *v, size_t n)
{
	char **r = xzalloc((n + 1) * sizeof(*r));

	for (size_t i = 0; i < n; i++)
		r[i] = xstrdup(v[i]);
	return r;
}
