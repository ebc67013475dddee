/* image_resolve: classify the source, look in the cache, convert on a miss
 * (see source.h). Sources share one conversion path; they differ only in
 * how they find the digest, the config and the layer bytes. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/json.h"
#include "common/text.h"
#include "common/util.h"
#include "image/cache.h"
#include "image/dockersave.h"
#include "image/erofs_format.h"
#include "image/flatten.h"
#include "image/layout.h"
#include "image/manifest.h"
#include "image/pull.h"
#include "image/reference.h"
#include "image/source.h"

#define EROFS_SUFFIX ".erofs"

typedef int (*apply_fn)(void *arg, struct flatten *f, char *const *diff_ids, size_t n,
			gantry_error_t *err);

/* What a conversion needs from a source. */
struct convert {
	const char *ref;	 /* absolute path: the index.json key */
	const char *fingerprint; /* version of a tar file, or NULL */
	const char *digest;	 /* cache key */
	const char *keyed_by;	 /* what digest is the digest of: CACHE_KEY_* */
	const char *config;	 /* config JSON, verified */
	size_t config_len;
	bool need_diff_ids; /* nothing else verifies the layers */
	apply_fn apply;
	void *arg;
};

void image_free(struct image *img)
{
	free(img->path);
	free(img->digest);
	free(img->source);
	if (img->config) {
		image_config_free(img->config);
		free(img->config);
	}
	*img = (struct image){ 0 };
}

static void fill(struct image *out, char *path, const char *digest, const char *ref,
		 struct image_config *cfg, bool converted)
{
	out->path = path;
	out->digest = xstrdup(digest);
	out->source = xstrdup(ref);
	out->config = xmalloc(sizeof(*out->config));
	*out->config = *cfg;
	*cfg = (struct image_config){ 0 };
	out->converted = converted;
}

/* Rewrite an entry's metadata with its kind, under the digest's lock (as
 * `image rm` removes it) and only while the image is still there, so that
 * a removal cannot be undone by a stale copy. Best effort: a busy lock or
 * a cache we cannot write still serves reads, and records it next time. */
static void record_kind(struct image_cache *c, const struct image_meta *m)
{
	cleanup_free char *erofs = image_cache_path(c, m->digest, ".erofs");
	gantry_error_t ignored = NULL;
	struct cache_lock l = { 0 };
	struct stat st;

	if (image_cache_lock_digest(c, m->digest, false, &l, &ignored) == 0) {
		if (stat(erofs, &st) == 0 && S_ISREG(st.st_mode))
			image_cache_store(c, m, &ignored);
		image_cache_unlock(&l);
	}
	gantry_error_free(&ignored);
}

/* 1 when the cache holds digest as the digest of a kind (CACHE_KEY_*), and
 * index.json then points ref at it. verified: the caller has read and
 * hashed what digest names, or found digest in our own index.json; an entry
 * from before kinds were recorded then learns its kind, and one recorded as
 * another kind is an error. Unverified (a layout's index.json, unread),
 * only an entry that records kind answers. */
static int from_cache(struct image_cache *c, const char *digest, const char *kind,
		      bool verified, const char *ref, const char *fingerprint, struct image *out,
		      gantry_error_t *err)
{
	struct image_meta m;
	int r = image_cache_load(c, digest, &m, err);

	if (r <= 0)
		return r;
	if (m.keyed_by ? strcmp(m.keyed_by, kind) != 0 : !verified) {
		/* One blob that is both a manifest and a config: keep the
		 * entry as it is rather than rebuild it from another image. */
		if (verified)
			r = gantry_error(err, 0, "%s is cached as the digest of a %s, not a %s",
					 digest, m.keyed_by, kind);
		else
			r = 0;
		image_meta_free(&m);
		return r;
	}
	if (m.keyed_by == NULL) {
		m.keyed_by = xstrdup(kind);
		record_kind(c, &m);
	}
	if (image_cache_ref_set(c, ref, digest, fingerprint, err) < 0) {
		image_meta_free(&m);
		return -1;
	}
	fill(out, image_cache_path(c, digest, ".erofs"), digest, ref, &m.config, false);
	image_meta_free(&m);
	return 1;
}

static int build(struct image_cache *c, const struct convert *s, struct image_config *cfg,
		 gantry_error_t *err)
{
	cleanup_free char *path = image_cache_path(c, s->digest, ".erofs");
	struct flatten *f = NULL;
	struct image_meta m = { 0 };
	char **diff_ids = NULL;
	size_t n = 0;
	int ret = -1;

	if (image_config_parse(s->config, s->config_len, cfg, &diff_ids, &n, err) < 0)
		return -1;
	if (s->need_diff_ids && n == 0) {
		gantry_error(err, 0, "image config lists no diff_ids");
		goto out;
	}
	image_cache_sweep(c, s->digest);
	if (flatten_new(path, &f, err) < 0 || s->apply(s->arg, f, diff_ids, n, err) < 0 ||
	    flatten_finish(f, &cfg->passwd, &cfg->group, err) < 0)
		goto out;
	/* Stored as JSON strings: a Latin-1 GECOS field must not lose the file. */
	if (cfg->passwd)
		text_sanitize_utf8(cfg->passwd);
	if (cfg->group)
		text_sanitize_utf8(cfg->group);
	m = (struct image_meta){
		.digest = (char *)s->digest,
		.keyed_by = (char *)s->keyed_by,
		.source = (char *)s->ref,
		.created = cache_now(),
		.config = *cfg,
	};
	ret = image_cache_store(c, &m, err);
	free(m.created);
out:
	if (ret < 0)
		image_cache_remove(c, s->digest);
	flatten_free(f);
	strv_free(diff_ids);
	return ret;
}

/* Convert under the digest's lock, unless another process just did. */
static int convert(struct image_cache *c, const struct convert *s, struct image *out,
		   gantry_error_t *err)
{
	struct image_config cfg = { 0 };
	struct cache_lock l = { 0 };
	int r;

	if (image_cache_lock_digest(c, s->digest, true, &l, err) < 0)
		return -1;
	r = from_cache(c, s->digest, s->keyed_by, true, s->ref, s->fingerprint, out, err);
	if (r == 0)
		r = build(c, s, &cfg, err) == 0 ? 2 : -1;
	image_cache_unlock(&l);
	if (r == 2) {
		if (image_cache_ref_set(c, s->ref, s->digest, s->fingerprint, err) < 0) {
			image_config_free(&cfg);
			return -1;
		}
		fill(out, image_cache_path(c, s->digest, ".erofs"), s->digest, s->ref, &cfg, true);
		return 0;
	}
	image_config_free(&cfg);
	return r < 0 ? -1 : 0;
}

static int apply_layout(void *arg, struct flatten *f, char *const *diff_ids, size_t n,
			gantry_error_t *err)
{
	return layout_apply(arg, f, diff_ids, n, err);
}

static int resolve_layout(struct image_cache *c, const char *ref, struct image *out,
			  gantry_error_t *err)
{
	cleanup_free char *config = NULL;
	char digest[DIGEST_STR_MAX];
	struct layout l;
	size_t len;
	int r;

	/* Already converted: the digest in index.json is the cache key, and
	 * the cache holds what that digest names, verified when it was made.
	 * Unread, index.json is only a claim that the digest is a manifest's:
	 * an entry keyed by a docker-save config digest (or one too old to
	 * say, until a verified lookup below records it) does not answer it;
	 * the layout's own blobs are read instead. */
	if (layout_peek(ref, OCI_HOST_ARCH, digest) == 1) {
		r = from_cache(c, digest, CACHE_KEY_MANIFEST, false, ref, NULL, out, err);
		if (r != 0)
			return r < 0 ? -1 : 0;
	}
	if (layout_open(ref, OCI_HOST_ARCH, &l, err) < 0)
		return -1;
	r = from_cache(c, l.manifest_digest, CACHE_KEY_MANIFEST, true, ref, NULL, out, err);
	if (r == 0 && layout_read_config(&l, &config, &len, err) == 0) {
		struct convert s = {
			.ref = ref,
			.digest = l.manifest_digest,
			.keyed_by = CACHE_KEY_MANIFEST,
			.config = config,
			.config_len = len,
			.apply = apply_layout,
			.arg = &l,
		};

		r = convert(c, &s, out, err);
	} else if (r == 0) {
		r = -1;
	}
	layout_close(&l);
	return r < 0 ? -1 : 0;
}

static int apply_dockersave(void *arg, struct flatten *f, char *const *diff_ids, size_t n,
			    gantry_error_t *err)
{
	return dockersave_apply(arg, f, diff_ids, n, err);
}

static int resolve_dockersave(struct image_cache *c, const char *ref, const struct stat *st,
			      struct image *out, gantry_error_t *err)
{
	cleanup_free char *fp = NULL, *digest = NULL, *seen = NULL;
	struct dockersave d;
	int r;

	/* An unchanged tar is not read again. */
	xasprintf(&fp, "%llu:%llu:%lld:%lld.%09ld", (unsigned long long)st->st_dev,
		  (unsigned long long)st->st_ino, (long long)st->st_size,
		  (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	if (image_cache_ref_get(c, ref, &digest, &seen, err) == 1 && seen &&
	    strcmp(seen, fp) == 0) {
		r = from_cache(c, digest, CACHE_KEY_CONFIG, true, ref, fp, out, err);
		if (r != 0)
			return r < 0 ? -1 : 0;
	}
	if (dockersave_open(ref, &d, err) < 0)
		return -1;
	r = from_cache(c, d.config_digest, CACHE_KEY_CONFIG, true, ref, fp, out, err);
	if (r == 0) {
		struct convert s = {
			.ref = ref,
			.fingerprint = fp,
			.digest = d.config_digest,
			.keyed_by = CACHE_KEY_CONFIG,
			.config = d.config,
			.config_len = d.config_len,
			.need_diff_ids = true,
			.apply = apply_dockersave,
			.arg = &d,
		};

		r = convert(c, &s, out, err);
	}
	dockersave_close(&d);
	return r < 0 ? -1 : 0;
}

static int prebuilt(const char *ref, struct image *out, gantry_error_t *err)
{
	cleanup_close int fd = open(ref, O_RDONLY | O_CLOEXEC);
	uint8_t magic[4];

	if (fd < 0)
		return gantry_error_errno(err, "open `%s`", ref);
	if (pread(fd, magic, sizeof(magic), EROFS_SUPER_OFFSET) != (ssize_t)sizeof(magic) ||
	    (magic[0] | magic[1] << 8 | magic[2] << 16 | (uint32_t)magic[3] << 24) != EROFS_MAGIC)
		return gantry_error(err, 0, "`%s` is not an EROFS image", ref);
	*out = (struct image){ .path = xstrdup(ref), .source = xstrdup(ref) };
	return 0;
}

static int apply_pull(void *arg, struct flatten *f, char *const *diff_ids, size_t n,
		      gantry_error_t *err)
{
	return pull_apply(arg, f, diff_ids, n, err);
}

/* From the registry: fetch the manifest (a tag is resolved again), then
 * the cache or a conversion that streams the layers. */
static int pull_convert(struct image_cache *c, const struct image_ref *ref,
			const struct image_resolve_opts *o, const char *platform,
			struct image *out, gantry_error_t *err)
{
	const struct pull_opts po = { o->platform, o->insecure ? ref->registry : NULL, o->progress_fd,
				      o->cancel };
	cleanup_free char *config = NULL;
	struct pull p;
	size_t len;
	int r;

	if (pull_open(ref, &po, &p, err) < 0)
		return -1;
	r = from_cache(c, p.manifest_digest, CACHE_KEY_MANIFEST, true, p.name, platform, out, err);
	if (r == 0 && pull_read_config(&p, &config, &len, err) == 0) {
		struct convert s = {
			.ref = p.name,
			.fingerprint = platform,
			.digest = p.manifest_digest,
			.keyed_by = CACHE_KEY_MANIFEST,
			.config = config,
			.config_len = len,
			.apply = apply_pull,
			.arg = &p,
		};

		r = convert(c, &s, out, err);
	} else if (r == 0) {
		r = -1;
	}
	pull_close(&p);
	return r < 0 ? -1 : 0;
}

/* A registry reference: the cache's entry for it (index.json's fingerprint
 * is the platform) unless a pull is asked for, else the registry. */
static int resolve_registry(struct image_cache *c, const char *src,
			    const struct image_resolve_opts *o, struct image *out,
			    gantry_error_t *err)
{
	cleanup_free char *name = NULL, *digest = NULL, *fp = NULL;
	struct platform plat;
	struct image_ref ref;
	int r = 0;

	if (platform_parse(o->platform, &plat, err) < 0)
		return -1;
	if (image_ref_parse(src, &ref, err) < 0)
		return gantry_error_prefix(err, "image `%s`", src);
	name = image_ref_string(&ref);
	if (!o->pull && image_cache_ref_get(c, name, &digest, &fp, err) == 1 && fp &&
	    strcmp(fp, plat.str) == 0)
		r = from_cache(c, digest, CACHE_KEY_MANIFEST, true, name, fp, out, err);
	if (r == 0)
		r = pull_convert(c, &ref, o, plat.str, out, err);
	image_ref_free(&ref);
	return r < 0 ? -1 : 0;
}

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* What can only be a file name is never taken for a registry reference. */
static bool looks_like_path(const char *s)
{
	return s[0] == '/' || s[0] == '.' || s[0] == '~' || has_suffix(s, ".tar") ||
	       has_suffix(s, EROFS_SUFFIX);
}

static int resolve_path(struct image_cache *c, const char *src, const char *ref,
			const struct stat *st, struct image *out, gantry_error_t *err)
{
	if (S_ISREG(st->st_mode) && has_suffix(ref, EROFS_SUFFIX))
		return prebuilt(ref, out, err);
	if (S_ISDIR(st->st_mode) && !layout_is(ref))
		return gantry_error(err, 0, "image `%s`: a directory without an oci-layout file",
				    src);
	if (!S_ISDIR(st->st_mode) && !S_ISREG(st->st_mode))
		return gantry_error(err, 0, "image `%s`: not a directory or a file", src);
	if (S_ISDIR(st->st_mode))
		return resolve_layout(c, ref, out, err);
	return resolve_dockersave(c, ref, st, out, err);
}

static int resolve(const char *src, const struct image_resolve_opts *o, struct image *out,
		   gantry_error_t *err)
{
	cleanup_free char *ref = NULL;
	struct image_cache c;
	struct stat st;
	int r;

	*out = (struct image){ 0 };
	if (src == NULL || *src == '\0')
		return gantry_error(err, 0, "no image given");
	ref = realpath(src, NULL);
	if (ref == NULL || stat(ref, &st) < 0) {
		if (errno != ENOENT)
			return gantry_error_errno(err, "image `%s`", src);
		if (looks_like_path(src))
			return gantry_error(err, 0, "image `%s`: no such file or directory", src);
		free(ref);
		ref = NULL;
	}
	if (image_cache_open(&c, err) < 0)
		return -1;
	if (ref)
		r = resolve_path(&c, src, ref, &st, out, err);
	else
		r = resolve_registry(&c, src, o, out, err);
	image_cache_close(&c);
	return r;
}

int image_resolve_with(const char *src, const struct image_resolve_opts *o, struct image *out,
		       gantry_error_t *err)
{
	if (resolve(src, o, out, err) < 0)
		return gantry_error_sanitize(err, 0); /* paths and names from the source */
	return 0;
}

int image_resolve(const char *src, struct image *out, gantry_error_t *err)
{
	const struct image_resolve_opts o = { 0 };

	return image_resolve_with(src, &o, out, err);
}
