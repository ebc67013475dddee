/* `gantry cp [-a] SRC DEST`: files between the host and a sandbox, one of
 * SRC and DEST NAME:PATH (sandbox/copy.h). */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/log.h"
#include "common/util.h"
#include "sandbox/lifecycle.h"

static void cp_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry cp [-a] NAME:PATH HOST_PATH\n"
		"       gantry cp [-a] HOST_PATH NAME:PATH\n\n"
		"Copy a file or a directory tree out of the running sandbox NAME's container, or\n"
		"into it, as cp -r would: into the destination when it is a directory (in the\n"
		"sandbox also when PATH ends in /), else as it. PATH is absolute. It runs tar in\n"
		"the container as root, so the image needs a tar (busybox's will do). What goes\n"
		"in is owned by root, what comes out by you; -a keeps owners and modes (set-id\n"
		"bits too) both ways. Out of the sandbox nothing is written outside the\n"
		"destination and no symlink is followed; devices, FIFOs, sockets and hard links\n"
		"are skipped, and said so.\n\n"
		"Flags:\n");
	flags_usage(out, flags);
}

/* "NAME:PATH" into its two parts; false when s is a host path. */
static bool sandbox_path(char *s, char **name, char **path)
{
	char *colon = strchr(s, ':'), *slash = strchr(s, '/');

	/* ./a:b and /x:y are host paths. */
	if (colon == NULL || colon == s || (slash && slash < colon))
		return false;
	*colon = '\0';
	*name = s;
	*path = colon + 1;
	return true;
}

int cmd_cp(int argc, char **argv)
{
	struct sandbox_copy_opts o = { 0 };
	struct sandbox_copy_result res;
	bool help = false, src_in, dst_in;
	char *pos[2], *name, *path, *sname = NULL, *spath = NULL, *dname = NULL, *dpath = NULL;
	gantry_error_t err = NULL;
	int npos, r;
	const struct flag flags[] = {
		{ "a", FLAG_BOOL, &o.archive, NULL, NULL, "keep owners and modes (archive)", 0 },
		{ "archive", FLAG_BOOL, &o.archive, NULL, NULL, "same as -a", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	r = flags_parse_mixed("cp", flags, argc, argv, pos, 2, &npos, cp_usage);
	if (r <= 0)
		return -r;
	if (npos != 2) {
		log_error("cp: want SRC and DEST, one of them NAME:PATH (see gantry cp -help)");
		return CLI_EXIT_USAGE;
	}
	src_in = sandbox_path(pos[0], &sname, &spath);
	dst_in = sandbox_path(pos[1], &dname, &dpath);
	if (src_in == dst_in) {
		log_error("cp: want one of SRC and DEST as NAME:PATH, %s",
			  src_in ? "not both" : "the sandbox's side");
		return CLI_EXIT_USAGE;
	}
	name = src_in ? sname : dname;
	path = src_in ? spath : dpath;
	if (sandbox_name_check(name, &err) < 0)
		return cli_fail(&err, CLI_EXIT_FAILED);
	if (src_in)
		r = sandbox_copy_out(name, path, pos[1], &o, NULL, &res, &err);
	else
		r = sandbox_copy_in(name, pos[0], path, &o, NULL, &res, &err);
	if (r < 0)
		return cli_fail(&err, CLI_EXIT_FAILED);
	if (res.skipped)
		log_warn("cp: %zu entries skipped (devices, FIFOs, sockets or hard links)",
			 res.skipped);
	return 0;
}
