/* A remote MCP server the gateway calls for the guest (-mcp-remote SPEC,
 * grammar 2.4 of the reference): comma-separated key=value,
 *   name=ID          required; [A-Za-z0-9][A-Za-z0-9._-]{0,30}, no "__",
 *                    not "fs" (the built-in server's); its tools are
 *                    ID__TOOL to the guest
 *   url=URL          required; https, or http to a loopback literal only;
 *                    no user:password@; a literal private, link-local,
 *                    CGNAT or metadata address refused (names are checked
 *                    again where they are dialed: mcp_addr_refused)
 *   auth=bearer:SECRET | header:NAME:SECRET | custody:PROVIDER
 *                    the credential the gateway adds to each request,
 *                    SECRET the name of a variable of the caller's
 *                    environment (taken into memory, never into the guest)
 *   allow=GLOB, deny=GLOB (repeatable)  which tools the guest sees: none
 *                    without an allow; deny wins
 *   redact=SECRET    (repeatable) a value never returned to the guest
 * Pure: no system calls; fuzzed (tests/fuzz/fuzz_mcp_spec.c). */
#ifndef GANTRY_MCP_SPEC_H
#define GANTRY_MCP_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "common/error.h"

#define MCP_ID_MAX	 31
#define MCP_GLOBS_MAX	 16
#define MCP_REDACT_MAX	 8
#define MCP_SPEC_MAX	 4096
#define MCP_SECRET_NAME_MAX 128

/* MCP_AUTH_CUSTODY: a bearer, the access token OAuth custody holds for
 * the provider (mcp_gateway_custody). */
enum mcp_auth { MCP_AUTH_NONE, MCP_AUTH_BEARER, MCP_AUTH_HEADER, MCP_AUTH_CUSTODY };

struct mcp_remote_spec {
	char id[MCP_ID_MAX + 1];
	char *url;
	bool loopback; /* http to a loopback literal: the one place loopback is dialed */
	enum mcp_auth auth;
	char *header;	   /* MCP_AUTH_HEADER's name */
	char *auth_secret; /* the variable's name */
	char *custody;	   /* MCP_AUTH_CUSTODY's provider */
	char *allow[MCP_GLOBS_MAX], *deny[MCP_GLOBS_MAX];
	size_t nr_allow, nr_deny;
	char *redact[MCP_REDACT_MAX]; /* variables' names */
	size_t nr_redact;
};

/* Parse s into *r (mcp_remote_spec_free it); one line naming what is
 * wrong otherwise. */
int mcp_remote_spec_parse(const char *s, struct mcp_remote_spec *r, gantry_error_t *err);
void mcp_remote_spec_free(struct mcp_remote_spec *r);

/* Does the guest see tool (the remote's own name)? An allow matches and
 * no deny does, and it is no auth or revoke tool. */
bool mcp_tool_allowed(const struct mcp_remote_spec *r, const char *tool);

/* fnmatch(3)-like: `*` any run, `?` one byte, the rest literal. */
bool mcp_glob(const char *glob, const char *s);

/* Is the address one the gateway refuses to dial: private, link-local
 * (the cloud metadata service), CGNAT, unspecified, multicast, and
 * loopback unless loopback_ok? */
bool mcp_addr_refused(const struct sockaddr *sa, bool loopback_ok);

#endif
