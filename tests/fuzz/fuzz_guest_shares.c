/* libFuzzer target for gantry-init's gantry.share= and gantry.tmpfs=
 * parsers (guest/shares.c): the input is one parameter's value, read as
 * each. What the share parser accepts must be a share the guest can bind
 * safely (a tag that names one directory of the hub, an absolute container
 * path without .. components), and the path, encoded again, must be the
 * input's: one spelling per path. A tmpfs it accepts has such a path too,
 * a mode within 07777, and a size within the bound. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "guest/shares.h"

#include "check.h"

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static void check_encoding(const char *path, const char *ctr)
{
	size_t len = strlen(path), o = 0;
	uint32_t acc = 0;
	unsigned int bits = 0;

	for (size_t i = 0; i < len; i++) {
		acc = acc << 8 | (uint8_t)path[i];
		bits += 8;
		while (bits >= 6) {
			bits -= 6;
			check(ctr[o++] == b64url[acc >> bits & 63]);
		}
	}
	if (bits)
		check(ctr[o++] == b64url[acc << (6 - bits) & 63]);
	check(ctr[o] == '\0');
}

/* Component by component: never "..", and one at least not "" or ".". */
static void check_path(const char *p)
{
	bool named = false;

	check(p[0] == '/');
	check(strlen(p) <= SHARE_PATH_MAX);
	check(strchr(p, '\n') == NULL);
	for (const char *c = p; *c;) {
		size_t n = strcspn(c, "/");

		check(!(n == 2 && c[0] == '.' && c[1] == '.'));
		named |= n > 1 || (n == 1 && c[0] != '.');
		c += n + (c[n] == '/');
	}
	check(named);
}

static void check_tmpfs(const char *value)
{
	static struct tmpfs_mounts l;
	char why[SHARE_WHY_MAX] = "";

	if (!tmpfs_add(&l, value, why)) {
		check(why[0] != '\0' && l.n == 0);
		return;
	}
	check(l.n == 1);
	check_path(l.v[0].path);
	check(l.v[0].mode <= 07777 && l.v[0].size_kib <= (1ULL << 40));
	free(l.v[0].path);
	l.n = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *value = malloc(size + 1), why[SHARE_WHY_MAX] = "";
	struct share s = { .path = NULL };
	size_t tlen;

	if (value == NULL)
		return 0;
	memcpy(value, data, size);
	value[size] = '\0';
	check_tmpfs(value);
	if (shares_parse(value, &s, why) < 0) {
		check(why[0] != '\0' && s.path == NULL);
		free(value);
		return 0;
	}
	tlen = strlen(s.tag);
	check(tlen >= 1 && tlen <= SHARE_TAG_MAX);
	for (size_t i = 0; i < tlen; i++)
		check(strchr(b64url, s.tag[i]) || s.tag[i] == '.');
	check(strcmp(s.tag, ".") != 0 && strcmp(s.tag, "..") != 0);
	check(strncmp(value, s.tag, tlen) == 0 && value[tlen] == ':');
	check(strncmp(value + tlen + 1, s.ro ? "ro:" : "rw:", 3) == 0);
	check_path(s.path);
	check_encoding(s.path, value + tlen + 4);
	free(s.path);
	free(value);
	return 0;
}
