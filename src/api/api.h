/* `gantry serve`: the local manager API, HTTP/1.1 with JSON bodies on a
 * Unix socket (libmicrohttpd, thread per connection), over the lifecycle.
 * The contract is api/openapi.yaml, served at /v1/openapi.yaml; the user's
 * page is docs/api.md. The server holds no sandbox state of its own: a
 * backend (the lifecycle's, or a test's stub) does the work, so every
 * sandbox it makes is one the CLI sees, and the other way round. */
#ifndef GANTRY_API_API_H
#define GANTRY_API_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cancel.h"
#include "common/error.h"

#define API_BODY_MAX	     (1u << 20) /* a request's body */
#define API_BODIES_MAX	     (256u << 20) /* every request's body at once */
#define API_CONNECTIONS_MAX  256 /* a listener's: streams, calls and API_PENDING_MAX */
#define API_PENDING_MAX	     32	 /* TCP connections whose request head has not come */
#define API_LIFECYCLE_MAX    8		/* create, start, stop, delete at once */
#define API_EXECS_MAX	     32		/* execs at once */
#define API_OPERATIONS_MAX   1024	/* remembered; the oldest finished go first */
#define API_SUBSCRIBERS_MAX  64		/* of /v1/events */
#define API_SUBSCRIBER_QUEUE 32		/* events held for a slow one; past that it is dropped */
#define API_KEEPALIVE_MS     15000
#define API_KEY_MAX	     128 /* an Idempotency-Key */
#define API_ARGV_MAX	     256
#define API_STDIN_MAX	     (1u << 20)
#define API_OUTPUT_DEFAULT   (1u << 20)
#define API_OUTPUT_MAX	     (16u << 20)
#define API_TIMEOUT_DEFAULT  30
#define API_TIMEOUT_MAX	     3600
#define API_KILL_GRACE_MS    5000  /* from an exec's SIGKILL to its session hung up */
#define API_PROCESSES_MS     30000 /* for a sandbox's process list */

/* An exec request, checked (argv 1..API_ARGV_MAX, limits in range). */
struct api_exec {
	char **argv; /* NULL-terminated */
	size_t argc;
	const char *cwd; /* NULL: the sandbox's own */
	char **env;	 /* NAME=VALUE, NULL-terminated; may be NULL */
	size_t nr_env;
	/* A terminal: in, out and err are one terminal's (its size is the
	 * process's, and a SIGWINCH byte on sig says it changed). */
	bool tty;
	/* argv as it is, no Entrypoint of the image's before it (as E2B's
	 * envd and gantry-init's helper want it). */
	bool raw;
};

/* What an exec's process did. */
struct api_exec_result {
	int exit_code; /* 128 + the signal for a killed one */
	int signal;    /* 0: it exited */
};

/* The work the server hands on. Each call returns 0, or -1 with err set:
 * an error marked as the caller's input (gantry_error_is_usage) is a 400,
 * ENOENT in its errno a 404, anything else a failed operation (409).
 * Calls come from many threads at once. */
struct api_backend {
	/* Every sandbox, as Sandbox objects (api/openapi.yaml), by name. */
	int (*list)(json_t **out, gantry_error_t *err);
	/* One sandbox as a Sandbox object; ENOENT when there is none. */
	int (*get)(const char *name, json_t **out, gantry_error_t *err);
	/* A CreateRequest body, its fields' types checked, no unknown one. */
	int (*create)(json_t *req, const struct gantry_cancel *cancel, gantry_error_t *err);
	int (*start)(const char *name, const struct gantry_cancel *cancel, gantry_error_t *err);
	int (*stop)(const char *name, gantry_error_t *err);
	/* Stop the running sandbox name with a save, which start restores
	 * (`gantry stop -snapshot`); NULL where the backend has none. */
	int (*pause)(const char *name, gantry_error_t *err);
	int (*remove)(const char *name, gantry_error_t *err);
	/* Snapshots (docs/snapshots.md), NULL where the backend has none:
	 * the running sandbox name saved live as snap; a new sandbox name
	 * from snap, running once this returns; every snapshot as `gantry
	 * snapshot ls --json` shows one; one removed (ENOENT: no such). */
	int (*snapshot)(const char *name, const char *snap, gantry_error_t *err);
	int (*start_from)(const char *name, const char *snap, const struct gantry_cancel *cancel,
			  gantry_error_t *err);
	int (*snapshots)(json_t **out, gantry_error_t *err);
	int (*snapshot_remove)(const char *snap, gantry_error_t *err);
	/* Run x in the running sandbox name, its stdin from in, its stdout
	 * to out and its stderr to err (the caller's fds, left open; out and
	 * err may be one); a signal number written as a byte to sig goes to
	 * the process; a fired cancel hangs its session up at once. */
	int (*exec)(const char *name, const struct api_exec *x, int in, int out, int err_fd,
		    int sig, const struct gantry_cancel *cancel, struct api_exec_result *res,
		    gantry_error_t *err);
	/* The processes of running sandbox name's container, as
	 * {"processes": [ProcessInfo...]} (api/openapi.yaml); a fired cancel
	 * ends the call. */
	int (*processes)(const char *name, const struct gantry_cancel *cancel, json_t **out,
			 gantry_error_t *err);
};

struct api_serve_opts {
	const char *socket; /* the Unix socket's path */
	/* Set to end the server: the signal's fd (readable once it came). */
	int stop_fd;
	/* Printed on stdout, a line, once the socket listens; NULL: nothing. */
	const char *ready_line;
	/* Between two keepalive comments of /v1/events; 0: API_KEEPALIVE_MS. */
	unsigned keepalive_ms;
	/* A TCP listener too (HOST:PORT), or NULL: a loopback address unless
	 * listen_remote; its requests must carry token (32 characters or
	 * more) as `Authorization: Bearer` or `X-API-Key`. */
	const char *listen;
	bool listen_remote;
	const char *token;
};

/* Serve until stop_fd turns readable; in-flight lifecycle calls are then
 * cancelled, and execs hung up. One server per socket: a second one on
 * the same path fails, naming the socket. */
int api_serve(const struct api_serve_opts *o, const struct api_backend *b, gantry_error_t *err);

/* -listen's HOST:PORT (HOST an IPv4 address, localhost or empty: the
 * loopback), a loopback address unless remote; a usage error else. */
struct sockaddr_in;
int api_listen_parse(const char *spec, bool remote, struct sockaddr_in *sa, gantry_error_t *err);

/* The token of the server's TCP listener: DIR/manager.token, 64 hex
 * digits made on first use (mode 0600); one that is not a regular file
 * of ours, 0600, is refused. */
int api_token(const char *dir, char **out, gantry_error_t *err);

/* The lifecycle's backend (src/api/backend.c). */
extern const struct api_backend api_lifecycle_backend;
/* The lifecycle's option names as the request's fields, for errors
 * (gantry_error_set_namer); NULL for a name it does not know. */
const char *api_field_of(const char *option);

/* The OpenAPI document, as built in (api/openapi.yaml). */
extern const unsigned char api_openapi_yaml[];
extern const size_t api_openapi_yaml_len;

#endif
