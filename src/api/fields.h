/* Strict request bodies: each field the contract names, with its type
 * (and an integer's range); a field it does not name, a wrong type or a
 * missing required one is a 400 that names the field. */
#ifndef GANTRY_API_FIELDS_H
#define GANTRY_API_FIELDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct api_reply;

enum api_type { API_STRING, API_INT, API_BOOL, API_STRINGS };

struct api_field {
	const char *name; /* NULL ends a table */
	enum api_type type;
	bool required;
	int64_t min, max; /* API_INT's range */
};

#define API_FIELD(n, t)                                                                            \
	{                                                                                          \
		.name = (n), .type = (t)                                                           \
	}
#define API_REQUIRED(n, t)                                                                         \
	{                                                                                          \
		.name = (n), .type = (t), .required = true                                         \
	}
#define API_RANGE(n, lo, hi)                                                                       \
	{                                                                                          \
		.name = (n), .type = API_INT, .min = (lo), .max = (hi)                             \
	}
#define API_FIELDS_END                                                                             \
	{                                                                                          \
		.name = NULL                                                                       \
	}

/* Whether body (an object) keeps to fields; else r has the 400. */
bool api_fields_check(json_t *body, const struct api_field *fields, struct api_reply *r);

#endif
