/* Go-style command-line flags, as the reference CLI takes them: `-name value`,
 * `-name=value`, `--name` spellings alike; booleans as `-name`,
 * `-name=true|false`; a bare `--` ends the flags. */
#ifndef GANTRY_CLI_FLAGS_H
#define GANTRY_CLI_FLAGS_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include <stdio.h>

#include "common/error.h"

enum flag_kind {
	FLAG_BOOL,
	FLAG_STRING,
	FLAG_UINT,
	FLAG_FUNC, /* repeatable: fn(opaque, value) */
};

struct flag {
	const char *name;
	enum flag_kind kind;
	void *target; /* bool*, const char**, uint64_t*, or opaque for FLAG_FUNC */
	int (*fn)(void *opaque, const char *value, gantry_error_t *err);
	const char *arg; /* placeholder shown in help, e.g. "PATH" */
	const char *help;
	uint64_t max; /* FLAG_UINT upper bound (0 = none) */
};

/* The image, resource and network flags of every command that boots a
 * sandbox (start, one-shot exec), filling a struct sandbox_opts *o
 * (sandbox/lifecycle.h). */
/* clang-format off */
#define FLAGS_SANDBOX(o)                                                              \
	{ "image", FLAG_STRING, &(o)->image, NULL, "SRC",                             \
	  "image: path or registry reference (default: built-in busybox)", 0 },       \
	{ "cpus", FLAG_UINT, &(o)->cpus, NULL, "N", "vCPUs (default 1)", 1024 },      \
	{ "mem", FLAG_UINT, &(o)->mem_mib, NULL, "MiB", "guest memory (default 512)", 0 }, \
	{ "net", FLAG_BOOL, &(o)->net, NULL, NULL,                                    \
	  "guest network (default true; -net=false: only lo)", 0 },                   \
	{ "p", FLAG_FUNC, (o), sandbox_opts_publish, "SPEC",                          \
	  "publish a port: [IP:]HOST:GUEST[/udp] or GUEST (repeatable)", 0 },         \
	{ "publish", FLAG_FUNC, (o), sandbox_opts_publish, "SPEC", "same as -p", 0 }, \
	{ "net-policy", FLAG_STRING, &(o)->net_policy, NULL, "FILE",                  \
	  "egress policy, JSON (see docs/network.md; default: allow, local wall)", 0 }, \
	{ "allow-local-net", FLAG_BOOL, &(o)->allow_local_net, NULL, NULL,            \
	  "let the guest reach local networks and the host", 0 },                     \
	{ "proxy", FLAG_STRING, &(o)->proxy, NULL, "URL",                             \
	  "the workload's proxy: sets HTTP(S)_PROXY, ALL_PROXY and lower case", 0 },  \
	{ "no-proxy", FLAG_STRING, &(o)->no_proxy, NULL, "LIST",                      \
	  "NO_PROXY with -proxy (default localhost,127.0.0.1,::1)", 0 },              \
	{ "proxy-enforce", FLAG_BOOL, &(o)->proxy_enforce, NULL, NULL,                \
	  "with -proxy: deny direct TCP 80/443 and UDP 443", 0 },                     \
	{ "share", FLAG_FUNC, (o), sandbox_opts_share, "SPEC",                        \
	  "share a host directory: TAG=HOST_PATH[@CTR_PATH][,ro][,nogit][,uid=N,gid=N]", 0 }, \
	{ "v", FLAG_FUNC, (o), sandbox_opts_volume, "HOST:CTR[:ro]",                  \
	  "docker's spelling of -share HOST_PATH at CTR_PATH (repeatable)", 0 },      \
	{ "volume", FLAG_FUNC, (o), sandbox_opts_volume, "HOST:CTR[:ro]", "same as -v", 0 }, \
	{ "m", FLAG_FUNC, (o), sandbox_opts_memory, "SIZE",                           \
	  "guest memory as docker's -m: 1g, 512m (whole MiB)", 0 },                   \
	{ "memory", FLAG_FUNC, (o), sandbox_opts_memory, "SIZE", "same as -m", 0 },   \
	{ "process-isolation", FLAG_STRING, &(o)->isolation, NULL, "MODE",            \
	  "confine the workers: auto, required or off (default auto, or "           \
	  "$GANTRY_PROCESS_ISOLATION)", 0 }
/* clang-format on */

/* The flags of the process a session runs (exec, one-shot or NAME),
 * filling a struct sandbox_process_opts *po (sandbox/process.h). */
int cli_flag_env(void *opaque, const char *spec, gantry_error_t *err);
int cli_flag_env_file(void *opaque, const char *path, gantry_error_t *err);
/* -secret SPEC and -secret-file FILE into opaque's (struct sandbox_opts)
 * secrets; a bare NAME takes its value from this process's environment. */
int cli_flag_secret(void *opaque, const char *spec, gantry_error_t *err);
int cli_flag_secret_file(void *opaque, const char *path, gantry_error_t *err);
/* -mcp-remote SPEC (opaque = struct mcp_gateway *): a remote MCP server
 * for the guest, its secrets taken from this environment (mcp/gateway.h). */
int cli_flag_mcp_remote(void *opaque, const char *spec, gantry_error_t *err);
#define FLAG_MCP_REMOTE(gw)                                                                        \
	{ "mcp-remote", FLAG_FUNC, (gw), cli_flag_mcp_remote,                                     \
	  "name=ID,url=URL[,auth=bearer:VAR|header:NAME:VAR|custody:PROVIDER][,allow=GLOB]..."   \
	  "[,deny=GLOB]..."                                                                       \
	  "[,redact=VAR]...",                                                                     \
	  "a remote MCP server the guest reaches through gantry-guest mcp-proxy, the credential " \
	  "added on the host (repeatable; see docs/agents.md)",                                   \
	  0 }
/* ~/.config/gantry/FILE (or $XDG_CONFIG_HOME's), allocated; NULL when
 * neither names an absolute directory. */
char *cli_config_path(const char *file);
/* -oauth-custody: when on, custody opened into c (its providers from
 * ~/.config/gantry/oauth-providers.json, that path o's oauth_providers)
 * and given to o; then each auth=custody: remote of gw (NULL: none) its
 * access token (an error without it). */
struct oauth_custody;
struct mcp_gateway;
struct sandbox_opts;
int cli_oauth_custody(struct oauth_custody *c, bool on, struct mcp_gateway *gw,
		      struct sandbox_opts *o, gantry_error_t *err);
/* -mcp, -mcp-fs-root, -mcp-fs-user into struct cli_mcp_fs; then
 * cli_mcp_fs() gives them to the gateway (either of the last two without
 * -mcp is an error). */
struct cli_mcp_fs {
	bool on;
	const char *root, *user;
};
int cli_mcp_fs(struct mcp_gateway *gw, const struct cli_mcp_fs *f, gantry_error_t *err);
#define FLAGS_MCP_FS(f)                                                                           \
	{ "mcp", FLAG_BOOL, &(f)->on, NULL, NULL,                                                 \
	  "the MCP gateway with its fs server (tools fs__read_file, fs__list_directory), "      \
	  "for gantry-guest mcp-proxy (see docs/agents.md)",                                    \
	  0 },                                                                                    \
	{ "mcp-fs-root", FLAG_STRING, &(f)->root, NULL, "PATH",                                  \
	  "the fs server's root in the sandbox (default /)", 0 },                                \
	{ "mcp-fs-user", FLAG_STRING, &(f)->user, NULL, "USER",                                  \
	  "the fs server's user: nobody (the default), UID or UID:GID; never root or "        \
	  "its group", 0 }
#define FLAG_OAUTH_CUSTODY(on)                                                                    \
	{ "oauth-custody", FLAG_BOOL, (on), NULL, NULL,                                          \
	  "serve gantry-guest oauth login|token PROVIDER: the login done and its refresh "      \
	  "token kept on the host, the guest given access tokens (see docs/agents.md)",        \
	  0 }
/* clang-format off */
#define FLAGS_PROCESS(po)                                                             \
	{ "e", FLAG_FUNC, (po), cli_flag_env, "NAME[=VALUE]",                         \
	  "set a variable of the process (NAME alone: its value here; repeatable)", 0 }, \
	{ "env", FLAG_FUNC, (po), cli_flag_env, "NAME[=VALUE]", "same as -e", 0 },    \
	{ "env-file", FLAG_FUNC, (po), cli_flag_env_file, "FILE",                     \
	  "-e for each line of FILE: NAME=VALUE or NAME; # starts a comment", 0 },    \
	{ "w", FLAG_STRING, &(po)->workdir, NULL, "DIR",                              \
	  "working directory, absolute (default: the image's WorkingDir, else /)", 0 }, \
	{ "workdir", FLAG_STRING, &(po)->workdir, NULL, "DIR", "same as -w", 0 },     \
	{ "u", FLAG_STRING, &(po)->user, NULL, "USER[:GROUP]",                        \
	  "run as this user, a name or uid (default: the image's User)", 0 },         \
	{ "user", FLAG_STRING, &(po)->user, NULL, "USER[:GROUP]", "same as -u", 0 },  \
	{ "entrypoint", FLAG_STRING, &(po)->entrypoint, NULL, "CMD",                  \
	  "replaces the image's Entrypoint and its Cmd (\"\": neither)", 0 }
/* -secret and -secret-file (FLAG_FUNCs for opaque = struct sandbox_opts *). */
#define FLAGS_SECRETS(o)                                                              \
	{ "secret", FLAG_FUNC, (o), cli_flag_secret, "SPEC",                          \
	  "a secret in the process's environment: NAME (its value here), "           \
	  "NAME=@FILE or NAME='!CMD ARGS' [,ttl=DUR] (repeatable); NAME@HOST,...: "   \
	  "for git on those hosts only; NAME@HOST,...,inject [,header=H] "            \
	  "[,format=F]: a placeholder, the value injected into HTTPS to those hosts " \
	  "(its credential headers, or H)", 0 },                                      \
	{ "secret-file", FLAG_FUNC, (o), cli_flag_secret_file, "FILE",                \
	  "secrets from a dotenv file: NAME=VALUE lines, read into memory only", 0 }
/* clang-format on */

/* Parse argv[0..argc) against flags; on success *rest is the index of the
 * first positional argument (after `--` if present) and *dashdash tells
 * whether `--` was seen. Errors name the flag. */
int flags_parse(const char *cmd, const struct flag *flags, int argc, char **argv, int *rest,
		bool *dashdash, gantry_error_t *err);
void flags_usage(FILE *out, const struct flag *flags);
/* flags_parse for a command whose flags include a boolean "help": 1 to go
 * on; 0 after printing usage() on stdout because help was asked for; -2
 * after printing the error. Callers return -r when r <= 0. */
int flags_parse_cmd(const char *cmd, const struct flag *flags, int argc, char **argv, int *rest,
		    bool *dashdash, void (*usage)(FILE *out, const struct flag *flags));
/* flags_parse_cmd with flags before, between and after positional
 * arguments (at most max, into pos; *npos how many): `cmd NAME SPEC
 * --json` and `cmd --json NAME SPEC` alike. Too many is an error (-2). */
int flags_parse_mixed(const char *cmd, const struct flag *flags, int argc, char **argv, char **pos,
		      int max, int *npos, void (*usage)(FILE *out, const struct flag *flags));
/* argv is exactly one of -h, -help, --help. */
bool flags_help_only(int argc, char **argv);
/* For commands that take NAME... and no flags: the count of names, 0
 * after printing the help, -1 after a usage error. */
int flags_names(const char *cmd, const char *what, int argc, char **argv);
/* fn for each name in turn, each failure printed: 0 when all went well,
 * else the last failure's status (CLI_EXIT_CANCELLED ends the round). */
int cli_each_name(int argc, char **argv, int (*fn)(const char *name, gantry_error_t *err));
/* Print a JSON value indented, ASCII only, and a newline. */
void cli_print_json(json_t *v);
/* o's string under key, as it is (sanitise before printing); none when
 * it has none. */
const char *cli_json_str(json_t *o, const char *key, const char *none);
/* `CMD NAME [--json]`: get(NAME) gives a JSON object, printed as JSON with
 * --json or by table() otherwise; what names the command's topic for the
 * usage error (see gantry WHAT -help). */
int cli_show(const char *cmd, const char *what, int argc, char **argv,
	     void (*usage)(FILE *out, const struct flag *flags),
	     int (*get)(const char *name, json_t **out, gantry_error_t *err),
	     void (*table)(json_t *o));
/* s is no sandbox name but reads as an image reference (a tag, a digest
 * or a registry path): the mistake of typing docker's `run IMAGE`. */
bool cli_image_like(const char *s);
/* Exit statuses, one rule for every command (docs/cli.md): 0 done; 2 the
 * command line was wrong (a flag, an argument, a value out of range, a
 * spec, a name: nothing was done); 1 the operation failed (no such
 * sandbox, a registry's error); exec and run pass the workload's status
 * and say 125 for their own failures, 126 and 127 as a shell does. */
#define CLI_EXIT_FAILED	   1
#define CLI_EXIT_USAGE	   2
#define CLI_EXIT_CANCELLED 130 /* as a shell reports a command ended by SIGINT */
/* Print the error and give the exit status: failed; CLI_EXIT_USAGE for an
 * error about the caller's input (gantry_error_is_usage); or
 * CLI_EXIT_CANCELLED when the call was cancelled. */
int cli_fail(gantry_error_t *err, int failed);
/* A command's exit status: 0, or cli_fail(err, 1) when r < 0. */
int cli_finish(gantry_error_t *err, int r);
/* getenv: where a sandbox's secrets from the environment come from for
 * the library's calls that take a sandbox_env_fn. */
const char *cli_getenv(const char *name);

#endif
