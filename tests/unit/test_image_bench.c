/* Conversion throughput of image_resolve (not a test):
 *   image_bench layout OUTDIR LAYER...  wrap layer files (tar, tar.gz or
 *                                       tar.zst) into an OCI image layout
 *   image_bench resolve SRC             convert SRC into $GANTRY_IMAGES and
 *                                       print the seconds it took
 * Divide the uncompressed layer bytes `layout` prints by the seconds for
 * MB/s. To compare with umoci and mkfs.erofs on the same layout (erofs_bench
 * makes the layer):
 *   erofs_bench gen L.tar 256 && gzip -1 L.tar && image_bench layout OCI L.tar.gz
 *   GANTRY_IMAGES=$(mktemp -d) image_bench resolve OCI
 *   time umoci unpack --image OCI:latest B && time mkfs.erofs X.erofs B/rootfs */
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "image/digest.h"
#include "image/manifest.h"
#include "image/source.h"

#define COPY_BLOCK (1u << 20)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Hash (and count) the uncompressed bytes of a layer file. */
static int diff_id(const char *path, char out[DIGEST_STR_MAX], uint64_t *bytes)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	struct sha256 h;
	const void *buf;
	size_t len;
	la_int64_t off;

	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_format_raw(a);
	if (archive_read_open_filename(a, path, COPY_BLOCK) != ARCHIVE_OK ||
	    archive_read_next_header(a, &e) != ARCHIVE_OK) {
		fprintf(stderr, "%s: %s\n", path, archive_error_string(a));
		archive_read_free(a);
		return -1;
	}
	sha256_init(&h);
	*bytes = 0;
	while (archive_read_data_block(a, &buf, &len, &off) == ARCHIVE_OK) {
		sha256_update(&h, buf, len);
		*bytes += len;
	}
	archive_read_free(a);
	return sha256_final(&h, out, NULL);
}

/* Copy src into OUTDIR's blobs, hashing it; the digest and size out. */
static int put_file(const char *out, const char *src, char digest[DIGEST_STR_MAX], int64_t *size,
		    uint8_t magic[4])
{
	cleanup_free char *tmp = NULL, *dst = NULL;
	cleanup_free uint8_t *buf = xmalloc(COPY_BLOCK);
	cleanup_close int in = open(src, O_RDONLY | O_CLOEXEC), o = -1;
	struct sha256 h;
	ssize_t n;

	xasprintf(&tmp, "%s/blobs/sha256/tmp", out);
	o = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (in < 0 || o < 0) {
		perror(src);
		return -1;
	}
	sha256_init(&h);
	*size = 0;
	while ((n = read(in, buf, COPY_BLOCK)) > 0) {
		if (*size == 0)
			memcpy(magic, buf, MIN((size_t)n, 4));
		sha256_update(&h, buf, (size_t)n);
		if (write_full(o, buf, (size_t)n) < 0)
			return -1;
		*size += n;
	}
	if (sha256_final(&h, digest, NULL) < 0)
		return -1;
	xasprintf(&dst, "%s/blobs/sha256/%s", out, digest_hex(digest));
	return n < 0 || rename(tmp, dst) < 0 ? -1 : 0;
}

static int put_json(const char *out, json_t *j, char digest[DIGEST_STR_MAX], int64_t *size)
{
	cleanup_free char *s = json_dumps(j, JSON_COMPACT), *p = NULL;
	cleanup_close int fd = -1;

	json_decref(j);
	if (sha256_buf(s, strlen(s), digest, NULL) < 0)
		return -1;
	*size = (int64_t)strlen(s);
	xasprintf(&p, "%s/blobs/sha256/%s", out, digest_hex(digest));
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	return fd < 0 || write_full(fd, s, strlen(s)) < 0 ? -1 : 0;
}

static int write_text(const char *out, const char *name, json_t *j)
{
	cleanup_free char *s = json_dumps(j, JSON_COMPACT), *p = NULL;
	cleanup_close int fd = -1;

	json_decref(j);
	xasprintf(&p, "%s/%s", out, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	return fd < 0 || write_full(fd, s, strlen(s)) < 0 ? -1 : 0;
}

static const char *media_type(const uint8_t m[4])
{
	if (m[0] == 0x1f && m[1] == 0x8b)
		return "application/vnd.oci.image.layer.v1.tar+gzip";
	if (m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd)
		return "application/vnd.oci.image.layer.v1.tar+zstd";
	return "application/vnd.oci.image.layer.v1.tar";
}

static int layout(const char *out, char **layers, int n)
{
	json_t *ids = json_array(), *descs = json_array();
	char d[DIGEST_STR_MAX], cd[DIGEST_STR_MAX], md[DIGEST_STR_MAX];
	int64_t size, csize, msize;
	uint64_t total = 0;
	char *p;

	mkdir(out, 0755);
	xasprintf(&p, "%s/blobs", out);
	mkdir(p, 0755);
	free(p);
	xasprintf(&p, "%s/blobs/sha256", out);
	mkdir(p, 0755);
	free(p);
	for (int i = 0; i < n; i++) {
		char id[DIGEST_STR_MAX];
		uint8_t magic[4] = { 0 };
		uint64_t bytes;

		if (diff_id(layers[i], id, &bytes) < 0 ||
		    put_file(out, layers[i], d, &size, magic) < 0)
			return 1;
		total += bytes;
		json_array_append_new(ids, json_string(id));
		json_array_append_new(descs,
				      json_pack("{s:s,s:s,s:I}", "mediaType", media_type(magic),
						"digest", d, "size", (json_int_t)size));
	}
	if (put_json(out,
		     json_pack("{s:s,s:s,s:{s:[s],s:[s]},s:{s:s,s:o}}", "architecture",
			       OCI_HOST_ARCH, "os", "linux", "config", "Env", "PATH=/bin", "Cmd",
			       "/bin/sh", "rootfs", "type", "layers", "diff_ids", ids),
		     cd, &csize) < 0 ||
	    put_json(out,
		     json_pack("{s:i,s:s,s:{s:s,s:s,s:I},s:o}", "schemaVersion", 2, "mediaType",
			       OCI_MT_MANIFEST, "config", "mediaType", OCI_MT_CONFIG, "digest", cd,
			       "size", (json_int_t)csize, "layers", descs),
		     md, &msize) < 0 ||
	    write_text(out, "index.json",
		       json_pack("{s:i,s:[{s:s,s:s,s:I,s:{s:s}}]}", "schemaVersion", 2, "manifests",
				 "mediaType", OCI_MT_MANIFEST, "digest", md, "size",
				 (json_int_t)msize, "annotations",
				 "org.opencontainers.image.ref.name", "latest")) < 0 ||
	    write_text(out, "oci-layout", json_pack("{s:s}", "imageLayoutVersion", "1.0.0")) < 0) {
		perror(out);
		return 1;
	}
	printf("%s: %d layers, %llu bytes uncompressed, manifest %s\n", out, n,
	       (unsigned long long)total, md);
	return 0;
}

static int resolve(const char *src)
{
	gantry_error_t err = NULL;
	double t0 = now(), t;
	struct image img;
	struct stat st;

	if (image_resolve(src, &img, &err) < 0) {
		gantry_error_print(&err);
		return 1;
	}
	t = now() - t0;
	stat(img.path, &st);
	printf("%s: %.1f MiB image in %.2f s (%s)\n", img.path, (double)st.st_size / (1 << 20), t,
	       img.converted ? "converted" : "cached");
	image_free(&img);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && strcmp(argv[1], "layout") == 0)
		return layout(argv[2], argv + 3, argc - 3);
	if (argc == 3 && strcmp(argv[1], "resolve") == 0)
		return resolve(argv[2]);
	fprintf(stderr, "usage: image_bench layout OUTDIR LAYER... | resolve SRC\n");
	return 2;
}
