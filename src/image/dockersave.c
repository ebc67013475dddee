/* docker-save tars read in place (see dockersave.h). */
#include <stdbool.h>
#include <string.h>

#include "common/util.h"
#include "image/dockersave.h"
#include "image/flatten.h"
#include "image/lazylib.h"

#define TAR_READ_BLOCK (256u * 1024u)

static struct archive *tar_open(const char *path, gantry_error_t *err)
{
	struct archive *a;

	if (lazy_archive(err) < 0)
		return NULL;
	a = sym_archive_read_new();
	if (a == NULL) {
		gantry_error(err, 0, "libarchive reader");
		return NULL;
	}
	sym_archive_read_support_filter_gzip(a);
	sym_archive_read_support_filter_zstd(a);
	sym_archive_read_support_format_tar(a);
	if (sym_archive_read_open_filename(a, path, TAR_READ_BLOCK) != ARCHIVE_OK) {
		const char *msg = sym_archive_error_string(a);

		gantry_error(err, 0, "open: %s", msg ? msg : "not a tar");
		sym_archive_read_free(a);
		return NULL;
	}
	return a;
}

/* Next member; 0 at the end. Member names lose a leading "./". */
static int tar_next(struct archive *a, const char **name, struct archive_entry **e,
		    gantry_error_t *err)
{
	int r = sym_archive_read_next_header(a, e);
	const char *n;

	if (r == ARCHIVE_EOF)
		return 0;
	if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
		const char *msg = sym_archive_error_string(a);

		return gantry_error(err, 0, "read: %s", msg ? msg : "libarchive error");
	}
	n = sym_archive_entry_pathname(*e);
	if (n == NULL)
		n = "";
	while (n[0] == '.' && n[1] == '/')
		n += 2;
	*name = n;
	return 1;
}

static bool same_member(const char *entry, const char *want)
{
	while (want[0] == '.' && want[1] == '/')
		want += 2;
	return strcmp(entry, want) == 0;
}

static int check_member(struct archive_entry *e, const char *name, gantry_error_t *err)
{
	if (sym_archive_entry_filetype(e) != AE_IFREG || sym_archive_entry_hardlink(e))
		return gantry_error(err, 0, "member `%s` is not a regular file", name);
	if (sym_archive_entry_sparse_count(e) > 0)
		return gantry_error(err, 0, "member `%s` is sparse", name);
	return 0;
}

/* The digest a member's name gives it: blobs/sha256/<hex> (docker 25 and
 * later) or <hex>.json (the config in older tars). */
static bool name_digest(const char *name, const char *suffix, char out[DIGEST_STR_MAX])
{
	const char *base = strrchr(name, '/');
	size_t slen = strlen(suffix);

	base = base ? base + 1 : name;
	if (strlen(base) != DIGEST_HEX_LEN + slen || strcmp(base + DIGEST_HEX_LEN, suffix) != 0)
		return false;
	snprintf(out, DIGEST_STR_MAX, "%s%.*s", DIGEST_PREFIX, DIGEST_HEX_LEN, base);
	return digest_valid(out);
}

/* One small member, read whole; 1 when found. */
static int read_member(const char *path, const char *want, const char *digest, char **buf,
		       size_t *len, gantry_error_t *err)
{
	struct archive *a = tar_open(path, err);
	struct archive_entry *e;
	const char *name;
	int r;

	if (a == NULL)
		return -1;
	while ((r = tar_next(a, &name, &e, err)) > 0) {
		struct blob_archive src = { .a = a };
		cleanup_free char *label = NULL;
		struct blob b;

		if (!same_member(name, want))
			continue;
		if (check_member(e, name, err) < 0) {
			r = -1;
			break;
		}
		xasprintf(&label, "`%s`", want);
		blob_init(&b, label, digest, sym_archive_entry_size(e), blob_pull_archive, &src);
		r = blob_read_all(&b, OCI_JSON_MAX, buf, len, err) < 0 ? -1 : 1;
		blob_release(&b);
		break;
	}
	sym_archive_read_free(a);
	if (r == 0)
		return gantry_error(err, 0, "no `%s` in the tar", want);
	return r < 0 ? -1 : 0;
}

int dockersave_open(const char *path, struct dockersave *d, gantry_error_t *err)
{
	cleanup_free char *mbuf = NULL;
	char named[DIGEST_STR_MAX];
	size_t mlen;
	bool has_name;

	*d = (struct dockersave){ .path = xstrdup(path) };
	if (read_member(path, "manifest.json", NULL, &mbuf, &mlen, err) < 0 ||
	    docker_manifest_parse(mbuf, mlen, &d->manifest, err) < 0)
		goto fail;
	has_name = name_digest(d->manifest.config, ".json", named) ||
		   name_digest(d->manifest.config, "", named);
	if (read_member(path, d->manifest.config, has_name ? named : NULL, &d->config,
			&d->config_len, err) < 0)
		goto fail;
	if (sha256_buf(d->config, d->config_len, d->config_digest, err) < 0)
		goto fail;
	return 0;
fail:
	dockersave_close(d);
	return gantry_error_prefix(err, "docker-save tar `%s`", path);
}

void dockersave_close(struct dockersave *d)
{
	free(d->path);
	docker_manifest_free(&d->manifest);
	free(d->config);
	*d = (struct dockersave){ 0 };
}

/* One pass over the tar: apply layers from *next on, as long as they come
 * in order. */
static int apply_pass(struct dockersave *d, struct flatten *f, char *const *diff_ids, size_t *next,
		      gantry_error_t *err)
{
	struct archive *a = tar_open(d->path, err);
	struct archive_entry *e;
	const char *name;
	int r = 0;

	if (a == NULL)
		return -1;
	while (*next < d->manifest.nlayers && (r = tar_next(a, &name, &e, err)) > 0) {
		const char *want = d->manifest.layers[*next];
		cleanup_free char *label = NULL;
		char digest[DIGEST_STR_MAX];
		struct layer_src src;

		if (!same_member(name, want))
			continue;
		if (check_member(e, name, err) < 0) {
			r = -1;
			break;
		}
		xasprintf(&label, "layer `%s`", want);
		src = (struct layer_src){
			.label = label,
			.digest = name_digest(want, "", digest) ? digest : NULL,
			.size = sym_archive_entry_size_is_set(e) ? sym_archive_entry_size(e) : -1,
			.diff_id = diff_ids[*next],
		};
		if (flatten_layer_archive(f, &src, a, err) < 0) {
			r = -1;
			break;
		}
		(*next)++;
	}
	sym_archive_read_free(a);
	return r < 0 ? -1 : 0;
}

int dockersave_apply(struct dockersave *d, struct flatten *f, char *const *diff_ids, size_t n,
		     gantry_error_t *err)
{
	size_t next = 0;

	if (n != d->manifest.nlayers)
		return gantry_error(
			err, 0, "docker-save tar `%s`: config lists %zu diff_ids for %zu layers",
			d->path, n, d->manifest.nlayers);
	while (next < d->manifest.nlayers) {
		size_t before = next;

		if (apply_pass(d, f, diff_ids, &next, err) < 0)
			return gantry_error_prefix(err, "docker-save tar `%s`", d->path);
		if (next == before)
			return gantry_error(err, 0, "docker-save tar `%s`: no member `%s`", d->path,
					    d->manifest.layers[next]);
	}
	return 0;
}
