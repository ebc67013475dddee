/* agentrun: the end-to-end tests' host driver for the agent protocol. It
 * does what `gantry exec` will do, with the guest side chosen by flags:
 *
 *   VM:    agentrun -dir DIR -kernel K -disk SYSROOT,ro -disk IMAGE,ro
 *                   [-append ARGS] [-mem MiB] [-cpus N] [options] -- CMD...
 *          boots the microVM in this process (vmm_run on its own thread,
 *          vsock Unix sockets in DIR, console to DIR/console.log)
 *   local: agentrun -dir DIR -init GANTRY_INIT -rootfs ROOT [options] -- CMD...
 *          runs gantry-init in its test mode (needs root and crun)
 *   vsock: agentrun -vsock [options] -- CMD...
 *          listens on this host's vsock for a guest that another VMM boots
 *          with vhost-vsock (bench/exec's QEMU side)
 *
 * options: -t (tty)  -e NAME=VALUE  -w CWD  -u UID[:GID[:G1,G2...]]
 *          -signal MS:SIGNO (send SIGNAL after MS ms)  -forward (forward our
 *          signals)  -no-stdin  -hello-timeout MS  -debug
 *          -no-shutdown (-vsock only: exit once the session has ended, as
 *          `gantry exec` does, leaving the VM for its VMM's owner to end)
 *
 * The command's stdout and stderr are ours; "agentrun: ..." lines on stderr
 * say what the driver saw. The exit status is the session's (code, 128 +
 * signal, or ERROR's code), or 125 when the driver itself failed. The guest
 * is then shut down with that status, and the status the VM (or the local
 * gantry-init) ended with is printed ("guest ended with status N"). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/session.h"
#include "cli/signals.h"
#include "common/util.h"
#include "machine/vmm.h"

#define MAX_ENV	    64
#define MAX_GIDS    16
#define FAIL_STATUS 125

struct vm_thread {
	struct vmm_config cfg;
	struct agent *agent;
	pthread_t thread;
	int status;
	int ret;
	gantry_error_t err;
};

struct killer {
	struct agent *agent;
	int after_ms, signo;
};

static void *vm_main(void *opaque)
{
	struct vm_thread *t = opaque;

	t->ret = vmm_run(&t->cfg, &t->status, &t->err);
	/* Whatever the session waits for will not come now. */
	agent_cancel(t->agent);
	return NULL;
}

static void *killer_main(void *opaque)
{
	struct killer *k = opaque;
	struct timespec ts = { .tv_sec = k->after_ms / 1000,
			       .tv_nsec = (long)(k->after_ms % 1000) * 1000000L };
	gantry_error_t err = NULL;

	nanosleep(&ts, NULL);
	fprintf(stderr, "agentrun: sending signal %d\n", k->signo);
	if (agent_signal(k->agent, k->signo, &err) < 0)
		gantry_error_print(&err);
	return NULL;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: agentrun (-dir DIR (-kernel K -disk PATH[,ro]... [-append A] [-mem M] "
		"[-cpus N] | -init PATH -rootfs DIR) | -vsock)\n"
		"       [-t] [-e K=V]... [-w CWD] [-u UID[:GID[:G,...]]] [-signal MS:SIGNO] "
		"[-forward] [-no-stdin] [-hello-timeout MS] [-debug] [-no-shutdown] -- CMD...\n");
	return 2;
}

static int parse_user(const char *s, struct agent_process *p, uint32_t *gids)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	p->uid = p->gid = (uint32_t)v;
	if (*end == ':') {
		p->gid = (uint32_t)strtoul(end + 1, &end, 10);
		if (*end == ':') {
			do {
				if (p->ngids == MAX_GIDS)
					return -1;
				gids[p->ngids++] = (uint32_t)strtoul(end + 1, &end, 10);
			} while (*end == ',');
		}
	}
	return *end ? -1 : 0;
}

static void print_console_tail(const char *dir)
{
	char path[4096], buf[4096];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/console.log", dir);
	f = fopen(path, "r");
	if (f == NULL)
		return;
	fseek(f, 0, SEEK_END);
	if (ftell(f) > (long)sizeof(buf) - 1)
		fseek(f, -(long)sizeof(buf) + 1, SEEK_END);
	else
		fseek(f, 0, SEEK_SET);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	fprintf(stderr, "agentrun: --- console tail ---\n%s\nagentrun: ---\n", buf);
}

int main(int argc, char **argv)
{
	static struct vm_thread vm;
	char *env[MAX_ENV + 1] = { 0 };
	uint32_t gids[MAX_GIDS];
	struct agent_process p = { .in_fd = 0, .out_fd = 1, .err_fd = 2, .gids = gids };
	struct agent_result res;
	struct proto_hello hello;
	struct killer killer = { 0 };
	pthread_t killer_thread;
	const char *dir = NULL, *init = NULL, *rootfs = NULL;
	gantry_error_t err = NULL;
	struct agent *agent = NULL;
	char console[4096], state[4096];
	int nenv = 0, hello_timeout = 60000, status = FAIL_STATUS, i, guest_status = -1;
	bool debug = false, with_vm, vm_started = false, vsock = false, shutdown = true;
	bool forward = false;
	uint64_t u;
	pid_t init_pid = -1;
	double t0 = now_ms_frac();

	vm.cfg.cpus = 1;
	vm.cfg.mem_mib = VMM_DEFAULT_MEM;
	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "-t") == 0) {
			p.tty = true;
			continue;
		} else if (strcmp(a, "-forward") == 0) {
			forward = true;
			continue;
		} else if (strcmp(a, "-no-stdin") == 0) {
			p.in_fd = -1;
			continue;
		} else if (strcmp(a, "-debug") == 0) {
			debug = true;
			continue;
		} else if (strcmp(a, "-vsock") == 0) {
			vsock = true;
			continue;
		} else if (strcmp(a, "-no-shutdown") == 0) {
			shutdown = false;
			continue;
		}
		if (v == NULL)
			return usage();
		i++;
		if (strcmp(a, "-dir") == 0)
			dir = v;
		else if (strcmp(a, "-init") == 0)
			init = v;
		else if (strcmp(a, "-rootfs") == 0)
			rootfs = v;
		else if (strcmp(a, "-kernel") == 0)
			vm.cfg.kernel = v;
		else if (strcmp(a, "-append") == 0)
			vm.cfg.append = v;
		else if (strcmp(a, "-disk") == 0 && vm.cfg.nr_disks < VMM_MAX_DISKS) {
			size_t n = strlen(v);
			bool ro = n > 3 && strcmp(v + n - 3, ",ro") == 0;

			vm.cfg.disks[vm.cfg.nr_disks].path = ro ? strndup(v, n - 3) : v;
			vm.cfg.disks[vm.cfg.nr_disks++].ro = ro;
		} else if (strcmp(a, "-mem") == 0 && parse_u64(v, VMM_MAX_MEM_MIB, &u) == 0)
			vm.cfg.mem_mib = u;
		else if (strcmp(a, "-cpus") == 0 && parse_u64(v, 64, &u) == 0)
			vm.cfg.cpus = (unsigned int)u;
		else if (strcmp(a, "-e") == 0 && nenv < MAX_ENV)
			env[nenv++] = (char *)v;
		else if (strcmp(a, "-w") == 0)
			p.cwd = v;
		else if (strcmp(a, "-u") == 0 && parse_user(v, &p, gids) == 0)
			continue;
		else if (strcmp(a, "-signal") == 0 &&
			 sscanf(v, "%d:%d", &killer.after_ms, &killer.signo) == 2)
			continue;
		else if (strcmp(a, "-hello-timeout") == 0 && parse_u64(v, INT32_MAX, &u) == 0)
			hello_timeout = (int)u;
		else
			return usage();
	}
	if (i >= argc - 1 || (dir == NULL) != vsock || (!shutdown && !vsock))
		return usage();
	with_vm = vm.cfg.kernel != NULL;
	if ((!vsock && with_vm == (init != NULL)) || (vsock && (with_vm || init)) ||
	    (init && !rootfs))
		return usage();
	p.argv = argv + i + 1;
	p.env = env;
	if (!vsock && (dir = realpath(dir, NULL)) == NULL) {
		perror("agentrun: -dir");
		return FAIL_STATUS;
	}

	if ((vsock ? agent_listen_vsock(&agent, &err) : agent_listen(dir, &agent, &err)) < 0)
		goto fail;
	vm.agent = agent;
	if (vsock) {
		/* The guest is another VMM's: nothing to start here. */
	} else if (with_vm) {
		snprintf(console, sizeof(console), "%s/console.log", dir);
		vm.cfg.console = console;
		vm.cfg.vsock_dir = dir;
		if (pthread_create(&vm.thread, NULL, vm_main, &vm) != 0) {
			gantry_error(&err, errno, "pthread_create");
			goto fail;
		}
		vm_started = true;
	} else {
		snprintf(state, sizeof(state), "%s/state", dir);
		mkdir(state, 0700);
		init_pid = fork();
		if (init_pid == 0) {
			execl(init, init, "--host-dir", dir, "--state", state, "--rootfs", rootfs,
			      debug ? "--debug" : NULL, (char *)NULL);
			_exit(127);
		}
	}
	if (agent_wait_ready(agent, hello_timeout, &hello, &err) < 0)
		goto fail;
	fprintf(stderr,
		"agentrun: HELLO after %.0f ms: protocol %u, guest uptime %llu ms, %u cpus, kernel "
		"%s\n",
		now_ms_frac() - t0, hello.version, (unsigned long long)hello.uptime_ms, hello.ncpus,
		hello.kernel);
	if (killer.signo) {
		killer.agent = agent;
		pthread_create(&killer_thread, NULL, killer_main, &killer);
	}
	/* Signals as the CLI forwards them (src/cli/signals.c). */
	p.signal_fd = forward ? cli_signals_fd(&err) : -1;
	if (forward && (p.signal_fd < 0 || cli_signals_catch(true, &err) < 0))
		goto fail;
	if (agent_run(agent, &p, &res, &err) < 0)
		goto fail;
	cli_signals_catch(false, NULL);
	status = agent_result_status(&res);
	if (res.error)
		fprintf(stderr, "agentrun: ERROR %d: %s\n", res.code, res.message);
	else
		fprintf(stderr, "agentrun: pid %u %s %d\n", res.pid,
			res.signaled ? "killed by signal" : "exited with", res.code);
	agent_result_free(&res);
	if (shutdown && agent_shutdown(agent, status & 0xff, 30000, &err) < 0)
		gantry_error_print(&err);
	goto wait_guest;
fail:
	/* When the VM failed, its error is the story; ours is "cancelled". */
	if (vm_started && err && err->status == ECANCELED)
		gantry_error_free(&err);
	else
		gantry_error_print(&err);
	status = FAIL_STATUS;
	if (agent)
		agent_cancel(agent);
	if (init_pid > 0)
		kill(init_pid, SIGKILL);
wait_guest:
	if (vm_started) {
		pthread_join(vm.thread, NULL);
		if (vm.ret < 0) {
			gantry_error_print(&vm.err);
		} else {
			guest_status = vm.status;
		}
		if (status == FAIL_STATUS || debug)
			print_console_tail(dir);
	} else if (init_pid > 0) {
		int ws;

		if (waitpid(init_pid, &ws, 0) == init_pid && WIFEXITED(ws))
			guest_status = WEXITSTATUS(ws);
	}
	fprintf(stderr, "agentrun: guest ended with status %d after %.0f ms\n", guest_status,
		now_ms_frac() - t0);
	/* A kernel without CONFIG_X86_IOPL_IOPERM cannot reach the exit port,
	 * and gantry-init falls back to a reset (status 0): a warning here; the
	 * tests check the status where the kernel has it. */
	if (status != FAIL_STATUS && !vsock && guest_status != (status & 0xff))
		fprintf(stderr,
			"agentrun: warning: the guest's status %d is not the session's %d\n",
			guest_status, status & 0xff);
	agent_free(agent);
	return status;
}
