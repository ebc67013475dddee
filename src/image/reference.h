/* Registry image references as Docker and Podman read them: `name`,
 * `name:tag`, `name@sha256:...`, `host[:port]/path[:tag][@digest]`. A name
 * without a registry is on Docker Hub (`docker.io`), a one-component Hub
 * name is under `library/`, and a reference without tag or digest means
 * `latest`. Registry host names themselves are registry_host.h's. Parsing
 * only: nothing here touches the network. */
#ifndef GANTRY_IMAGE_REFERENCE_H
#define GANTRY_IMAGE_REFERENCE_H

#include "common/error.h"

#define REF_DOCKER_HUB	"docker.io"
#define REF_DEFAULT_TAG "latest"
/* Docker's limits: the whole name, and a tag. */
#define REF_NAME_MAX 255
#define REF_TAG_MAX  128

struct image_ref {
	char *registry;	  /* "docker.io", "127.0.0.1:5000", "[::1]:5000" */
	char *repository; /* "library/python" */
	char *tag;	  /* NULL when only a digest was given */
	char *digest;	  /* "sha256:<hex>" or NULL */
};

/* Parse s; errors are one line saying what is wrong with it. */
int image_ref_parse(const char *s, struct image_ref *out, gantry_error_t *err);
void image_ref_free(struct image_ref *r);
/* The canonical form, "docker.io/library/python:3.12" (tag and digest both
 * when both were given); caller frees. */
char *image_ref_string(const struct image_ref *r);
/* What the manifest is fetched by: the digest when there is one. */
const char *image_ref_object(const struct image_ref *r);

#endif
