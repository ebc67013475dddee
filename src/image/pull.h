/* Registry images as an image source: the reference's manifest is fetched
 * (following an index or manifest list to the platform's manifest), every
 * document verified against the digest that names it, and the layers
 * streamed from the registry into a struct flatten. The platform
 * manifest's digest is the cache key, as for an OCI layout. */
#ifndef GANTRY_IMAGE_PULL_H
#define GANTRY_IMAGE_PULL_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "image/digest.h"
#include "image/manifest.h"
#include "image/reference.h"
#include "image/registry.h"

struct flatten;

/* Indexes followed to a manifest. */
#define PULL_MAX_NESTING 4
/* "linux/arm64/v8" at most this long. */
#define PLATFORM_MAX 64

struct pull_opts {
	const char *platform; /* "linux/ARCH[/VARIANT]", NULL: this host's */
	const char *insecure; /* more plain-HTTP registries, or NULL */
	int progress_fd;      /* per-layer progress on this terminal; 0: none */
	const struct gantry_cancel *cancel; /* ends the pull at its next wait, or NULL */
};

struct platform {
	char arch[PLATFORM_MAX];
	char variant[PLATFORM_MAX]; /* "" for any */
	char str[PLATFORM_MAX];	    /* "linux/amd64" */
};

struct pull {
	struct image_ref ref;
	char *name; /* canonical reference: the index.json key */
	struct platform platform;
	struct registry reg;
	int progress_fd;
	char manifest_digest[DIGEST_STR_MAX];
	struct oci_manifest manifest;
	bool platform_unchecked; /* no index entry named the platform */
	char *config;		 /* read early to check the platform, or NULL */
	size_t config_len;
};

/* "linux/amd64", "linux/arm64/v8"; NULL or "" is this host's. */
int platform_parse(const char *s, struct platform *p, gantry_error_t *err);
/* Parse ref and find its platform manifest; a manifest that no index
 * entry placed is checked against the platform by its config. */
int pull_open(const struct image_ref *ref, const struct pull_opts *o, struct pull *p,
	      gantry_error_t *err);
void pull_close(struct pull *p);
/* The image config blob, verified and NUL-terminated. */
int pull_read_config(struct pull *p, char **buf, size_t *len, gantry_error_t *err);
/* Stream every layer into f; diff_ids (n, may be 0) are checked. */
int pull_apply(struct pull *p, struct flatten *f, char *const *diff_ids, size_t n,
	       gantry_error_t *err);

#endif
