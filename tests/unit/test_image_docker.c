/* Tests for image_resolve on docker-save tars (image/dockersave.c): layers
 * out of tar order, diff_id checks, docker 25's blobs/sha256 names, gzipped
 * tars and the fingerprint shortcut through index.json. */
#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/settings.h"
#include "common/util.h"
#include "erofs/layers.h"
#include "image/cache.h"
#include "image/digest.h"
#include "image/source.h"
#include "test_image_fixtures.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

/* A docker-save tar: members in the order given, manifest.json naming the
 * layers in layer order. */
struct member {
	const char *name;
	const char *file; /* contents from this file, or */
	const char *data; /* these bytes */
};

static void write_tar_filtered(const char *path, const struct member *v, size_t n, bool gzip)
{
	struct archive *a = archive_write_new();

	archive_write_set_format_pax_restricted(a);
	if (gzip)
		archive_write_add_filter_gzip(a);
	assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		size_t len = 0;
		char *data = v[i].file ? read_file(v[i].file, &len) : xstrdup(v[i].data);

		if (!v[i].file)
			len = strlen(data);
		archive_entry_set_pathname(e, v[i].name);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		archive_entry_set_size(e, (la_int64_t)len);
		assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
		assert_int_equal(archive_write_data(a, data, len), (la_ssize_t)len);
		archive_entry_free(e);
		free(data);
	}
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
}

static void write_tar(const char *path, const struct member *v, size_t n)
{
	write_tar_filtered(path, v, n, false);
}

static char *docker_config(const struct desc *layers, size_t n, const char *cfg)
{
	json_t *ids = json_array(), *j;
	char *s;

	for (size_t i = 0; i < n; i++)
		json_array_append_new(ids, json_string(layers[i].diff_id));
	j = json_pack("{s:s,s:s,s:o,s:{s:s,s:o}}", "architecture", "amd64", "os", "linux", "config",
		      json_loads(cfg, 0, NULL), "rootfs", "type", "layers", "diff_ids", ids);
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return s;
}

static void test_docker_save(void **state)
{
	static const struct tent l1[] = {
		{ "etc/", 'd' },
		{ "etc/passwd", 'f',
		  .data = "root:x:0:0::/root:/bin/sh\nweb:x:33:33::/var/www:/bin/false\n" },
		{ "etc/group", 'f', .data = "root:x:0:\nwww:x:33:\n" },
		{ "f", 'f', .data = "one" },
		{ "only1", 'f', .data = "x" },
	};
	static const struct tent l2[] = {
		{ "f", 'f', .data = "two" },
		{ ".wh.only1", 'f' },
	};
	struct desc layers[2];
	char *tar = at(state, "image.tar"), *cfg, cfgname[DIGEST_STR_MAX + 8], cfgd[DIGEST_STR_MAX];
	char *mani, *f, *msg, *kind, *layout;
	struct image img, again;
	struct desc claim;
	gantry_error_t err = NULL;
	struct image_user u;

	make_layer(state, "dl1.tar", NULL, l1, ARRAY_SIZE(l1), &layers[0]);
	make_layer(state, "dl2.tar", NULL, l2, ARRAY_SIZE(l2), &layers[1]);
	cfg = docker_config(layers, 2, "{\"User\":\"web\",\"Cmd\":[\"/serve\"]}");
	assert_int_equal(sha256_buf(cfg, strlen(cfg), cfgd, NULL), 0);
	snprintf(cfgname, sizeof(cfgname), "%s.json", digest_hex(cfgd));
	xasprintf(&mani,
		  "[{\"Config\":\"%s\",\"RepoTags\":[\"t:latest\"],"
		  "\"Layers\":[\"aaa/layer.tar\",\"bbb/layer.tar\"]}]",
		  cfgname);
	/* The second layer comes first in the tar, manifest.json last. */
	write_tar(tar,
		  (const struct member[]){
			  { "bbb/VERSION", .data = "1.0" },
			  { "bbb/layer.tar", .file = layers[1].path },
			  { cfgname, .data = cfg },
			  { "aaa/layer.tar", .file = layers[0].path },
			  { "manifest.json", .data = mani },
			  { "repositories", .data = "{\"t\":{\"latest\":\"x\"}}" },
		  },
		  6);
	resolve_ok(tar, &img);
	assert_true(img.converted);
	assert_string_equal(img.digest, cfgd);
	f = image_file(img.path, "f");
	assert_string_equal(f, "two");
	free(f);
	assert_null(image_file(img.path, "only1"));
	assert_int_equal(image_config_user(img.config, NULL, &u, &err), 0);
	assert_int_equal(u.uid, 33);
	assert_int_equal(u.gid, 33);
	image_user_free(&u);
	if (!check_image(img.path, at(state, "x"),
			 (const struct tent[]){ { "f", 'f', .data = "two" } }, 1, 0))
		print_message("note: checked with the reader only\n");

	/* An unchanged tar is found through index.json without reading it. */
	resolve_ok(tar, &again);
	assert_false(again.converted);
	assert_string_equal(again.path, img.path);
	image_free(&again);

	/* The entry is keyed by a config digest, and says so: a layout whose
	 * index.json calls that digest a manifest's (with no blob behind it)
	 * does not get this image from the cache. */
	kind = cache_keyed_by(state, cfgd);
	assert_string_equal(kind, CACHE_KEY_CONFIG);
	free(kind);
	memset(&claim, 0, sizeof(claim));
	snprintf(claim.digest, sizeof(claim.digest), "%s", cfgd);
	claim.size = (int64_t)strlen(cfg);
	layout = at(state, "claims");
	write_index(layout, &claim, (const char *const[]){ NULL }, 1, NULL);
	msg = resolve_fails(layout);
	assert_contains(msg, digest_hex(cfgd));
	free(msg);
	image_free(&img);
	free(mani);

	/* A layer that is not what the config's diff_ids say. */
	tar = at(state, "bad.tar");
	xasprintf(&mani, "[{\"Config\":\"%s\",\"Layers\":[\"bbb/layer.tar\",\"aaa/layer.tar\"]}]",
		  cfgname);
	write_tar(tar,
		  (const struct member[]){
			  { "aaa/layer.tar", .file = layers[0].path },
			  { "bbb/layer.tar", .file = layers[1].path },
			  { cfgname, .data = cfg },
			  { "manifest.json", .data = mani },
		  },
		  4);
	setenv("GANTRY_IMAGES", at(state, "cache2"), 1);
	gantry_settings_load();
	msg = resolve_fails(tar);
	assert_contains(msg, "layer `bbb/layer.tar`: uncompressed content does not match diff_id");
	free(msg);
	free(mani);
	assert_dir_clean(at(state, "cache2"));
	free(cfg);
}

static void test_docker_save_blobs(void **state)
{
	static const struct tent l1[] = { { "hello", 'f', .data = "docker 25" } };
	struct desc layer;
	char *tar = at(state, "image.tar"), *cfg, *mani, *name, *lname, *f, *msg;
	char cfgd[DIGEST_STR_MAX];
	struct image img;

	/* docker 25 and later: blobs/sha256/<hex> names, checked as digests. */
	make_layer(state, "l.tar", NULL, l1, 1, &layer);
	cfg = docker_config(&layer, 1, "{}");
	assert_int_equal(sha256_buf(cfg, strlen(cfg), cfgd, NULL), 0);
	xasprintf(&name, "blobs/sha256/%s", digest_hex(cfgd));
	xasprintf(&lname, "blobs/sha256/%s", digest_hex(layer.digest));
	xasprintf(&mani, "[{\"Config\":\"%s\",\"Layers\":[\"%s\"]}]", name, lname);
	write_tar(tar,
		  (const struct member[]){
			  { lname, .file = layer.path },
			  { name, .data = cfg },
			  { "manifest.json", .data = mani },
			  { "oci-layout", .data = "{\"imageLayoutVersion\":\"1.0.0\"}" },
		  },
		  4);
	resolve_ok(tar, &img);
	f = image_file(img.path, "hello");
	assert_string_equal(f, "docker 25");
	free(f);
	image_free(&img);

	/* `docker save | gzip`: read in passes over the decompressed stream. */
	tar = at(state, "image.tar.gz");
	write_tar_filtered(tar,
			   (const struct member[]){
				   { "manifest.json", .data = mani },
				   { lname, .file = layer.path },
				   { name, .data = cfg },
			   },
			   3, true);
	resolve_ok(tar, &img);
	assert_false(img.converted); /* same config digest as the plain tar */
	image_free(&img);
	setenv("GANTRY_IMAGES", at(state, "cache-gz"), 1);
	gantry_settings_load();
	resolve_ok(tar, &img);
	assert_true(img.converted);
	f = image_file(img.path, "hello");
	assert_string_equal(f, "docker 25");
	free(f);
	image_free(&img);

	/* A config whose bytes differ from the digest its name claims. */
	tar = at(state, "bad.tar");
	write_tar(tar,
		  (const struct member[]){
			  { name, .data = "{\"rootfs\":{}}" },
			  { "manifest.json", .data = mani },
		  },
		  2);
	msg = resolve_fails(tar);
	assert_contains(msg, "content does not match its digest");
	assert_contains(msg, name);
	free(msg);
	free(name);
	free(lname);
	free(mani);
	free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_docker_save, setup, teardown),
		cmocka_unit_test_setup_teardown(test_docker_save_blobs, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
