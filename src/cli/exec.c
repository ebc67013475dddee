/* `gantry exec`: one-shot, boot a fresh microVM on an image, run one process
 * in it with the terminal relayed, return the process's exit status, and
 * leave nothing behind; or `gantry exec NAME`, a session in a running
 * persistent sandbox (src/sandbox/lifecycle.c). Both relay the terminal,
 * signals and exit status through agent_run (src/agent/session.c). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "agent/session.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "common/files.h"
#include "common/assets.h"
#include "common/util.h"
#include "image/source.h"
#include "sandbox/lifecycle.h"
#include "sandbox/process.h"
#include "vmm/vmm.h"

#define EXEC_VM_FAILED	   125 /* the VM or Gantry failed, not the process */
#define EXEC_READY_TIMEOUT 120000
#define EXEC_CONSOLE_TAIL  20
#define EXEC_APPEND	   "root=/dev/vda rootfstype=erofs ro init=/sbin/gantry-init"

struct exec_vm {
	struct vmm_config cfg;
	atomic_bool ended; /* vmm_run returned (before the agent is cancelled) */
	struct agent *agent;
	pthread_t thread;
	int status;
	int rc;
	gantry_error_t err;
};

static void *exec_vm_thread(void *arg)
{
	struct exec_vm *vm = arg;

	vm->rc = vmm_run(&vm->cfg, &vm->status, &vm->err);
	atomic_store(&vm->ended, true);
	/* The guest is gone: whatever waits on it must stop waiting. */
	agent_cancel(vm->agent);
	return NULL;
}

static void stop_vm(struct exec_vm *vm)
{
	uint64_t one = 1;

	(void)!write(vm->cfg.stop_fd, &one, sizeof(one));
}

/* The guest's own words are shown sanitised: a hostile guest must not
 * drive the user's terminal with escape sequences. */
static void console_tail(const char *path)
{
	char **lines;
	size_t n = read_tail_lines(path, EXEC_CONSOLE_TAIL, &lines);

	if (n == 0)
		return;
	fprintf(stderr, "gantry: last lines of the guest console:\n");
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, "  %s\n", lines[i]);
	free_lines(lines, n);
}

/* `gantry exec NAME [-- CMD...]`. */
static int exec_sandbox(const char *name, char *const *args, size_t nargs)
{
	struct agent_result res = { 0 };
	gantry_error_t err = NULL;
	int status;

	if (sandbox_exec(name, args, nargs, &res, &err) < 0) {
		gantry_error_print(&err);
		return EXEC_VM_FAILED;
	}
	status = agent_result_status(&res);
	if (res.error)
		fprintf(stderr, "gantry: exec: %s\n", res.message ? res.message : "cannot run");
	agent_result_free(&res);
	return status;
}

static void exec_usage(FILE *out, const struct flag *flags)
{
	fprintf(out, "Usage: gantry exec NAME [-- CMD ARG...]\n"
		     "       gantry exec [-image SRC] [-cpus N] [-mem MiB] [-console] [-- CMD...]\n\n"
		     "With NAME: run CMD in the running sandbox NAME (gantry start), in its one\n"
		     "long-lived container; many sessions may run at once.\n"
		     "Without: boot a fresh microVM on an image, run CMD in it (else the image's\n"
		     "Entrypoint and Cmd, else /bin/sh) with the terminal relayed, and return its\n"
		     "exit status.\n"
		     "SRC is an OCI image layout directory, a docker-save tar, a .erofs image or\n"
		     "a registry reference (pulled on first use, then taken from the cache; see\n"
		     "gantry image -help); without -image, Gantry's built-in busybox image.\n"
		     "Exit status: the process's own, 128+N for signal N, 127 when the command\n"
		     "is not in the image, 125 when the VM itself failed. Signals go to the\n"
		     "process; without a terminal the third Ctrl-C kills it.\n\nFlags:\n");
	flags_usage(out, flags);
}

int cmd_exec(int argc, char **argv)
{
	struct exec_vm vm = { .cfg = { .cpus = 1, .mem_mib = VMM_DEFAULT_MEM, .stop_fd = -1 } };
	cleanup_free char *kernel = NULL, *sysroot = NULL, *default_image = NULL,
			  *console = NULL;
	char rundir[] = "/tmp/gantry-exec.XXXXXX";
	struct image img = { 0 };
	struct sandbox_process proc = { 0 };
	struct agent_result res = { 0 };
	gantry_error_t err = NULL;
	const char *image_src = NULL;
	/* GANTRY_BOOT_TIMING milestones, ms from the start of cmd_exec */
	double t0 = now_ms_frac(), t_image = 0, t_ready = 0, t_done = 0;
	uint64_t cpus = 1;
	bool help = false, show_console = false, dashdash, vm_started = false;
	int rest, status = EXEC_VM_FAILED;
	const struct flag flags[] = {
		{ "image", FLAG_STRING, &image_src, NULL, "SRC",
		  "image: path or registry reference (default: built-in busybox)", 0 },
		{ "cpus", FLAG_UINT, &cpus, NULL, "N", "vCPUs (default 1)", 1024 },
		{ "mem", FLAG_UINT, &vm.cfg.mem_mib, NULL, "MiB", "guest memory (default 512)", 0 },
		{ "console", FLAG_BOOL, &show_console, NULL, NULL, "guest console to stderr", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	if (flags_parse("exec", flags, argc, argv, &rest, &dashdash, &err) < 0) {
		gantry_error_print(&err);
		return 2;
	}
	if (help) {
		exec_usage(stdout, flags);
		return 0;
	}
	if (!dashdash && rest < argc) {
		if (rest > 0) {
			fprintf(stderr, "gantry: exec: flags are for a fresh microVM, not for the "
					"sandbox `%s` (gantry exec NAME -- CMD)\n",
				argv[rest]);
			return 2;
		}
		if (rest + 1 < argc && strcmp(argv[rest + 1], "--") != 0) {
			fprintf(stderr, "gantry: exec: unexpected argument `%s` (put the command "
					"after --)\n",
				argv[rest + 1]);
			return 2;
		}
		return exec_sandbox(argv[rest], argv + rest + 2,
				    rest + 2 <= argc ? (size_t)(argc - rest - 2) : 0);
	}
	vm.cfg.cpus = (unsigned int)cpus;

	if (assets_path(ASSET_KERNEL, &kernel, &err) < 0 ||
	    assets_path(ASSET_SYSROOT, &sysroot, &err) < 0)
		goto fail;
	if (image_src == NULL) {
		if (assets_path(ASSET_DEFAULT_IMAGE, &default_image, &err) < 0)
			goto fail;
		image_src = default_image;
	}
	if (image_resolve(image_src, &img, &err) < 0)
		goto fail;
	t_image = now_ms_frac() - t0;
	if (sandbox_process_init(&proc, img.config, argv + rest, (size_t)(argc - rest), &err) < 0)
		goto fail;

	if (mkdtemp(rundir) == NULL) {
		gantry_error_errno(&err, "cannot create a run directory");
		goto fail;
	}
	if (agent_listen(rundir, &vm.agent, &err) < 0)
		goto fail;
	xasprintf(&console, "%s/console.log", rundir);
	vm.cfg.kernel = kernel;
	vm.cfg.disks[0] = (struct vmm_disk){ sysroot, true };
	vm.cfg.disks[1] = (struct vmm_disk){ img.path, true };
	vm.cfg.nr_disks = 2;
	vm.cfg.vsock_dir = rundir;
	vm.cfg.stop_fd = eventfd(0, EFD_CLOEXEC);
	if (vm.cfg.stop_fd < 0) {
		gantry_error_errno(&err, "eventfd");
		goto fail;
	}
	vm.cfg.timing = vmm_timing_requested();
	/* With timing, gantry-init logs its milestones on the console too. */
	vm.cfg.append = vm.cfg.timing ? EXEC_APPEND " gantry.debug=1" : EXEC_APPEND;
	if (show_console)
		vm.cfg.console_fd = STDERR_FILENO;
	else
		vm.cfg.console = console;
	if (vmm_validate(&vm.cfg, &err) < 0)
		goto fail;
	if (pthread_create(&vm.thread, NULL, exec_vm_thread, &vm) != 0) {
		gantry_error(&err, 0, "cannot start the VM thread");
		goto fail;
	}
	vm_started = true;

	if (agent_wait_ready(vm.agent, EXEC_READY_TIMEOUT, NULL, &err) < 0)
		goto fail;
	t_ready = now_ms_frac() - t0;
	if (agent_run(vm.agent, &proc.p, &res, &err) < 0)
		goto fail;
	t_done = now_ms_frac() - t0;
	status = agent_result_status(&res);
	if (res.error)
		fprintf(stderr, "gantry: exec: %s\n", res.message ? res.message : "cannot run");
	/* The status and every byte of output are here, and the guest has
	 * nothing to save (both its disks are read-only; the container's
	 * writable layer is guest memory): end the VM now rather than wait
	 * for the guest to power itself off. */
	stop_vm(&vm);
	goto out;

fail:
	status = EXEC_VM_FAILED;
	if (vm_started) {
		bool ended_itself = atomic_load(&vm.ended);

		/* A guest that is still up (it did not get ready in time, or its
		 * agent broke) is ended here. */
		stop_vm(&vm);
		pthread_join(vm.thread, NULL);
		vm_started = false;
		if (vm.rc < 0) {
			gantry_error_free(&err);
			gantry_error_print(&vm.err);
		} else {
			gantry_error_print(&err);
			if (ended_itself)
				fprintf(stderr, "gantry: the VM ended before the command finished\n");
		}
		if (!show_console)
			console_tail(console);
	} else {
		gantry_error_print(&err);
	}
out:
	if (vm_started) {
		pthread_join(vm.thread, NULL);
		gantry_error_free(&vm.err);
		if (vm.cfg.timing)
			fprintf(stderr,
				"gantry: exec: image ready %.1f ms, guest ready %.1f ms, command "
				"done %.1f ms, VM gone %.1f ms\n",
				t_image, t_ready, t_done, now_ms_frac() - t0);
	}
	if (vm.agent)
		agent_free(vm.agent);
	if (vm.cfg.stop_fd >= 0)
		close(vm.cfg.stop_fd);
	if (rundir[strlen(rundir) - 1] != 'X')
		rm_tree(rundir);
	agent_result_free(&res);
	sandbox_process_free(&proc);
	image_free(&img);
	return status;
}
