/* libFuzzer target for what users type to name images: references
 * (image_ref_parse; the canonical form must parse back to itself),
 * registry names (registry_normalize, the plain-HTTP rule) and platforms
 * (platform_parse). Inputs are plain text, one string each. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "image/digest.h"
#include "image/pull.h"
#include "image/reference.h"
#include "image/registry_host.h"

#include "check.h"

static void one_line(gantry_error_t *err)
{
	check(*err != NULL);
	check(strchr(gantry_error_str(*err), '\n') == NULL);
	gantry_error_free(err);
}

static void fuzz_ref(const char *s)
{
	gantry_error_t err = NULL;
	struct image_ref r, back;
	char *canon, *again;

	if (image_ref_parse(s, &r, &err) < 0) {
		one_line(&err);
		return;
	}
	check(r.registry && r.repository && (r.tag || r.digest));
	check(r.digest == NULL || digest_valid(r.digest));
	check(strlen(r.registry) + 1 + strlen(r.repository) <= REF_NAME_MAX);
	canon = image_ref_string(&r);
	check(image_ref_parse(canon, &back, &err) == 0);
	again = image_ref_string(&back);
	check(strcmp(canon, again) == 0);
	(void)registry_plain_http(r.registry, "a,b:1");
	free(again);
	free(canon);
	image_ref_free(&back);
	image_ref_free(&r);
}

static void fuzz_registry(const char *s)
{
	char *n = registry_normalize(s), *again;

	if (n == NULL)
		return;
	again = registry_normalize(n);
	check(again && strcmp(again, n) == 0);
	(void)registry_is_loopback(n);
	free(again);
	free(n);
}

static void fuzz_platform(const char *s)
{
	gantry_error_t err = NULL;
	struct platform p;

	if (platform_parse(s, &p, &err) < 0) {
		one_line(&err);
		return;
	}
	check(p.arch[0] != '\0' && strncmp(p.str, "linux/", 6) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;

	if (size > 4096)
		return 0;
	s = xmalloc(size + 1);
	memcpy(s, data, size);
	s[size] = '\0';
	fuzz_ref(s);
	fuzz_registry(s);
	fuzz_platform(s);
	free(s);
	return 0;
}
