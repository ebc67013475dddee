/* The JSON documents that name an image's blobs: OCI image indexes (and
 * Docker manifest lists), OCI image manifests (and Docker schema 2
 * manifests), and docker save's manifest.json. Parsers only: they check
 * types, digests and media types and copy out what the image sources use;
 * fetching and verifying the blobs is the sources' work. */
#ifndef GANTRY_IMAGE_MANIFEST_H
#define GANTRY_IMAGE_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* JSON documents larger than this are refused before parsing. */
#define OCI_JSON_MAX (4u << 20)
/* More layers than this is not an image anyone built on purpose. */
#define OCI_MAX_LAYERS 1024
/* Entries of one index. */
#define OCI_MAX_MANIFESTS 4096

#define OCI_MT_INDEX	   "application/vnd.oci.image.index.v1+json"
#define OCI_MT_MANIFEST	   "application/vnd.oci.image.manifest.v1+json"
#define OCI_MT_CONFIG	   "application/vnd.oci.image.config.v1+json"
#define DOCKER_MT_LIST	   "application/vnd.docker.distribution.manifest.list.v2+json"
#define DOCKER_MT_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define DOCKER_MT_CONFIG   "application/vnd.docker.container.image.v1+json"

/* The platform this binary runs images for, in OCI's words. */
#if defined(__x86_64__)
#define OCI_HOST_ARCH "amd64"
#elif defined(__aarch64__)
#define OCI_HOST_ARCH "arm64"
#else
#error "unsupported host architecture"
#endif

struct oci_descriptor {
	char *media_type; /* may be NULL in an index entry */
	char *digest;	  /* valid sha256 digest */
	int64_t size;	  /* >= 0 */
	/* Index entries only; NULL when absent. */
	char *os;
	char *architecture;
	char *variant;
	bool attestation; /* a BuildKit attestation entry, never an image */
};

struct oci_index {
	struct oci_descriptor *manifests;
	size_t n;
};

struct oci_manifest {
	struct oci_descriptor config;
	struct oci_descriptor *layers;
	size_t nlayers;
};

enum oci_kind {
	OCI_KIND_INDEX,
	OCI_KIND_MANIFEST,
};

/* Which of the two a document is: its mediaType, else its shape. */
int oci_kind(const char *buf, size_t len, enum oci_kind *kind, gantry_error_t *err);
int oci_index_parse(const char *buf, size_t len, struct oci_index *out, gantry_error_t *err);
void oci_index_free(struct oci_index *ix);
/* The entry for linux/arch (or the only image entry); an error listing
 * the platforms there are when none fits. */
int oci_index_select(const struct oci_index *ix, const char *arch,
		     const struct oci_descriptor **out, gantry_error_t *err);
/* The same, with the variant ("v8") required when not NULL. */
int oci_index_select_variant(const struct oci_index *ix, const char *arch, const char *variant,
			     const struct oci_descriptor **out, gantry_error_t *err);
int oci_manifest_parse(const char *buf, size_t len, struct oci_manifest *out, gantry_error_t *err);
void oci_manifest_free(struct oci_manifest *m);
bool oci_media_is_index(const char *mt);
bool oci_media_is_manifest(const char *mt);

/* docker save's manifest.json: paths inside the tar. */
struct docker_manifest {
	char *config;
	char **layers;
	size_t nlayers;
};
/* The tar must hold exactly one image. */
int docker_manifest_parse(const char *buf, size_t len, struct docker_manifest *out,
			  gantry_error_t *err);
void docker_manifest_free(struct docker_manifest *m);

#endif
