/* Tests for image_resolve on OCI layouts and prebuilt images (image/source.c
 * and what it drives: layout.c, flatten.c, cache.c): conversion, the cache,
 * blob verification, platform choice, concurrent conversions, and the
 * default image from images/default/build.sh where Debian's busybox-static
 * is installed. Every converted image is read back with the independent
 * reader and fsck.erofs; the cache lives in the test's own directory. */
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/json.h"
#include "common/util.h"
#include "erofs/layers.h"
#include "erofs/reader.h"
#include "image/cache.h"
#include "image/digest.h"
#include "image/layout.h"
#include "image/manifest.h"
#include "image/source.h"
#include "skip.h"
#include "test_image_fixtures.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

static const struct tent base_layer[] = {
	{ "etc/", 'd' },
	{ "etc/passwd", 'f', .data = "root:x:0:0:root:/root:/bin/sh\n" },
	{ "etc/group", 'f', .data = "root:x:0:\n" },
	{ "bin/", 'd' },
	{ "bin/tool", 'f', 0755, .data = "#!/bin/sh\necho tool\n" },
	{ "gone", 'f', .data = "removed by the next layer" },
	{ "tmp/", 'd', 01777 },
};
static const struct tent top_layer[] = {
	{ "etc/passwd.real", 'f',
	  .data = "root:x:0:0:root:/root:/bin/sh\n"
		  "app:x:1234:2345:app:/home/app:/bin/sh\n" },
	{ "etc/passwd", 'l', .data = "passwd.real" },
	{ "etc/group", 'f', .data = "root:x:0:\napp:x:2345:\nextra:x:77:app\n" },
	{ "home/", 'd' },
	{ "home/app/", 'd', 0700, 1234, 2345 },
	{ ".wh.gone", 'f' },
	{ "bin/link", 'h', .data = "bin/tool" },
};

/* A two-layer image (gzip then zstd) in its own layout. */
static char *basic_layout(void **state, struct desc *m, struct desc *layers, struct desc *cfg)
{
	char *layout = at(state, "layout");

	make_layer(state, "l1.tar.gz", "gzip", base_layer, ARRAY_SIZE(base_layer), &layers[0]);
	make_layer(state, "l2.tar.zst", "zstd", top_layer, ARRAY_SIZE(top_layer), &layers[1]);
	make_image(layout, "amd64",
		   "{\"Env\":[\"PATH=/bin\",\"LANG=C\"],\"Entrypoint\":[\"/bin/tool\"],"
		   "\"Cmd\":[\"--help\"],\"User\":\"app\",\"WorkingDir\":\"/home/app\"}",
		   layers, 2, m, cfg);
	write_index(layout, m, (const char *const[]){ "amd64" }, 1, NULL);
	return layout;
}

static void test_layout_converts(void **state)
{
	static const struct tent want[] = {
		{ "etc/passwd", 'l', .data = "passwd.real" },
		{ "etc/group", 'f', .data = "root:x:0:\napp:x:2345:\nextra:x:77:app\n" },
		{ "bin/tool", 'f', 0755, .data = "#!/bin/sh\necho tool\n" },
		{ "bin/link", 'f', 0755, .data = "#!/bin/sh\necho tool\n", .same_as = "bin/tool" },
		{ "home/app", 'd', 0700, 1234, 2345 },
		{ "tmp", 'd', 01777 },
	};
	struct desc m, layers[2];
	struct image img;
	struct image_user u;
	gantry_error_t err = NULL;
	char *layout = basic_layout(state, &m, layers, NULL), *cached, **argv, *gone;
	size_t argc;

	resolve_ok(layout, &img);
	assert_true(img.converted);
	assert_string_equal(img.digest, m.digest);
	assert_string_equal(img.source, layout);
	xasprintf(&cached, "%s/sha256-%s.erofs", ((struct ctx *)*state)->cache,
		  digest_hex(m.digest));
	assert_string_equal(img.path, cached);
	free(cached);

	/* Config fields, and User resolved against the image's own files. */
	assert_non_null(img.config);
	assert_int_equal(img.config->nenv, 2);
	assert_string_equal(img.config->env[1], "LANG=C");
	assert_string_equal(img.config->working_dir, "/home/app");
	argc = image_config_argv(img.config, NULL, 0, &argv);
	assert_int_equal(argc, 2);
	assert_string_equal(argv[0], "/bin/tool");
	assert_string_equal(argv[1], "--help");
	strv_free(argv);
	assert_int_equal(image_config_user(img.config, NULL, &u, &err), 0);
	assert_int_equal(u.uid, 1234);
	assert_int_equal(u.gid, 2345);
	assert_string_equal(u.home, "/home/app");
	assert_int_equal(u.ngroups, 1);
	assert_int_equal(u.groups[0], 77);
	image_user_free(&u);
	assert_int_equal(image_config_user(img.config, "nobody", &u, &err), -1);
	assert_string_equal(gantry_error_str(err), "user `nobody`: not in the image's /etc/passwd");
	gantry_error_free(&err);

	gone = image_file(img.path, "gone");
	assert_null(gone);
	if (!check_image(img.path, at(state, "x"), want, ARRAY_SIZE(want), 0))
		print_message("note: checked with the reader only\n");
	image_free(&img);
}

static void test_cache_hit(void **state)
{
	struct ctx *c = *state;
	struct desc m, layers[2];
	struct image a, b;
	struct stat s1, s2;
	char *layout = basic_layout(state, &m, layers, NULL), *index, *blob, *meta, *msg, *kind;
	struct image_cache ic = { .dir = c->cache };
	struct cache_lock lk = { 0 };
	gantry_error_t err = NULL;
	char digest[DIGEST_STR_MAX];
	json_t *j;
	json_error_t je;

	resolve_ok(layout, &a);
	assert_true(a.converted);
	assert_int_equal(stat(a.path, &s1), 0);
	resolve_ok(layout, &b);
	assert_false(b.converted);
	assert_int_equal(stat(b.path, &s2), 0);
	assert_int_equal(s1.st_ino, s2.st_ino); /* not rebuilt */
	assert_int_equal(s1.st_mtim.tv_nsec, s2.st_mtim.tv_nsec);
	assert_string_equal(b.config->user, "app");
	assert_non_null(b.config->passwd);
	assert_string_equal(a.config->passwd, b.config->passwd);
	image_free(&b);

	/* An entry recorded as another kind of digest (one blob that would be
	 * both a config and a manifest) is refused, not rebuilt. */
	kind = cache_keyed_by(state, m.digest);
	assert_string_equal(kind, "manifest");
	free(kind);
	xasprintf(&meta, "%s/sha256-%s.json", c->cache, digest_hex(m.digest));
	j = json_load_file(meta, 0, &je);
	assert_non_null(j);
	json_object_set_new(j, "keyed_by", json_string("config"));
	assert_int_equal(json_dump_file(j, meta, JSON_COMPACT), 0);
	msg = resolve_fails(layout);
	assert_contains(msg, "is cached as the digest of a config, not a manifest");
	free(msg);
	assert_int_equal(stat(a.path, &s2), 0);
	assert_int_equal(s1.st_ino, s2.st_ino);

	/* An entry from before kinds were recorded: the layout's manifest is
	 * read once, and the entry learns its digest is a manifest's. */
	assert_int_equal(json_object_del(j, "keyed_by"), 0);
	assert_int_equal(json_dump_file(j, meta, JSON_COMPACT), 0);
	json_decref(j);
	/* Not while the digest's lock is held (`image rm` removes an entry
	 * under it): the lookup hits, the metadata is left as it was. */
	assert_int_equal(image_cache_lock_digest(&ic, m.digest, true, &lk, &err), 0);
	resolve_ok(layout, &b);
	assert_false(b.converted);
	image_free(&b);
	assert_null(cache_keyed_by(state, m.digest));
	image_cache_unlock(&lk);
	resolve_ok(layout, &b);
	assert_false(b.converted);
	image_free(&b);
	resolve_ok(layout, &b); /* from the rewritten metadata */
	assert_string_equal(b.config->user, "app");
	assert_string_equal(b.config->passwd, a.config->passwd);
	image_free(&b);
	kind = cache_keyed_by(state, m.digest);
	assert_string_equal(kind, "manifest");
	free(kind);
	free(meta);

	/* A hit needs index.json alone: the digest it names is the cache key,
	 * so no blob is read (nor hashed) any more. */
	assert_int_equal(layout_peek(layout, OCI_HOST_ARCH, digest), 1);
	assert_string_equal(digest, m.digest);
	xasprintf(&blob, "%s/blobs/sha256/%s", layout, digest_hex(m.digest));
	assert_int_equal(unlink(blob), 0);
	free(blob);
	resolve_ok(layout, &b);
	assert_false(b.converted);
	assert_string_equal(b.digest, m.digest);

	/* index.json maps the layout to the digest. */
	xasprintf(&index, "%s/index.json", c->cache);
	j = json_load_file(index, 0, &je);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(
				    json_object_get(json_object_get(j, "refs"), layout), "digest")),
			    m.digest);
	json_decref(j);
	free(index);
	image_free(&a);
	image_free(&b);
}

/* A killed conversion's temporary file is swept, and metadata that does
 * not read back is a miss that converts again. */
static void test_cache_repairs(void **state)
{
	struct ctx *c = *state;
	struct desc m, layers[2];
	char *layout = basic_layout(state, &m, layers, NULL), *stale, *meta;
	struct image img;

	mkdir(c->cache, 0700);
	xasprintf(&stale, "%s/sha256-%s.erofs.tmp-AbCdEf", c->cache, digest_hex(m.digest));
	write_file(stale, "half an image", 13);
	resolve_ok(layout, &img);
	assert_true(img.converted);
	assert_int_equal(access(stale, F_OK), -1);
	image_free(&img);

	xasprintf(&meta, "%s/sha256-%s.json", c->cache, digest_hex(m.digest));
	write_file(meta, "{\"digest\":", 11);
	resolve_ok(layout, &img);
	assert_true(img.converted);
	assert_string_equal(img.config->user, "app");
	image_free(&img);
	resolve_ok(layout, &img);
	assert_false(img.converted);
	image_free(&img);
	free(stale);
	free(meta);
}

/* A Latin-1 GECOS field in /etc/passwd: the file still resolves users
 * after it went through the cache's JSON. */
static void test_passwd_not_utf8(void **state)
{
	static const struct tent layer[] = {
		{ "etc/", 'd' },
		{ "etc/passwd", 'f',
		  .data = "root:x:0:0::/root:/bin/sh\nrene:x:7:8:Ren\xe9:/h:/bin/sh\n" },
	};
	struct desc m, l;
	char *layout = at(state, "layout");
	struct image img;
	struct image_user u;
	gantry_error_t err = NULL;

	make_layer(state, "l.tar", NULL, layer, ARRAY_SIZE(layer), &l);
	make_image(layout, "amd64", NULL, &l, 1, &m, NULL);
	write_index(layout, &m, (const char *const[]){ "amd64" }, 1, NULL);
	for (int i = 0; i < 2; i++) {
		resolve_ok(layout, &img);
		assert_int_equal(img.converted, i == 0);
		assert_int_equal(image_config_user(img.config, "rene", &u, &err), 0);
		assert_int_equal(u.uid, 7);
		assert_int_equal(u.gid, 8);
		image_user_free(&u);
		image_free(&img);
	}
}

/* Flip one byte of a blob, keeping its size. */
static void corrupt(const char *layout, const char *digest)
{
	char *p = blob_path(layout, digest), *data;
	size_t len;

	data = read_file(p, &len);
	data[len / 2] ^= 0x20;
	write_file(p, data, len);
	free(data);
	free(p);
}

static void test_layer_digest_mismatch(void **state)
{
	struct desc m, layers[2];
	char *layout = basic_layout(state, &m, layers, NULL), *msg, *want;

	corrupt(layout, layers[1].digest);
	msg = resolve_fails(layout);
	xasprintf(&want,
		  "layer %s: content does not match its digest (got sha256:", layers[1].digest);
	assert_contains(msg, want);
	free(want);
	free(msg);
	assert_cache_clean(state);
}

static void test_config_digest_mismatch(void **state)
{
	struct desc m, layers[2], cfg;
	char *layout = basic_layout(state, &m, layers, &cfg), *msg, *want;

	corrupt(layout, cfg.digest);
	msg = resolve_fails(layout);
	xasprintf(&want, "config %s: content does not match its digest", cfg.digest);
	assert_contains(msg, want);
	free(want);
	free(msg);
	assert_cache_clean(state);
}

static void test_manifest_digest_mismatch(void **state)
{
	struct desc m, layers[2];
	char *layout = basic_layout(state, &m, layers, NULL), *msg, *want;

	corrupt(layout, m.digest);
	msg = resolve_fails(layout);
	xasprintf(&want, "manifest %s: content does not match its digest", m.digest);
	assert_contains(msg, want);
	free(want);
	free(msg);
	assert_cache_clean(state);
}

/* A blob that is no file (a FIFO would block for good, a link to
 * /dev/zero never end): refused at once, the cache as it was. */
static void test_blob_not_a_file(void **state)
{
	struct desc m, layers[2];
	char *layout = basic_layout(state, &m, layers, NULL), *msg, *p;

	p = blob_path(layout, layers[0].digest);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(mkfifo(p, 0600), 0);
	msg = resolve_fails(layout);
	assert_contains(msg, "is not a file");
	free(msg);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(symlink("/dev/zero", p), 0);
	msg = resolve_fails(layout);
	assert_contains(msg, "is not a file");
	free(msg);
	free(p);
	assert_cache_clean(state);
}

static void test_size_mismatch(void **state)
{
	struct desc m, layers[2];
	char *layout = at(state, "layout"), *msg, *p;

	make_layer(state, "l1.tar.gz", "gzip", base_layer, ARRAY_SIZE(base_layer), &layers[0]);
	layers[0].size -= 10; /* the blob is longer than its descriptor says */
	make_image(layout, "amd64", NULL, layers, 1, &m, NULL);
	write_index(layout, &m, (const char *const[]){ NULL }, 1, NULL);
	msg = resolve_fails(layout);
	xasprintf(&p, "layer %s: more than the %lld bytes its descriptor says", layers[0].digest,
		  (long long)layers[0].size);
	assert_contains(msg, p);
	free(p);
	free(msg);
	assert_cache_clean(state);
}

static void test_diff_id_mismatch(void **state)
{
	struct desc m, layers[2];
	char *layout = at(state, "layout"), *msg;

	make_layer(state, "l1.tar.gz", "gzip", base_layer, ARRAY_SIZE(base_layer), &layers[0]);
	make_layer(state, "l2.tar", NULL, top_layer, ARRAY_SIZE(top_layer), &layers[1]);
	snprintf(layers[0].diff_id, sizeof(layers[0].diff_id), "%s", layers[1].diff_id);
	make_image(layout, "amd64", NULL, layers, 2, &m, NULL);
	write_index(layout, &m, (const char *const[]){ "amd64" }, 1, NULL);
	msg = resolve_fails(layout);
	assert_contains(msg, "uncompressed content does not match diff_id");
	assert_contains(msg, layers[0].digest);
	free(msg);
	assert_cache_clean(state);
}

/* A truncated gzip stream whose descriptor matches what is left: the
 * decompressor, not the digest, must catch it. */
static void truncated(void **state, size_t cut, const char *name)
{
	struct tent big[] = { { "data", 'f' } };
	struct desc m, layer;
	char *layout = at(state, "%s", name), *data, *payload = xmalloc(300000), *msg;
	size_t len;

	uint64_t x = 88172645463325252ull;

	for (size_t i = 0; i + 1 < 300000; i++) { /* letters gzip cannot squeeze much */
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		payload[i] = (char)('a' + x % 26);
	}
	payload[299999] = '\0';
	big[0].data = payload;
	make_layer(state, "big.tar.gz", "gzip", big, 1, &layer);
	free(payload);
	data = read_file(layer.path, &len);
	assert_true(len > cut);
	len = cut ? cut : len - 4; /* 0: drop the end of the gzip trailer only */
	write_file(layer.path, data, len);
	free(data);
	data = read_file(layer.path, &len);
	assert_int_equal(sha256_buf(data, len, layer.digest, NULL), 0);
	layer.size = (int64_t)len;
	free(data);
	make_image(layout, "amd64", NULL, &layer, 1, &m, NULL);
	write_index(layout, &m, (const char *const[]){ "amd64" }, 1, NULL);
	msg = resolve_fails(layout);
	assert_contains(msg, layer.digest);
	free(msg);
	assert_cache_clean(state);
}

static void test_truncated_gzip(void **state)
{
	truncated(state, 2000, "cut-in-data");
	truncated(state, 0, "cut-in-trailer");
}

static void test_multi_platform_index(void **state)
{
	static const struct tent arm[] = { { "arch", 'f', .data = "arm64" } };
	static const struct tent x86[] = { { "arch", 'f', .data = "amd64" } };
	static const struct tent s390[] = { { "arch", 'f', .data = "s390x" } };
	struct desc ms[3], la[3], nested;
	char *layout = at(state, "layout"), *arch, *s, digest[DIGEST_STR_MAX];
	struct image img;
	json_t *list = json_array(), *ix;

	make_layer(state, "arm.tar", NULL, arm, 1, &la[0]);
	make_layer(state, "x86.tar.gz", "gzip", x86, 1, &la[1]);
	make_layer(state, "s390.tar", NULL, s390, 1, &la[2]);
	make_image(layout, "arm64", NULL, &la[0], 1, &ms[0], NULL);
	make_image(layout, "amd64", NULL, &la[1], 1, &ms[1], NULL);
	make_image(layout, "s390x", NULL, &la[2], 1, &ms[2], NULL);
	write_index(layout, ms, (const char *const[]){ "arm64", "amd64", "s390x" }, 3, NULL);
	resolve_ok(layout, &img);
	assert_string_equal(img.digest, ms[1].digest);
	arch = image_file(img.path, "arch");
	assert_string_equal(arch, "amd64");
	free(arch);
	image_free(&img);

	/* A nested index: index.json -> index blob -> platform manifest. */
	layout = at(state, "nested");
	for (size_t i = 0; i < 3; i++) {
		static const char *const archs[] = { "arm64", "amd64", "s390x" };
		json_t *e;

		make_image(layout, archs[i], NULL, &la[i], 1, &ms[i], NULL);
		e = descriptor(OCI_MT_MANIFEST, &ms[i]);
		json_object_set_new(
			e, "platform",
			json_pack("{s:s,s:s}", "os", "linux", "architecture", archs[i]));
		json_array_append_new(list, e);
	}
	ix = json_pack("{s:i,s:s,s:o}", "schemaVersion", 2, "mediaType", OCI_MT_INDEX, "manifests",
		       list);
	s = json_dumps(ix, JSON_COMPACT);
	put_blob(layout, s, strlen(s), &nested);
	free(s);
	json_decref(ix);
	write_index(layout, &nested, (const char *const[]){ NULL }, 1, OCI_MT_INDEX);
	/* index.json alone does not name the platform manifest here. */
	assert_int_equal(layout_peek(layout, OCI_HOST_ARCH, digest), 0);
	resolve_ok(layout, &img);
	assert_string_equal(img.digest, ms[1].digest);
	arch = image_file(img.path, "arch");
	assert_string_equal(arch, "amd64");
	free(arch);
	assert_false(img.converted); /* the same platform manifest: already cached */
	image_free(&img);
}

static void test_no_platform_match(void **state)
{
	static const struct tent arm[] = { { "arch", 'f', .data = "arm64" } };
	struct desc ms[2], la;
	char *layout = at(state, "layout"), *msg;

	make_layer(state, "arm.tar", NULL, arm, 1, &la);
	make_image(layout, "arm64", NULL, &la, 1, &ms[0], NULL);
	make_image(layout, "arm64", "{\"Cmd\":[\"x\"]}", &la, 1, &ms[1], NULL);
	write_index(layout, ms, (const char *const[]){ "arm64", "riscv64" }, 2, NULL);
	msg = resolve_fails(layout);
	assert_contains(msg, "no image for linux/amd64 (the index has linux/arm64, linux/riscv64)");
	free(msg);
	assert_cache_clean(state);
}

static void test_prebuilt_erofs(void **state)
{
	struct desc m, layers[2];
	char *layout = basic_layout(state, &m, layers, NULL), *copy = at(state, "img.erofs");
	char *bad = at(state, "bad.erofs"), *data, *msg;
	struct image img;
	size_t len;

	resolve_ok(layout, &img);
	data = read_file(img.path, &len);
	image_free(&img);
	write_file(copy, data, len);
	free(data);
	resolve_ok(copy, &img);
	assert_string_equal(img.path, copy);
	assert_null(img.config);
	assert_null(img.digest);
	assert_false(img.converted);
	image_free(&img);

	write_file(bad, "not an image", 12);
	msg = resolve_fails(bad);
	assert_contains(msg, "is not an EROFS image");
	free(msg);
	msg = resolve_fails(at(state, "missing"));
	assert_contains(msg, "no such file or directory");
	free(msg);
	mkdir(at(state, "plain-dir"), 0755);
	msg = resolve_fails(at(state, "plain-dir"));
	assert_contains(msg, "without an oci-layout file");
	free(msg);
}

/* Conversions of one digest in several processes at once: one builds, the
 * others wait for it and find it in the cache. */
static void test_concurrent_resolve(void **state)
{
	enum { N = 4 };
	struct desc m, layers[2];
	char *layout = basic_layout(state, &m, layers, NULL);
	int fds[2], built = 0, hits = 0;
	pid_t pids[N];

	assert_int_equal(pipe(fds), 0);
	for (int i = 0; i < N; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			gantry_error_t err = NULL;
			struct image img;
			char r = 'e';

			if (image_resolve(layout, &img, &err) == 0)
				r = img.converted ? 'b' : 'h';
			if (write(fds[1], &r, 1) != 1)
				_exit(2);
			_exit(0);
		}
	}
	close(fds[1]);
	for (int i = 0; i < N; i++) {
		char r;
		int st;

		assert_int_equal(read(fds[0], &r, 1), 1);
		built += r == 'b';
		hits += r == 'h';
		assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
	}
	close(fds[0]);
	assert_int_equal(built, 1);
	assert_int_equal(hits, N - 1);
}

/* images/default/build.sh: deterministic, and the image it makes works. */
static void test_default_image(void **state)
{
	const char *script = getenv("GANTRY_DEFAULT_IMAGE_SCRIPT");
	char *a = at(state, "default-a"), *b = at(state, "default-b"), *ia, *ib, *sh;
	struct image img;
	struct image_user u;
	gantry_error_t err = NULL;
	char **argv;
	struct rd r;
	struct rd_inode ino;

	if (script == NULL || access("/bin/busybox", X_OK) != 0) {
		skip_because("needs GANTRY_DEFAULT_IMAGE_SCRIPT and /bin/busybox (busybox-static)");
	}
	{
		const char *argv_a[] = { "sh", "-c", "\"$0\" \"$1\" >/dev/null", script, a, NULL };
		const char *argv_b[] = { "sh", "-c", "\"$0\" \"$1\" >/dev/null", script, b, NULL };

		assert_int_equal(run(argv_a), 0);
		assert_int_equal(run(argv_b), 0);
	}
	xasprintf(&ia, "%s/index.json", a);
	xasprintf(&ib, "%s/index.json", b);
	{
		char *da = read_file(ia, NULL), *db = read_file(ib, NULL);

		assert_string_equal(da, db); /* same manifest digest: same bytes */
		free(da);
		free(db);
	}
	free(ia);
	free(ib);

	resolve_ok(a, &img);
	assert_int_equal(rd_open(&r, img.path), 0);
	assert_int_equal(rd_lookup(&r, "bin/sh", &ino), 0);
	assert_int_equal(ino.mode & S_IFMT, S_IFLNK);
	assert_int_equal(rd_lookup(&r, "bin/busybox", &ino), 0);
	assert_int_equal(ino.mode & S_IFMT, S_IFREG);
	assert_int_equal(rd_lookup(&r, "tmp", &ino), 0);
	assert_int_equal(ino.mode & 07777, 01777);
	assert_int_equal(rd_lookup(&r, "home/gantry", &ino), 0);
	assert_int_equal(ino.uid, 1000);
	assert_int_equal(ino.gid, 1000);
	rd_close(&r);
	sh = image_file(img.path, "etc/passwd");
	assert_contains(sh, "gantry:x:1000:1000:");
	free(sh);
	assert_int_equal(image_config_user(img.config, "gantry", &u, &err), 0);
	assert_int_equal(u.uid, 1000);
	assert_int_equal(u.gid, 1000);
	assert_string_equal(u.home, "/home/gantry");
	image_user_free(&u);
	assert_int_equal(image_config_argv(img.config, NULL, 0, &argv), 1);
	assert_string_equal(argv[0], "/bin/sh");
	strv_free(argv);
	assert_string_equal(img.config->env[0],
			    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	if (have_fsck()) {
		const char *fsck[] = { "fsck.erofs", img.path, NULL };

		assert_int_equal(run(fsck), 0);
	}
	image_free(&img);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_layout_converts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_hit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_repairs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_passwd_not_utf8, setup, teardown),
		cmocka_unit_test_setup_teardown(test_layer_digest_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_digest_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_manifest_digest_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_blob_not_a_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_size_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_diff_id_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncated_gzip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_multi_platform_index, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_platform_match, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prebuilt_erofs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_resolve, setup, teardown),
		cmocka_unit_test_setup_teardown(test_default_image, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
