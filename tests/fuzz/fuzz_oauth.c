/* libFuzzer target for OAuth custody's parsers (oauth/custody.h): the
 * input as the user's providers file, and as the head of a request to the
 * login's callback listener, which any local process can reach. A
 * providers file parses to valid names, endpoints and paths, or fails with
 * one line; a callback is not ours, a refusal of one line, or a code. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "oauth/custody.h"

#include "check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct oauth_provider *p = NULL;
	gantry_error_t err = NULL;
	char *s = xmalloc(size + 1), *code = NULL;
	size_t n = 0;
	int r;

	memcpy(s, data, size);
	s[size] = '\0';
	if (oauth_providers_parse((const char *)data, size, &p, &n, &err) < 0) {
		check(err != NULL && strchr(gantry_error_str(err), '\n') == NULL);
		check(p == NULL && n == 0);
		gantry_error_free(&err);
	} else {
		check(n <= OAUTH_PROVIDERS_MAX);
		for (size_t i = 0; i < n; i++) {
			check(oauth_name_valid(p[i].name));
			check(oauth_url_valid(p[i].authorize) && oauth_url_valid(p[i].token));
			check(p[i].path[0] == '/' && strpbrk(p[i].path, "?# \r\n") == NULL);
			check(p[i].port == 0 || p[i].port >= 1024);
			check(p[i].params == NULL || strpbrk(p[i].params, " #\r\n") == NULL);
		}
		oauth_providers_free(p, n);
	}
	r = oauth_callback_parse(s, "/cb", "st", &code, &err);
	if (r > 0) {
		check(code != NULL && code[0] != '\0' && strlen(code) <= 4096);
		check(strncmp(s, "GET /cb", 7) == 0);
	} else {
		check(code == NULL);
	}
	if (r < 0) {
		check(err != NULL && strchr(gantry_error_str(err), '\n') == NULL);
		for (const char *c = gantry_error_str(err); *c; c++)
			check((unsigned char)*c >= ' ' && *c != 0x7f);
	}
	gantry_error_free(&err);
	free(code);
	free(s);
	return 0;
}
