/* `gantry serve`: the manager API (src/api/) on a Unix socket until
 * SIGINT, SIGTERM or SIGHUP. */
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>

#include "api/api.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/signals.h"
#include "common/files.h"
#include "common/log.h"
#include "common/util.h"

static void serve_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry serve [-socket PATH] [-listen HOST:PORT [-listen-remote]]\n"
		"                    [-keepalive MS]\n\n"
		"Serve the manager API, HTTP/1.1 with JSON bodies (docs/api.md; its contract is\n"
		"GET /v1/openapi.yaml), on a Unix socket that only this user may reach (mode\n"
		"0600, and a peer of another UID is hung up on). Programs create, list, start,\n"
		"stop and delete sandboxes and run commands in them through it; they are the\n"
		"sandboxes gantry ls shows. Runs until SIGINT, SIGTERM or SIGHUP, which cancel\n"
		"the calls under way. The values of secretNames come from this process's\n"
		"environment.\n"
		"With -listen it also answers on a TCP address, loopback only unless\n"
		"-listen-remote; every request there must carry the server's token\n"
		"(Authorization: Bearer TOKEN, or X-API-Key: TOKEN), which it keeps in\n"
		"$GANTRY_HOME/manager.token (0600; made on first use).\n\n"
		"Flags:\n");
	flags_usage(out, flags);
}

int cmd_serve(int argc, char **argv)
{
	static struct gantry_cancel stop;
	struct api_serve_opts o = { 0 };
	cleanup_free char *home = NULL, *path = NULL, *token = NULL;
	gantry_error_t err = NULL;
	uint64_t keepalive = 0;
	struct sockaddr_in sa;
	bool help = false, dashdash;
	int r, rest;
	const struct flag flags[] = {
		{ "socket", FLAG_STRING, &o.socket, NULL, "PATH",
		  "the socket (default $GANTRY_HOME/manager.sock)", 0 },
		{ "listen", FLAG_STRING, &o.listen, NULL, "HOST:PORT",
		  "a TCP address too (127.0.0.1:PORT), requests with the token", 0 },
		{ "listen-remote", FLAG_BOOL, &o.listen_remote, NULL, NULL,
		  "let -listen take an address other than loopback", 0 },
		{ "keepalive", FLAG_UINT, &keepalive, NULL, "MS",
		  "between two keepalive comments of /v1/events (default 15000)", 3600000 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	r = flags_parse_cmd("serve", flags, argc, argv, &rest, &dashdash, serve_usage);
	if (r <= 0)
		return -r;
	if (rest != argc) {
		log_error("serve: takes no arguments (see gantry serve -help)");
		return 2;
	}
	o.keepalive_ms = (unsigned)keepalive;
	/* Errors about a request's options name its fields, not flags. */
	gantry_error_set_namer(api_field_of);
	if (o.listen_remote && o.listen == NULL) {
		log_error("serve: -listen-remote goes with -listen (see gantry serve -help)");
		return 2;
	}
	if (o.listen && api_listen_parse(o.listen, o.listen_remote, &sa, &err) < 0)
		return cli_finish(&err, -1);
	if ((o.socket == NULL || o.listen) &&
	    (gantry_home(&home, &err) < 0 || mkdir_p(home, &err) < 0))
		return cli_finish(&err, -1);
	if (o.socket == NULL) {
		xasprintf(&path, "%s/manager.sock", home);
		o.socket = path;
	}
	if (o.listen) {
		if (api_token(home, &token, &err) < 0)
			return cli_finish(&err, -1);
		o.token = token;
	}
	if (cli_signals_cancel(&stop, &err) < 0)
		return cli_finish(&err, -1);
	o.stop_fd = cancel_fd(&stop);
	/* A client or a session gone: its write fails, the server goes on. */
	signal(SIGPIPE, SIG_IGN);
	return cli_finish(&err, api_serve(&o, &api_lifecycle_backend, &err));
}
