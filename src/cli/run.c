/* `gantry run`: boot a kernel in a microVM with no sandbox state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "confine/confine.h"
#include "net/portspec.h"
#include "net/spawn.h"
#include "sandbox/network.h"
#include "sandbox/machine.h"
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
	struct fs_server *server;
	struct virtio_fs_handler handler;
};

static int add_share(void *opaque, const char *value, gantry_error_t *err)
{
	struct run_shares *sh = opaque;
	cleanup_free char *cwd = getcwd(NULL, 0);

	return shares_add(&sh->v, &sh->n, value, cwd, err);
}

/* One share: its directory checked and opened once, an export of the
 * server. The guest has no container, so a container path means nothing. */
static int share_one(struct fs_server *s, const char *spec, gantry_error_t *err)
{
	struct share_spec sp;
	char dflt[sizeof("/host/") + SHARE_TAG_MAX];
	int r = -1;

	if (share_spec_parse(spec, NULL, &sp, err) < 0)
		return -1;
	snprintf(dflt, sizeof(dflt), "/host/%s", sp.tag);
	if (strcmp(sp.ctr_path, dflt) != 0) {
		gantry_error(err, 0,
			     "-share `%s`: `@CTR_PATH` is for sandboxes; the guest "
			     "of `gantry run` mounts the shares itself",
			     sp.tag);
		goto out;
	}
	r = machine_share_export(s, &sp, err);
out:
	share_spec_free(&sp);
	return r;
}

/* With -share: the share server over every directory, behind the one
 * virtio-fs device. */
static int shares_setup(struct vmm_config *cfg, struct run_shares *sh, gantry_error_t *err)
{
	if (sh->n == 0)
		return 0;
	if (fs_server_new(&sh->server, 0, err) < 0)
		return gantry_error_prefix(err, "share server");
	for (size_t i = 0; i < sh->n; i++)
		if (share_one(sh->server, sh->v[i], err) < 0)
			return -1;
	machine_share_device(sh->server, &sh->handler, cfg);
	return 0;
}

/* The VMM's threads run under their seccomp filters unless process
 * isolation is off; GANTRY_SECCOMP=log logs instead of refusing. */
static int run_confine(struct vmm_config *cfg, gantry_error_t *err)
{
	enum confine_mode mode;

	if (confine_mode_from_env(&mode, err) < 0)
		return -1;
	cfg->confine_threads = mode != CONFINE_OFF;
	cfg->confine_log = confine_seccomp_log();
	return 0;
}

static int add_port(void *opaque, const char *value, gantry_error_t *err)
{
	struct run_ports *ports = opaque;

	return ports_add(&ports->v, &ports->n, value, err);
}

/* With -net: start the network worker and hand the VMM its frame socket,
 * then run the VM; the worker goes when the VM does. */
static int run_vm(struct vmm_config *cfg, bool net, struct run_ports *ports, int *status,
		  gantry_error_t *err)
{
	struct net_worker w = NET_WORKER_NONE;
	enum confine_mode mode;
	bool given[PORTS_MAX];
	struct port_spec p;
	int r;

	if (!net)
		return vmm_run(cfg, status, err);
	/* A config that cannot boot fails before a worker is started for it. */
	if (vmm_validate(cfg, err) < 0)
		return -1;
	for (size_t i = 0; i < ports->n; i++)
		given[i] = port_spec_parse(ports->v[i], &p, NULL) == 0 && p.host_port != 0;
	if (ports_pick(ports->v, ports->n, err) < 0)
		return -1;
	/* A port picked for the user is one they could not know otherwise. */
	for (size_t i = 0; i < ports->n; i++)
		if (!given[i])
			log_info("run: publishing %s", ports->v[i]);
	if (confine_mode_from_env(&mode, err) < 0)
		return -1;
	if (net_worker_start(&w,
			     &(struct net_worker_opts){ .ports = ports->v,
							.nr_ports = ports->n,
							.allow_local = ports->allow_local,
							.isolation = mode },
			     STDERR_FILENO, err) < 0)
		return -1;
	cfg->net_fd = w.vmm_fd;
	r = vmm_run(cfg, status, err);
	net_worker_stop(&w);
	return r;
}

static void run_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry run -kernel PATH [-initrd PATH] [-disk PATH[,ro]]... [-append "
		"ARGS]\n"
		"                  [-cpus N] [-mem MiB] [-console PATH] [-vsock DIR]\n"
		"                  [-net [-p SPEC]... [-allow-local-net]] [-share SPEC]...\n\n"
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
		"(mount -t virtiofs gantry-shares /mnt; the share is /mnt/TAG).\n\n"
		"Flags:\n");
	flags_usage(out, flags);
	fprintf(out, "\nEnvironment: GANTRY_BOOT_TIMING=1 prints setup time and VM exit counts;\n"
		     "GANTRY_GUEST_PROFILE=FILE samples the guest's instruction pointer into FILE\n"
		     "(scripts/guest-profile names the functions); GANTRY_KVM_DEVICE overrides\n"
		     "/dev/kvm; GANTRY_PROCESS_ISOLATION=off runs the VMM's threads without their\n"
		     "seccomp filters, GANTRY_SECCOMP=log has the kernel log what they refuse.\n");
}

int cmd_run(int argc, char **argv)
{
	struct vmm_config cfg = { .cpus = 1, .mem_mib = VMM_DEFAULT_MEM, .console_input = true };
	gantry_error_t err = NULL;
	uint64_t cpus = 1;
	struct run_ports ports = { .v = NULL, .n = 0, .allow_local = false };
	struct run_shares shares = { 0 };
	bool help = false, net = false, dashdash;
	int rest, status = 0, r;
	const struct flag flags[] = {
		{ "kernel", FLAG_STRING, &cfg.kernel, NULL, "PATH",
		  "kernel: vmlinux ELF or bzImage", 0 },
		{ "initrd", FLAG_STRING, &cfg.initrd, NULL, "PATH",
		  "initial ramdisk (cpio archive)", 0 },
		{ "disk", FLAG_FUNC, &cfg, add_disk, "PATH[,ro]", "virtio-blk disk (repeatable)",
		  0 },
		{ "append", FLAG_STRING, &cfg.append, NULL, "ARGS", "extra kernel command line",
		  0 },
		{ "cpus", FLAG_UINT, &cpus, NULL, "N", "vCPUs (default 1)", 1024 },
		{ "mem", FLAG_UINT, &cfg.mem_mib, NULL, "MiB", "guest memory (default 512)", 0 },
		{ "console", FLAG_STRING, &cfg.console, NULL, "PATH", "write the console to PATH",
		  0 },
		{ "vsock", FLAG_STRING, &cfg.vsock_dir, NULL, "DIR",
		  "virtio-vsock, guest CID 3: guest port P reaches DIR/P.sock", 0 },
		{ "net", FLAG_BOOL, &net, NULL, NULL,
		  "virtio-net through the network worker (NAT, no DHCP)", 0 },
		{ "p", FLAG_FUNC, &ports, add_port, "SPEC",
		  "with -net, publish a port: [IP:]HOST:GUEST[/udp] or GUEST (repeatable)", 0 },
		{ "allow-local-net", FLAG_BOOL, &ports.allow_local, NULL, NULL,
		  "with -net, let the guest reach local networks and the host", 0 },
		{ "share", FLAG_FUNC, &shares, add_share, "SPEC",
		  "serve a host directory: TAG=HOST_PATH[,ro][,uid=N,gid=N] (repeatable)", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	r = flags_parse_cmd("run", flags, argc, argv, &rest, &dashdash, run_usage);
	if (r <= 0)
		return -r;
	if (rest < argc) {
		log_error("run: unexpected argument `%s`", argv[rest]);
		return 2;
	}
	if (ports.n > 0 && !net) {
		log_error("run: -p needs -net");
		status = 2;
	} else {
		cfg.cpus = (unsigned int)cpus;
		cfg.timing = vmm_timing_requested();
		if (run_confine(&cfg, &err) < 0 || shares_setup(&cfg, &shares, &err) < 0 ||
		    run_vm(&cfg, net, &ports, &status, &err) < 0) {
			gantry_error_print(&err);
			status = 125;
		}
	}
	for (unsigned int i = 0; i < cfg.nr_disks; i++)
		free((char *)cfg.disks[i].path);
	strv_free(ports.v);
	strv_free(shares.v);
	fs_server_free(shares.server);
	return status;
}
