/* Listing and removing cache entries (see inventory.h). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/json.h"
#include "common/util.h"
#include "image/digest.h"
#include "image/inventory.h"
#include "image/reference.h"

#define ENTRY_PREFIX "sha256-"
#define LOCK_PREFIX  ".lock-"

static void strv_push(char ***v, size_t *n, const char *s)
{
	*v = xrealloc(*v, (*n + 2) * sizeof(**v));
	(*v)[(*n)++] = xstrdup(s);
	(*v)[*n] = NULL;
}

static bool strv_has(char *const *v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The digest a cache file name belongs to ("sha256-<hex>.<anything>"). */
static bool name_digest(const char *name, char out[DIGEST_STR_MAX])
{
	size_t p = strlen(ENTRY_PREFIX);

	if (strncmp(name, ENTRY_PREFIX, p) != 0 || strlen(name) < p + DIGEST_HEX_LEN + 1 ||
	    name[p + DIGEST_HEX_LEN] != '.')
		return false;
	snprintf(out, DIGEST_STR_MAX, DIGEST_PREFIX "%.*s", DIGEST_HEX_LEN, name + p);
	return digest_valid(out);
}

/* Every digest some file in the cache belongs to, complete or not. */
static int cache_digests(const struct image_cache *c, char ***out, size_t *n, gantry_error_t *err)
{
	DIR *d = opendir(c->dir);
	struct dirent *e;

	*out = xzalloc(sizeof(**out));
	*n = 0;
	if (d == NULL)
		return gantry_error_errno(err, "open `%s`", c->dir);
	while ((e = readdir(d)) != NULL) {
		char dg[DIGEST_STR_MAX];

		if (name_digest(e->d_name, dg) && !strv_has(*out, *n, dg))
			strv_push(out, n, dg);
	}
	closedir(d);
	qsort(*out, *n, sizeof(**out), cmp_str);
	return 0;
}

void image_entries_free(struct image_entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(e[i].digest);
		free(e[i].keyed_by);
		free(e[i].created);
		free(e[i].source);
		strv_free(e[i].refs);
	}
	free(e);
}

static void entry_refs(json_t *refs, struct image_entry *e)
{
	const char *key;
	json_t *v;

	e->refs = xzalloc(sizeof(*e->refs));
	json_object_foreach(refs, key, v)
	{
		const char *d = json_string_value(json_object_get(v, "digest"));

		if (d && strcmp(d, e->digest) == 0)
			strv_push(&e->refs, &e->nrefs, key);
	}
	qsort(e->refs, e->nrefs, sizeof(*e->refs), cmp_str);
}

static int cmp_entry(const void *a, const void *b)
{
	const struct image_entry *x = a, *y = b;
	int r = strcmp(y->created ? y->created : "", x->created ? x->created : "");

	return r ? r : strcmp(x->digest, y->digest);
}

int image_list(const struct image_cache *c, struct image_entry **out, size_t *n,
	       gantry_error_t *err)
{
	char **digests;
	size_t nd;
	json_t *refs;

	*out = NULL;
	*n = 0;
	if (cache_digests(c, &digests, &nd, err) < 0) {
		strv_free(digests);
		return -1;
	}
	refs = image_cache_refs(c);
	*out = xzalloc((nd + 1) * sizeof(**out));
	for (size_t i = 0; i < nd; i++) {
		cleanup_free char *path = image_cache_path(c, digests[i], ".erofs");
		struct image_entry *e = &(*out)[*n];
		struct image_meta m;
		struct stat st;

		if (image_cache_load(c, digests[i], &m, err) != 1)
			continue;
		*e = (struct image_entry){
			.digest = steal_pointer(&m.digest),
			.keyed_by = steal_pointer(&m.keyed_by),
			.created = steal_pointer(&m.created),
			.source = steal_pointer(&m.source),
			.size = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0,
		};
		image_meta_free(&m);
		entry_refs(refs, e);
		(*n)++;
	}
	json_decref(refs);
	strv_free(digests);
	qsort(*out, *n, sizeof(**out), cmp_entry);
	return 0;
}

json_t *image_entries_json(const struct image_entry *e, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++) {
		json_t *o = json_object();

		json_object_set_new(o, "references", jsonh_from_strv(e[i].refs, e[i].nrefs));
		json_object_set_new(o, "digest", json_string(e[i].digest));
		json_object_set_new(o, "keyed_by", jsonh_string_or_null(e[i].keyed_by));
		json_object_set_new(o, "size", json_integer((json_int_t)e[i].size));
		json_object_set_new(o, "created", jsonh_string_or_null(e[i].created));
		json_object_set_new(o, "source", jsonh_string_or_null(e[i].source));
		json_array_append_new(a, o);
	}
	return a;
}

/* ---- removing ---- */

/* Unlink an entry's files under its lock; the bytes they held. */
static int entry_remove(const struct image_cache *c, const char *digest, bool wait,
			uint64_t *freed, gantry_error_t *err)
{
	cleanup_free char *erofs = image_cache_path(c, digest, ".erofs");
	struct cache_lock l = { 0 };
	struct stat st;
	int r;

	r = image_cache_lock_digest(c, digest, wait, &l, err);
	if (r != 0)
		return r; /* 1: being converted right now */
	*freed = stat(erofs, &st) == 0 ? (uint64_t)st.st_size : 0;
	image_cache_remove(c, digest);
	image_cache_sweep(c, digest);
	image_cache_unlock(&l);
	return 0;
}

static const struct image_use *use_of(const struct image_use *uses, size_t n, const char *digest)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(uses[i].digest, digest) == 0)
			return &uses[i];
	return NULL;
}

static int check_unused(const struct image_use *uses, size_t n, const char *digest,
			gantry_error_t *err)
{
	const struct image_use *u = use_of(uses, n, digest);

	if (u)
		return gantry_error(err, 0, "image %s is used by sandbox `%s`", digest, u->sandbox);
	return 0;
}

/* A digest, "sha256:"-prefixed or not, or a unique prefix of its hex. */
static int match_digest(const struct image_cache *c, const char *what, char **digest,
			gantry_error_t *err)
{
	const char *hex = strncmp(what, DIGEST_PREFIX, strlen(DIGEST_PREFIX)) == 0
				  ? what + strlen(DIGEST_PREFIX)
				  : what;
	size_t len = strlen(hex), nd, hits = 0;
	char **digests;

	*digest = NULL;
	if (len < 4 || len > DIGEST_HEX_LEN || strspn(hex, "0123456789abcdef") != len)
		return 0;
	if (cache_digests(c, &digests, &nd, err) < 0) {
		strv_free(digests);
		return -1;
	}
	for (size_t i = 0; i < nd; i++) {
		if (strncmp(digest_hex(digests[i]), hex, len) != 0)
			continue;
		hits++;
		free(*digest);
		*digest = xstrdup(digests[i]);
	}
	strv_free(digests);
	if (hits > 1) {
		free(*digest);
		*digest = NULL;
		return gantry_error(err, 0, "`%s` matches %zu images: give more of the digest",
				    what, hits);
	}
	return hits == 1;
}

/* The index.json key what names: itself, or its canonical reference. */
static char *ref_key(json_t *refs, const char *what)
{
	struct image_ref r;
	gantry_error_t e = NULL;
	char *name;

	if (json_object_get(refs, what))
		return xstrdup(what);
	if (image_ref_parse(what, &r, &e) < 0) {
		gantry_error_free(&e);
		return NULL;
	}
	name = image_ref_string(&r);
	image_ref_free(&r);
	if (json_object_get(refs, name))
		return name;
	free(name);
	return NULL;
}

static bool other_ref(json_t *refs, const char *key, const char *digest)
{
	const char *k;
	json_t *v;

	json_object_foreach(refs, k, v)
	{
		const char *d = json_string_value(json_object_get(v, "digest"));

		if (strcmp(k, key) != 0 && d && strcmp(d, digest) == 0)
			return true;
	}
	return false;
}

static int remove_ref(const struct image_cache *c, json_t *refs, const char *key,
		      const struct image_use *uses, size_t nuses, char **digest,
		      gantry_error_t *err)
{
	const char *d = json_string_value(json_object_get(json_object_get(refs, key), "digest"));
	cleanup_free char *dg = xstrdup(d ? d : "");
	bool last = digest_valid(dg) && !other_ref(refs, key, dg);
	uint64_t freed;
	size_t n;

	if (last && check_unused(uses, nuses, dg, err) < 0)
		return -1;
	if (image_cache_refs_drop(c, key, NULL, &n, err) < 0)
		return -1;
	if (!last)
		return 0;
	if (entry_remove(c, dg, true, &freed, err) < 0)
		return -1;
	*digest = steal_pointer(&dg);
	return 0;
}

int image_remove(const struct image_cache *c, const char *what, const struct image_use *uses,
		 size_t nuses, char **digest, gantry_error_t *err)
{
	json_t *refs = image_cache_refs(c);
	cleanup_free char *key = ref_key(refs, what), *dg = NULL;
	uint64_t freed;
	size_t n;
	int r;

	*digest = NULL;
	if (key) {
		r = remove_ref(c, refs, key, uses, nuses, digest, err);
		json_decref(refs);
		return r;
	}
	json_decref(refs);
	r = match_digest(c, what, &dg, err);
	if (r < 0)
		return -1;
	if (r == 0)
		return gantry_error(err, 0, "image `%s`: not in the cache (see gantry image ls)",
				    what);
	if (check_unused(uses, nuses, dg, err) < 0 ||
	    image_cache_refs_drop(c, NULL, dg, &n, err) < 0 ||
	    entry_remove(c, dg, true, &freed, err) < 0)
		return -1;
	*digest = steal_pointer(&dg);
	return 0;
}

/* ---- pruning ---- */

/* Lock files a killed process left: free ones are taken and so removed. */
static void prune_locks(const struct image_cache *c)
{
	DIR *d = opendir(c->dir);
	struct dirent *e;

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		struct cache_lock l = { 0 };
		gantry_error_t err = NULL;

		if (strncmp(e->d_name, LOCK_PREFIX, strlen(LOCK_PREFIX)) != 0)
			continue;
		if (image_cache_trylock(c, e->d_name + strlen(LOCK_PREFIX), &l, &err) == 0)
			image_cache_unlock(&l);
		gantry_error_free(&err);
	}
	closedir(d);
}

/* index.json temporaries and entries whose image is gone. */
static int prune_index(const struct image_cache *c, gantry_error_t *err)
{
	json_t *refs = image_cache_refs(c), *v;
	struct cache_lock l = { 0 };
	const char *key;
	struct dirent *e;
	DIR *d;
	int ret = 0;

	json_object_foreach(refs, key, v)
	{
		const char *dg = json_string_value(json_object_get(v, "digest"));
		struct image_meta m;
		size_t n;

		if (dg && image_cache_load(c, dg, &m, err) == 1) {
			image_meta_free(&m);
			continue;
		}
		if (image_cache_refs_drop(c, key, NULL, &n, err) < 0) {
			ret = -1;
			break;
		}
	}
	json_decref(refs);
	if (ret < 0 || image_cache_lock(c, "index", &l, err) < 0)
		return -1;
	d = opendir(c->dir);
	while (d && (e = readdir(d)) != NULL)
		if (strncmp(e->d_name, "index.json.tmp-", 15) == 0)
			unlinkat(dirfd(d), e->d_name, 0);
	if (d)
		closedir(d);
	image_cache_unlock(&l);
	return 0;
}

int image_prune(const struct image_cache *c, const struct image_use *uses, size_t nuses,
		size_t *removed, uint64_t *freed, gantry_error_t *err)
{
	char **digests = NULL;
	size_t nd;
	int ret = -1;

	*removed = 0;
	*freed = 0;
	if (cache_digests(c, &digests, &nd, err) < 0)
		goto out;
	for (size_t i = 0; i < nd; i++) {
		uint64_t bytes = 0;
		struct image_meta m;
		bool complete;
		int r;

		if (use_of(uses, nuses, digests[i]))
			continue;
		complete = image_cache_load(c, digests[i], &m, err) == 1;
		if (complete)
			image_meta_free(&m);
		r = entry_remove(c, digests[i], false, &bytes, err);
		if (r < 0)
			goto out;
		if (r == 0 && complete)
			(*removed)++;
		*freed += bytes;
	}
	prune_locks(c);
	ret = prune_index(c, err);
out:
	strv_free(digests);
	return ret;
}
