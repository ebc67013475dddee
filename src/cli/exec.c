/* `gantry exec`: one-shot. Boot a fresh microVM on an image, run one process
 * in it with the terminal relayed, return the process's exit status, and
 * leave nothing behind. (`gantry exec NAME` into a persistent sandbox comes
 * with the sandbox lifecycle.) */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/session.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "common/assets.h"
#include "common/util.h"
#include "image/source.h"
#include "vmm/vmm.h"

#define EXEC_VM_FAILED	   125 /* the VM or Gantry failed, not the process */
#define EXEC_HELLO_TIMEOUT 120000
#define EXEC_SHUTDOWN_MS   30000
#define EXEC_CONSOLE_TAIL  20

struct exec_vm {
	struct vmm_config cfg;
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
	/* The guest is gone: whatever waits on it must stop waiting. */
	agent_cancel(vm->agent);
	return NULL;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void console_tail(const char *path)
{
	cleanup_fclose FILE *f = fopen(path, "r");
	char *lines[EXEC_CONSOLE_TAIL] = { 0 };
	char *line = NULL;
	size_t cap = 0, n = 0;

	if (f == NULL)
		return;
	while (getline(&line, &cap, f) > 0) {
		free(lines[n % EXEC_CONSOLE_TAIL]);
		lines[n % EXEC_CONSOLE_TAIL] = xstrdup(line);
		n++;
	}
	free(line);
	if (n == 0)
		return;
	fprintf(stderr, "gantry: last lines of the guest console:\n");
	for (size_t i = n > EXEC_CONSOLE_TAIL ? n - EXEC_CONSOLE_TAIL : 0; i < n; i++) {
		fprintf(stderr, "  %s", lines[i % EXEC_CONSOLE_TAIL]);
		free(lines[i % EXEC_CONSOLE_TAIL]);
	}
}

/* The process to run: the image's Entrypoint and Cmd (the user's command
 * replaces Cmd), Env, WorkingDir and User. */
static int exec_process(const struct image *img, char **user_args, size_t nuser,
			struct agent_process *p, struct image_user *user, char ***argv,
			gantry_error_t *err)
{
	static char *const no_env[] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
					"/sbin:/bin",
					NULL };

	image_config_argv(img->config, user_args, nuser, argv);
	memset(p, 0, sizeof(*p));
	p->argv = *argv;
	p->env = img->config ? img->config->env : no_env;
	p->cwd = img->config && img->config->working_dir[0] ? img->config->working_dir : "/";
	memset(user, 0, sizeof(*user));
	if (img->config && image_config_user(img->config, NULL, user, err) < 0)
		return -1;
	p->uid = user->uid;
	p->gid = user->gid;
	p->gids = user->groups;
	p->ngids = user->ngroups;
	p->tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
	p->in_fd = STDIN_FILENO;
	p->out_fd = STDOUT_FILENO;
	p->err_fd = STDERR_FILENO;
	p->forward_signals = true;
	return 0;
}

static void exec_usage(FILE *out, const struct flag *flags)
{
	fprintf(out, "Usage: gantry exec [-image SRC] [-cpus N] [-mem MiB] [-console] [-- CMD ARG...]\n\n"
		     "Boot a fresh microVM on an image, run CMD in it (else the image's Entrypoint\n"
		     "and Cmd, else /bin/sh) with the terminal relayed, and return its exit status.\n"
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
	struct exec_vm vm = { .cfg = { .cpus = 1, .mem_mib = VMM_DEFAULT_MEM } };
	cleanup_free char *kernel = NULL, *sysroot = NULL, *default_image = NULL,
			  *console = NULL;
	char rundir[] = "/tmp/gantry-exec.XXXXXX";
	struct image img = { 0 };
	struct image_user user = { 0 };
	struct agent_process proc;
	struct agent_result res = { 0 };
	gantry_error_t err = NULL;
	const char *image_src = NULL, *timing;
	char **pargv = NULL;
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
		fprintf(stderr, "gantry: exec: unexpected argument `%s` (put the command after --; "
				"persistent sandboxes are not available yet)\n",
			argv[rest]);
		return 2;
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
	if (exec_process(&img, argv + rest, (size_t)(argc - rest), &proc, &user, &pargv, &err) < 0)
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
	vm.cfg.append = "root=/dev/vda rootfstype=erofs ro init=/sbin/gantry-init";
	vm.cfg.vsock_dir = rundir;
	timing = getenv("GANTRY_BOOT_TIMING");
	vm.cfg.timing = timing && *timing && strcmp(timing, "0") != 0;
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

	if (agent_wait_hello(vm.agent, EXEC_HELLO_TIMEOUT, NULL, &err) < 0 ||
	    agent_run(vm.agent, &proc, &res, &err) < 0)
		goto fail;
	status = agent_result_status(&res);
	if (res.error)
		fprintf(stderr, "gantry: exec: %s\n", res.message ? res.message : "cannot run");
	agent_shutdown(vm.agent, status, EXEC_SHUTDOWN_MS, NULL);
	goto out;

fail:
	status = EXEC_VM_FAILED;
	if (vm_started) {
		pthread_join(vm.thread, NULL);
		vm_started = false;
		if (vm.rc < 0) {
			gantry_error_free(&err);
			gantry_error_print(&vm.err);
		} else {
			gantry_error_print(&err);
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
	}
	if (vm.agent)
		agent_free(vm.agent);
	if (rundir[strlen(rundir) - 1] != 'X')
		nftw(rundir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	agent_result_free(&res);
	image_user_free(&user);
	free(pargv);
	image_free(&img);
	return status;
}
