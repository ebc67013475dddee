/* Image references (see reference.h), following the grammar of Docker's
 * distribution/reference package. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"
#include "image/digest.h"
#include "image/reference.h"
#include "image/registry_host.h"

void image_ref_free(struct image_ref *r)
{
	free(r->registry);
	free(r->repository);
	free(r->tag);
	free(r->digest);
	*r = (struct image_ref){ 0 };
}

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* [a-z0-9]+ joined by `.`, `_`, `__` or runs of `-`. */
static bool component_valid(const char *s, size_t n)
{
	size_t i = 0;

	if (n == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
		return false;
	while (i < n) {
		size_t run = 0;

		if (is_lower_alnum(s[i])) {
			i++;
			continue;
		}
		if (s[i] == '-') {
			while (i < n && s[i] == '-')
				i++;
			continue;
		}
		while (i + run < n && (s[i + run] == '_' || s[i + run] == '.'))
			run++;
		if (!(run == 1 || (run == 2 && s[i] == '_' && s[i + 1] == '_')))
			return false;
		i += run;
	}
	return true;
}

static bool path_valid(const char *path)
{
	const char *p = path;

	for (;;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);

		if (!component_valid(p, n))
			return false;
		if (slash == NULL)
			return true;
		p = slash + 1;
	}
}

/* Docker's rule: the first component names a registry when it has a dot,
 * a colon or capitals, or is `localhost`. */
static bool first_is_registry(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] == '.' || s[i] == ':' || isupper((unsigned char)s[i]))
			return true;
	return n == strlen("localhost") && strncmp(s, "localhost", n) == 0;
}

static bool tag_valid(const char *t)
{
	size_t n = strlen(t);

	if (n == 0 || n > REF_TAG_MAX || !(isalnum((unsigned char)t[0]) || t[0] == '_'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!(isalnum((unsigned char)t[i]) || t[i] == '_' || t[i] == '.' || t[i] == '-'))
			return false;
	return true;
}

static int split_name(char *name, struct image_ref *out, gantry_error_t *err)
{
	char *slash = strchr(name, '/'), *colon, *path = name;

	if (slash && first_is_registry(name, (size_t)(slash - name))) {
		if (!registry_host_valid(name, (size_t)(slash - name)))
			return gantry_error(err, 0, "invalid registry `%.*s`",
					    (int)(slash - name), name);
		*slash = '\0';
		/* Host names are case-insensitive: one cache key, one login. A
		 * first component that names a registry only because it has
		 * capitals (Docker's rule) keeps them, or it would not any more. */
		if (strpbrk(name, ".:") || strcasecmp(name, "localhost") == 0)
			for (char *c = name; *c; c++)
				*c = (char)tolower((unsigned char)*c);
		out->registry = xstrdup(registry_is_hub(name) ? REF_DOCKER_HUB : name);
		path = slash + 1;
	} else {
		out->registry = xstrdup(REF_DOCKER_HUB);
	}
	colon = strrchr(path, ':');
	if (colon) {
		*colon = '\0';
		if (!tag_valid(colon + 1))
			return gantry_error(err, 0, "invalid tag `%s`", colon + 1);
		out->tag = xstrdup(colon + 1);
	}
	for (const char *p = path; *p; p++)
		if (isupper((unsigned char)*p))
			return gantry_error(err, 0, "repository name must be lowercase");
	if (!path_valid(path))
		return gantry_error(err, 0, "invalid repository name `%s`", path);
	if (strcmp(out->registry, REF_DOCKER_HUB) == 0 && strchr(path, '/') == NULL)
		xasprintf(&out->repository, "library/%s", path);
	else
		out->repository = xstrdup(path);
	return 0;
}

int image_ref_parse(const char *s, struct image_ref *out, gantry_error_t *err)
{
	cleanup_free char *name = NULL;
	char *at;

	*out = (struct image_ref){ 0 };
	if (s == NULL || *s == '\0')
		return gantry_error(err, 0, "empty image reference");
	if (strlen(s) > REF_NAME_MAX + 1 + DIGEST_STR_MAX + REF_TAG_MAX)
		return gantry_error(err, 0, "image reference is too long");
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
			return gantry_error(err, 0, "image reference holds a space or a control "
						    "or non-ASCII character");
	name = xstrdup(s);
	at = strchr(name, '@');
	if (at) {
		*at = '\0';
		if (digest_check(at + 1, err) < 0)
			goto fail;
		out->digest = xstrdup(at + 1);
	}
	if (split_name(name, out, err) < 0)
		goto fail;
	if (strlen(out->registry) + 1 + strlen(out->repository) > REF_NAME_MAX) {
		gantry_error(err, 0, "repository name is longer than %d characters", REF_NAME_MAX);
		goto fail;
	}
	if (out->tag == NULL && out->digest == NULL)
		out->tag = xstrdup(REF_DEFAULT_TAG);
	return 0;
fail:
	image_ref_free(out);
	return -1;
}

char *image_ref_string(const struct image_ref *r)
{
	char *s;

	xasprintf(&s, "%s/%s%s%s%s%s", r->registry, r->repository, r->tag ? ":" : "",
		  r->tag ? r->tag : "", r->digest ? "@" : "", r->digest ? r->digest : "");
	return s;
}

const char *image_ref_object(const struct image_ref *r)
{
	return r->digest ? r->digest : r->tag;
}
