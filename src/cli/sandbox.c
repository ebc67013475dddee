/* `gantry start`, `ls`, `stop`, `resume` and `delete`: persistent
 * sandboxes. Flags and output only; the work is src/sandbox/lifecycle.c. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/util.h"
#include "sandbox/lifecycle.h"
#include "sandbox/rwlayer.h"
#include "sandbox/supervisor.h"
#include "vmm/vmm.h"

static bool is_help(int argc, char **argv)
{
	return argc == 1 && (strcmp(argv[0], "-help") == 0 || strcmp(argv[0], "--help") == 0 ||
			     strcmp(argv[0], "-h") == 0);
}

static void start_usage(FILE *out, const struct flag *flags)
{
	fprintf(out, "Usage: gantry start NAME [-image SRC] [-cpus N] [-mem MiB] [-disk-size MiB]\n"
		     "                         [-rw=false] [-rwlayer PATH]\n\n"
		     "Create the persistent sandbox NAME and boot it: one long-lived container on\n"
		     "the image, with a writable layer that keeps its files across stop and\n"
		     "resume. Returns once `gantry exec NAME` can run commands in it.\n"
		     "NAME: 1 to 64 of A-Z a-z 0-9 . _ - (not . or .., not starting with -).\n"
		     "SRC as for gantry exec.\n\n"
		     "Flags:\n");
	flags_usage(out, flags);
}

int cmd_start(int argc, char **argv)
{
	struct sandbox_opts o = { .cpus = SANDBOX_DEFAULT_CPUS,
				  .mem_mib = VMM_DEFAULT_MEM,
				  .disk_mib = RWLAYER_DEFAULT_MIB,
				  .writable = true };
	gantry_error_t err = NULL;
	bool help = false, dashdash;
	int rest;
	const struct flag flags[] = {
		{ "image", FLAG_STRING, &o.image, NULL, "SRC",
		  "image: path or registry reference (default: built-in busybox)", 0 },
		{ "cpus", FLAG_UINT, &o.cpus, NULL, "N", "vCPUs (default 1)", 1024 },
		{ "mem", FLAG_UINT, &o.mem_mib, NULL, "MiB", "guest memory (default 512)", 0 },
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
	if (flags_parse("start", flags, argc, argv, &rest, &dashdash, &err) < 0) {
		gantry_error_print(&err);
		return 2;
	}
	if (help) {
		start_usage(stdout, flags);
		return 0;
	}
	if (o.name == NULL && rest < argc)
		o.name = argv[rest++];
	if (o.name == NULL || rest < argc) {
		fprintf(stderr, "gantry: start: %s (see gantry start -help)\n",
			o.name ? "unexpected arguments after NAME" : "NAME is required");
		return 2;
	}
	if (sandbox_create(&o, &err) < 0) {
		gantry_error_print(&err);
		return 1;
	}
	return 0;
}

/* The commands that take exactly one NAME: 1 to go on, 0 after the help,
 * -1 after a usage error. */
static int one_name(const char *cmd, const char *what, int argc, char **argv, const char **name)
{
	if (is_help(argc, argv)) {
		printf("Usage: gantry %s NAME\n\n%s\n", cmd, what);
		return 0;
	}
	if (argc != 1 || argv[0][0] == '-') {
		fprintf(stderr, "gantry: %s: want exactly one NAME (see gantry %s -help)\n", cmd,
			cmd);
		return -1;
	}
	*name = argv[0];
	return 1;
}

static int finish(gantry_error_t *err, int r)
{
	if (r < 0) {
		gantry_error_print(err);
		return 1;
	}
	return 0;
}

int cmd_stop(int argc, char **argv)
{
	gantry_error_t err = NULL;
	const char *name;
	int r = one_name("stop",
			 "Stop a running sandbox: its guest syncs and powers off, its processes\n"
			 "end. Its configuration and writable layer stay for gantry resume.",
			 argc, argv, &name);

	return r <= 0 ? -r * 2 : finish(&err, sandbox_stop(name, &err));
}

int cmd_resume(int argc, char **argv)
{
	gantry_error_t err = NULL;
	const char *name;
	int r = one_name("resume",
			 "Boot a stopped (or crashed) sandbox again, with the files it had.\n"
			 "Returns once gantry exec NAME can run commands in it.",
			 argc, argv, &name);

	return r <= 0 ? -r * 2 : finish(&err, sandbox_resume(name, &err));
}

int cmd_delete(int argc, char **argv)
{
	gantry_error_t err = NULL;
	const char *name;
	int r = one_name("delete",
			 "Delete a sandbox, stopping it first if it runs: its state and the\n"
			 "writable layer Gantry made for it. A -rwlayer file you gave is kept,\n"
			 "and so are cached images.",
			 argc, argv, &name);

	return r <= 0 ? -r * 2 : finish(&err, sandbox_delete(name, &err));
}

static void ls_json(const struct sandbox *v, size_t n)
{
	json_t *a = json_array();
	char *text;

	for (size_t i = 0; i < n; i++) {
		json_t *o = json_pack("{s:s,s:s,s:i,s:s,s:I,s:I,s:b}", "name", v[i].name, "state",
				      sandbox_state_name(v[i].state), "pid", (int)v[i].pid, "image",
				      v[i].image, "cpus", (json_int_t)v[i].cpus, "mem_mib",
				      (json_int_t)v[i].mem_mib, "writable", v[i].writable);

		json_object_set_new(o, "image_digest",
				    v[i].image_digest ? json_string(v[i].image_digest)
						      : json_null());
		json_object_set_new(o, "rwlayer",
				    v[i].rwlayer ? json_string(v[i].rwlayer) : json_null());
		json_object_set_new(o, "reason",
				    v[i].reason ? json_string(v[i].reason) : json_null());
		json_array_append_new(a, o);
	}
	text = json_dumps(a, JSON_INDENT(2));
	json_decref(a);
	printf("%s\n", text ? text : "[]");
	free(text);
}

int cmd_ls(int argc, char **argv)
{
	gantry_error_t err = NULL;
	struct sandbox *v;
	bool as_json = false;
	size_t n;

	if (is_help(argc, argv)) {
		printf("Usage: gantry ls [--json]\n\nList sandboxes: NAME, STATE (running, "
		       "stopped, crashed), the supervisor's PID,\nIMAGE, CPUS and MEM (MiB). "
		       "A crashed sandbox's reason follows the table.\n");
		return 0;
	}
	if (argc == 1 && (strcmp(argv[0], "--json") == 0 || strcmp(argv[0], "-json") == 0))
		as_json = true;
	else if (argc > 0) {
		fprintf(stderr, "gantry: ls: unexpected argument `%s` (see gantry ls -help)\n",
			argv[0]);
		return 2;
	}
	if (sandbox_list(&v, &n, &err) < 0) {
		gantry_error_print(&err);
		return 1;
	}
	if (as_json) {
		ls_json(v, n);
	} else {
		printf("%-24s %-8s %-8s %-32s %-4s %s\n", "NAME", "STATE", "PID", "IMAGE", "CPUS",
		       "MEM");
		for (size_t i = 0; i < n; i++) {
			char pid[24] = "-";

			if (v[i].pid > 0)
				snprintf(pid, sizeof(pid), "%ld", v[i].pid);
			printf("%-24s %-8s %-8s %-32s %-4llu %llu\n", v[i].name,
			       sandbox_state_name(v[i].state), pid, v[i].image,
			       (unsigned long long)v[i].cpus, (unsigned long long)v[i].mem_mib);
		}
		for (size_t i = 0; i < n; i++)
			if (v[i].state == SANDBOX_CRASHED && v[i].reason)
				printf("%s: crashed: %s\n", v[i].name, v[i].reason);
	}
	sandbox_list_free(v, n);
	return 0;
}

int cmd_supervisor(int argc, char **argv)
{
	return supervisor_main(argc, argv);
}
