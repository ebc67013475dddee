/* Tests for image/config.c and image/manifest.c without any files: the
 * config fields, the argv rules, User resolution against /etc/passwd and
 * /etc/group, the metadata round trip, and the index/manifest parsers'
 * platform choice and refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/json.h"
#include "common/util.h"
#include "image/config.h"
#include "image/manifest.h"

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define D3 "sha256:3333333333333333333333333333333333333333333333333333333333333333"

static const char passwd[] = "root:x:0:0:root:/root:/bin/sh\n"
			     "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
			     "# a comment line\n"
			     "broken line\n"
			     "gantry:x:1000:1000:Gantry:/home/gantry:/bin/sh\n"
			     "nohome:x:1001:1001::::\n"
			     "last:x:1002:100:last:/home/last:/bin/sh"; /* no newline */
static const char group[] = "root:x:0:\n"
			    "wheel:x:10:gantry,other\n"
			    "staff:x:50:other,gantry\n"
			    "gantry:x:1000:\n"
			    "users:x:100:\n"
			    "dup:x:10:gantry\n";

static char *parse_error(const char *json)
{
	struct image_config cfg;
	gantry_error_t err = NULL;
	char *msg;

	assert_int_equal(image_config_parse(json, strlen(json), &cfg, NULL, NULL, &err), -1);
	msg = xstrdup(gantry_error_str(err));
	gantry_error_free(&err);
	assert_null(strchr(msg, '\n'));
	return msg;
}

static void test_config_fields(void **state)
{
	static const char json[] =
		"{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{"
		"\"Env\":[\"PATH=/bin\",\"A=b=c\"],\"Entrypoint\":[\"/ep\",\"-x\"],"
		"\"Cmd\":[\"run\"],\"User\":\"gantry:staff\",\"WorkingDir\":\"/work\","
		"\"ExposedPorts\":{\"80/tcp\":{}}},"
		"\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"" D1 "\",\"" D2 "\"]}}";
	struct image_config cfg;
	gantry_error_t err = NULL;
	char **ids;
	size_t n;

	(void)state;
	assert_int_equal(image_config_parse(json, strlen(json), &cfg, &ids, &n, &err), 0);
	assert_int_equal(cfg.nenv, 2);
	assert_string_equal(cfg.env[0], "PATH=/bin");
	assert_string_equal(cfg.env[1], "A=b=c");
	assert_null(cfg.env[2]);
	assert_int_equal(cfg.nentrypoint, 2);
	assert_string_equal(cfg.entrypoint[1], "-x");
	assert_int_equal(cfg.ncmd, 1);
	assert_string_equal(cfg.cmd[0], "run");
	assert_string_equal(cfg.user, "gantry:staff");
	assert_string_equal(cfg.working_dir, "/work");
	assert_null(cfg.passwd);
	assert_int_equal(n, 2);
	assert_string_equal(ids[1], D2);
	strv_free(ids);
	image_config_free(&cfg);

	/* No config object at all: empty fields, not an error. */
	assert_int_equal(image_config_parse("{}", 2, &cfg, &ids, &n, &err), 0);
	assert_int_equal(cfg.nenv + cfg.ncmd + cfg.nentrypoint + n, 0);
	assert_string_equal(cfg.user, "");
	assert_string_equal(cfg.working_dir, "");
	image_config_free(&cfg);
}

static void test_config_refusals(void **state)
{
	static const struct {
		const char *json, *want;
	} cases[] = {
		{ "[]", "not a JSON object" },
		{ "{\"config\":{\"Env\":\"PATH=/bin\"}}", "`Env` is not an array" },
		{ "{\"config\":{\"Env\":[1]}}", "`Env` holds something other than a string" },
		{ "{\"config\":{\"Env\":[\"NOEQUALS\"]}}", "is not KEY=value" },
		{ "{\"config\":{\"Cmd\":[\"a\\u0000b\"]}}", "invalid JSON" },
		{ "{\"config\":{\"User\":7}}", "`User` is not a string" },
		{ "{\"config\":[]}", "`config` is not an object" },
		{ "{\"rootfs\":{\"diff_ids\":[\"md5:00\"]}}", "diff_ids[0]: digest `md5:00`" },
		{ "{\"rootfs\":{\"diff_ids\":[\"sha256:XY\"]}}", "malformed digest" },
		{ "{\"config\":{},\"config\":{}}", "invalid JSON" },
		{ "{} trailing", "invalid JSON" },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *msg = parse_error(cases[i].json);

		if (strstr(msg, cases[i].want) == NULL)
			fail_msg("`%s`: got `%s`, want `%s`", cases[i].json, msg, cases[i].want);
		free(msg);
	}
}

static void check_argv(const struct image_config *cfg, char *const *user, size_t nuser,
		       const char *want)
{
	char **argv, *joined = xstrdup("");
	size_t n = image_config_argv(cfg, user, nuser, &argv);

	for (size_t i = 0; i < n; i++) {
		char *next;

		xasprintf(&next, "%s%s%s", joined, i ? " " : "", argv[i]);
		free(joined);
		joined = next;
	}
	assert_null(argv[n]);
	assert_string_equal(joined, want);
	free(joined);
	strv_free(argv);
}

static void test_argv_rules(void **state)
{
	char *ep[] = { "/ep", "-x", NULL }, *cmd[] = { "serve", "--port=80", NULL };
	char *user[] = { "ls", "-l", NULL };
	struct image_config both = { .entrypoint = ep, .nentrypoint = 2, .cmd = cmd, .ncmd = 2 };
	struct image_config only_cmd = { .cmd = cmd, .ncmd = 2 };
	struct image_config only_ep = { .entrypoint = ep, .nentrypoint = 2 };
	struct image_config neither = { 0 };

	(void)state;
	check_argv(&both, NULL, 0, "/ep -x serve --port=80");
	check_argv(&both, user, 2, "/ep -x ls -l"); /* `--` replaces Cmd, keeps Entrypoint */
	check_argv(&only_cmd, NULL, 0, "serve --port=80");
	check_argv(&only_cmd, user, 2, "ls -l");
	check_argv(&only_ep, NULL, 0, "/ep -x");
	check_argv(&only_ep, user, 1, "/ep -x ls");
	check_argv(&neither, NULL, 0, "/bin/sh");
	check_argv(&neither, user, 2, "ls -l");
	check_argv(NULL, NULL, 0, "/bin/sh"); /* a prebuilt .erofs */
	check_argv(NULL, user, 2, "ls -l");
}

static void check_user(const char *cfg_user, const char *spec, uint32_t uid, uint32_t gid,
		       const char *home, const char *groups)
{
	struct image_config cfg = { .user = (char *)cfg_user,
				    .passwd = (char *)passwd,
				    .group = (char *)group };
	gantry_error_t err = NULL;
	struct image_user u;
	char *got = xstrdup("");

	if (image_config_user(&cfg, spec, &u, &err) < 0)
		fail_msg("user `%s`: %s", spec ? spec : cfg_user, gantry_error_str(err));
	assert_int_equal(u.uid, uid);
	assert_int_equal(u.gid, gid);
	assert_string_equal(u.home, home);
	for (size_t i = 0; i < u.ngroups; i++) {
		char *next;

		xasprintf(&next, "%s%s%u", got, i ? "," : "", u.groups[i]);
		free(got);
		got = next;
	}
	assert_string_equal(got, groups);
	free(got);
	image_user_free(&u);
}

static void check_user_fails(const char *pw, const char *spec, const char *want)
{
	struct image_config cfg = { .user = "", .passwd = (char *)pw, .group = (char *)group };
	gantry_error_t err = NULL;
	struct image_user u;

	assert_int_equal(image_config_user(&cfg, spec, &u, &err), -1);
	if (strstr(gantry_error_str(err), want) == NULL)
		fail_msg("user `%s`: got `%s`, want `%s`", spec, gantry_error_str(err), want);
	assert_null(strchr(gantry_error_str(err), '\n'));
	gantry_error_free(&err);
}

static void test_user_resolution(void **state)
{
	(void)state;
	check_user("", NULL, 0, 0, "/root", "");
	check_user("gantry", NULL, 1000, 1000, "/home/gantry", "10,50");
	check_user("", "gantry", 1000, 1000, "/home/gantry", "10,50"); /* spec beats config */
	check_user("root", "1000", 1000, 1000, "/home/gantry", "10,50");
	check_user("", "gantry:wheel", 1000, 10, "/home/gantry", "");
	check_user("", "gantry:77", 1000, 77, "/home/gantry", "");
	check_user("", "1000:staff", 1000, 50, "/home/gantry", "");
	check_user("", "4242", 4242, 0, "/", "");
	check_user("", "4242:7", 4242, 7, "/", "");
	check_user("", "nohome", 1001, 1001, "/", "");
	check_user("", "last", 1002, 100, "/home/last", "");
	check_user("", "0:0", 0, 0, "/root", "");

	check_user_fails(passwd, "nobody", "user `nobody`: not in the image's /etc/passwd");
	check_user_fails(passwd, "gantry:nogroup",
			 "group `nogroup`: not in the image's /etc/group");
	check_user_fails(passwd, "4242:nogroup", "group `nogroup`");
	check_user_fails(NULL, "gantry", "user `gantry`: the image has no /etc/passwd");
	check_user_fails(passwd, ":wheel", "expected user, uid, user:group or uid:gid");
	check_user_fails(passwd, "gantry:", "expected user");
	check_user_fails(passwd, "99999999999", "uid out of range");
	check_user_fails(passwd, "4294967295", "uid out of range");
	check_user_fails(passwd, "1:4294967296", "gid out of range");
	check_user_fails(passwd, "broken line", "not in the image's /etc/passwd");

	/* Without /etc/passwd, numeric ids still work. */
	{
		struct image_config cfg = { .user = "" };
		gantry_error_t err = NULL;
		struct image_user u;

		assert_int_equal(image_config_user(&cfg, "12:34", &u, &err), 0);
		assert_int_equal(u.uid, 12);
		assert_int_equal(u.gid, 34);
		assert_string_equal(u.home, "/");
		image_user_free(&u);
		assert_int_equal(image_config_user(NULL, NULL, &u, &err), 0);
		assert_int_equal(u.uid, 0);
		image_user_free(&u);
	}
}

static void test_metadata_round_trip(void **state)
{
	char *env[] = { "A=1", NULL }, *cmd[] = { "x", NULL };
	struct image_config in = { .env = env,
				   .nenv = 1,
				   .cmd = cmd,
				   .ncmd = 1,
				   .user = "u",
				   .working_dir = "/w",
				   .passwd = "p\n",
				   .group = NULL };
	struct image_config out;
	gantry_error_t err = NULL;
	json_t *j = image_config_to_json(&in);

	(void)state;
	assert_int_equal(image_config_from_json(j, &out, &err), 0);
	json_decref(j);
	assert_int_equal(out.nenv, 1);
	assert_string_equal(out.env[0], "A=1");
	assert_null(out.entrypoint);
	assert_int_equal(out.ncmd, 1);
	assert_string_equal(out.user, "u");
	assert_string_equal(out.working_dir, "/w");
	assert_string_equal(out.passwd, "p\n");
	assert_null(out.group);
	image_config_free(&out);
}

static const struct oci_descriptor *select_ok(const char *json, struct oci_index *ix)
{
	const struct oci_descriptor *d;
	gantry_error_t err = NULL;

	if (oci_index_parse(json, strlen(json), ix, &err) < 0 ||
	    oci_index_select(ix, "amd64", &d, &err) < 0)
		fail_msg("%s", gantry_error_str(err));
	return d;
}

static char *select_fails(const char *json)
{
	const struct oci_descriptor *d;
	gantry_error_t err = NULL;
	struct oci_index ix;
	char *msg;

	if (oci_index_parse(json, strlen(json), &ix, &err) == 0) {
		assert_int_equal(oci_index_select(&ix, "amd64", &d, &err), -1);
		oci_index_free(&ix);
	}
	msg = xstrdup(gantry_error_str(err));
	gantry_error_free(&err);
	return msg;
}

#define ENTRY(d, size, os, arch)                                                                   \
	"{\"mediaType\":\"" OCI_MT_MANIFEST "\",\"digest\":\"" d "\",\"size\":" #size              \
	",\"platform\":{\"os\":\"" os "\",\"architecture\":\"" arch "\"}}"

static void test_index_platforms(void **state)
{
	struct oci_index ix;
	const struct oci_descriptor *d;
	char *msg;

	(void)state;
	d = select_ok(
		"{\"schemaVersion\":2,\"manifests\":[" ENTRY(D1, 10, "linux", "arm64") "," ENTRY(
			D2, 20, "windows", "amd64") "," ENTRY(D3, 30, "linux", "amd64") "]}",
		&ix);
	assert_string_equal(d->digest, D3);
	assert_int_equal(d->size, 30);
	oci_index_free(&ix);

	/* The only image entry, without a platform; attestations do not count. */
	d = select_ok("{\"schemaVersion\":2,\"manifests\":[{\"digest\":\"" D1 "\",\"size\":1},"
		      "{\"mediaType\":\"" OCI_MT_MANIFEST "\",\"digest\":\"" D2 "\",\"size\":2,"
		      "\"platform\":{\"os\":\"unknown\",\"architecture\":\"unknown\"},"
		      "\"annotations\":{\"vnd.docker.reference.type\":\"attestation-manifest\"}}]}",
		      &ix);
	assert_string_equal(d->digest, D1);
	oci_index_free(&ix);

	msg = select_fails("{\"schemaVersion\":2,\"manifests\":[" ENTRY(
		D1, 10, "linux", "arm64") "," ENTRY(D2, 10, "linux", "s390x") "]}");
	assert_string_equal(msg,
			    "no image for linux/amd64 (the index has linux/arm64, linux/s390x)");
	free(msg);
	msg = select_fails(
		"{\"schemaVersion\":2,\"manifests\":[" ENTRY(D1, 10, "linux", "arm64") "]}");
	assert_non_null(strstr(msg, "no image for linux/amd64"));
	free(msg);
	msg = select_fails("{\"schemaVersion\":2,\"manifests\":[]}");
	assert_string_equal(msg, "index lists no image manifest");
	free(msg);
	msg = select_fails("{\"schemaVersion\":1,\"manifests\":[]}");
	assert_string_equal(msg, "index: schemaVersion 1 is not supported");
	free(msg);
	msg = select_fails(
		"{\"schemaVersion\":2,\"manifests\":[{\"digest\":\"sha512:00\",\"size\":1}]}");
	assert_non_null(strstr(msg, "only sha256 is supported"));
	free(msg);
	msg = select_fails("{\"schemaVersion\":2,\"manifests\":[{\"digest\":\"" D1
			   "\",\"size\":-1}]}");
	assert_non_null(strstr(msg, "negative size"));
	free(msg);
}

static void test_manifest_parse(void **state)
{
	static const char good[] =
		"{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_MANIFEST "\","
		"\"config\":{\"mediaType\":\"" OCI_MT_CONFIG "\",\"digest\":\"" D1 "\",\"size\":5},"
		"\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\","
		"\"digest\":\"" D2 "\",\"size\":7},"
		"{\"mediaType\":\"application/vnd.docker.image.rootfs.diff.tar.gzip\","
		"\"digest\":\"" D3 "\",\"size\":9}]}";
	static const struct {
		const char *json, *want;
	} bad[] = {
		{ "{\"schemaVersion\":2,\"config\":{\"mediaType\":\"application/"
		  "x-helm\",\"digest\":\"" D1 "\",\"size\":1},\"layers\":[]}",
		  "is not an image config" },
		{ "{\"schemaVersion\":2,\"config\":{\"digest\":\"" D1 "\",\"size\":1},\"layers\":"
		  "[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip+encrypted\","
		  "\"digest\":\"" D2 "\",\"size\":1}]}",
		  "is not a tar layer" },
		{ "{\"schemaVersion\":2,\"config\":{\"digest\":\"" D1 "\",\"size\":1}}",
		  "`layers` is not an array" },
		{ "{\"schemaVersion\":2,\"layers\":[]}", "config: descriptor is not an object" },
	};
	struct oci_manifest m;
	gantry_error_t err = NULL;
	enum oci_kind kind;

	(void)state;
	assert_int_equal(oci_manifest_parse(good, strlen(good), &m, &err), 0);
	assert_string_equal(m.config.digest, D1);
	assert_int_equal(m.nlayers, 2);
	assert_int_equal(m.layers[1].size, 9);
	oci_manifest_free(&m);
	assert_int_equal(oci_kind(good, strlen(good), &kind, &err), 0);
	assert_int_equal(kind, OCI_KIND_MANIFEST);
	assert_int_equal(oci_kind("{\"manifests\":[]}", 16, &kind, &err), 0);
	assert_int_equal(kind, OCI_KIND_INDEX);
	assert_int_equal(oci_kind("{\"mediaType\":\"text/plain\"}", 26, &kind, &err), -1);
	gantry_error_free(&err);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		assert_int_equal(oci_manifest_parse(bad[i].json, strlen(bad[i].json), &m, &err),
				 -1);
		if (strstr(gantry_error_str(err), bad[i].want) == NULL)
			fail_msg("got `%s`, want `%s`", gantry_error_str(err), bad[i].want);
		gantry_error_free(&err);
	}
}

static void test_docker_manifest(void **state)
{
	static const char one[] = "[{\"Config\":\"abc.json\",\"RepoTags\":[\"x:latest\"],"
				  "\"Layers\":[\"a/layer.tar\",\"b/layer.tar\"]}]";
	static const char two[] = "[{\"Config\":\"a.json\",\"Layers\":[]},"
				  "{\"Config\":\"b.json\",\"Layers\":[]}]";
	struct docker_manifest m;
	gantry_error_t err = NULL;

	(void)state;
	assert_int_equal(docker_manifest_parse(one, strlen(one), &m, &err), 0);
	assert_string_equal(m.config, "abc.json");
	assert_int_equal(m.nlayers, 2);
	assert_string_equal(m.layers[1], "b/layer.tar");
	docker_manifest_free(&m);
	assert_int_equal(docker_manifest_parse(two, strlen(two), &m, &err), -1);
	assert_string_equal(gantry_error_str(err),
			    "manifest.json: the tar holds 2 images; save one per tar");
	gantry_error_free(&err);
	assert_int_equal(docker_manifest_parse("[{}]", 4, &m, &err), -1);
	assert_string_equal(gantry_error_str(err), "manifest.json: missing `Config`");
	gantry_error_free(&err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_fields),	    cmocka_unit_test(test_config_refusals),
		cmocka_unit_test(test_argv_rules),	    cmocka_unit_test(test_user_resolution),
		cmocka_unit_test(test_metadata_round_trip), cmocka_unit_test(test_index_platforms),
		cmocka_unit_test(test_manifest_parse),	    cmocka_unit_test(test_docker_manifest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
