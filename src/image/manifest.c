/* Index, manifest and docker-save manifest.json parsers (see manifest.h). */
#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "common/util.h"
#include "image/digest.h"
#include "image/manifest.h"

/* The platform list in a "no image for linux/amd64" error. */
#define PLATFORMS_LISTED 16

bool oci_media_is_index(const char *mt)
{
	return mt && (strcmp(mt, OCI_MT_INDEX) == 0 || strcmp(mt, DOCKER_MT_LIST) == 0);
}

bool oci_media_is_manifest(const char *mt)
{
	return mt && (strcmp(mt, OCI_MT_MANIFEST) == 0 || strcmp(mt, DOCKER_MT_MANIFEST) == 0);
}

static void descriptor_free(struct oci_descriptor *d)
{
	free(d->media_type);
	free(d->digest);
	free(d->os);
	free(d->architecture);
	free(d->variant);
	*d = (struct oci_descriptor){ 0 };
}

static int descriptor_parse(json_t *j, struct oci_descriptor *d, bool platform, gantry_error_t *err)
{
	json_t *size = json_object_get(j, "size"), *p, *ann;

	*d = (struct oci_descriptor){ 0 };
	if (!json_is_object(j))
		return gantry_error(err, 0, "descriptor is not an object");
	if (jsonh_string(j, "mediaType", false, &d->media_type, err) < 0 ||
	    jsonh_string(j, "digest", true, &d->digest, err) < 0 ||
	    digest_check(d->digest, err) < 0)
		goto fail;
	if (!json_is_integer(size) || json_integer_value(size) < 0) {
		gantry_error(err, 0, "descriptor of %s: missing or negative size", d->digest);
		goto fail;
	}
	d->size = json_integer_value(size);
	if (!platform)
		return 0;
	p = json_object_get(j, "platform");
	if (p && !json_is_null(p)) {
		if (!json_is_object(p)) {
			gantry_error(err, 0, "`platform` is not an object");
			goto fail;
		}
		if (jsonh_string(p, "os", false, &d->os, err) < 0 ||
		    jsonh_string(p, "architecture", false, &d->architecture, err) < 0 ||
		    jsonh_string(p, "variant", false, &d->variant, err) < 0)
			goto fail;
	}
	ann = json_object_get(j, "annotations");
	if (json_is_object(ann)) {
		json_t *t = json_object_get(ann, "vnd.docker.reference.type");

		d->attestation = json_is_string(t) &&
				 strcmp(json_string_value(t), "attestation-manifest") == 0;
	}
	return 0;
fail:
	descriptor_free(d);
	return -1;
}

static int schema_version(json_t *j, const char *what, gantry_error_t *err)
{
	json_t *v = json_object_get(j, "schemaVersion");

	if (!json_is_object(j))
		return gantry_error(err, 0, "%s is not a JSON object", what);
	if (!json_is_integer(v))
		return gantry_error(err, 0, "%s: missing schemaVersion", what);
	if (json_integer_value(v) != 2)
		return gantry_error(err, 0, "%s: schemaVersion %lld is not supported", what,
				    (long long)json_integer_value(v));
	return 0;
}

int oci_kind(const char *buf, size_t len, enum oci_kind *kind, gantry_error_t *err)
{
	json_t *j = jsonh_load(buf, len, "manifest", err);
	const char *mt;
	int ret = 0;

	if (j == NULL)
		return -1;
	mt = json_string_value(json_object_get(j, "mediaType"));
	if (oci_media_is_index(mt) || (mt == NULL && json_object_get(j, "manifests")))
		*kind = OCI_KIND_INDEX;
	else if (oci_media_is_manifest(mt) || (mt == NULL && json_object_get(j, "layers")))
		*kind = OCI_KIND_MANIFEST;
	else if (mt)
		ret = gantry_error(err, 0, "manifest: media type `%.100s` is not an image", mt);
	else
		ret = gantry_error(err, 0, "manifest: neither an index nor an image manifest");
	json_decref(j);
	if (ret < 0)
		gantry_error_sanitize(err, 0);
	return ret;
}

int oci_index_parse(const char *buf, size_t len, struct oci_index *out, gantry_error_t *err)
{
	json_t *j = jsonh_load(buf, len, "index", err), *m, *e;
	size_t i;

	*out = (struct oci_index){ 0 };
	if (j == NULL)
		return -1;
	if (schema_version(j, "index", err) < 0)
		goto fail;
	m = json_object_get(j, "manifests");
	if (!json_is_array(m)) {
		gantry_error(err, 0, "index: `manifests` is not an array");
		goto fail;
	}
	if (json_array_size(m) > OCI_MAX_MANIFESTS) {
		gantry_error(err, 0, "index: more than %d manifests", OCI_MAX_MANIFESTS);
		goto fail;
	}
	out->manifests = xzalloc((json_array_size(m) + 1) * sizeof(*out->manifests));
	json_array_foreach(m, i, e)
	{
		if (descriptor_parse(e, &out->manifests[i], true, err) < 0) {
			gantry_error_prefix(err, "index: manifest %zu", i);
			goto fail;
		}
		out->n++;
	}
	json_decref(j);
	return 0;
fail:
	json_decref(j);
	oci_index_free(out);
	return gantry_error_sanitize(err, 0);
}

void oci_index_free(struct oci_index *ix)
{
	for (size_t i = 0; i < ix->n; i++)
		descriptor_free(&ix->manifests[i]);
	free(ix->manifests);
	*ix = (struct oci_index){ 0 };
}

static bool is_image_entry(const struct oci_descriptor *d)
{
	if (d->attestation)
		return false;
	return d->media_type == NULL || oci_media_is_manifest(d->media_type) ||
	       oci_media_is_index(d->media_type);
}

int oci_index_select(const struct oci_index *ix, const char *arch,
		     const struct oci_descriptor **out, gantry_error_t *err)
{
	return oci_index_select_variant(ix, arch, NULL, out, err);
}

static bool variant_fits(const struct oci_descriptor *d, const char *variant)
{
	return variant == NULL || (d->variant && strcmp(d->variant, variant) == 0);
}

int oci_index_select_variant(const struct oci_index *ix, const char *arch, const char *variant,
			     const struct oci_descriptor **out, gantry_error_t *err)
{
	const struct oci_descriptor *only = NULL;
	size_t images = 0, off = 0;
	char list[512] = "";

	for (size_t i = 0; i < ix->n; i++) {
		const struct oci_descriptor *d = &ix->manifests[i];

		if (!is_image_entry(d))
			continue;
		images++;
		only = d;
		if (d->os && strcmp(d->os, "linux") == 0 && d->architecture &&
		    strcmp(d->architecture, arch) == 0 && variant_fits(d, variant)) {
			*out = d;
			return 0;
		}
	}
	if (images == 1) {
		/* An entry without a platform is whatever the layout holds. */
		if (only->os == NULL ||
		    (strcmp(only->os, "linux") == 0 &&
		     (only->architecture == NULL ||
		      (strcmp(only->architecture, arch) == 0 && variant_fits(only, variant))))) {
			*out = only;
			return 0;
		}
	}
	if (images == 0)
		return gantry_error(err, 0, "index lists no image manifest");
	for (size_t i = 0, shown = 0; i < ix->n && shown < PLATFORMS_LISTED; i++) {
		const struct oci_descriptor *d = &ix->manifests[i];
		int n;

		if (!is_image_entry(d))
			continue;
		n = snprintf(list + off, sizeof(list) - off, "%s%.32s/%.32s", shown ? ", " : "",
			     d->os ? d->os : "?", d->architecture ? d->architecture : "?");
		if (n < 0 || (size_t)n >= sizeof(list) - off)
			break;
		off += (size_t)n;
		shown++;
	}
	gantry_error(err, 0, "no image for linux/%s%s%s (the index has %s)", arch,
		     variant ? "/" : "", variant ? variant : "", list);
	return gantry_error_sanitize(err, 0);
}

void oci_manifest_free(struct oci_manifest *m)
{
	descriptor_free(&m->config);
	for (size_t i = 0; i < m->nlayers; i++)
		descriptor_free(&m->layers[i]);
	free(m->layers);
	*m = (struct oci_manifest){ 0 };
}

static bool layer_media_ok(const char *mt)
{
	static const char *const prefixes[] = {
		"application/vnd.oci.image.layer.",
		"application/vnd.docker.image.rootfs.",
	};

	if (mt == NULL || strstr(mt, "encrypted"))
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(prefixes); i++)
		if (strncmp(mt, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	return false;
}

int oci_manifest_parse(const char *buf, size_t len, struct oci_manifest *out, gantry_error_t *err)
{
	json_t *j = jsonh_load(buf, len, "manifest", err), *layers, *e;
	size_t i;

	*out = (struct oci_manifest){ 0 };
	if (j == NULL)
		return -1;
	if (schema_version(j, "manifest", err) < 0)
		goto fail;
	if (descriptor_parse(json_object_get(j, "config"), &out->config, false, err) < 0) {
		gantry_error_prefix(err, "manifest: config");
		goto fail;
	}
	if (out->config.media_type && strcmp(out->config.media_type, OCI_MT_CONFIG) != 0 &&
	    strcmp(out->config.media_type, DOCKER_MT_CONFIG) != 0) {
		gantry_error(err, 0, "manifest: config media type `%.100s` is not an image config",
			     out->config.media_type);
		goto fail;
	}
	layers = json_object_get(j, "layers");
	if (!json_is_array(layers)) {
		gantry_error(err, 0, "manifest: `layers` is not an array");
		goto fail;
	}
	if (json_array_size(layers) > OCI_MAX_LAYERS) {
		gantry_error(err, 0, "manifest: more than %d layers", OCI_MAX_LAYERS);
		goto fail;
	}
	out->layers = xzalloc((json_array_size(layers) + 1) * sizeof(*out->layers));
	json_array_foreach(layers, i, e)
	{
		struct oci_descriptor *d = &out->layers[i];

		if (descriptor_parse(e, d, false, err) < 0) {
			gantry_error_prefix(err, "manifest: layer %zu", i);
			goto fail;
		}
		out->nlayers++;
		if (!layer_media_ok(d->media_type)) {
			gantry_error(err, 0,
				     "manifest: layer %s: media type `%.100s` is not a tar layer",
				     d->digest, d->media_type ? d->media_type : "(none)");
			goto fail;
		}
	}
	json_decref(j);
	return 0;
fail:
	json_decref(j);
	oci_manifest_free(out);
	return gantry_error_sanitize(err, 0);
}

void docker_manifest_free(struct docker_manifest *m)
{
	free(m->config);
	strv_free(m->layers);
	*m = (struct docker_manifest){ 0 };
}

int docker_manifest_parse(const char *buf, size_t len, struct docker_manifest *out,
			  gantry_error_t *err)
{
	json_t *j = jsonh_load(buf, len, "manifest.json", err), *img;

	*out = (struct docker_manifest){ 0 };
	if (j == NULL)
		return -1;
	if (!json_is_array(j) || json_array_size(j) == 0) {
		gantry_error(err, 0, "manifest.json: not a list of images");
		goto fail;
	}
	if (json_array_size(j) > 1) {
		gantry_error(err, 0, "manifest.json: the tar holds %zu images; save one per tar",
			     json_array_size(j));
		goto fail;
	}
	img = json_array_get(j, 0);
	if (!json_is_object(img)) {
		gantry_error(err, 0, "manifest.json: image entry is not an object");
		goto fail;
	}
	if (jsonh_string(img, "Config", true, &out->config, err) < 0 ||
	    jsonh_strv(img, "Layers", OCI_MAX_LAYERS, &out->layers, &out->nlayers, err) < 0) {
		gantry_error_prefix(err, "manifest.json");
		goto fail;
	}
	json_decref(j);
	return 0;
fail:
	json_decref(j);
	docker_manifest_free(out);
	return gantry_error_sanitize(err, 0);
}
