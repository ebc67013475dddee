/* `gantry run`: boot a kernel in a microVM with no sandbox state. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "confine/confine.h"
#include "net/portspec.h"
#include "net/spawn.h"
#include "sandbox/lifecycle.h"
#include "sandbox/machine.h"
#include "snapshot/files.h"
#include "share/server.h"
#include "share/spec.h"
#include "virtio/devices.h"
#include "machine/vmm.h"

/* -p: canonical specs (sandbox/network.h), host ports of 0 not yet chosen;
 * and -allow-local-net. */
struct run_ports {
	char **v;
	size_t n;
	bool allow_local;
};

static int add_disk(void *opaque, const char *value, gantry_error_t *err)
{
	struct vmm_config *cfg = opaque;
	const char *comma = strrchr(value, ',');
	char *path;

	if (cfg->nr_disks == VMM_MAX_DISKS)
		return gantry_error(err, 0, "at most %d disks", VMM_MAX_DISKS);
	if (*value == '\0')
		return gantry_error(err, 0, "empty disk path");
	if (comma && strcmp(comma, ",ro") == 0) {
		path = strndup(value, (size_t)(comma - value));
		cfg->disks[cfg->nr_disks].ro = true;
	} else if (comma && strcmp(comma, ",rw") == 0) {
		path = strndup(value, (size_t)(comma - value));
	} else {
		path = strdup(value);
	}
	if (path == NULL)
		abort();
	cfg->disks[cfg->nr_disks++].path = path;
	return 0;
}

/* -share: canonical specs (share/spec.h), tags unique. */
struct run_shares {
	char **v;
	size_t n;
};

static int add_share(void *opaque, const char *value, gantry_error_t *err)
{
	struct run_shares *sh = opaque;
	cleanup_free char *cwd = getcwd(NULL, 0);

	return shares_add(&sh->v, &sh->n, value, cwd, err);
}

/* The guest has no container, so a container path means nothing. */
static int run_shares_check(const struct run_shares *sh, gantry_error_t *err)
{
	for (size_t i = 0; i < sh->n; i++) {
		char dflt[sizeof("/host/") + SHARE_TAG_MAX];
		struct share_spec sp;
		bool ctr;

		if (share_spec_parse(sh->v[i], NULL, &sp, err) < 0)
			return -1;
		snprintf(dflt, sizeof(dflt), "/host/%s", sp.tag);
		ctr = strcmp(sp.ctr_path, dflt) != 0;
		if (ctr)
			gantry_error(err, 0,
				     "-share `%s`: `@CTR_PATH` is for sandboxes; the guest of "
				     "`gantry run` mounts the shares itself",
				     sp.tag);
		share_spec_free(&sp);
		if (ctr)
			return -1;
	}
	return 0;
}

static int add_port(void *opaque, const char *value, gantry_error_t *err)
{
	struct run_ports *ports = opaque;

	return ports_add(&ports->v, &ports->n, value, err);
}

/* Ports of 0 chosen now, and said: a port picked for the user is one they
 * could not know otherwise. */
static int ports_choose(struct run_ports *ports, gantry_error_t *err)
{
	bool given[PORTS_MAX];
	struct port_spec p;

	for (size_t i = 0; i < ports->n; i++)
		given[i] = port_spec_parse(ports->v[i], &p, NULL) == 0 && p.host_port != 0;
	if (ports_pick(ports->v, ports->n, err) < 0)
		return -1;
	for (size_t i = 0; i < ports->n; i++)
		if (!given[i])
			log_info("run: publishing %s", ports->v[i]);
	return 0;
}

/* With -snapshot, SIGINT, SIGTERM and SIGHUP stop the VM (its stop
 * event, which saves it) instead of ending gantry at once. */
static int run_stop_fd = -1;

static void run_stop_handler(int signo)
{
	uint64_t save = VMM_STOP_SAVE;
	int saved = errno;

	(void)signo;
	if (run_stop_fd >= 0)
		(void)!write(run_stop_fd, &save, sizeof(save));
	errno = saved;
}

static void run_stop_on_signals(int stop_fd)
{
	static const int ending[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa = { .sa_handler = run_stop_handler, .sa_flags = SA_RESTART };

	run_stop_fd = stop_fd;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < ARRAY_SIZE(ending); i++)
		sigaction(ending[i], &sa, NULL);
}

/* The VM, built by the machine layer as a sandbox's is: its network, share
 * and VMM workers confined as GANTRY_PROCESS_ISOLATION says. */
static int run_vm(struct machine_run *r, struct run_ports *ports, struct run_shares *shares,
		  int *status, gantry_error_t *err)
{
	struct machine m;
	int rc = -1;

	if (run_shares_check(shares, err) < 0 || confine_mode_from_env(&r->isolation, err) < 0)
		return -1;
	/* A config that cannot boot fails before a port is taken for it. */
	if (vmm_validate(&r->cfg, err) < 0)
		return -1;
	if (r->net && ports_choose(ports, err) < 0)
		return -1;
	r->ports = ports->v;
	r->nr_ports = ports->n;
	r->allow_local_net = ports->allow_local;
	r->shares = shares->v;
	r->nr_shares = shares->n;
	if (machine_config_run(&m, r, err) == 0 && machine_start(&m, err) == 0) {
		if (r->cfg.save_state_fd > 0)
			run_stop_on_signals(m.cfg.stop_fd);
		machine_join(&m);
		run_stop_fd = -1; /* closed with the machine */
		rc = m.rc;
		*status = m.status;
		if (rc < 0) {
			*err = m.err;
			m.err = NULL;
		}
	}
	machine_free(&m);
	return rc;
}

/* -snapshot DIR and -restore DIR: a saved VM (snapshot/files.h). */
struct run_snapshot {
	const char *save, *restore;
	struct snap_save saving;
};

static int snapshot_open(struct run_snapshot *sn, struct vmm_config *cfg, gantry_error_t *err)
{
	sn->saving = (struct snap_save){ .dir = -1, .state_fd = -1, .mem_fd = -1 };
	if (sn->restore &&
	    snap_open_restore(sn->restore, &cfg->restore_state_fd, &cfg->restore_mem_fd, err) < 0)
		return gantry_error_prefix(err, "-restore");
	if (sn->save) {
		if (snap_open_save(&sn->saving, sn->save, err) < 0)
			return gantry_error_prefix(err, "-snapshot");
		cfg->save_state_fd = sn->saving.state_fd;
		cfg->save_mem_fd = sn->saving.mem_fd;
	}
	return 0;
}

#define UNSET UINT64_MAX

/* -cpus and -mem as given; else, restoring, the saved VM's; else 1 and
 * 512 MiB. */
static int run_machine_size(struct vmm_config *cfg, const uint64_t *cpus, gantry_error_t *err)
{
	unsigned int saved_cpus = 1;
	uint64_t saved_mem = VMM_DEFAULT_MEM;

	if (cfg->restore_state_fd > 0 && (*cpus == UNSET || cfg->mem_mib == UNSET) &&
	    vmm_saved_machine(cfg->restore_state_fd, &saved_cpus, &saved_mem, err) < 0)
		return gantry_error_prefix(err, "cannot restore the VM");
	cfg->cpus = *cpus == UNSET ? saved_cpus : (unsigned int)*cpus;
	if (cfg->mem_mib == UNSET)
		cfg->mem_mib = saved_mem;
	return 0;
}

/* The save, when the VM made one, put in place; else its files gone. */
static int snapshot_finish(struct run_snapshot *sn, struct vmm_config *cfg, bool ok,
			   gantry_error_t *err)
{
	int r = snap_finish(&sn->saving, ok, err);

	if (r > 0)
		log_info("run: the VM is saved in %s", sn->save);
	if (cfg->restore_state_fd > 0)
		close(cfg->restore_state_fd);
	if (cfg->restore_mem_fd > 0)
		close(cfg->restore_mem_fd);
	return r < 0 ? gantry_error_prefix(err, "-snapshot") : 0;
}

static void run_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry run -kernel PATH [-initrd PATH] [-disk PATH[,ro]]... [-append "
		"ARGS]\n"
		"                  [-cpus N] [-mem MiB] [-console PATH] [-vsock DIR]\n"
		"                  [-net [-p SPEC]... [-allow-local-net]] [-share SPEC]...\n"
		"                  [-snapshot DIR]\n"
		"       gantry run -restore DIR [-disk PATH[,ro]]... [-console PATH] [-vsock DIR]\n"
		"                  [-net [-p SPEC]... [-allow-local-net]] [-share SPEC]...\n"
		"                  [-snapshot DIR]\n\n"
		"Boot a Linux kernel (vmlinux ELF or bzImage) in a microVM, with no sandbox\n"
		"state. Disks appear as /dev/vda, /dev/vdb, ... in the order given. The serial\n"
		"console goes to stdout (or -console PATH). The guest ends the VM by resetting\n"
		"(exit status: the last byte written to Gantry's status register, else 0)\n"
		"or by writing its status to Gantry's exit port; that status is returned.\n"
		"gantry-init writes the status register and resets. With -vsock DIR, a guest\n"
		"connection to host port P reaches the Unix socket DIR/P.sock, and a host\n"
		"client of DIR/vsock.sock that writes `CONNECT P\\n` reaches guest port P.\n"
		"With -net, the guest gets a virtio-net link to Gantry's network worker\n"
		"(NAT: 192.168.127.2/24, gateway and DNS 192.168.127.1, the host's loopback\n"
		"at 192.168.127.254); the guest configures eth0 itself. -p [IP:]HOST:GUEST\n"
		"forwards HOST on IP (default 127.0.0.1) to GUEST in the guest; -p GUEST or\n"
		"a HOST of 0 picks a free host port. The guest may reach the internet but\n"
		"not local networks nor the host, unless -allow-local-net.\n"
		"-share TAG=HOST_PATH[,ro][,uid=N,gid=N] serves HOST_PATH to the guest by\n"
		"Gantry's share server (docs/shares.md): one virtio-fs device, tag\n"
		"gantry-shares, whose root holds one directory per share, named TAG\n"
		"(mount -t virtiofs gantry-shares /mnt; the share is /mnt/TAG).\n"
		"-snapshot DIR saves the VM into DIR (files state and memory) when gantry is\n"
		"stopped (SIGINT, SIGTERM) instead of only ending it; -restore DIR goes on\n"
		"from such a save instead of booting a kernel, on the saved VM's -cpus and -mem,\n"
		"with its -disk files unchanged since the save; vsock and network connections do not\n"
		"survive it (a restored -net VM gets a fresh network worker); -share is given\n"
		"again, and the guest's files and directories on it go on where they still are\n"
		"(docs/snapshots.md).\n\n"
		"Flags:\n");
	flags_usage(out, flags);
	fprintf(out, "\nEnvironment: GANTRY_BOOT_TIMING=1 prints setup time and VM exit counts;\n"
		     "GANTRY_GUEST_PROFILE=FILE samples the guest's instruction pointer into FILE\n"
		     "(scripts/guest-profile names the functions); GANTRY_KVM_DEVICE overrides\n"
		     "/dev/kvm; GANTRY_PROCESS_ISOLATION (auto, required or off) confines the\n"
		     "VMM, network and share workers as for a sandbox, and off runs the VM in\n"
		     "gantry's own process, unconfined; GANTRY_SECCOMP=log has the kernel log\n"
		     "what the filters refuse.\n");
}

int cmd_run(int argc, char **argv)
{
	struct machine_run r = {
		/* Keystrokes from a terminal on stdin go to the serial console. */
		.cfg = { .cpus = 1,
			 .mem_mib = UNSET,
			 .console_input = isatty(STDIN_FILENO),
			 .console_in = STDIN_FILENO }
	};
	struct vmm_config *cfg = &r.cfg;
	gantry_error_t err = NULL;
	uint64_t cpus = UNSET;
	struct run_ports ports = { .v = NULL, .n = 0, .allow_local = false };
	struct run_shares shares = { 0 };
	struct run_snapshot snap = { 0 };
	bool help = false, dashdash;
	int rest, status = 0, rc;
	const struct flag flags[] = {
		{ "kernel", FLAG_STRING, &cfg->kernel, NULL, "PATH",
		  "kernel: vmlinux ELF or bzImage", 0 },
		{ "initrd", FLAG_STRING, &cfg->initrd, NULL, "PATH",
		  "initial ramdisk (cpio archive)", 0 },
		{ "disk", FLAG_FUNC, cfg, add_disk, "PATH[,ro]", "virtio-blk disk (repeatable)",
		  0 },
		{ "append", FLAG_STRING, &cfg->append, NULL, "ARGS", "extra kernel command line",
		  0 },
		{ "cpus", FLAG_UINT, &cpus, NULL, "N", "vCPUs (default 1; -restore: the saved VM's)",
		  1024 },
		{ "mem", FLAG_UINT, &cfg->mem_mib, NULL, "MiB",
		  "guest memory (default 512; -restore: the saved VM's)", 0 },
		{ "console", FLAG_STRING, &cfg->console, NULL, "PATH", "write the console to PATH",
		  0 },
		{ "vsock", FLAG_STRING, &cfg->vsock_dir, NULL, "DIR",
		  "virtio-vsock, guest CID 3: guest port P reaches DIR/P.sock", 0 },
		{ "net", FLAG_BOOL, &r.net, NULL, NULL,
		  "virtio-net through the network worker (NAT, no DHCP)", 0 },
		{ "p", FLAG_FUNC, &ports, add_port, "SPEC",
		  "with -net, publish a port: [IP:]HOST:GUEST[/udp] or GUEST (repeatable)", 0 },
		{ "allow-local-net", FLAG_BOOL, &ports.allow_local, NULL, NULL,
		  "with -net, let the guest reach local networks and the host", 0 },
		{ "share", FLAG_FUNC, &shares, add_share, "SPEC",
		  "serve a host directory: TAG=HOST_PATH[,ro][,uid=N,gid=N] (repeatable)", 0 },
		{ "snapshot", FLAG_STRING, &snap.save, NULL, "DIR",
		  "when stopped, save the VM into DIR", 0 },
		{ "restore", FLAG_STRING, &snap.restore, NULL, "DIR",
		  "go on from the VM saved in DIR instead of booting", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	rc = flags_parse_cmd("run", flags, argc, argv, &rest, &dashdash, run_usage);
	if (rc <= 0)
		return -rc;
	if (rest < argc) {
		if (r.cfg.kernel == NULL)
			log_error("run: unexpected argument `%s`: gantry run boots a kernel "
				  "(-kernel); "
				  "to run an image: gantry exec -image %s -- CMD, or gantry start "
				  "NAME "
				  "-image %s",
				  argv[rest], argv[rest], argv[rest]);
		else
			log_error("run: unexpected argument `%s`", argv[rest]);
		return 2;
	}
	if (ports.n > 0 && !r.net) {
		log_error("run: -p needs -net");
		status = 2;
	} else if (snap.restore && (cfg->kernel || cfg->initrd || cfg->append)) {
		log_error("run: -restore takes no -kernel, -initrd or -append: the VM is the saved "
			  "one");
		status = 2;
	} else {
		cfg->timing = vmm_timing_requested();
		rc = snapshot_open(&snap, cfg, &err);
		if (rc == 0)
			rc = run_machine_size(cfg, &cpus, &err);
		if (rc == 0)
			rc = run_vm(&r, &ports, &shares, &status, &err);
		if (snapshot_finish(&snap, cfg, rc == 0, rc < 0 ? NULL : &err) < 0)
			rc = -1;
		if (rc < 0)
			status = cli_fail(&err, 125);
	}
	for (unsigned int i = 0; i < cfg->nr_disks; i++)
		free((char *)cfg->disks[i].path);
	strv_free(ports.v);
	strv_free(shares.v);
	return status;
}
