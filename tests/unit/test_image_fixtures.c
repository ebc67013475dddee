/* Fixtures for the image_resolve tests (see test_image_fixtures.h). */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/settings.h"
#include "common/util.h"
#include "erofs/reader.h"
#include "image/manifest.h"
#include "test_image_fixtures.h"

int setup(void **state)
{
	struct ctx *c = xzalloc(sizeof(*c));
	const char *tmp = getenv("TMPDIR");

	xasprintf(&c->dir, "%s/gantry-image-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (mkdtemp(c->dir) == NULL)
		return -1;
	xasprintf(&c->cache, "%s/cache", c->dir);
	setenv("GANTRY_IMAGES", c->cache, 1);
	gantry_settings_load();
	*state = c;
	return 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(p);
}

int teardown(void **state)
{
	struct ctx *c = *state;

	nftw(c->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	unsetenv("GANTRY_IMAGES");
	gantry_settings_load();
	for (size_t i = 0; i < c->npaths; i++)
		free(c->paths[i]);
	free(c->paths);
	free(c->cache);
	free(c->dir);
	free(c);
	return 0;
}

/* A path in the test's directory, valid until teardown. */
char *at(void **state, const char *fmt, ...)
{
	struct ctx *c = *state;
	char *name;
	va_list ap;

	va_start(ap, fmt);
	assert_true(vasprintf(&name, fmt, ap) >= 0);
	va_end(ap);
	c->paths = xrealloc(c->paths, (c->npaths + 1) * sizeof(*c->paths));
	xasprintf(&c->paths[c->npaths], "%s/%s", c->dir, name);
	free(name);
	return c->paths[c->npaths++];
}

void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write_full(fd, data, len), 0);
	close(fd);
}

char *read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char *buf;

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	buf = xmalloc((size_t)st.st_size + 1);
	assert_int_equal(read_full(fd, buf, (size_t)st.st_size), 0);
	buf[st.st_size] = '\0';
	close(fd);
	if (len)
		*len = (size_t)st.st_size;
	return buf;
}

static void mkdirs(const char *layout)
{
	char *p;

	mkdir(layout, 0755);
	xasprintf(&p, "%s/blobs", layout);
	mkdir(p, 0755);
	free(p);
	xasprintf(&p, "%s/blobs/sha256", layout);
	mkdir(p, 0755);
	free(p);
}

char *blob_path(const char *layout, const char *digest)
{
	char *p;

	xasprintf(&p, "%s/blobs/sha256/%s", layout, digest_hex(digest));
	return p;
}

void put_blob(const char *layout, const void *buf, size_t len, struct desc *d)
{
	char *p;

	mkdirs(layout);
	assert_int_equal(sha256_buf(buf, len, d->digest, NULL), 0);
	d->size = (int64_t)len;
	p = blob_path(layout, d->digest);
	write_file(p, buf, len);
	free(p);
}

/* The uncompressed bytes of a layer file, hashed. */
static void diff_id_of(const char *path, char out[DIGEST_STR_MAX])
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	struct sha256 h;
	const void *buf;
	size_t len;
	la_int64_t off;

	archive_read_support_filter_all(a);
	archive_read_support_format_raw(a);
	assert_int_equal(archive_read_open_filename(a, path, 65536), ARCHIVE_OK);
	assert_int_equal(archive_read_next_header(a, &e), ARCHIVE_OK);
	sha256_init(&h);
	while (archive_read_data_block(a, &buf, &len, &off) == ARCHIVE_OK)
		sha256_update(&h, buf, len);
	assert_int_equal(sha256_final(&h, out, NULL), 0);
	archive_read_free(a);
}

/* Write a layer file (filter NULL, "gzip" or "zstd") and describe it. */
void make_layer(void **state, const char *name, const char *filter, const struct tent *v, size_t n,
		struct desc *d)
{
	char *path = at(state, "%s", name), *data;
	size_t len;

	tw_layer(path, filter, v, n);
	data = read_file(path, &len);
	assert_int_equal(sha256_buf(data, len, d->digest, NULL), 0);
	free(data);
	d->size = (int64_t)len;
	diff_id_of(path, d->diff_id);
	d->media_type = filter == NULL		      ? MT_LAYER_TAR
			: strcmp(filter, "gzip") == 0 ? MT_LAYER_GZIP
						      : MT_LAYER_ZSTD;
	snprintf(d->path, sizeof(d->path), "%s", path);
}

static void put_json(const char *layout, json_t *j, struct desc *d)
{
	char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);

	put_blob(layout, s, strlen(s), d);
	free(s);
	json_decref(j);
}

json_t *descriptor(const char *mt, const struct desc *d)
{
	return json_pack("{s:s,s:s,s:I}", "mediaType", mt, "digest", d->digest, "size",
			 (json_int_t)d->size);
}

/* Store layers, a config (config_obj: the "config" member, JSON text) and
 * a manifest in layout; *m describes the manifest, *cfg (may be NULL) the
 * config. */
void make_image(const char *layout, const char *arch, const char *config_obj, struct desc *layers,
		size_t n, struct desc *m, struct desc *cfg)
{
	json_t *ids = json_array(), *descs = json_array(), *config;
	json_error_t je;
	struct desc c;

	for (size_t i = 0; i < n; i++) {
		char *p = blob_path(layout, layers[i].digest), *data;
		size_t len;

		mkdirs(layout);
		data = read_file(layers[i].path, &len);
		write_file(p, data, len);
		free(data);
		free(p);
		json_array_append_new(ids, json_string(layers[i].diff_id));
		json_array_append_new(descs, descriptor(layers[i].media_type, &layers[i]));
	}
	config = json_loads(config_obj ? config_obj : "{}", 0, &je);
	assert_non_null(config);
	put_json(layout,
		 json_pack("{s:s,s:s,s:o,s:{s:s,s:o}}", "architecture", arch, "os", "linux",
			   "config", config, "rootfs", "type", "layers", "diff_ids", ids),
		 &c);
	put_json(layout,
		 json_pack("{s:i,s:s,s:o,s:o}", "schemaVersion", 2, "mediaType", OCI_MT_MANIFEST,
			   "config", descriptor(OCI_MT_CONFIG, &c), "layers", descs),
		 m);
	if (cfg)
		*cfg = c;
}

/* index.json listing manifests[i] for archs[i] (NULL: no platform). */
void write_index(const char *layout, const struct desc *manifests, const char *const *archs,
		 size_t n, const char *mt)
{
	json_t *list = json_array(), *ix;
	char *p, *s;

	mkdirs(layout);
	for (size_t i = 0; i < n; i++) {
		json_t *e = descriptor(mt ? mt : OCI_MT_MANIFEST, &manifests[i]);

		if (archs[i])
			json_object_set_new(
				e, "platform",
				json_pack("{s:s,s:s}", "os", "linux", "architecture", archs[i]));
		json_array_append_new(list, e);
	}
	ix = json_pack("{s:i,s:s,s:o}", "schemaVersion", 2, "mediaType", OCI_MT_INDEX, "manifests",
		       list);
	s = json_dumps(ix, JSON_COMPACT);
	xasprintf(&p, "%s/index.json", layout);
	write_file(p, s, strlen(s));
	free(p);
	free(s);
	json_decref(ix);
	xasprintf(&p, "%s/oci-layout", layout);
	write_file(p, "{\"imageLayoutVersion\":\"1.0.0\"}", 30);
	free(p);
}

void resolve_ok(const char *src, struct image *img)
{
	gantry_error_t err = NULL;

	if (image_resolve(src, img, &err) < 0)
		fail_msg("resolve `%s`: %s", src, gantry_error_str(err));
}

/* The one-line error of a failed resolve. */
char *resolve_fails(const char *src)
{
	gantry_error_t err = NULL;
	struct image img;
	char *msg;

	assert_int_equal(image_resolve(src, &img, &err), -1);
	msg = xstrdup(gantry_error_str(err));
	gantry_error_free(&err);
	if (strchr(msg, '\n'))
		fail_msg("error is not one line: %s", msg);
	return msg;
}

void assert_contains(const char *s, const char *want)
{
	assert_non_null(s);
	assert_non_null(want);
	if (strstr(s, want) == NULL)
		fail_msg("`%s` does not contain `%s`", s ? s : "", want ? want : "");
}

/* Nothing of a failed conversion stays in the cache. */
void assert_dir_clean(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			fail_msg("left in the cache: %s", e->d_name);
	closedir(d);
}

void assert_cache_clean(void **state)
{
	assert_dir_clean(((struct ctx *)*state)->cache);
}

char *cache_keyed_by(void **state, const char *digest)
{
	struct ctx *c = *state;
	const char *v;
	char *path, *r;
	json_t *j;

	xasprintf(&path, "%s/sha256-%s.json", c->cache, digest_hex(digest));
	j = json_load_file(path, 0, NULL);
	assert_non_null(j);
	v = json_string_value(json_object_get(j, "keyed_by"));
	r = v ? xstrdup(v) : NULL;
	json_decref(j);
	free(path);
	return r;
}

/* Read a file out of an image with the independent reader. */
char *image_file(const char *image, const char *path)
{
	struct rd r;
	struct rd_inode ino;
	char *buf;

	assert_int_equal(rd_open(&r, image), 0);
	if (rd_lookup(&r, path, &ino) < 0) {
		rd_close(&r);
		return NULL;
	}
	buf = xzalloc(ino.size + 1);
	assert_int_equal(rd_read(&r, &ino, 0, buf, ino.size), 0);
	rd_close(&r);
	return buf;
}
