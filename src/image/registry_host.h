/* Registry host names: host[:port] as references and logins name them
 * (DNS labels, an IPv4 address or [IPv6], an optional port), Docker Hub's
 * several names, the host the Distribution API is spoken to, and which
 * registries get plain HTTP: those on loopback and those the user marks
 * insecure. Parsing only: nothing here touches the network. */
#ifndef GANTRY_IMAGE_REGISTRY_HOST_H
#define GANTRY_IMAGE_REGISTRY_HOST_H

#include <stdbool.h>
#include <stddef.h>

/* Where Docker Hub (REF_DOCKER_HUB) serves the Distribution API. */
#define REGISTRY_HUB_API_HOST "registry-1.docker.io"
/* Registries (host[:port], comma-separated) spoken to over plain HTTP even
 * though they are not on loopback. */
#define REGISTRY_INSECURE_ENV "GANTRY_INSECURE_REGISTRIES"

/* Whether the n bytes at s are a host[:port]. */
bool registry_host_valid(const char *s, size_t n);
/* Whether host is one of Docker Hub's names (any case). */
bool registry_is_hub(const char *host);
/* A registry name as users type it ("docker.io", "index.docker.io",
 * "https://index.docker.io/v1/", "localhost:5000/") as the bare
 * host[:port] it names, "docker.io" for Docker Hub; NULL when it is not a
 * registry name. Caller frees. */
char *registry_normalize(const char *name);
/* The host[:port] the Distribution API is spoken to for a registry. */
const char *registry_api_host(const char *registry);
/* Whether host (host[:port]) names a loopback address. */
bool registry_is_loopback(const char *host);
/* Plain HTTP for a registry: loopback ones, and those listed in
 * GANTRY_INSECURE_REGISTRIES or extra (comma-separated, may be NULL). */
bool registry_plain_http(const char *host, const char *extra);

#endif
