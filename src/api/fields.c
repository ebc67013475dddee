/* Strict request bodies (fields.h). */
#include <string.h>

#include "api/api_priv.h"
#include "api/fields.h"

static const struct api_field *field(const struct api_field *fields, const char *name)
{
	for (const struct api_field *f = fields; f->name; f++)
		if (strcmp(f->name, name) == 0)
			return f;
	return NULL;
}

static bool strings(json_t *v)
{
	size_t i;
	json_t *e;

	if (!json_is_array(v))
		return false;
	json_array_foreach(v, i, e) if (!json_is_string(e)) return false;
	return true;
}

bool api_fields_check(json_t *body, const struct api_field *fields, struct api_reply *r)
{
	static const char *const types[] = { "a string", "an integer", "true or false",
					     "an array of strings" };
	const struct api_field *f;
	const char *key;
	json_t *v;
	bool ok;

	json_object_foreach(body, key, v)
	{
		f = field(fields, key);
		if (f == NULL) {
			api_reply_error(r, 400, "unknown field `%.64s`", key);
			return false;
		}
		ok = f->type == API_STRING ? json_is_string(v)
		     : f->type == API_INT  ? json_is_integer(v)
		     : f->type == API_BOOL ? json_is_boolean(v)
					   : strings(v);
		if (!ok) {
			api_reply_error(r, 400, "field `%s` must be %s", key, types[f->type]);
			return false;
		}
		if (f->type == API_INT &&
		    (json_integer_value(v) < f->min || json_integer_value(v) > f->max)) {
			api_reply_error(r, 400, "field `%s` must be %lld to %lld", key,
					(long long)f->min, (long long)f->max);
			return false;
		}
	}
	for (f = fields; f->name; f++)
		if (f->required && json_object_get(body, f->name) == NULL) {
			api_reply_error(r, 400, "field `%s` is required", f->name);
			return false;
		}
	return true;
}
