/* libFuzzer target for the image JSON parsers: every input goes through the
 * OCI index parser (and the platform choice), the manifest parser, docker
 * save's manifest.json parser and the image config parser, whose result is
 * then turned into argv, written as our metadata and read back unchanged.
 * The same bytes also serve as /etc/passwd and /etc/group for User
 * resolution, with the input's first line as one of the specs. Inputs are
 * plain text: the seeds are real documents. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/text.h"
#include "common/util.h"
#include "image/config.h"
#include "image/digest.h"
#include "image/manifest.h"

/* Specs longer than this are not interesting. */
#define SPEC_MAX 64

#include "check.h"

static void one_line(gantry_error_t *err)
{
	check(*err != NULL);
	check(strchr(gantry_error_str(*err), '\n') == NULL);
	gantry_error_free(err);
}

static void check_strv(char **a, size_t na, char **b, size_t nb)
{
	check(na == nb);
	for (size_t i = 0; i < na; i++)
		check(strcmp(a[i], b[i]) == 0);
	if (na)
		check(a[na] == NULL && b[nb] == NULL);
}

static void fuzz_index(const char *buf, size_t len)
{
	gantry_error_t err = NULL;
	const struct oci_descriptor *d;
	struct oci_index ix;
	enum oci_kind kind;

	if (oci_kind(buf, len, &kind, &err) < 0)
		one_line(&err);
	if (oci_index_parse(buf, len, &ix, &err) < 0) {
		one_line(&err);
		return;
	}
	for (size_t i = 0; i < ix.n; i++)
		check(digest_valid(ix.manifests[i].digest) && ix.manifests[i].size >= 0);
	if (oci_index_select(&ix, "amd64", &d, &err) == 0)
		check(d >= ix.manifests && d < ix.manifests + ix.n && !d->attestation);
	else
		one_line(&err);
	if (oci_index_select_variant(&ix, "arm64", "v8", &d, &err) == 0)
		check(d >= ix.manifests && d < ix.manifests + ix.n && !d->attestation);
	else
		one_line(&err);
	oci_index_free(&ix);
}

static void fuzz_manifests(const char *buf, size_t len)
{
	gantry_error_t err = NULL;
	struct docker_manifest dm;
	struct oci_manifest m;

	if (oci_manifest_parse(buf, len, &m, &err) == 0) {
		check(digest_valid(m.config.digest));
		check(m.nlayers <= OCI_MAX_LAYERS);
		for (size_t i = 0; i < m.nlayers; i++)
			check(digest_valid(m.layers[i].digest) && m.layers[i].media_type);
		oci_manifest_free(&m);
	} else {
		one_line(&err);
	}
	if (docker_manifest_parse(buf, len, &dm, &err) == 0) {
		check(dm.config != NULL && dm.nlayers <= OCI_MAX_LAYERS);
		docker_manifest_free(&dm);
	} else {
		one_line(&err);
	}
}

static void fuzz_config(const char *buf, size_t len)
{
	struct image_config cfg, back;
	gantry_error_t err = NULL;
	char **ids, **argv;
	size_t nids, argc;
	json_t *j;

	if (image_config_parse(buf, len, &cfg, &ids, &nids, &err) < 0) {
		one_line(&err);
		return;
	}
	for (size_t i = 0; i < nids; i++)
		check(digest_valid(ids[i]));
	strv_free(ids);
	argc = image_config_argv(&cfg, NULL, 0, &argv);
	check(argc >= 1 && argv[argc] == NULL);
	check(argc == (cfg.nentrypoint + cfg.ncmd ? cfg.nentrypoint + cfg.ncmd : 1));
	strv_free(argv);

	/* Our metadata form reads back as it was written. */
	cfg.passwd = xstrdup("root:x:0:0::/root:/bin/sh\n");
	j = image_config_to_json(&cfg);
	check(image_config_from_json(j, &back, &err) == 0);
	json_decref(j);
	check_strv(cfg.env, cfg.nenv, back.env, back.nenv);
	check_strv(cfg.entrypoint, cfg.nentrypoint, back.entrypoint, back.nentrypoint);
	check_strv(cfg.cmd, cfg.ncmd, back.cmd, back.ncmd);
	check(strcmp(cfg.user, back.user) == 0);
	check(strcmp(cfg.working_dir, back.working_dir) == 0);
	check(strcmp(cfg.passwd, back.passwd) == 0 && back.group == NULL);
	image_config_free(&back);
	image_config_free(&cfg);
}

/* Any /etc/passwd survives our metadata once sanitized. */
static void fuzz_etc_round_trip(const char *buf, size_t len)
{
	struct image_config cfg = { .user = "", .working_dir = "" }, back;
	gantry_error_t err = NULL;
	json_t *j;

	cfg.passwd = xmalloc(len + 1);
	memcpy(cfg.passwd, buf, len + 1);
	text_sanitize_utf8(cfg.passwd);
	j = image_config_to_json(&cfg);
	check(image_config_from_json(j, &back, &err) == 0);
	json_decref(j);
	check(back.passwd != NULL && strcmp(back.passwd, cfg.passwd) == 0);
	image_config_free(&back);
	free(cfg.passwd);
}

/* The input as /etc/passwd and /etc/group. */
static void fuzz_users(const char *buf, size_t len)
{
	static const char *const specs[] = { "",       "root",	       "0",	  "1000",
					     "gantry", "gantry:staff", "1000:50", "x:0" };
	struct image_config cfg = { .user = "", .passwd = (char *)buf, .group = (char *)buf };
	const char *nl = memchr(buf, '\n', len);
	char first[SPEC_MAX + 1];
	size_t flen = MIN(nl ? (size_t)(nl - buf) : len, (size_t)SPEC_MAX);

	memcpy(first, buf, flen);
	first[flen] = '\0';
	for (size_t i = 0; i <= ARRAY_SIZE(specs); i++) {
		const char *spec = i < ARRAY_SIZE(specs) ? specs[i] : first;
		gantry_error_t err = NULL;
		struct image_user u;

		if (image_config_user(&cfg, spec, &u, &err) < 0) {
			one_line(&err);
			continue;
		}
		check(u.home != NULL && u.ngroups <= 256);
		for (size_t g = 0; g < u.ngroups; g++)
			check(u.groups[g] != u.gid);
		image_user_free(&u);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf;

	if (size > OCI_JSON_MAX)
		return 0;
	/* The parsers get what the sources give them: a NUL-terminated copy. */
	buf = xmalloc(size + 1);
	memcpy(buf, data, size);
	buf[size] = '\0';
	fuzz_index(buf, size);
	fuzz_manifests(buf, size);
	fuzz_config(buf, size);
	fuzz_users(buf, size);
	fuzz_etc_round_trip(buf, size);
	free(buf);
	return 0;
}
