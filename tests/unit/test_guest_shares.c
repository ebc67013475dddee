/* Unit tests for gantry-init's host directory shares (guest/shares.c and
 * spec.c's binds), run on the host: the base64url decoder on RFC 4648's
 * vectors and on what it must refuse, the gantry.share= parser on good and
 * bad tags, modes and paths, the 64-share bound, and the binds config.json
 * gets, after every other mount. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/files.h"
#include "common/util.h"
#include "guest/guest.h"
#include "guest/shares.h"

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* The encoder the host would use, to make long and odd paths. */
static char *encode(const char *in, size_t len)
{
	char *out = xmalloc(len / 3 * 4 + 5), *o = out;
	size_t i;

	for (i = 0; i + 3 <= len; i += 3) {
		uint32_t v = (uint32_t)(uint8_t)in[i] << 16 | (uint32_t)(uint8_t)in[i + 1] << 8 |
			     (uint8_t)in[i + 2];

		*o++ = b64url[v >> 18];
		*o++ = b64url[v >> 12 & 63];
		*o++ = b64url[v >> 6 & 63];
		*o++ = b64url[v & 63];
	}
	if (len - i == 1) {
		*o++ = b64url[(uint8_t)in[i] >> 2];
		*o++ = b64url[((uint8_t)in[i] & 3) << 4];
	} else if (len - i == 2) {
		uint32_t v = (uint32_t)(uint8_t)in[i] << 8 | (uint8_t)in[i + 1];

		*o++ = b64url[v >> 10];
		*o++ = b64url[v >> 4 & 63];
		*o++ = b64url[(v & 15) << 2];
	}
	*o = '\0';
	return out;
}

static void test_decode_vectors(void **state)
{
	static const char *const vec[][2] = {
		{ "", "" },
		{ "Zg", "f" },
		{ "Zm8", "fo" },
		{ "Zm9v", "foo" },
		{ "Zm9vYg", "foob" },
		{ "Zm9vYmE", "fooba" },
		{ "Zm9vYmFy", "foobar" },
	};
	char out[16];

	(void)state;
	for (size_t i = 0; i < sizeof(vec) / sizeof(vec[0]); i++) {
		assert_int_equal(
			shares_b64url_decode(vec[i][0], strlen(vec[i][0]), out, sizeof(out)),
			(long)strlen(vec[i][1]));
		assert_string_equal(out, vec[i][1]);
	}
	/* The URL alphabet's two: 62 and 63. */
	assert_int_equal(shares_b64url_decode("-_8", 3, out, sizeof(out)), 2);
	assert_int_equal((uint8_t)out[0], 0xfb);
	assert_int_equal((uint8_t)out[1], 0xff);
	/* Every byte value survives the round trip. */
	for (int b = 0; b < 256; b++) {
		char in[3] = { (char)b, (char)(255 - b), (char)(b * 7) };
		char *e;

		for (size_t len = 1; len <= 3; len++) {
			e = encode(in, len);
			assert_int_equal(shares_b64url_decode(e, strlen(e), out, sizeof(out)),
					 (long)len);
			assert_memory_equal(out, in, len);
			free(e);
		}
	}
}

static void test_decode_rejects(void **state)
{
	static const char *const bad[] = {
		"Z",	   /* 6 bits: no whole byte */
		"Zm9vY",   /* the same, after a group */
		"Zh",	   /* stray low bits: a second spelling of "f" */
		"Zm9",	   /* likewise of "fo" */
		"Zg==",	   /* padding */
		"Zm+v",	   /* the standard alphabet, not the URL one */
		"Zm/v",	   /* its other one */
		"Zm9v Yg", /* whitespace */
		"Zm9v\x80g",
	};
	char out[16];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(shares_b64url_decode(bad[i], strlen(bad[i]), out, sizeof(out)),
				 -1);
	/* Room for the bytes but not the NUL. */
	assert_int_equal(shares_b64url_decode("Zm9v", 4, out, 3), -1);
	assert_int_equal(shares_b64url_decode("Zm9v", 4, out, 4), 3);
}

static void test_parse_good(void **state)
{
	char why[SHARE_WHY_MAX] = "";
	struct share s;
	char tag[SHARE_TAG_MAX + 1], value[128];

	(void)state;
	assert_int_equal(shares_parse("src:rw:L3dvcmtzcGFjZQ", &s, why), 0);
	assert_string_equal(s.tag, "src");
	assert_false(s.ro);
	assert_string_equal(s.path, "/workspace");
	free(s.path);

	/* The longest tag, every kind of character in it, a read-only mode. */
	memset(tag, 'a', SHARE_TAG_MAX);
	memcpy(tag, "Az09._-...", 10);
	tag[SHARE_TAG_MAX] = '\0';
	snprintf(value, sizeof(value), "%s:ro:L3Zhci9kYXRh", tag);
	assert_int_equal(shares_parse(value, &s, why), 0);
	assert_string_equal(s.tag, tag);
	assert_true(s.ro);
	assert_string_equal(s.path, "/var/data");
	free(s.path);

	/* ".." inside a name is no component; "." and "//" are left to crun. */
	assert_int_equal(shares_parse("t:rw:L2EvLi5iLy4vYy8vZC8", &s, why), 0);
	assert_string_equal(s.path, "/a/..b/./c//d/");
	free(s.path);
}

static void expect_bad(const char *value, const char *why_has)
{
	char why[SHARE_WHY_MAX] = "";
	struct share s = { .path = NULL };

	if (shares_parse(value, &s, why) != -1)
		fail_msg("accepted `%s`", value);
	if (strstr(why, why_has) == NULL)
		fail_msg("`%s`: said `%s`, wanted `%s`", value, why, why_has);
	assert_null(s.path);
}

/* The container path's bytes, encoded, after TAG:MODE:. */
static void expect_bad_path(const char *path, size_t len, const char *why_has)
{
	char *e = encode(path, len), *value = xmalloc(strlen(e) + 8);

	sprintf(value, "t:ro:%s", e);
	expect_bad(value, why_has);
	free(value);
	free(e);
}

static void test_parse_rejects(void **state)
{
	char value[64];

	(void)state;
	expect_bad("", "tag");
	expect_bad(":rw:L3dvcmtzcGFjZQ", "tag");
	expect_bad(".:rw:L3dvcmtzcGFjZQ", "tag");
	expect_bad("..:rw:L3dvcmtzcGFjZQ", "tag");
	expect_bad("a/b:rw:L3dvcmtzcGFjZQ", "tag");
	expect_bad("a+b:rw:L3dvcmtzcGFjZQ", "tag");
	memset(value, 'a', SHARE_TAG_MAX + 1);
	snprintf(value + SHARE_TAG_MAX + 1, sizeof(value) - SHARE_TAG_MAX - 1, ":rw:L3c");
	expect_bad(value, "tag");

	expect_bad("src", "TAG:MODE:PATH");
	expect_bad("src:rw", "TAG:MODE:PATH");
	expect_bad("src::L3dvcmtzcGFjZQ", "mode");
	expect_bad("src:r:L3dvcmtzcGFjZQ", "mode");
	expect_bad("src:RO:L3dvcmtzcGFjZQ", "mode");
	expect_bad("src:rwx:L3dvcmtzcGFjZQ", "mode");

	expect_bad("src:rw:", "absolute");
	expect_bad("src:rw:L3dvcmtzcGFjZQ==", "base64url");
	expect_bad("src:rw:L3dvcmtzcGFjZQ:x", "base64url");
	expect_bad("src:rw:/workspace", "base64url");
	expect_bad_path("workspace", 9, "absolute");
	expect_bad_path("/", 1, "root");
	expect_bad_path("//./", 4, "root");
	expect_bad_path("/..", 3, "..");
	expect_bad_path("/a/../b", 7, "..");
	expect_bad_path("/a/..", 5, "..");
	expect_bad_path("/a/b/../../../etc", 17, "..");
	expect_bad_path("/a\nb", 4, "newline");
	expect_bad_path("/a\0b", 4, "NUL");
}

static void test_parse_long(void **state)
{
	char *path = xmalloc(SHARE_PATH_MAX + 2), *e, *value;
	char why[SHARE_WHY_MAX];
	struct share s;

	(void)state;
	memset(path, 'p', SHARE_PATH_MAX + 1);
	path[0] = '/';
	e = encode(path, SHARE_PATH_MAX);
	value = xmalloc(strlen(e) + 16);
	sprintf(value, "big:rw:%s", e);
	assert_int_equal(shares_parse(value, &s, why), 0);
	assert_int_equal(strlen(s.path), SHARE_PATH_MAX);
	free(s.path);
	free(value);
	free(e);

	expect_bad_path(path, SHARE_PATH_MAX + 1, "4095");
	free(path);
}

static void test_add_bounded(void **state)
{
	struct shares *l = xzalloc(sizeof(*l));
	char why[SHARE_WHY_MAX], value[64];

	(void)state;
	/* A bad one takes no place. */
	assert_false(shares_add(l, "..:rw:L3c", why));
	assert_int_equal(l->n, 0);
	for (int i = 0; i < SHARES_MAX; i++) {
		snprintf(value, sizeof(value), "s%d:ro:L3c", i);
		assert_true(shares_add(l, value, why));
	}
	assert_false(shares_add(l, "one-more:ro:L3c", why));
	assert_non_null(strstr(why, "64"));
	assert_int_equal(l->n, SHARES_MAX);
	assert_string_equal(l->v[SHARES_MAX - 1].tag, "s63");
	assert_string_equal(l->v[SHARES_MAX - 1].path, "/w");
	shares_clear(l);
	assert_int_equal(l->n, 0);
	free(l);
}

static char *slurp(const char *dir, const char *name)
{
	char path[GUEST_PATH_MAX], *buf = xzalloc(16384);
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, buf, 16383);
	assert_true(n >= 0);
	close(fd);
	return buf;
}

static void test_spec_binds(void **state)
{
	char base[] = "/tmp/gantry-guest-shares-XXXXXX", path[GUEST_PATH_MAX], why[SHARE_WHY_MAX];
	struct guest_config cfg = {
		.hostname = "box", .rootfs = "/r", .nofile = 1024, .self = "/sbin/gantry-init"
	};
	struct shares *l = xzalloc(sizeof(*l));
	char *argv[] = { "true", NULL };
	struct proto_exec e = { .argv = argv, .argc = 1 };
	char *err = NULL, *s, *tmp, *etc, *ro, *rw, *odd, *quoted;

	(void)state;
	assert_non_null(mkdtemp(base));
	/* No shares: no binds from the hub. */
	assert_int_equal(spec_write(&cfg, base, &e, false, &err), 0);
	s = slurp(base, "config.json");
	assert_null(strstr(s, SHARES_MOUNT_DIR));
	free(s);

	assert_true(shares_add(l, "src:rw:L3dvcmtzcGFjZQ", why));
	assert_true(shares_add(l, "data:ro:L3RtcA", why)); /* over /tmp */
	quoted = encode("/a \"b\"\\c", 8);
	snprintf(path, sizeof(path), "odd:ro:%s", quoted);
	free(quoted);
	assert_true(shares_add(l, path, why));
	cfg.shares = l;
	cfg.etc_dir = "/run/gantry/etc";
	assert_int_equal(spec_write(&cfg, base, &e, true, &err), 0);
	s = slurp(base, "config.json");
	rw = strstr(s, "{\"destination\":\"/workspace\",\"type\":\"bind\",\"source\":"
		       "\"/run/mnt/gantry-shares/src\",\"options\":[\"rbind\",\"nosuid\","
		       "\"nodev\",\"rw\"]}");
	ro = strstr(s, "{\"destination\":\"/tmp\",\"type\":\"bind\",\"source\":"
		       "\"/run/mnt/gantry-shares/data\",\"options\":[\"rbind\",\"nosuid\","
		       "\"nodev\",\"ro\"]}");
	odd = strstr(s, "{\"destination\":\"/a \\\"b\\\"\\\\c\",\"type\":\"bind\",\"source\":"
			"\"/run/mnt/gantry-shares/odd\"");
	tmp = strstr(s, "{\"destination\":\"/tmp\",\"type\":\"tmpfs\"");
	etc = strstr(s, "\"/etc/hostname\"");
	assert_non_null(rw);
	assert_non_null(ro);
	assert_non_null(odd);
	assert_non_null(tmp);
	assert_non_null(etc);
	/* In the order given, after the tmpfs and the generated files. */
	assert_true(tmp < rw && etc < rw && rw < ro && ro < odd);
	assert_non_null(strstr(odd, "}],\"linux\":"));
	free(s);
	shares_clear(l);
	free(l);
	snprintf(path, sizeof(path), "%s/config.json", base);
	unlink(path);
	rmdir(base);
}

/* crun's config.json for e, parsed. */
static json_t *spec_json(const struct guest_config *cfg, const char *base,
			 const struct proto_exec *e)
{
	char *err = NULL, *s;
	json_t *j;

	assert_int_equal(spec_write(cfg, base, e, false, &err), 0);
	s = slurp(base, "config.json");
	j = json_loads(s, 0, NULL);
	free(s);
	assert_non_null(j);
	return j;
}

/* The process's own limits and capability sets (gantry-oci's config.json)
 * into crun's config; without them the guest's defaults. */
static void test_spec_limits_and_caps(void **state)
{
	char base[] = "/tmp/gantry-guest-spec-XXXXXX";
	struct guest_config cfg = { .hostname = "box", .rootfs = "/r", .nofile = 1024 };
	char *argv[] = { "true", NULL };
	struct proto_rlimit lim[] = { { 6, 10, 20 }, { 4, 0, 1ULL << 40 } };
	struct proto_exec e = { .argv = argv, .argc = 1 };
	json_t *j, *p, *caps;
	char *err = NULL, *s;

	(void)state;
	assert_non_null(mkdtemp(base));
	j = spec_json(&cfg, base, &e);
	p = json_object_get(j, "process");
	caps = json_object_get(p, "capabilities");
	assert_int_equal(json_array_size(json_object_get(caps, "bounding")), 14);
	assert_null(json_object_get(caps, "ambient"));
	assert_int_equal(json_array_size(json_object_get(p, "rlimits")), 1);
	json_decref(j);

	e.flags = PROTO_EXEC_RLIMITS | PROTO_EXEC_CAPS;
	e.rlimits = lim;
	e.nrlimits = 2;
	e.caps[PROTO_CAPS_BOUNDING] = (1ULL << 0) | (1ULL << 21) | (1ULL << 40);
	e.caps[PROTO_CAPS_AMBIENT] = 1ULL << 5;
	j = spec_json(&cfg, base, &e);
	p = json_object_get(j, "process");
	caps = json_object_get(p, "capabilities");
	s = json_dumps(json_object_get(caps, "bounding"), JSON_COMPACT);
	assert_string_equal(s, "[\"CAP_CHOWN\",\"CAP_SYS_ADMIN\",\"CAP_CHECKPOINT_RESTORE\"]");
	free(s);
	s = json_dumps(json_object_get(caps, "ambient"), JSON_COMPACT);
	assert_string_equal(s, "[\"CAP_KILL\"]");
	free(s);
	assert_int_equal(json_array_size(json_object_get(caps, "effective")), 0);
	{
		static struct tmpfs_mounts tm;
		char why[SHARE_WHY_MAX];

		assert_false(tmpfs_add(&tm, "-:0:755:", why)); /* no path */
		assert_false(tmpfs_add(&tm, "z:0:755:L3Q", why));
		assert_false(tmpfs_add(&tm, "-:0:99999:L3Q", why));
		assert_false(tmpfs_add(&tm, "-:0:755:Lw", why)); /* "/": not a mount point */
		assert_true(tmpfs_add(&tm, "rx:64:1777:L3Q", why)); /* /t */
		assert_true(tm.v[0].ro && tm.v[0].noexec && tm.v[0].size_kib == 64);
		cfg.tmpfs = &tm;
		assert_int_equal(spec_write(&cfg, base, &e, false, &err), 0);
		s = slurp(base, "config.json");
		assert_non_null(strstr(s, "{\"destination\":\"/t\",\"type\":\"tmpfs\",\"source\":"
					  "\"tmpfs\",\"options\":[\"nosuid\",\"nodev\",\"ro\","
					  "\"noexec\",\"mode=1777\",\"size=64k\"]}"));
		free(tm.v[0].path);
		free(s);
	}
	s = json_dumps(json_object_get(p, "rlimits"), JSON_COMPACT | JSON_PRESERVE_ORDER);
	assert_string_equal(s, "[{\"type\":\"RLIMIT_NPROC\",\"hard\":20,\"soft\":10},"
			       "{\"type\":\"RLIMIT_CORE\",\"hard\":1099511627776,\"soft\":0},"
			       "{\"type\":\"RLIMIT_NOFILE\",\"hard\":1024,\"soft\":1024}]");
	free(s);
	json_decref(j);
	free(err);
	rm_tree(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode_vectors), cmocka_unit_test(test_decode_rejects),
		cmocka_unit_test(test_parse_good),     cmocka_unit_test(test_parse_rejects),
		cmocka_unit_test(test_parse_long),     cmocka_unit_test(test_add_bounded),
		cmocka_unit_test(test_spec_binds),
		cmocka_unit_test(test_spec_limits_and_caps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
