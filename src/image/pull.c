/* Registry images (see pull.h). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "common/util.h"
#include "image/flatten.h"
#include "image/progress.h"
#include "image/pull.h"

/* What a manifest request takes, best first. */
#define MANIFEST_ACCEPT                                                                            \
	OCI_MT_INDEX ", " DOCKER_MT_LIST ", " OCI_MT_MANIFEST ", " DOCKER_MT_MANIFEST

int platform_parse(const char *s, struct platform *p, gantry_error_t *err)
{
	char os[PLATFORM_MAX] = "", back[3 * PLATFORM_MAX];
	int n;

	*p = (struct platform){ 0 };
	if (s == NULL || *s == '\0')
		s = "linux/" OCI_HOST_ARCH;
	n = sscanf(s, "%63[a-z0-9_]/%63[a-z0-9_]/%63[a-z0-9_]", os, p->arch, p->variant);
	snprintf(back, sizeof(back), "%s/%s%s%s", os, p->arch, n == 3 ? "/" : "", p->variant);
	if (strlen(s) >= PLATFORM_MAX || n < 2 || strcmp(back, s) != 0) {
		gantry_error_usage(err, "platform `%.64s`: want linux/ARCH[/VARIANT]", s);
		return gantry_error_sanitize(err, 0); /* the user's text */
	}
	if (strcmp(os, "linux") != 0)
		return gantry_error_usage(err, "platform `%s`: Gantry runs linux images only", s);
	snprintf(p->str, sizeof(p->str), "%s", s);
	return 0;
}

/* A manifest or index from the registry, by tag or digest; verified
 * against want (when given) and against the registry's own digest header. */
static int fetch_manifest(struct pull *p, const char *object, const struct oci_descriptor *want,
			  char **buf, size_t *len, char digest[DIGEST_STR_MAX],
			  gantry_error_t *err)
{
	cleanup_free char *what = NULL;
	struct registry_resp resp;
	struct blob b;
	int ret = -1;

	xasprintf(&what, "manifest %s", object);
	if (registry_get(&p->reg, "manifests", object, MANIFEST_ACCEPT, what, &resp, err) < 0)
		return -1;
	if (resp.head.length > (int64_t)OCI_JSON_MAX) {
		registry_resp_end(&resp);
		return gantry_error(err, 0, "%s: %lld bytes, more than the %u allowed", what,
				    (long long)resp.head.length, OCI_JSON_MAX);
	}
	blob_init(&b, what, want ? want->digest : NULL, want ? want->size : -1, registry_pull,
		  &resp);
	if (blob_read_all(&b, OCI_JSON_MAX, buf, len, err) == 0) {
		memcpy(digest, b.computed, DIGEST_STR_MAX);
		if (digest_valid(resp.head.docker_digest) &&
		    strcmp(resp.head.docker_digest, digest) != 0)
			gantry_error(err, 0, "%s: content does not match the registry's digest %s",
				     what, resp.head.docker_digest);
		else if (p->ref.digest && want == NULL && strcmp(p->ref.digest, digest) != 0)
			gantry_error(err, 0, "%s: content has digest %s", what, digest);
		else
			ret = 0;
		if (ret < 0) {
			free(*buf);
			*buf = NULL;
		}
	}
	blob_release(&b);
	registry_resp_end(&resp);
	return ret;
}

/* From the reference to the platform's manifest, through indexes. */
static int resolve_manifest(struct pull *p, gantry_error_t *err)
{
	cleanup_free char *buf = NULL;
	struct oci_descriptor chosen = { 0 };
	const struct oci_descriptor *want = NULL;
	const char *object = image_ref_object(&p->ref);
	char digest[DIGEST_STR_MAX];
	bool named = false; /* the index entry named its platform */
	size_t len;

	for (int depth = 0;; depth++) {
		const struct oci_descriptor *d;
		struct oci_index ix;
		enum oci_kind kind;

		free(buf);
		buf = NULL;
		if (fetch_manifest(p, object, want, &buf, &len, digest, err) < 0 ||
		    oci_kind(buf, len, &kind, err) < 0)
			break;
		if (kind == OCI_KIND_MANIFEST) {
			if (oci_manifest_parse(buf, len, &p->manifest, err) < 0) {
				gantry_error_prefix(err, "manifest %s", digest);
				break;
			}
			memcpy(p->manifest_digest, digest, sizeof(digest));
			/* An index entry named its platform; a lone manifest did not. */
			p->platform_unchecked = !named;
			free(chosen.digest);
			return 0;
		}
		if (depth + 1 >= PULL_MAX_NESTING) {
			gantry_error(err, 0, "indexes nested deeper than %d", PULL_MAX_NESTING);
			break;
		}
		if (oci_index_parse(buf, len, &ix, err) < 0)
			break;
		if (oci_index_select_variant(&ix, p->platform.arch,
					     p->platform.variant[0] ? p->platform.variant : NULL,
					     &d, err) < 0) {
			oci_index_free(&ix);
			break;
		}
		free(chosen.digest);
		chosen = (struct oci_descriptor){ .digest = xstrdup(d->digest), .size = d->size };
		named = d->architecture != NULL;
		oci_index_free(&ix);
		want = &chosen;
		object = chosen.digest;
	}
	free(chosen.digest);
	return -1;
}

/* The config's platform against the one asked for, where no index
 * entry vouched for it: "image is linux/arm64, not linux/amd64". */
static int check_platform(const struct pull *p, const char *buf, size_t len, gantry_error_t *err)
{
	json_t *j = json_loadb(buf, len, 0, NULL);
	const char *os = json_string_value(json_object_get(j, "os"));
	const char *arch = json_string_value(json_object_get(j, "architecture"));
	const char *variant = json_string_value(json_object_get(j, "variant"));
	const char *want = p->platform.variant;
	bool ok = true;

	if (os && strcmp(os, "linux") != 0)
		ok = false;
	if (arch && strcmp(arch, p->platform.arch) != 0)
		ok = false;
	/* arm64 without a variant is v8. */
	if (arch && ok && want[0] && !(variant ? strcmp(variant, want) == 0 :
					       strcmp(arch, "arm64") == 0 && strcmp(want, "v8") == 0))
		ok = false;
	if (!ok) {
		gantry_error(err, 0, "image is %.32s/%.32s%s%.32s, not %s", os ? os : "linux",
			     arch ? arch : "?", variant ? "/" : "", variant ? variant : "",
			     p->platform.str);
		gantry_error_sanitize(err, 0);
	}
	json_decref(j);
	return ok ? 0 : -1;
}

static int read_config(struct pull *p, char **buf, size_t *len, gantry_error_t *err)
{
	const struct oci_descriptor *d = &p->manifest.config;
	cleanup_free char *what = NULL;
	struct registry_resp resp;
	struct blob b;
	int ret;

	xasprintf(&what, "config %s", d->digest);
	if (registry_get(&p->reg, "blobs", d->digest, NULL, what, &resp, err) < 0)
		return -1;
	blob_init(&b, what, d->digest, d->size, registry_pull, &resp);
	ret = blob_read_all(&b, OCI_JSON_MAX, buf, len, err);
	blob_release(&b);
	registry_resp_end(&resp);
	return ret;
}

int pull_open(const struct image_ref *ref, const struct pull_opts *o, struct pull *p,
	      gantry_error_t *err)
{
	*p = (struct pull){ .progress_fd = o->progress_fd };
	if (platform_parse(o->platform, &p->platform, err) < 0)
		return -1;
	p->ref = (struct image_ref){
		.registry = xstrdup(ref->registry),
		.repository = xstrdup(ref->repository),
		.tag = ref->tag ? xstrdup(ref->tag) : NULL,
		.digest = ref->digest ? xstrdup(ref->digest) : NULL,
	};
	p->name = image_ref_string(ref);
	if (registry_open(ref->registry, ref->repository, o->insecure, &p->reg, err) < 0)
		goto fail;
	p->reg.cancel = o->cancel;
	if (resolve_manifest(p, err) == 0 &&
	    (!p->platform_unchecked || (read_config(p, &p->config, &p->config_len, err) == 0 &&
					check_platform(p, p->config, p->config_len, err) == 0)))
		return 0;
fail:
	gantry_error_prefix(err, "image `%s`", p->name);
	pull_close(p);
	return -1;
}

void pull_close(struct pull *p)
{
	registry_close(&p->reg);
	oci_manifest_free(&p->manifest);
	image_ref_free(&p->ref);
	free(p->name);
	free(p->config);
	*p = (struct pull){ 0 };
}

int pull_read_config(struct pull *p, char **buf, size_t *len, gantry_error_t *err)
{
	if (p->config) {
		*buf = steal_pointer(&p->config);
		*len = p->config_len;
		return 0;
	}
	if (read_config(p, buf, len, err) < 0)
		return gantry_error_prefix(err, "image `%s`", p->name);
	return 0;
}

/* A layer's body, counted for the progress line. */
struct layer_stream {
	struct registry_resp resp;
	struct progress progress;
};

static ssize_t layer_pull(void *arg, const void **buf, gantry_error_t *err)
{
	struct layer_stream *s = arg;
	ssize_t n = registry_pull(&s->resp, buf, err);

	if (n > 0)
		progress_add(&s->progress, (uint64_t)n);
	return n;
}

static int apply_one(struct pull *p, struct flatten *f, const struct oci_descriptor *d,
		     const char *diff_id, gantry_error_t *err)
{
	cleanup_free char *label = NULL;
	struct layer_stream s;
	struct layer_src src;
	char short_id[20];
	int ret;

	xasprintf(&label, "layer %s", d->digest);
	if (registry_get(&p->reg, "blobs", d->digest, NULL, label, &s.resp, err) < 0)
		return -1;
	snprintf(short_id, sizeof(short_id), "%.12s", digest_hex(d->digest));
	progress_start(&s.progress, p->progress_fd, short_id, d->size);
	src = (struct layer_src){
		.label = label,
		.digest = d->digest,
		.size = d->size,
		.diff_id = diff_id,
	};
	ret = flatten_layer(f, &src, layer_pull, &s, err);
	progress_end(&s.progress, ret == 0);
	registry_resp_end(&s.resp);
	return ret;
}

int pull_apply(struct pull *p, struct flatten *f, char *const *diff_ids, size_t n,
	       gantry_error_t *err)
{
	if (n && n != p->manifest.nlayers)
		return gantry_error(err, 0, "image `%s`: config lists %zu diff_ids for %zu layers",
				    p->name, n, p->manifest.nlayers);
	for (size_t i = 0; i < p->manifest.nlayers; i++)
		if (apply_one(p, f, &p->manifest.layers[i], n ? diff_ids[i] : NULL, err) < 0)
			return gantry_error_prefix(err, "image `%s`", p->name);
	return 0;
}
