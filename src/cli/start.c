/* `gantry start NAME`: create and boot a persistent sandbox. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/log.h"
#include "sandbox/lifecycle.h"
#include "sandbox/network.h"
#include "sandbox/rwlayer.h"
#include "machine/vmm.h"

static void start_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry start NAME [-image SRC] [-cpus N] [-mem MiB] [-disk-size MiB]\n"
		"                         [-rw=false] [-rwlayer PATH] [-net=false] [-p SPEC]...\n\n"
		"Create the persistent sandbox NAME and boot it: one long-lived container on\n"
		"the image, with a writable layer that keeps its files across stop and\n"
		"resume. Returns once `gantry exec NAME` can run commands in it.\n"
		"NAME: 1 to 64 of A-Z a-z 0-9 . _ - (not . or .., not starting with -).\n"
		"SRC as for gantry exec.\n"
		"The guest has a network (NAT through the host; -net=false: none, only lo).\n"
		"-p [IP:]HOST:GUEST[/tcp|/udp] forwards HOST on IP (default 127.0.0.1) to\n"
		"GUEST in the guest; -p GUEST or a HOST of 0 picks a free host port, kept\n"
		"across stop and resume (gantry ports ls NAME shows it).\n\n"
		"Flags:\n");
	flags_usage(out, flags);
}

int cmd_start(int argc, char **argv)
{
	struct sandbox_opts o = { .cpus = SANDBOX_DEFAULT_CPUS,
				  .mem_mib = VMM_DEFAULT_MEM,
				  .disk_mib = RWLAYER_DEFAULT_MIB,
				  .writable = true,
				  .net = true };
	gantry_error_t err = NULL;
	bool help = false, dashdash;
	int rest, r;
	const struct flag flags[] = {
		FLAGS_SANDBOX(&o),
		{ "disk-size", FLAG_UINT, &o.disk_mib, NULL, "MiB",
		  "size of a new writable layer (default 512; 64 to 65536)", 0 },
		{ "rw", FLAG_BOOL, &o.writable, NULL, NULL,
		  "writable root (default true; -rw=false: read-only)", 0 },
		{ "rwlayer", FLAG_STRING, &o.rwlayer, NULL, "PATH",
		  "writable layer file to use or create (kept by delete)", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

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
	if (sandbox_opts_check(&o, &err) < 0) {
		gantry_error_prefix(&err, "start");
		gantry_error_print(&err);
		sandbox_opts_free(&o);
		return 2;
	}
	r = sandbox_create(&o, &err);
	sandbox_opts_free(&o);
	if (r < 0) {
		gantry_error_print(&err);
		return 1;
	}
	return 0;
}
