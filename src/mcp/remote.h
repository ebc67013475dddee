/* A remote MCP server over streamable HTTP, as the gateway calls it: each
 * JSON-RPC request a POST to its URL with the credential added here (the
 * guest never sees it), the answer a JSON body or a server-sent event
 * stream, read to the response with the request's id. Dials are checked
 * where they happen (mcp_addr_refused: no private, link-local or metadata
 * address, whatever the name resolves to); no redirect is followed, no
 * proxy taken from the environment; an answer over MCP_FRAME_MAX is
 * refused. One request at a time per remote. */
#ifndef GANTRY_MCP_REMOTE_H
#define GANTRY_MCP_REMOTE_H

#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>

#include "common/error.h"
#include "mcp/spec.h"

#define MCP_REMOTE_TIMEOUT_S 60
#define MCP_PROTOCOL_VERSION "2025-06-18"

/* How a confined gateway reaches the world, where it can open no file:
 * its own look-ups to these nameservers (the address checked, then pinned
 * for the dial), and the hosts' trust store in memory. NULL: libcurl's
 * resolver and the system's store. */
struct mcp_net {
	const struct sockaddr_in *up;
	size_t nr_up;
	const char *trust;
	size_t trust_len;
};

struct mcp_remote {
	struct mcp_remote_spec spec;
	const struct mcp_net *net; /* borrowed */
	char *auth;			   /* the credential's value (explicit_bzero'd) */
	/* Values never returned: the credential first, the spec's, and the
	 * credential a renewal replaced last (prev_kept). */
	char *redact[MCP_REDACT_MAX + 2];
	size_t nr_redact;
	bool prev_kept;
	/* auth and redact, which a renewal changes from another thread where
	 * the gateway is not confined; never held across a request (lock is). */
	pthread_mutex_t secrets_lock;
	char *session; /* Mcp-Session-Id, once initialized */
	bool ready;
	long next_id;
	pthread_mutex_t lock;
};

/* Take spec's secrets from the environment (each variable unset once
 * read): its credential and redactions. A variable it names that is not
 * set is an error. With from_env false, only the spec: the values come
 * later (mcp_remote_secrets_json's, to a confined gateway). */
int mcp_remote_open(struct mcp_remote *r, const char *spec, bool from_env, gantry_error_t *err);
/* Its secret values as JSON ({"auth":V|null,"redact":[V...]}), and back. */
json_t *mcp_remote_secrets_json(const struct mcp_remote *r);
int mcp_remote_secrets_take(struct mcp_remote *r, json_t *j, gantry_error_t *err);
void mcp_remote_close(struct mcp_remote *r);

/* A new value for the credential (custody's refreshed access token),
 * taken by the next request; the one it replaces stays redacted. */
void mcp_remote_auth_renew(struct mcp_remote *r, const char *value);
/* Call method with params (borrowed) and wait for the answer: 0 with
 * *result or *error (a JSON-RPC error object; owned), -1 when the remote
 * could not be reached or answered nonsense. Initializes the session
 * first when it has none. */
int mcp_remote_call(struct mcp_remote *r, const char *method, json_t *params, json_t **result,
		    json_t **error, gantry_error_t *err);

/* text with every one of r's secret values (and its JSON-escaped form)
 * replaced by "[redacted]"; allocated. */
char *mcp_redact(struct mcp_remote *r, const char *text);

#endif
