/* One-shot `gantry exec` (see lifecycle.h): a transient sandbox in a
 * temporary run directory, its VM on a thread of this process, one session,
 * and nothing left behind. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/files.h"
#include "common/log.h"
#include "common/util.h"
#include "image/source.h"
#include "sandbox/lifecycle.h"
#include "common/json.h"
#include "sandbox/machine.h"
#include "sandbox/network.h"
#include "sandbox/process.h"

#define ONESHOT_READY_TIMEOUT 120000
#define ONESHOT_CONSOLE_TAIL  20

/* The guest's last words, for an error that says the VM failed. */
static void error_add_console(gantry_error_t *err, const char *console, bool ended)
{
	if (ended) {
		cleanup_free char *msg = NULL;

		xasprintf(&msg, "%s\nthe VM ended before the command finished",
			  gantry_error_str(*err));
		gantry_error_free(err);
		gantry_error(err, 0, "%s", msg);
	}
	if (console)
		error_add_tail(err, console, ONESHOT_CONSOLE_TAIL,
			       "last lines of the guest console:");
}

int sandbox_run_once(const struct sandbox_opts *o, bool show_console,
		     const struct sandbox_process_opts *po, const struct sandbox_stdio *io,
		     const struct gantry_cancel *cancel, struct agent_result *res,
		     gantry_error_t *err)
{
	char rundir[] = "/tmp/gantry-exec.XXXXXX";
	struct sandbox sb = { .transient = true, .cpus = o->cpus, .mem_mib = o->mem_mib };
	struct machine m = MACHINE_NONE;
	struct image img = { 0 };
	struct sandbox_process proc = { 0 };
	/* GANTRY_BOOT_TIMING milestones, ms from the start */
	double t0 = now_ms_frac(), t_image = 0, t_ready = 0, t_done = 0;
	bool made = false;
	int r = -1;

	memset(res, 0, sizeof(*res));
	/* Every value checked before an image is pulled for it. */
	if (sandbox_process_opts_check(po, err) < 0)
		return -1;
	if (sandbox_opts_net(o, &sb, err) < 0 || ports_pick(sb.ports, sb.nr_ports, err) < 0) {
		sandbox_transient_free(&sb);
		return -1;
	}
	/* A port picked for the user is one they could not know otherwise. */
	for (size_t i = 0; i < sb.nr_ports; i++)
		if (strcmp(sb.ports[i], o->ports[i]) != 0)
			log_info("exec: publishing %s", sb.ports[i]);
	if (sandbox_image_resolve(o->image, &img, err) < 0) {
		sandbox_transient_free(&sb);
		return -1;
	}
	t_image = now_ms_frac() - t0;
	sb.image_path = img.path;
	if (cancel_check(cancel, err) < 0 ||
	    sandbox_process_init(&proc, img.config, po, &sb, io, err) < 0)
		goto out;
	if (mkdtemp(rundir) == NULL) {
		gantry_error_errno(err, "cannot create a run directory");
		goto out;
	}
	made = true;
	if (machine_config(&m, &sb, rundir, show_console ? STDERR_FILENO : -1, err) < 0 ||
	    machine_start(&m, err) < 0)
		goto out;
	agent_watch_cancel(m.agent, cancel_fd(cancel));
	if (machine_wait_ready(&m, ONESHOT_READY_TIMEOUT, err) < 0 ||
	    (t_ready = now_ms_frac() - t0, sandbox_process_run(m.agent, &proc, io, res, err) < 0)) {
		bool ended = atomic_load(&m.ended);

		/* A guest still up (not ready in time, or its agent broke) ends here. */
		machine_kill(&m);
		machine_join(&m);
		if (cancel_fired(cancel)) {
			gantry_error_free(err);
			cancel_check(cancel, err);
			goto out;
		}
		if (m.rc < 0) {
			gantry_error_free(err);
			gantry_error(err, 0, "%s", gantry_error_str(m.err));
		}
		error_add_console(err, show_console ? NULL : m.cfg.console, ended && m.rc >= 0);
		goto out;
	}
	t_done = now_ms_frac() - t0;
	/* The status and every byte of output are here, and the guest has
	 * nothing to save (both its disks are read-only; the container's
	 * writable layer is guest memory): end the VM now rather than wait for
	 * the guest to power itself off. */
	machine_kill(&m);
	r = 0;
out:
	machine_join(&m);
	if (m.cfg.timing && t_done > 0)
		log_always("exec: image ready %.1f ms, guest ready %.1f ms, command done %.1f ms, "
			   "VM gone %.1f ms",
			   t_image, t_ready, t_done, now_ms_frac() - t0);
	machine_free(&m);
	/* (Not told by its name: a random suffix may end in X too.) */
	if (made)
		rm_tree(rundir);
	sandbox_process_free(&proc);
	image_free(&img);
	sandbox_transient_free(&sb);
	return r;
}
