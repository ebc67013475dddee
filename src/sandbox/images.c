/* Images and registries for the front ends, and the images the saved
 * sandboxes use (see images.h). */
#include <stdio.h>
#include <stdlib.h>

#include "common/files.h"
#include "common/json.h"
#include "common/util.h"
#include "image/creds.h"
#include "image/digest.h"
#include "image/registry.h"
#include "image/registry_host.h"
#include "sandbox/images.h"
#include "sandbox/state.h"

/* Larger than any sandbox.json Gantry writes; a bigger one is an error. */
#define IMAGES_STATE_MAX (16u << 20)

/* Only the image's digest: a sandbox.json that lacks the rest (written by
 * hand, or by another version) still keeps its image in the cache. */
static int image_digest_of(const char *dir, char **digest, gantry_error_t *err)
{
	cleanup_free char *path = NULL, *buf = NULL;
	size_t len;
	json_t *j;
	int ret = 0;

	*digest = NULL;
	xasprintf(&path, "%s/%s", dir, SANDBOX_JSON);
	if (read_file_max(path, IMAGES_STATE_MAX, &buf, &len, err) < 0)
		return -1;
	if (buf == NULL)
		return 0; /* a sandbox being created or deleted */
	j = jsonh_load(buf, len, path, err);
	if (j == NULL)
		return -1;
	if (jsonh_string(j, "image_digest", false, digest, err) < 0)
		ret = gantry_error_prefix(err, "`%s`", path);
	json_decref(j);
	return ret;
}

void sandbox_images_free(struct image_use *u, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(u[i].digest);
		free(u[i].sandbox);
	}
	free(u);
}

int sandbox_images_in_use(struct image_use **out, size_t *n, gantry_error_t *err)
{
	char **dirs, **names;
	size_t ndirs;
	int r = 0;

	*out = NULL;
	*n = 0;
	if (sandbox_dirs_list(&dirs, &names, &ndirs, err) < 0)
		return -1;
	for (size_t i = 0; i < ndirs; i++) {
		cleanup_free char *digest = NULL;

		if (image_digest_of(dirs[i], &digest, err) < 0) {
			r = gantry_error_prefix(err, "sandbox `%s` is broken", names[i]);
			sandbox_images_free(*out, *n);
			*out = NULL;
			*n = 0;
			break;
		}
		if (digest == NULL || !digest_valid(digest))
			continue;
		*out = xrealloc(*out, (*n + 1) * sizeof(**out));
		(*out)[(*n)++] = (struct image_use){
			.digest = steal_pointer(&digest),
			.sandbox = xstrdup(names[i]),
		};
	}
	strv_free(dirs);
	strv_free(names);
	return r;
}

int sandbox_image_pull(const char *src, const struct image_resolve_opts *o, struct image *img,
		       gantry_error_t *err)
{
	struct image_resolve_opts po = *o;

	po.pull = true;
	return image_resolve_with(src, &po, img, err);
}

int sandbox_image_list(struct image_entry **out, size_t *n, gantry_error_t *err)
{
	struct image_cache c;
	int r;

	if (image_cache_open(&c, err) < 0)
		return -1;
	r = image_list(&c, out, n, err);
	image_cache_close(&c);
	return r;
}

/* The cache, and which of its images the saved sandboxes hold. */
struct cache_uses {
	struct image_cache c;
	struct image_use *uses;
	size_t n;
};

static int uses_open(struct cache_uses *cu, gantry_error_t *err)
{
	if (sandbox_images_in_use(&cu->uses, &cu->n, err) < 0)
		return -1;
	if (image_cache_open(&cu->c, err) < 0) {
		sandbox_images_free(cu->uses, cu->n);
		return -1;
	}
	return 0;
}

static int uses_close(struct cache_uses *cu, int r)
{
	image_cache_close(&cu->c);
	sandbox_images_free(cu->uses, cu->n);
	return r;
}

int sandbox_image_remove(const char *what, char **digest, gantry_error_t *err)
{
	struct cache_uses cu;

	*digest = NULL;
	if (uses_open(&cu, err) < 0)
		return -1;
	return uses_close(&cu, image_remove(&cu.c, what, cu.uses, cu.n, digest, err));
}

int sandbox_image_prune(size_t *removed, uint64_t *freed, gantry_error_t *err)
{
	struct cache_uses cu;

	if (uses_open(&cu, err) < 0)
		return -1;
	return uses_close(&cu, image_prune(&cu.c, cu.uses, cu.n, removed, freed, err));
}

static int registry_name(const char *registry, char **reg, gantry_error_t *err)
{
	*reg = registry_normalize(registry);
	if (*reg == NULL)
		return gantry_error(err, 0, "`%s` is not a registry name", registry);
	return 0;
}

int sandbox_registry_login(const char *registry, const char *user, const char *pass, bool insecure,
			   char **reg, char **path, gantry_error_t *err)
{
	struct registry r = { 0 };
	int ret = -1;

	*path = NULL;
	if (registry_name(registry, reg, err) < 0 ||
	    registry_open(*reg, "", insecure ? *reg : NULL, &r, err) < 0)
		goto out;
	registry_set_creds(&r, user, pass);
	if (registry_ping(&r, err) == 0 && creds_store(*reg, user, pass, err) == 0 &&
	    creds_file(path, err) == 0)
		ret = 0;
out:
	registry_close(&r);
	return ret;
}

int sandbox_registry_logout(const char *registry, char **reg, gantry_error_t *err)
{
	bool removed;

	if (registry_name(registry, reg, err) < 0 || creds_erase(*reg, &removed, err) < 0)
		return -1;
	if (!removed)
		return gantry_error(err, 0, "not logged in to %s", *reg);
	return 0;
}

int sandbox_registry_source(const char *registry, char **reg, char **source, gantry_error_t *err)
{
	*source = NULL;
	if (registry_name(registry, reg, err) < 0)
		return -1;
	return creds_source(*reg, source, err);
}
