/* Tests for the cache inventory (image/inventory.c: ls, rm, prune) and for
 * sandbox/images.c, which tells it which images the saved sandboxes hold:
 * two images converted from layouts, sandbox.json files written by hand in
 * the test's own $GANTRY_HOME. */
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
#include "image/inventory.h"
#include "image/source.h"
#include "sandbox/images.h"
#include "test_image_fixtures.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define REF_A "registry.example/team/a:1"

struct images {
	char a[DIGEST_STR_MAX], b[DIGEST_STR_MAX];
	char *layout_a; /* the reference a's layout is recorded under */
};

static int inv_setup(void **state)
{
	if (setup(state) < 0)
		return -1;
	setenv("GANTRY_HOME", at(state, "home"), 1);
	gantry_settings_load();
	return mkdir(at(state, "home"), 0700) == 0 ? 0 : -1;
}

static int inv_teardown(void **state)
{
	unsetenv("GANTRY_HOME");
	gantry_settings_load();
	return teardown(state);
}

static void one_image(void **state, const char *name, const char *data, char digest[])
{
	const struct tent files[] = {
		{ "etc/", 'd' },
		{ "etc/hostname", 'f', .data = data },
	};
	char *layout = at(state, "%s", name);
	struct desc m, layer;
	struct image img;

	char lname[64];

	snprintf(lname, sizeof(lname), "%s.layer.tar", name);
	make_layer(state, lname, NULL, files, ARRAY_SIZE(files), &layer);
	make_image(layout, "amd64", "{}", &layer, 1, &m, NULL);
	write_index(layout, &m, (const char *const[]){ "amd64" }, 1, NULL);
	resolve_ok(layout, &img);
	snprintf(digest, DIGEST_STR_MAX, "%s", img.digest);
	image_free(&img);
}

/* Images a and b, and a second reference to a. */
static void two_images(void **state, struct images *im)
{
	struct image_cache c;
	gantry_error_t err = NULL;

	one_image(state, "a", "a\n", im->a);
	one_image(state, "b", "b\n", im->b);
	im->layout_a = realpath(at(state, "a"), NULL);
	assert_non_null(im->layout_a);
	assert_int_equal(image_cache_open(&c, &err), 0);
	assert_int_equal(image_cache_ref_set(&c, REF_A, im->a, NULL, &err), 0);
	image_cache_close(&c);
}

static void sandbox_json(void **state, const char *name, const char *text)
{
	char *dir = at(state, "home/sandboxes/%s", name);

	mkdir(at(state, "home/sandboxes"), 0700);
	assert_int_equal(mkdir(dir, 0700), 0);
	if (text)
		write_file(at(state, "home/sandboxes/%s/sandbox.json", name), text, strlen(text));
}

static const struct image_use *find_use(const struct image_use *u, size_t n, const char *sandbox)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(u[i].sandbox, sandbox) == 0)
			return &u[i];
	return NULL;
}

static void test_ls_json(void **state)
{
	struct image_entry *e;
	struct image_cache c;
	struct images im;
	gantry_error_t err = NULL;
	json_t *a, *o, *refs;
	size_t n;

	two_images(state, &im);
	assert_int_equal(image_cache_open(&c, &err), 0);
	assert_int_equal(image_list(&c, &e, &n, &err), 0);
	image_cache_close(&c);
	assert_int_equal(n, 2);
	a = image_entries_json(e, n);
	assert_int_equal(json_array_size(a), 2);
	for (size_t i = 0; i < n; i++) {
		o = json_array_get(a, i);
		assert_string_equal(json_string_value(json_object_get(o, "digest")), e[i].digest);
		assert_string_equal(json_string_value(json_object_get(o, "keyed_by")),
				    CACHE_KEY_MANIFEST);
		assert_true(json_integer_value(json_object_get(o, "size")) > 0);
		assert_int_equal(json_integer_value(json_object_get(o, "size")),
				 (json_int_t)e[i].size);
		assert_non_null(json_string_value(json_object_get(o, "created")));
		assert_true(json_is_string(json_object_get(o, "source")));
		refs = json_object_get(o, "references");
		assert_int_equal(json_array_size(refs), e[i].nrefs);
		if (strcmp(e[i].digest, im.a) == 0) {
			/* Sorted: the registry-style reference, then the layout's path. */
			assert_int_equal(json_array_size(refs), 2);
			assert_string_equal(json_string_value(json_array_get(refs, 0)),
					    im.layout_a);
			assert_string_equal(json_string_value(json_array_get(refs, 1)), REF_A);
		}
	}
	json_decref(a);
	a = image_entries_json(NULL, 0);
	assert_int_equal(json_array_size(a), 0);
	json_decref(a);
	image_entries_free(e, n);
	free(im.layout_a);
}

static void test_in_use(void **state)
{
	struct image_use *u;
	struct images im;
	gantry_error_t err = NULL;
	char *text;
	size_t n;

	/* No sandboxes directory at all. */
	assert_int_equal(sandbox_images_in_use(&u, &n, &err), 0);
	assert_int_equal(n, 0);
	sandbox_images_free(u, n);

	two_images(state, &im);
	/* Only the digest counts: a hand-written file with nothing else. */
	xasprintf(&text, "{\"name\":\"keep\",\"image_digest\":\"%s\"}", im.a);
	sandbox_json(state, "keep", text);
	free(text);
	xasprintf(&text, "{\"image_digest\":\"%s\",\"state\":\"stopped\"}", im.b);
	sandbox_json(state, ".dev", text);
	sandbox_json(state, "~deleting", text); /* not a sandbox name: being deleted */
	free(text);
	sandbox_json(state, "creating", NULL);
	sandbox_json(state, "prebuilt", "{\"image_digest\":null,\"image_path\":\"/x.erofs\"}");
	sandbox_json(state, "odd", "{\"image_digest\":\"sha256:1234\"}");

	assert_int_equal(sandbox_images_in_use(&u, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(find_use(u, n, "keep")->digest, im.a);
	assert_string_equal(find_use(u, n, ".dev")->digest, im.b);
	sandbox_images_free(u, n);

	/* One that cannot be read stops the lot, naming it. */
	sandbox_json(state, "broken", "{\"image_digest\":");
	assert_int_equal(sandbox_images_in_use(&u, &n, &err), -1);
	assert_null(u);
	assert_int_equal(n, 0);
	assert_contains(gantry_error_str(err), "sandbox `broken` is broken: ");
	assert_contains(gantry_error_str(err), "invalid JSON");
	gantry_error_free(&err);
	unlink(at(state, "home/sandboxes/broken/sandbox.json"));
	sandbox_json(state, "wrong-type", "{\"image_digest\":7}");
	assert_int_equal(sandbox_images_in_use(&u, &n, &err), -1);
	assert_contains(gantry_error_str(err), "sandbox `wrong-type` is broken: ");
	assert_contains(gantry_error_str(err), "`image_digest` is not a string");
	gantry_error_free(&err);
	free(im.layout_a);
}

static void test_rm_and_prune(void **state)
{
	struct image_use uses[1];
	struct image_entry *e;
	struct image_cache c;
	struct images im;
	gantry_error_t err = NULL;
	char *digest, *want;
	uint64_t freed;
	size_t removed, n;

	two_images(state, &im);
	uses[0] = (struct image_use){ .digest = im.a, .sandbox = (char *)"keep" };
	assert_int_equal(image_cache_open(&c, &err), 0);

	/* A reference that is not the last one goes, whoever uses the image. */
	assert_int_equal(image_remove(&c, REF_A, uses, 1, &digest, &err), 0);
	assert_null(digest);
	/* The last one, and the digest itself, are refused. */
	xasprintf(&want, "image %s is used by sandbox `keep`", im.a);
	assert_int_equal(image_remove(&c, im.layout_a, uses, 1, &digest, &err), -1);
	assert_string_equal(gantry_error_str(err), want);
	gantry_error_free(&err);
	assert_int_equal(image_remove(&c, digest_hex(im.a), uses, 1, &digest, &err), -1);
	assert_string_equal(gantry_error_str(err), want);
	gantry_error_free(&err);
	free(want);

	/* prune keeps it, and removes b. */
	assert_int_equal(image_prune(&c, uses, 1, &removed, &freed, &err), 0);
	assert_int_equal(removed, 1);
	assert_true(freed > 0);
	assert_int_equal(image_list(&c, &e, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(e[0].digest, im.a);
	assert_int_equal(e[0].nrefs, 1);
	image_entries_free(e, n);

	/* Nobody uses it any more. */
	assert_int_equal(image_remove(&c, im.layout_a, NULL, 0, &digest, &err), 0);
	assert_string_equal(digest, im.a);
	free(digest);
	assert_int_equal(image_prune(&c, NULL, 0, &removed, &freed, &err), 0);
	assert_int_equal(removed, 0);
	assert_int_equal(image_list(&c, &e, &n, &err), 0);
	assert_int_equal(n, 0);
	image_entries_free(e, n);
	image_cache_close(&c);
	free(im.layout_a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ls_json, inv_setup, inv_teardown),
		cmocka_unit_test_setup_teardown(test_in_use, inv_setup, inv_teardown),
		cmocka_unit_test_setup_teardown(test_rm_and_prune, inv_setup, inv_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
