/* The process flags of `gantry exec` (flags.h's FLAGS_PROCESS): -e and
 * --env-file as Docker reads them. A variable named without a value takes
 * this process's own, and is left out when it has none. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/flags.h"
#include "mcp/gateway.h"
#include "oauth/custody.h"
#include "sandbox/lifecycle.h"
#include "common/files.h"
#include "common/util.h"

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

static struct secret_store *secrets_of(struct sandbox_opts *o)
{
	if (o->secrets == NULL) {
		o->secrets = xzalloc(sizeof(*o->secrets));
		secret_store_init(o->secrets);
	}
	return o->secrets;
}

int cli_flag_secret(void *opaque, const char *spec, gantry_error_t *err)
{
	char name[SECRET_NAME_MAX + 1];
	size_t n = strspn(spec, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_");

	struct secret_store *st = secrets_of(opaque);
	char *value;

	snprintf(name, sizeof(name), "%.*s", (int)MIN(n, (size_t)SECRET_NAME_MAX), spec);
	value = getenv(name);
	/* Given twice: its value was taken the first time. */
	if (value == NULL && strchr(spec, '=') == NULL && secret_store_has(st, name))
		return 0;
	if (secret_store_add(st, spec, value, err) < 0)
		return -1;
	/* Taken: gone from this process's environment too, so that neither
	 * its /proc/PID/environ nor a process it starts has it (the value is
	 * in the arena). */
	if (value && strchr(spec, '=') == NULL) {
		explicit_bzero(value, strlen(value));
		unsetenv(name);
	}
	return 0;
}

int cli_flag_secret_file(void *opaque, const char *path, gantry_error_t *err)
{
	return secret_store_add_dotenv(secrets_of(opaque), path, err);
}

int cli_flag_mcp_remote(void *opaque, const char *spec, gantry_error_t *err)
{
	return mcp_gateway_add(opaque, spec, err);
}

char *cli_config_path(const char *file)
{
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	char *path = NULL;

	if (xdg && *xdg == '/')
		xasprintf(&path, "%s/gantry/%s", xdg, file);
	else if (home && *home == '/')
		xasprintf(&path, "%s/.config/gantry/%s", home, file);
	return path;
}

int cli_oauth_custody(struct oauth_custody *c, bool on, struct mcp_gateway *gw,
		      struct sandbox_opts *o, gantry_error_t *err)
{
	if (on) {
		char *config = cli_config_path("oauth-providers.json");

		if (oauth_custody_open(c, config, err) < 0) {
			free(config);
			return gantry_error_prefix(err, "-oauth-custody");
		}
		o->oauth_custody = c;
		/* A sandbox's supervisor reads the same file at each boot. */
		free(o->oauth_providers);
		o->oauth_providers = config;
	}
	return gw ? mcp_gateway_custody(gw, on ? c : NULL, err) : 0;
}

int cli_mcp_fs(struct mcp_gateway *gw, const struct cli_mcp_fs *f, gantry_error_t *err)
{
	if (!f->on && (f->root || f->user))
		return gantry_error(err, EINVAL, "-mcp-fs-root and -mcp-fs-user need -mcp");
	return f->on ? mcp_gateway_fs(gw, f->root, f->user, err) : 0;
}
