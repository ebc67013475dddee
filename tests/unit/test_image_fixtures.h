/* Fixtures for the image_resolve tests (test_image.c, test_image_docker.c):
 * a private directory per test with the cache in it (GANTRY_IMAGES), layer
 * files and OCI layouts written with libarchive and jansson, and checks on
 * what a resolve left behind. Every helper fails the test on error. */
#ifndef GANTRY_TESTS_IMAGE_FIXTURES_H
#define GANTRY_TESTS_IMAGE_FIXTURES_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "erofs/layers.h"
#include "image/digest.h"
#include "image/source.h"

#define MT_LAYER_GZIP "application/vnd.oci.image.layer.v1.tar+gzip"
#define MT_LAYER_TAR  "application/vnd.oci.image.layer.v1.tar"
#define MT_LAYER_ZSTD "application/vnd.oci.image.layer.v1.tar+zstd"

struct ctx {
	char *dir;
	char *cache;
	char **paths;
	size_t npaths;
};

/* A blob as a descriptor names it. */
struct desc {
	char digest[DIGEST_STR_MAX];
	int64_t size;
	char diff_id[DIGEST_STR_MAX]; /* layers: the uncompressed tar's */
	const char *media_type;
	char path[512]; /* layers: the file outside the layout */
};

int setup(void **state);
int teardown(void **state);
/* A path in the test's directory, valid until teardown. */
char *at(void **state, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void write_file(const char *path, const void *data, size_t len);
char *read_file(const char *path, size_t *len);
char *blob_path(const char *layout, const char *digest);
void put_blob(const char *layout, const void *buf, size_t len, struct desc *d);
/* Write a layer file (filter NULL, "gzip" or "zstd") and describe it. */
void make_layer(void **state, const char *name, const char *filter, const struct tent *v, size_t n,
		struct desc *d);
json_t *descriptor(const char *mt, const struct desc *d);
/* Store layers, a config (config_obj: the "config" member, JSON text) and
 * a manifest in layout; *m describes the manifest, *cfg (may be NULL) the
 * config. */
void make_image(const char *layout, const char *arch, const char *config_obj, struct desc *layers,
		size_t n, struct desc *m, struct desc *cfg);
/* index.json listing manifests[i] for archs[i] (NULL: no platform), as
 * media type mt (NULL: image manifests). */
void write_index(const char *layout, const struct desc *manifests, const char *const *archs,
		 size_t n, const char *mt);
void resolve_ok(const char *src, struct image *img);
/* The one-line error of a failed resolve. */
char *resolve_fails(const char *src);
void assert_contains(const char *s, const char *want);
/* Nothing of a failed conversion stays in the cache. */
void assert_dir_clean(const char *dir);
void assert_cache_clean(void **state);
/* The keyed_by of digest's cache entry metadata; NULL when it has none. */
char *cache_keyed_by(void **state, const char *digest);
/* A file out of an image, read with the independent reader; NULL if absent. */
char *image_file(const char *image, const char *path);

#endif
