/* The process flags of `gantry exec` (flags.h's FLAGS_PROCESS): -e and
 * --env-file as Docker reads them. A variable named without a value takes
 * this process's own, and is left out when it has none. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/flags.h"
#include "common/files.h"
#include "common/util.h"
#include "sandbox/process.h"

#define ENV_FILE_MAX (1u << 20)

/* NAME=VALUE as it is; NAME alone from our environment, or nothing. */
static int env_one(struct sandbox_process_opts *o, const char *spec, gantry_error_t *err)
{
	cleanup_free char *full = NULL;
	const char *v;

	if (strchr(spec, '=') || *spec == '\0')
		return sandbox_process_opts_env(o, spec, err);
	v = getenv(spec);
	if (v == NULL)
		return 0; /* as Docker: unset here, unset there */
	xasprintf(&full, "%s=%s", spec, v);
	return sandbox_process_opts_env(o, full, err);
}

int cli_flag_env(void *opaque, const char *spec, gantry_error_t *err)
{
	return env_one(opaque, spec, err);
}

int cli_flag_env_file(void *opaque, const char *path, gantry_error_t *err)
{
	cleanup_free char *text = NULL;
	size_t len, lineno = 0;
	char *line, *next;

	if (read_file_max(path, ENV_FILE_MAX, &text, &len, err) < 0)
		return -1;
	if (text == NULL)
		return gantry_error(err, ENOENT, "%s", path);
	if (memchr(text, '\0', len))
		return gantry_error(err, 0, "%s: a NUL byte", path);
	for (line = text; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		line += strspn(line, " \t");
		if (*line && line[strlen(line) - 1] == '\r')
			line[strlen(line) - 1] = '\0';
		if (*line == '\0' || *line == '#')
			continue;
		if (env_one(opaque, line, err) < 0)
			return gantry_error_prefix(err, "%s:%zu", path, lineno);
	}
	return 0;
}
