/* jansson helpers (see json.h). */
#include <string.h>

#include "common/json.h"
#include "common/util.h"

json_t *jsonh_load(const char *buf, size_t len, const char *what, gantry_error_t *err)
{
	json_error_t je;
	json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);

	if (j == NULL) {
		gantry_error(err, 0, "%s: invalid JSON at line %d: %.120s", what, je.line, je.text);
		gantry_error_sanitize(err, 0); /* jansson quotes the input */
	}
	return j;
}

int jsonh_string(json_t *obj, const char *key, bool required, char **out, gantry_error_t *err)
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

int jsonh_u64(json_t *obj, const char *key, bool required, uint64_t *out, gantry_error_t *err)
{
	json_t *v = json_object_get(obj, key);

	if (v == NULL || json_is_null(v)) {
		if (required)
			return gantry_error(err, 0, "missing `%s`", key);
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return gantry_error(err, 0, "`%s` is not a whole number", key);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

int jsonh_strv(json_t *obj, const char *key, size_t max, char ***out, size_t *n,
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

json_t *jsonh_string_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

json_t *jsonh_from_strv(char *const *v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
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
