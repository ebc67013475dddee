/* `gantry start NAME`: create and boot a persistent sandbox. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/signals.h"
#include "common/log.h"
#include "common/util.h"
#include "oauth/custody.h"
#include "sandbox/lifecycle.h"

static void start_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry start NAME [-image SRC] [-cpus N] [-mem MiB] [-disk-size MiB]\n"
		"                         [-rw=false] [-rwlayer PATH] [-net=false] [-p SPEC]...\n"
		"       gantry start NAME -from SNAP [-p SPEC]...\n\n"
		"Create the persistent sandbox NAME and boot it: one long-lived container on\n"
		"the image, with a writable layer that keeps its files across stop and\n"
		"resume. Returns once `gantry exec NAME` can run commands in it; Ctrl-C\n"
		"before then ends the boot and leaves nothing behind (exit status 130).\n"
		"NAME: 1 to 64 of A-Z a-z 0-9 . _ - (not . or .., not starting with -).\n"
		"SRC as for gantry exec.\n"
		"The guest has a network (NAT through the host; -net=false: none, only lo).\n"
		"-p [IP:]HOST:GUEST[/tcp|/udp] forwards HOST on IP (default 127.0.0.1) to\n"
		"GUEST in the guest; -p GUEST or a HOST of 0 picks a free host port, kept\n"
		"across stop and resume (gantry ports ls NAME shows it).\n"
		"-e, -env-file, -w, -u and -entrypoint become the sandbox's own Env,\n"
		"WorkingDir, User and Entrypoint over its image's, as docker run makes them\n"
		"the container's: every gantry exec NAME starts from them.\n"
		"-from SNAP starts NAME from a snapshot (gantry snapshot) instead of booting:\n"
		"its processes run on from where the snapshot's did, with their memory, on a\n"
		"copy of its writable layer; the guest takes NAME as its hostname, a new\n"
		"machine id and fresh entropy. Its ports are the -p given (docs/snapshots.md).\n"
		"-oauth-custody serves gantry-guest oauth login|token PROVIDER inside, as for\n"
		"gantry wrap; a login's URL is shown by that command, for a browser on the host\n"
		"(docs/agents.md).\n\n"
		"Flags:\n");
	flags_usage(out, flags);
}

/* Whether the flags in argv are -from and -p (-publish) alone. */
static bool only_ports(int argc, char **argv)
{
	static const char *const ok[] = { "from", "p", "publish" };

	for (int i = 0; i < argc; i++) {
		const char *f = argv[i];
		size_t len;
		bool found = false;

		if (strcmp(f, "--") == 0)
			break;
		if (f[0] != '-')
			continue;
		f += f[1] == '-' ? 2 : 1;
		len = strcspn(f, "=");
		for (size_t k = 0; k < ARRAY_SIZE(ok); k++)
			found |= strlen(ok[k]) == len && strncmp(f, ok[k], len) == 0;
		if (!found)
			return false;
		if (f[len] == '\0')
			i++; /* its value */
	}
	return true;
}

int cmd_start(int argc, char **argv)
{
	struct sandbox_opts o;
	static struct gantry_cancel cancel;
	gantry_error_t err = NULL;
	bool help = false, dashdash, custody_on = false;
	struct oauth_custody custody = { 0 };
	const char *from = NULL;
	int rest, r;
	const struct flag flags[] = {
		FLAGS_SANDBOX(&o),
		{ "from", FLAG_STRING, &from, NULL, "SNAP",
		  "a new sandbox from snapshot SNAP (gantry snapshot): only -p goes with it", 0 },
		FLAGS_PROCESS(&o.process),
		FLAGS_SECRETS(&o),
		{ "disk-size", FLAG_UINT, &o.disk_mib, NULL, "MiB",
		  "size of a new writable layer (default 512; 64 to 65536)", 0 },
		{ "rw", FLAG_BOOL, &o.writable, NULL, NULL,
		  "writable root (default true; -rw=false: read-only)", 0 },
		{ "rwlayer", FLAG_STRING, &o.rwlayer, NULL, "PATH",
		  "writable layer file to use or create (kept by delete)", 0 },
		FLAG_OAUTH_CUSTODY(&custody_on),
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	sandbox_opts_init(&o);
	o.progress_fd = STDERR_FILENO; /* a pull draws its layers on a terminal */
	/* NAME first, flags after it (flags before it work too). */
	if (argc > 0 && argv[0][0] != '-') {
		o.name = argv[0];
		argc--;
		argv++;
	}
	r = flags_parse_cmd("start", flags, argc, argv, &rest, &dashdash, start_usage);
	if (r <= 0) {
		sandbox_opts_free(&o);
		return -r;
	}
	if (o.name == NULL && rest < argc)
		o.name = argv[rest++];
	if (o.name == NULL || rest < argc) {
		log_error("start: %s (see gantry start -help)",
			  o.name ? "unexpected arguments after NAME" : "NAME is required");
		sandbox_opts_free(&o);
		return 2;
	}
	if (cli_image_like(o.name)) {
		log_error("start: `%s` is an image, not a sandbox name: gantry start NAME -image %s",
			  o.name, o.name);
		sandbox_opts_free(&o);
		return 2;
	}
	if (from && !only_ports(argc, argv)) {
		log_error("start: -from takes only -p: the machine, image, shares and secrets are "
			  "the snapshot's");
		sandbox_opts_free(&o);
		return 2;
	}
	if (from) {
		r = cli_signals_cancel(&cancel, &err);
		if (r == 0)
			r = sandbox_start_from(o.name, from, o.ports, o.nr_ports, cli_getenv,
					       &cancel, &err);
		if (r == 0)
			log_info("sandbox `%s` is running, from snapshot `%s`: gantry exec %s -- CMD",
				 o.name, from, o.name);
		sandbox_opts_free(&o);
		return cli_finish(&err, r);
	}
	/* Custody's providers are read here too, so that a bad file is one
	 * line now rather than a failed boot. */
	if (sandbox_opts_check(&o, &err) < 0 ||
	    cli_oauth_custody(&custody, custody_on, NULL, &o, &err) < 0) {
		gantry_error_prefix(&err, "start");
		gantry_error_print(&err);
		oauth_custody_close(&custody);
		sandbox_opts_free(&o);
		return 2;
	}
	/* Ctrl-C while it boots ends the boot and leaves nothing behind. */
	r = cli_signals_cancel(&cancel, &err);
	if (r == 0)
		r = sandbox_create(&o, &cancel, &err);
	if (r == 0)
		log_info("sandbox `%s` is running: gantry exec %s -- CMD", o.name, o.name);
	oauth_custody_close(&custody);
	sandbox_opts_free(&o);
	return cli_finish(&err, r);
}
