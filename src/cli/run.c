/* `gantry run`: boot a kernel in a microVM with no sandbox state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/log.h"
#include "common/util.h"
#include "vmm/vmm.h"

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

static void run_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry run -kernel PATH [-initrd PATH] [-disk PATH[,ro]]... [-append "
		"ARGS]\n"
		"                  [-cpus N] [-mem MiB] [-console PATH] [-vsock DIR]\n\n"
		"Boot a Linux kernel (vmlinux ELF or bzImage) in a microVM, with no sandbox\n"
		"state. Disks appear as /dev/vda, /dev/vdb, ... in the order given. The serial\n"
		"console goes to stdout (or -console PATH). The guest ends the VM by resetting\n"
		"(exit status: the last byte written to Gantry's status register, else 0)\n"
		"or by writing its status to Gantry's exit port; that status is returned.\n"
		"gantry-init writes the status register and resets. With -vsock DIR, a guest\n"
		"connection to host port P reaches the Unix socket DIR/P.sock, and a host\n"
		"client of DIR/vsock.sock that writes `CONNECT P\\n` reaches guest port P.\n\n"
		"Flags:\n");
	flags_usage(out, flags);
	fprintf(out, "\nEnvironment: GANTRY_BOOT_TIMING=1 prints setup time and VM exit counts;\n"
		     "GANTRY_GUEST_PROFILE=FILE samples the guest's instruction pointer into FILE\n"
		     "(scripts/guest-profile names the functions); GANTRY_KVM_DEVICE overrides\n"
		     "/dev/kvm.\n");
}

int cmd_run(int argc, char **argv)
{
	struct vmm_config cfg = { .cpus = 1, .mem_mib = VMM_DEFAULT_MEM, .console_input = true };
	gantry_error_t err = NULL;
	uint64_t cpus = 1;
	bool help = false, dashdash;
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
	cfg.cpus = (unsigned int)cpus;
	cfg.timing = vmm_timing_requested();
	r = vmm_run(&cfg, &status, &err);
	for (unsigned int i = 0; i < cfg.nr_disks; i++)
		free((char *)cfg.disks[i].path);
	if (r < 0) {
		gantry_error_print(&err);
		return 125;
	}
	return status;
}
