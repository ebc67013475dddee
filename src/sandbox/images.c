/* Images the saved sandboxes use (see images.h). */
#include <stdio.h>
#include <stdlib.h>

#include "common/files.h"
#include "common/json.h"
#include "common/util.h"
#include "image/digest.h"
#include "sandbox/images.h"
#include "sandbox/state.h"

/* Larger than any sandbox.json Gantry writes; a bigger one is an error. */
#define IMAGES_STATE_MAX (16u << 20)

/* Only the image's digest: a sandbox.json that lacks the rest (written by
 * hand, or by another version) still keeps its image in the cache. */
static int image_digest_of(const char *dir, char **digest, gantry_error_t *err)
{
	cleanup_free char *path = NULL, *buf = NULL;
	size_t len;
	json_t *j;
	int ret = 0;

	*digest = NULL;
	xasprintf(&path, "%s/%s", dir, SANDBOX_JSON);
	if (read_file_max(path, IMAGES_STATE_MAX, &buf, &len, err) < 0)
		return -1;
	if (buf == NULL)
		return 0; /* a sandbox being created or deleted */
	j = jsonh_load(buf, len, path, err);
	if (j == NULL)
		return -1;
	if (jsonh_string(j, "image_digest", false, digest, err) < 0)
		ret = gantry_error_prefix(err, "`%s`", path);
	json_decref(j);
	return ret;
}

void sandbox_images_free(struct image_use *u, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(u[i].digest);
		free(u[i].sandbox);
	}
	free(u);
}

int sandbox_images_in_use(struct image_use **out, size_t *n, gantry_error_t *err)
{
	char **dirs, **names;
	size_t ndirs;
	int r = 0;

	*out = NULL;
	*n = 0;
	if (sandbox_dirs_list(&dirs, &names, &ndirs, err) < 0)
		return -1;
	for (size_t i = 0; i < ndirs; i++) {
		cleanup_free char *digest = NULL;

		if (image_digest_of(dirs[i], &digest, err) < 0) {
			r = gantry_error_prefix(err, "sandbox `%s`", names[i]);
			sandbox_images_free(*out, *n);
			*out = NULL;
			*n = 0;
			break;
		}
		if (digest == NULL || !digest_valid(digest))
			continue;
		*out = xrealloc(*out, (*n + 1) * sizeof(**out));
		(*out)[(*n)++] = (struct image_use){
			.digest = steal_pointer(&digest),
			.sandbox = xstrdup(names[i]),
		};
	}
	strv_free(dirs);
	strv_free(names);
	return r;
}
