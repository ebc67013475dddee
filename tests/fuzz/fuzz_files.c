/* libFuzzer target for the file helper's records (proto/files.c): what a
 * hostile guest could write on the helper's stdout in place of them
 * (entries, processes for `gantry top`, a watch's changes), read whole
 * or as a stream (files_record_len).
 * Every record taken must hold what proto/files.h promises; reading stops
 * at the first malformed one. Seeds: tests/fuzz/corpus/files. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/files.h"

static void check_name(const char *s)
{
	size_t n = strlen(s);

	if (n > PROTO_FILES_NAME_MAX)
		abort();
	for (size_t i = 0; i < n; i++)
		if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
			   s[i]) == NULL)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data, *why = NULL;
	struct files_record r;
	size_t off = 0, before;
	int k;

	for (;;) {
		before = off;
		k = files_next(buf, size, &off, &r, &why);
		if (k <= 0)
			break;
		if (off <= before || off > size || r.path_len == 0 ||
		    r.path_len > PROTO_FILES_PATH_MAX || r.path < buf ||
		    r.path + r.path_len > buf + size || memchr(r.path, '\0', r.path_len))
			abort();
		if (strchr("exnpyw", r.kind) == NULL || r.kind == '\0')
			abort();
		if (r.kind == 'w' && (strchr("cwrma", r.type) == NULL || r.type == '\0'))
			abort();
		/* A stream's reader finds the same record whole. */
		if (files_record_len(buf + before, size - before) != (ssize_t)(off - before))
			abort();
		if (r.kind == 'p' &&
		    !((r.state >= 'A' && r.state <= 'Z') || (r.state >= 'a' && r.state <= 'z')))
			abort();
		if (r.kind == 'e') {
			if (r.mode > 07777 || strchr("fdlo", r.type) == NULL || r.type == '\0')
				abort();
			check_name(r.owner);
			check_name(r.group);
		}
	}
	if (k < 0 && (why == NULL || off != before))
		abort();
	return 0;
}
