/* The Distribution API v2 client (libcurl): GET of manifests and blobs of
 * one repository, with the registry's authentication (anonymous, HTTP
 * Basic, or a Bearer token from the realm its WWW-Authenticate names) and
 * redirects followed by hand so credentials never go to another host. The
 * body of a response is pulled, not pushed: registry_pull is a
 * blob_pull_fn, so a layer streams from the socket through the digest check
 * into the EROFS writer. Proxies come from the environment as libcurl reads
 * them (http_proxy, https_proxy, no_proxy). */
#ifndef GANTRY_IMAGE_REGISTRY_H
#define GANTRY_IMAGE_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/cancel.h"
#include "common/error.h"
#include "image/creds.h"
#include "image/http.h"

/* Hops one request may take. */
#define REGISTRY_MAX_REDIRECTS 10
/* Body bytes kept from an error response, for its message. */
#define REGISTRY_ERROR_BODY_MAX (64u * 1024u)
/* Buffered body bytes before the transfer pauses for the reader. */
#define REGISTRY_STREAM_BUF (1u << 20)
/* A connection that moves no byte for this long is dead. */
#define REGISTRY_STALL_SECONDS	 60
#define REGISTRY_CONNECT_SECONDS 30

struct registry {
	char *name;	  /* host[:port] of the reference */
	char *repository; /* "library/python" */
	char *base;	  /* "https://registry-1.docker.io" */
	const char *insecure; /* extra plain-HTTP registries, or NULL */
	/* Fired, it ends the transfer at its next wait (ECANCELED); or NULL. */
	const struct gantry_cancel *cancel;
	struct registry_creds creds;
	bool creds_loaded;
	char *authz; /* "Authorization: ..." for the registry's host */
	void *multi; /* CURLM */
	void *easy;  /* CURL, reused: one connection per registry */
};

struct registry_resp {
	struct registry *reg;
	struct http_head head; /* of the final response */
	char *buf;
	size_t len, cap;
	bool handed, paused, overflow, done, started;
	int result; /* CURLcode once done */
	char errbuf[256];
};

/* Set up for registry (host[:port]) and repository; nothing is sent yet.
 * insecure (may be NULL) lists more plain-HTTP registries. */
int registry_open(const char *registry, const char *repository, const char *insecure,
		  struct registry *r, gantry_error_t *err);
void registry_close(struct registry *r);
/* Use these credentials instead of looking them up (login). */
void registry_set_creds(struct registry *r, const char *user, const char *pass);
/* GET /v2/<repository>/<kind>/<object> (kind "manifests" or "blobs"),
 * through authentication and redirects, to a 2xx response whose body
 * registry_pull then reads. what names the object in errors. */
int registry_get(struct registry *r, const char *kind, const char *object, const char *accept,
		 const char *what, struct registry_resp *resp, gantry_error_t *err);
/* GET /v2/ with authentication: does the registry take our credentials? */
int registry_ping(struct registry *r, gantry_error_t *err);
/* blob_pull_fn over a response's body. */
ssize_t registry_pull(void *arg, const void **buf, gantry_error_t *err);
void registry_resp_end(struct registry_resp *resp);

#endif
