/* `gantry fence [-guard DIR]... -- CMD ARG...`: CMD in a private PID
 * namespace, with the guarded directories read-only (src/fence/). Flags
 * and printing only. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/log.h"
#include "common/util.h"
#include "fence/fence.h"

static void fence_usage(FILE *out, const struct flag *flags)
{
	fprintf(out, "Usage: gantry fence [-guard DIR]... [--] CMD ARG...\n\n"
		     "Run CMD in a private PID namespace under a small init of Gantry's, with\n"
		     "each guarded directory read-only but for its .git, .gantry and\n"
		     ".gantry-worktrees. Without -guard the guard is the git checkout around\n"
		     "the current directory (for a linked worktree, the repository's main\n"
		     "checkout). Everything else is the host's, as it was: the same user,\n"
		     "files, network, environment, working directory and terminal.\n"
		     "When CMD exits, or the fence's parent dies, whatever CMD started dies\n"
		     "with it, daemons included; ps inside shows only the init and CMD's tree.\n"
		     "SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH sent to\n"
		     "the fence go to CMD.\n"
		     "Exit status: CMD's; when a signal killed CMD the fence dies of the same\n"
		     "signal (a shell shows 128+N); 126 CMD cannot run, 127 CMD not found,\n"
		     "125 the fence could not be made (user namespaces refused, a mount\n"
		     "failed), 2 bad usage (or no checkout and no -guard).\n"
		     "The fence keeps a run correct; it is no security boundary (see\n"
		     "docs/confined-use.md).\n\nFlags:\n");
	flags_usage(out, flags);
}

static int fence_guard_flag(void *opaque, const char *value, gantry_error_t *err)
{
	return fence_guards_add(opaque, value, err);
}

/* No -guard: the checkout around the current directory. */
static int fence_default_guard(struct fence_guards *g)
{
	cleanup_free char *cwd = getcwd(NULL, 0), *checkout = NULL;
	gantry_error_t err = NULL;
	int r;

	if (cwd == NULL) {
		log_error("fence: the current directory is gone");
		return -1;
	}
	r = fence_find_checkout(cwd, &checkout, &err);
	if (r == 1) {
		log_error("fence: %s is in no git checkout; name what to guard with -guard DIR",
			  cwd);
		return -1;
	}
	if (r < 0 || fence_guards_add(g, checkout, &err) < 0) {
		gantry_error_prefix(&err, "fence");
		gantry_error_print(&err);
		return -1;
	}
	return 0;
}

int cmd_fence(int argc, char **argv)
{
	struct fence_guards g = { 0 };
	gantry_error_t err = NULL;
	bool help = false, dashdash;
	int rest, r, status;
	const struct flag flags[] = {
		{ "guard", FLAG_FUNC, &g, fence_guard_flag, "DIR",
		  "make DIR read-only (repeatable; default: the checkout)", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	r = flags_parse_cmd("fence", flags, argc, argv, &rest, &dashdash, fence_usage);
	if (r <= 0 || rest >= argc || (g.n == 0 && fence_default_guard(&g) < 0)) {
		if (r > 0 && rest >= argc)
			log_error("fence: no command (gantry fence [-guard DIR]... -- CMD ARG...)");
		fence_guards_free(&g);
		return r == 0 ? 0 : 2;
	}
	r = fence_run(&g, argv + rest, &status, &err);
	fence_guards_free(&g);
	if (r < 0) {
		gantry_error_print(&err);
		return FENCE_FAILED;
	}
	fence_exit(status);
}
