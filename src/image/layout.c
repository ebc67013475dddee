/* OCI image layout directories (see layout.h). Blobs are opened relative to
 * the layout's directory descriptor by their digest; nothing is written. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/files.h"
#include "common/json.h"
#include "common/util.h"
#include "image/flatten.h"
#include "image/layout.h"

bool layout_is(const char *dir)
{
	cleanup_free char *p = NULL;
	struct stat st;

	xasprintf(&p, "%s/oci-layout", dir);
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* A regular file, or an error: a FIFO would block the open or the read
 * for good, a device (a link to /dev/zero) never end. */
static int open_file(int dfd, const char *rel, gantry_error_t *err)
{
	struct stat st;
	int fd = open_regular_at(dfd, rel, O_RDONLY, &st);

	if (fd == -2)
		return gantry_error(err, 0, "`%s` is not a file", rel);
	if (fd < 0)
		return gantry_error_errno(err, "open `%s`", rel);
	return fd;
}

static int open_blob(struct layout *l, const char *digest, gantry_error_t *err)
{
	cleanup_free char *rel = NULL;
	int fd;

	xasprintf(&rel, "blobs/sha256/%s", digest_hex(digest));
	fd = open_file(l->dfd, rel, err);
	if (fd < 0)
		return gantry_error_prefix(err, "blob %s", digest);
	return fd;
}

/* A small blob (a manifest, an index, a config), verified. */
static int read_blob(struct layout *l, const char *what, const struct oci_descriptor *d, char **buf,
		     size_t *len, gantry_error_t *err)
{
	cleanup_close int fd = open_blob(l, d->digest, err);
	cleanup_free char *label = NULL;
	struct blob_fd src;
	struct blob b;
	int ret;

	if (fd < 0)
		return gantry_error_prefix(err, "%s", what);
	xasprintf(&label, "%s %s", what, d->digest);
	blob_fd_init(&src, fd);
	blob_init(&b, label, d->digest, d->size, blob_pull_fd, &src);
	ret = blob_read_all(&b, OCI_JSON_MAX, buf, len, err);
	blob_release(&b);
	blob_fd_release(&src);
	return ret;
}

/* index.json is the one document no digest covers. */
static int read_top_index(int dfd, const char *dir, char **buf, size_t *len, gantry_error_t *err)
{
	cleanup_close int fd = open_file(dfd, "index.json", err);
	struct stat st;

	if (fd < 0)
		return gantry_error_prefix(err, "`%s`", dir);
	if (fstat(fd, &st) < 0)
		return gantry_error_errno(err, "`%s/index.json`", dir);
	if ((uint64_t)st.st_size > OCI_JSON_MAX)
		return gantry_error(err, 0, "`%s/index.json` is larger than %u bytes", dir,
				    OCI_JSON_MAX);
	*buf = xmalloc((size_t)st.st_size + 1);
	if (read_full(fd, *buf, (size_t)st.st_size) < 0) {
		free(*buf);
		*buf = NULL;
		return gantry_error_errno(err, "read `%s/index.json`", dir);
	}
	(*buf)[st.st_size] = '\0';
	*len = (size_t)st.st_size;
	return 0;
}

int layout_peek(const char *dir, const char *arch, char digest[DIGEST_STR_MAX])
{
	cleanup_free char *buf = NULL;
	cleanup_close int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct oci_index ix = { 0 };
	const struct oci_descriptor *d;
	gantry_error_t err = NULL;
	size_t len;
	int r = 0;

	if (dfd < 0)
		return 0;
	if (read_top_index(dfd, dir, &buf, &len, &err) == 0 &&
	    oci_index_parse(buf, len, &ix, &err) == 0 &&
	    oci_index_select(&ix, arch, &d, &err) == 0 && d->media_type &&
	    !oci_media_is_index(d->media_type)) {
		snprintf(digest, DIGEST_STR_MAX, "%s", d->digest);
		r = 1;
	}
	gantry_error_free(&err);
	oci_index_free(&ix);
	return r;
}

int layout_open(const char *dir, const char *arch, struct layout *l, gantry_error_t *err)
{
	cleanup_free char *buf = NULL;
	struct oci_index ix = { 0 };
	struct oci_descriptor chosen = { 0 };
	size_t len;

	*l = (struct layout){ .dfd = -1 };
	l->dir = xstrdup(dir);
	l->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (l->dfd < 0) {
		gantry_error_errno(err, "open `%s`", dir);
		goto fail;
	}
	if (read_top_index(l->dfd, l->dir, &buf, &len, err) < 0)
		goto fail;
	for (int depth = 0;; depth++) {
		const struct oci_descriptor *d;
		enum oci_kind kind;

		if (oci_index_parse(buf, len, &ix, err) < 0 ||
		    oci_index_select(&ix, arch, &d, err) < 0)
			goto fail;
		free(chosen.digest);
		chosen = (struct oci_descriptor){ .digest = xstrdup(d->digest), .size = d->size };
		free(buf);
		buf = NULL;
		if (read_blob(l, "manifest", &chosen, &buf, &len, err) < 0 ||
		    oci_kind(buf, len, &kind, err) < 0)
			goto fail;
		if ((d->media_type &&
		     oci_media_is_index(d->media_type) != (kind == OCI_KIND_INDEX))) {
			gantry_error(err, 0, "manifest %s: its media type differs from the index's",
				     chosen.digest);
			goto fail;
		}
		oci_index_free(&ix);
		if (kind == OCI_KIND_MANIFEST)
			break;
		if (depth + 1 >= LAYOUT_MAX_NESTING) {
			gantry_error(err, 0, "indexes nested deeper than %d", LAYOUT_MAX_NESTING);
			goto fail;
		}
	}
	if (oci_manifest_parse(buf, len, &l->manifest, err) < 0) {
		gantry_error_prefix(err, "%s", chosen.digest);
		goto fail;
	}
	snprintf(l->manifest_digest, sizeof(l->manifest_digest), "%s", chosen.digest);
	free(chosen.digest);
	return 0;
fail:
	free(chosen.digest);
	oci_index_free(&ix);
	layout_close(l);
	return gantry_error_prefix(err, "OCI layout `%s`", dir);
}

void layout_close(struct layout *l)
{
	if (l->dfd >= 0)
		close(l->dfd);
	oci_manifest_free(&l->manifest);
	free(l->dir);
	*l = (struct layout){ .dfd = -1 };
}

int layout_read_config(struct layout *l, char **buf, size_t *len, gantry_error_t *err)
{
	if (read_blob(l, "config", &l->manifest.config, buf, len, err) < 0)
		return gantry_error_prefix(err, "OCI layout `%s`", l->dir);
	return 0;
}

int layout_apply(struct layout *l, struct flatten *f, char *const *diff_ids, size_t n,
		 gantry_error_t *err)
{
	if (n && n != l->manifest.nlayers)
		return gantry_error(err, 0,
				    "OCI layout `%s`: config lists %zu diff_ids for %zu layers",
				    l->dir, n, l->manifest.nlayers);
	for (size_t i = 0; i < l->manifest.nlayers; i++) {
		const struct oci_descriptor *d = &l->manifest.layers[i];
		cleanup_free char *label = NULL;
		cleanup_close int fd = -1;
		struct layer_src src;

		xasprintf(&label, "layer %s", d->digest);
		fd = open_blob(l, d->digest, err);
		if (fd < 0)
			return gantry_error_prefix(err, "OCI layout `%s`", l->dir);
		src = (struct layer_src){
			.label = label,
			.digest = d->digest,
			.size = d->size,
			.diff_id = n ? diff_ids[i] : NULL,
		};
		if (flatten_layer_fd(f, &src, fd, err) < 0)
			return gantry_error_prefix(err, "OCI layout `%s`", l->dir);
	}
	return 0;
}
