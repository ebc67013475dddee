/* libFuzzer target for -mcp-remote specs (mcp/spec.h): any text fails
 * with one line or parses to a remote with a valid name, an https URL or
 * an http one to loopback, a known auth, bounded globs; and the glob
 * matcher and tool filter take any name. The input's first line is the
 * spec, the rest a tool name to filter. The first line also goes, as the
 * URL a guest's login opens, through the OAuth bridge's reading of its
 * callback (oauth_callback_port): 0, or a port it names as loopback. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "mcp/spec.h"
#include "sandbox/oneshot_oauth.h"

#include "check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = xmalloc(size + 1), *nl;
	const char *tool = "";
	struct mcp_remote_spec r;
	gantry_error_t err = NULL;

	memcpy(s, data, size);
	s[size] = '\0';
	if ((nl = strchr(s, '\n')) != NULL) {
		*nl = '\0';
		tool = nl + 1;
	}
	if (mcp_remote_spec_parse(s, &r, &err) < 0) {
		check(err != NULL && strchr(gantry_error_str(err), '\n') == NULL);
		gantry_error_free(&err);
	} else {
		check(r.id[0] && strlen(r.id) <= MCP_ID_MAX && strstr(r.id, "__") == NULL);
		check(strcmp(r.id, "fs") != 0);
		check(strncmp(r.url, "https://", 8) == 0 ||
		      (strncmp(r.url, "http://", 7) == 0 && r.loopback));
		check(r.auth == MCP_AUTH_NONE || r.auth_secret != NULL ||
		      (r.auth == MCP_AUTH_CUSTODY && r.custody != NULL));
		check(r.auth != MCP_AUTH_HEADER || r.header != NULL);
		check(r.nr_allow <= MCP_GLOBS_MAX && r.nr_deny <= MCP_GLOBS_MAX);
		if (r.nr_allow == 0)
			check(!mcp_tool_allowed(&r, tool));
		(void)mcp_tool_allowed(&r, tool);
		mcp_remote_spec_free(&r);
	}
	(void)mcp_glob(s, tool);
	if (oauth_callback_port(s))
		check(strstr(s, "redirect_uri=") != NULL);
	free(s);
	return 0;
}
