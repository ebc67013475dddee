/* Assemble and run a microVM (see vmm.h). */
#include <errno.h>
#include <linux/virtio_mmio.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/settings.h"
#include "common/util.h"
#include "confine/confine.h"
#include "confine/vmm_filter.h"
#include "snapshot/state.h"
#include "virtio/devices.h"
#include "vmm/boot_x86.h"
#include "vmm/console.h"
#include "vmm/mptable.h"
#include "vmm/serial.h"
#include "vmm/sysdev.h"
#include "vmm/vm.h"
#include "vmm/vmstate.h"
#include "machine/devices.h"
#include "machine/vmm.h"

/* Interrupt lines free for virtio-mmio devices: ISA IRQs the MP table routes
 * edge-triggered to the IO-APIC, minus the PIT (0), the cascade (2), COM1 (4)
 * and the RTC (8). */
static const unsigned int virtio_irqs[] = { 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 3 };
#define VMM_MAX_DEVICES ARRAY_SIZE(virtio_irqs)

/* Quiet, probe-free boot on hardware we fully describe. noreplace-smp: a
 * kernel that finds one CPU otherwise rewrites every lock prefix in its text
 * to a no-op, each one a text_poke() through a temporary address space; for
 * a one-vCPU guest that was a tenth of the boot under nested virtualization
 * (docs/vmm.md), for an atomic op per lock saved. */
static const char default_cmdline[] = "console=ttyS0 reboot=k panic=-1 pci=off nomodule "
				      "tsc=reliable no_timer_check io_delay=none noreplace-smp "
				      "8250.nr_uarts=1 quiet";

struct queue_watch {
	struct virtio_dev *dev;
	unsigned int queue;
};

struct vmm {
	struct vm vm;
	struct serial serial;
	struct virtio_dev *devs[VMM_MAX_DEVICES];
	int ioeventfds[VMM_MAX_DEVICES][VIRTIO_MAX_QUEUES];
	struct queue_watch watches[VMM_MAX_DEVICES][VIRTIO_MAX_QUEUES];
	unsigned int nr_devs;
	char *cmdline;
	struct console console;
	struct vmm_filter_opts confine;
	struct machine_slots slots; /* what the device table's adds are handed */
	double t_loaded, t_kvm;	    /* set-up milestones for GANTRY_BOOT_TIMING */
	double t_kvm_done;	    /* the VM built (booted or restored), not yet confined */
	/* A restore's state file, parsed (its sections point into state_buf). */
	uint8_t *state_buf;
	int pagemap_fd; /* a save's view of which RAM pages are in use; -1: none */
	struct state_file state;
	bool frozen; /* its vCPUs parked by VMM_FREEZE (the main thread's) */
};

struct mapped_file {
	void *data;
	size_t len;
};

/* path, or the caller's fd (> 0) that path only names. */
static int map_file(const char *what, const char *path, int given, struct mapped_file *f,
		    gantry_error_t *err)
{
	cleanup_close int fd = given > 0 ? fcntl(given, F_DUPFD_CLOEXEC, 3) :
					   open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;

	f->data = NULL;
	f->len = 0;
	if (fd < 0)
		return gantry_error_errno(err, "%s `%s`", what, path);
	if (fstat(fd, &st) < 0)
		return gantry_error_errno(err, "%s `%s`", what, path);
	if (!S_ISREG(st.st_mode))
		return gantry_error(err, 0, "%s `%s` is not a regular file", what, path);
	if (st.st_size == 0)
		return gantry_error(err, 0, "%s `%s` is empty", what, path);
	f->data = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (f->data == MAP_FAILED) {
		f->data = NULL;
		return gantry_error_errno(err, "%s `%s`: mmap", what, path);
	}
	f->len = (size_t)st.st_size;
	return 0;
}

static void unmap_file(struct mapped_file *f)
{
	if (f->data)
		munmap(f->data, f->len);
	f->data = NULL;
}

static uint64_t host_ram_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES);
	long page = sysconf(_SC_PAGESIZE);

	return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
}

bool vmm_timing_requested(void)
{
	const char *v = gantry_setting("GANTRY_BOOT_TIMING");

	return v && *v && strcmp(v, "0") != 0;
}

int vmm_validate(const struct vmm_config *cfg, gantry_error_t *err)
{
	unsigned int max_cpus = vm_max_vcpus(cfg->kvm_fd);
	uint64_t host_mib = host_ram_bytes() / MiB;
	unsigned int devices;
	struct stat st;

	if (cfg->kernel == NULL && cfg->restore_state_fd <= 0)
		return gantry_error_opt(err, "kernel", " is required (a vmlinux ELF or bzImage)");
	if (cfg->kernel &&
	    (cfg->kernel_fd > 0 ? fstat(cfg->kernel_fd, &st) : stat(cfg->kernel, &st)) < 0)
		return gantry_error_errno(err, "kernel `%s`", cfg->kernel);
	if (cfg->initrd && (cfg->initrd_fd > 0 ? fstat(cfg->initrd_fd, &st) : stat(cfg->initrd, &st)) < 0)
		return gantry_error_errno(err, "initrd `%s`", cfg->initrd);
	for (unsigned int i = 0; i < cfg->nr_disks; i++) {
		const struct vmm_disk *d = &cfg->disks[i];

		if ((d->fd > 0 ? fstat(d->fd, &st) : stat(d->path, &st)) < 0)
			return gantry_error_errno(err, "disk `%s`", d->path);
	}
	if (cfg->cpus == 0 || cfg->cpus > max_cpus)
		return gantry_error_opt(err, "cpus", " %u: this host allows 1 to %u", cfg->cpus,
					max_cpus);
	if (cfg->mem_mib < VMM_MIN_MEM_MIB)
		return gantry_error_opt(err, "mem_mib", " %llu: at least %u MiB is needed",
					(unsigned long long)cfg->mem_mib, VMM_MIN_MEM_MIB);
	if (cfg->mem_mib > VMM_MAX_MEM_MIB || cfg->mem_mib > host_mib)
		return gantry_error_opt(err, "mem_mib", " %llu: this host has %llu MiB of RAM",
					(unsigned long long)cfg->mem_mib,
					(unsigned long long)host_mib);
	if (cfg->vsock_dir && (stat(cfg->vsock_dir, &st) < 0 || !S_ISDIR(st.st_mode)))
		return gantry_error_opt(err, "vsock_dir", " %s: not a directory", cfg->vsock_dir);
	if (cfg->net_fd > 0 && (fstat(cfg->net_fd, &st) < 0 || !S_ISSOCK(st.st_mode)))
		return gantry_error(err, 0, "network: fd %d is not a socket", cfg->net_fd);
	devices = machine_count_devices(cfg);
	if (devices > VMM_MAX_DEVICES)
		return gantry_error(err, 0, "too many devices: %u disks and %u others, room for %zu",
				    cfg->nr_disks, devices - cfg->nr_disks, VMM_MAX_DEVICES);
	return 0;
}

int vmm_check_images(const struct vmm_config *cfg, gantry_error_t *err)
{
	struct mapped_file f;
	bool kernel_ok;

	if (cfg->restore_state_fd > 0)
		return 0;
	if (map_file("kernel", cfg->kernel, cfg->kernel_fd, &f, err) < 0)
		return -1;
	kernel_ok = boot_kernel_format_ok(f.data, f.len);
	unmap_file(&f);
	if (!kernel_ok)
		return gantry_error(err, 0, "kernel `%s`: not a vmlinux ELF or bzImage", cfg->kernel);
	if (cfg->initrd && map_file("initrd", cfg->initrd, cfg->initrd_fd, &f, err) < 0)
		return -1;
	unmap_file(&f);
	return 0;
}

static void vmm_queue_kick(void *opaque, int fd, unsigned int events)
{
	struct queue_watch *w = opaque;
	uint64_t n;

	(void)events;
	if (read(fd, &n, sizeof(n)) == sizeof(n))
		virtio_dev_notify(w->dev, w->queue);
}

/* Console input from a terminal; a full receive FIFO drops keystrokes. */
static void vmm_console_input(void *opaque, int fd, unsigned int events)
{
	struct vmm *v = opaque;
	uint8_t buf[SERIAL_RX_FIFO];
	ssize_t n;

	(void)events;
	n = read(fd, buf, sizeof(buf));
	if (n > 0)
		serial_input(&v->serial, buf, (size_t)n);
	else if (n == 0 || errno != EINTR)
		ioloop_remove(&v->vm.io, fd); /* hung up: stop polling it */
}

/* The I/O thread's and the virtio-fs workers' filters (vm_confine_thread). */
static bool vmm_confine_io(void *opaque)
{
	return vm_confine_thread(opaque, VMM_THREAD_IO);
}

static void vmm_confine_fs(void *opaque)
{
	/* Its VM ends; the worker serves on, under the I/O thread's filter,
	 * until the teardown stops it. */
	vm_confine_thread(opaque, VMM_THREAD_FS);
}

static void vmm_stop_requested(void *opaque, int fd, unsigned int events)
{
	struct vmm *v = opaque;
	uint64_t n = 0;

	(void)events;
	if (read(fd, &n, sizeof(n)) != sizeof(n))
		return;
	if (n >= VMM_CHECKPOINT) {
		n %= VMM_CHECKPOINT;
		vm_request_checkpoint(&v->vm);
	}
	/* Its caller waits for each answer: a freeze and a thaw never add up. */
	if (n >= VMM_FREEZE) {
		vm_request_freeze(&v->vm, n % VMM_THAW >= VMM_FREEZE);
		n %= VMM_FREEZE;
	}
	if (n == 0)
		return;
	if (n >= VMM_STOP_SAVE)
		atomic_store(&v->vm.save_asked, true);
	vm_request_end(&v->vm, VM_END_STOP, 0, "stopped by its host");
}

/* Place a device in the MMIO hole, wire its interrupt through an irqfd and
 * each queue's notify register through an ioeventfd, and declare it on the
 * kernel command line. */
static int vmm_attach_virtio(struct machine_slots *s, struct virtio_dev *d, gantry_error_t *err)
{
	struct vmm *v = container_of(s, struct vmm, slots);
	unsigned int i = v->nr_devs;
	char *decl, *cmdline;

	if (i >= VMM_MAX_DEVICES) {
		d->ops->destroy(d);
		return gantry_error(err, 0, "too many devices");
	}
	v->devs[v->nr_devs++] = d;
	d->base = VMM_MMIO_BASE + (uint64_t)i * VIRTIO_MMIO_SIZE;
	d->irq = virtio_irqs[i];
	d->irqfd = vm_irqfd(&v->vm, d->irq, err);
	if (d->irqfd < 0)
		return -1;
	for (unsigned int q = 0; q < d->ops->num_queues; q++) {
		struct queue_watch *w = &v->watches[i][q];
		int fd = vm_ioeventfd(&v->vm, d->base + VIRTIO_MMIO_QUEUE_NOTIFY, q, err);

		if (fd < 0)
			return -1;
		v->ioeventfds[i][q] = fd;
		d->queue_fds[q] = fd;
		if (d->ops->own_kicks & (1u << q)) {
			/* The device's own thread blocks reading it. */
			if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0)
				return gantry_error_errno(err, "%s: queue %u's eventfd",
							  d->ops->name, q);
			continue;
		}
		*w = (struct queue_watch){ d, q };
		if (ioloop_add(&v->vm.io, fd, vmm_queue_kick, w, err) < 0)
			return -1;
	}
	d->thread_start = vmm_confine_fs;
	d->thread_opaque = &v->vm;
	if (bus_register(&v->vm.mmio, d->base, VIRTIO_MMIO_SIZE, virtio_mmio_access, d,
			 d->ops->name, err) < 0)
		return -1;
	xasprintf(&decl, " virtio_mmio.device=4K@%#llx:%u", (unsigned long long)d->base, d->irq);
	xasprintf(&cmdline, "%s%s", v->cmdline, decl);
	free(decl);
	free(v->cmdline);
	v->cmdline = cmdline;
	return 0;
}

/* The VM and its devices, as both a boot and a restore make them. */
static int vmm_build(struct vmm *v, const struct vmm_config *cfg, gantry_error_t *err)
{
	if (vm_create(&v->vm, cfg->kvm_fd, err) < 0)
		return -1;
	v->t_kvm = now_ms_frac();

	serial_init(&v->serial, &v->vm, &v->console);
	if (serial_attach(&v->serial, err) < 0 || sysdev_attach(&v->vm, err) < 0)
		return -1;
	if (cfg->stop_fd > 0 && ioloop_add(&v->vm.io, cfg->stop_fd, vmm_stop_requested, v, err) < 0)
		return -1;
	if (cfg->console_input &&
	    ioloop_add(&v->vm.io, cfg->console_in, vmm_console_input, v, err) < 0)
		return -1;

	v->cmdline = xstrdup(default_cmdline);
	v->slots = (struct machine_slots){ &v->vm.mem, &v->vm.io, vmm_attach_virtio };
	for (unsigned int i = 0; i < machine_nr_devices; i++)
		if (machine_devices[i].count(cfg) &&
		    machine_devices[i].add(&v->slots, cfg, err) < 0)
			return -1;
	v->vm.save_on_stop = cfg->save_state_fd > 0;
	/* Opened while set-up may: a confined worker has no /proc after. */
	if (v->vm.save_on_stop)
		v->pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	return 0;
}

static int vmm_boot(struct vmm *v, const struct vmm_config *cfg, gantry_error_t *err)
{
	struct mapped_file kernel = { 0 }, initrd = { 0 };
	struct boot_image img;
	uint64_t initrd_gpa = 0;
	char *full;
	int r = -1;

	if (map_file("kernel", cfg->kernel, cfg->kernel_fd, &kernel, err) < 0)
		goto out;
	if (cfg->initrd && map_file("initrd", cfg->initrd, cfg->initrd_fd, &initrd, err) < 0)
		goto out;
	/* Load the guest before opening KVM: a bad image is bad input, whatever
	 * this host's KVM can do. */
	if (guest_mem_init(&v->vm.mem, cfg->mem_mib * MiB, err) < 0)
		goto out;
	if (cfg->small_pages)
		guest_mem_small_pages(&v->vm.mem);
	if (boot_load_kernel(&v->vm.mem, kernel.data, kernel.len, &img, err) < 0) {
		gantry_error_prefix(err, "%s", cfg->kernel);
		goto out;
	}
	if (initrd.data &&
	    boot_load_initrd(&v->vm.mem, &img, initrd.data, initrd.len, &initrd_gpa, err) < 0)
		goto out;
	v->t_loaded = now_ms_frac();
	if (vmm_build(v, cfg, err) < 0)
		goto out;

	/* The user's arguments come last so they override ours. */
	xasprintf(&full, "%s%s%s", v->cmdline, cfg->append ? " " : "",
		  cfg->append ? cfg->append : "");
	free(v->cmdline);
	v->cmdline = full;

	if (boot_setup_zero_page(&v->vm.mem, &img, v->cmdline, initrd_gpa, initrd.len, err) < 0)
		goto out;
	if (boot_setup_page_tables(&v->vm.mem, err) < 0)
		goto out;
	if (mptable_write(&v->vm.mem, BOOT_MPTABLE_ADDR, cfg->cpus, err) < 0)
		goto out;
	if (vcpus_create(&v->vm, img.entry, err) < 0)
		goto out;
	r = 0;
out:
	unmap_file(&kernel);
	unmap_file(&initrd);
	return r;
}

/* ---- snapshots ------------------------------------------------------------------------ */

#define VMM_TAG_MACHINE STATE_TAG('V', 'M', 'C', 'F')

/* What must match between a saved VM and the one restoring it. */
struct vmm_saved {
	uint32_t cpus, devices;
	uint64_t mem_mib;
};

/* The whole state file in *buf (at most STATE_SIZE_MAX), parsed into sf,
 * whose sections point into *buf. */
static int read_state(int fd, uint8_t **buf, struct state_file *sf, gantry_error_t *err)
{
	struct stat st;
	ssize_t n;

	if (fstat(fd, &st) < 0)
		return gantry_error_errno(err, "the state file");
	if (!S_ISREG(st.st_mode) || st.st_size < STATE_HEADER_LEN ||
	    (uint64_t)st.st_size > STATE_SIZE_MAX)
		return gantry_error(err, 0, "the state file is %lld bytes, not a state file",
				    (long long)st.st_size);
	*buf = xmalloc((size_t)st.st_size);
	n = pread(fd, *buf, (size_t)st.st_size, 0);
	if (n != (ssize_t)st.st_size)
		return gantry_error(err, n < 0 ? errno : 0, "the state file: a short read");
	return state_parse(*buf, (size_t)st.st_size, sf, err);
}

int vmm_saved_machine(int state_fd, unsigned int *cpus, uint64_t *mem_mib, gantry_error_t *err)
{
	cleanup_free uint8_t *buf = NULL;
	struct state_file sf = { 0 };
	struct vmm_saved m;
	int r = read_state(state_fd, &buf, &sf, err);

	if (r == 0)
		r = state_get(&sf, VMM_TAG_MACHINE, 0, &m, sizeof(m), err);
	state_file_free(&sf);
	if (r < 0)
		return -1;
	*cpus = m.cpus;
	*mem_mib = m.mem_mib;
	return 0;
}

static int vmm_restore(struct vmm *v, const struct vmm_config *cfg, gantry_error_t *err)
{
	struct vmm_saved want = { cfg->cpus, machine_count_devices(cfg), cfg->mem_mib }, got;

	if (read_state(cfg->restore_state_fd, &v->state_buf, &v->state, err) < 0 ||
	    state_get(&v->state, VMM_TAG_MACHINE, 0, &got, sizeof(got), err) < 0)
		return -1;
	if (memcmp(&got, &want, sizeof(got)) != 0)
		return gantry_error(err, 0,
				    "it is a VM of %u vCPUs, %llu MiB and %u devices; this one has "
				    "%u, %llu and %u",
				    got.cpus, (unsigned long long)got.mem_mib, got.devices,
				    want.cpus, (unsigned long long)want.mem_mib, want.devices);
	/* The memory file mapped copy-on-write: clones of one snapshot share
	 * its page cache (the share worker maps none of it: share/rpc.h). */
	if (guest_mem_init_file(&v->vm.mem, cfg->mem_mib * MiB, cfg->restore_mem_fd, err) < 0)
		return -1;
	if (cfg->small_pages)
		guest_mem_small_pages(&v->vm.mem);
	v->t_loaded = now_ms_frac();
	if (vmm_build(v, cfg, err) < 0 || vm_chips_restore(v->vm.vm_fd, &v->state, err) < 0 ||
	    serial_restore(&v->serial, &v->state, err) < 0)
		return -1;
	for (unsigned int i = 0; i < v->nr_devs; i++)
		if (virtio_dev_restore(v->devs[i], &v->state, i, err) < 0)
			return -1;
	v->vm.restore = &v->state;
	if (vcpus_create(&v->vm, 0, err) < 0)
		return -1;
	v->vm.restore = NULL;
	if (vm_clock_restore(v->vm.vm_fd, &v->state, err) < 0)
		return -1;
	/* Last: an interrupt a device raises now reaches the restored LAPICs
	 * (one raised before KVM_SET_LAPIC would be lost with the IRR it
	 * replaces, and the driver would see the event only at the next). */
	for (unsigned int i = 0; i < v->nr_devs; i++)
		virtio_dev_resume(v->devs[i], true);
	return 0;
}

/* The vCPUs of a VM being saved have ended or parked, its I/O thread
 * stopped or parked: its state file and its RAM, each written whole
 * before the call returns. */
static int vmm_save(struct vmm *v, const struct vmm_config *cfg, gantry_error_t *err)
{
	struct vmm_saved m = { cfg->cpus, machine_count_devices(cfg), cfg->mem_mib };
	struct state_writer w;
	cleanup_free uint8_t *buf = NULL;
	uint64_t ram = 0;
	size_t len;
	double t0 = now_ms_frac();
	int r;

	state_writer_init(&w);
	state_put(&w, VMM_TAG_MACHINE, &m, sizeof(m));
	r = vcpus_save(&v->vm, &w, err);
	if (r == 0)
		r = vm_chips_save(v->vm.vm_fd, &w, err);
	if (r == 0)
		r = vm_clock_save(v->vm.vm_fd, &w, err);
	if (r == 0) {
		serial_save(&v->serial, &w);
		for (unsigned int i = 0; i < v->nr_devs && r == 0; i++)
			r = virtio_dev_save(v->devs[i], &w, err);
		if (r == 0)
			r = state_finish(&w, &buf, &len, err);
	}
	state_writer_free(&w);
	if (r < 0)
		return -1;
	/* RAM first: a state file that is there says the memory is too. */
	if (guest_mem_save(&v->vm.mem, cfg->save_mem_fd, v->pagemap_fd, &ram, err) < 0)
		return -1;
	if (ftruncate(cfg->save_state_fd, 0) < 0 ||
	    pwrite(cfg->save_state_fd, buf, len, 0) != (ssize_t)len ||
	    fsync(cfg->save_state_fd) < 0)
		return gantry_error_errno(err, "the state file");
	if (cfg->timing)
		log_always("VM saved in %.1f ms: state %zu bytes, RAM %llu of %llu MiB resident",
			   now_ms_frac() - t0, len, (unsigned long long)(ram / MiB),
			   (unsigned long long)cfg->mem_mib);
	return 0;
}

/* A live save: the I/O thread parked first, so no stop it reads can end
 * the VM under the save, then the vCPUs (each reads its state); the
 * save; the caller told; the devices take up what the save gave back to
 * their rings, and all runs on. */
static void vmm_checkpoint(struct vmm *v, const struct vmm_config *cfg)
{
	gantry_error_t err = NULL;
	double t0 = now_ms_frac(), t_saved;
	int r;

	ioloop_pause(&v->vm.io);
	if (vcpus_pause(&v->vm) < 0) {
		ioloop_unpause(&v->vm.io);
		cfg->checkpointed(cfg->checkpoint_opaque, "the VM ended before it was saved");
		return;
	}
	r = vmm_save(v, cfg, &err);
	t_saved = now_ms_frac();
	cfg->checkpointed(cfg->checkpoint_opaque, r < 0 ? gantry_error_str(err) : NULL);
	gantry_error_free(&err);
	for (unsigned int i = 0; i < v->nr_devs; i++)
		virtio_dev_resume(v->devs[i], false);
	ioloop_unpause(&v->vm.io);
	/* A frozen VM stays so: saved, it is still paused. */
	if (!v->frozen)
		vcpus_unpause(&v->vm);
	if (cfg->timing)
		log_always("VM saved live: paused %.1f ms (saving %.1f)", now_ms_frac() - t0,
			   t_saved - t0);
}

/* VMM_FREEZE and VMM_THAW: the vCPUs parked (the devices' thread runs
 * on, so a stop is still read) or let go, and the caller told either way
 * once it holds. */
static void vmm_freeze(struct vmm *v, const struct vmm_config *cfg, bool freeze)
{
	if (freeze && !v->frozen)
		v->frozen = vcpus_pause(&v->vm) == 0;
	else if (!freeze && v->frozen) {
		vcpus_unpause(&v->vm);
		v->frozen = false;
	}
	if (cfg->frozen)
		cfg->frozen(cfg->frozen_opaque, v->frozen);
}

/* What the VM has, which decides what its threads' filters allow. */
static void vmm_filter_opts_fill(struct vmm *v, const struct vmm_config *cfg)
{
	v->confine = (struct vmm_filter_opts){
		.log = cfg->confine_log,
		.console_file = v->console.path != NULL,
		.profile = v->vm.profile != NULL,
		.save = cfg->save_state_fd > 0,
	};
	for (unsigned int i = 0; i < machine_nr_devices; i++)
		if (machine_devices[i].filter && machine_devices[i].count(cfg))
			machine_devices[i].filter(cfg, &v->confine);
}

/* Set-up is done: the base filter onto the whole process (unless the
 * caller's hook did), and each thread's own as it starts. */
static int vmm_confine(struct vmm *v, bool load_base, gantry_error_t *err)
{
	if (load_base)
		confine_prime_libc();
	if (load_base && confine_filter_vmm(VMM_THREAD_BASE, &v->confine, err) < 0)
		return -1;
	v->vm.confine = &v->confine;
	v->vm.io.thread_start = vmm_confine_io;
	v->vm.io.thread_opaque = &v->vm;
	return 0;
}

static void vmm_teardown(struct vmm *v)
{
	ioloop_stop(&v->vm.io);
	/* Each device first: a thread of its own may be blocked reading a
	 * queue's eventfd, which closing would not wake. */
	for (unsigned int i = 0; i < v->nr_devs; i++) {
		v->devs[i]->ops->destroy(v->devs[i]);
		for (unsigned int q = 0; q < VIRTIO_MAX_QUEUES; q++) {
			if (v->ioeventfds[i][q] >= 0)
				close(v->ioeventfds[i][q]);
		}
	}
	if (v->serial.vm) /* serial_init ran */
		serial_destroy(&v->serial);
	vm_destroy(&v->vm);
	free(v->cmdline);
	state_file_free(&v->state);
	free(v->state_buf);
	if (v->pagemap_fd >= 0)
		close(v->pagemap_fd);
}

int vmm_run(const struct vmm_config *cfg, int *status, gantry_error_t *err)
{
	struct vmm v;
	double t0 = now_ms_frac(), t_run;
	int r = -1;

	memset(&v, 0, sizeof(v));
	vm_init(&v.vm, cfg->cpus);
	v.vm.profile = cfg->profile ? cfg->profile : gantry_setting(VMM_PROFILE_ENV);
	if (cfg->profile && cfg->profile_fd > 0)
		v.vm.profile_fd = cfg->profile_fd;
	if (v.vm.profile && *v.vm.profile == '\0')
		v.vm.profile = NULL;
	memset(v.ioeventfds, 0xff, sizeof(v.ioeventfds));
	v.pagemap_fd = -1;
	console_init_fd(&v.console, cfg->console_fd > 0 ? cfg->console_fd : STDOUT_FILENO);
	if (vmm_validate(cfg, err) < 0)
		return -1;
	/* A log file of ours is capped (console.h); the caller's fd is not. */
	if (cfg->console && console_open(&v.console, cfg->console, VMM_CONSOLE_MAX, err) < 0)
		return -1;
	if ((cfg->restore_state_fd > 0 ? vmm_restore(&v, cfg, err) : vmm_boot(&v, cfg, err)) < 0) {
		if (cfg->restore_state_fd > 0)
			gantry_error_prefix(err, "cannot restore the VM");
		goto out;
	}
	v.t_kvm_done = now_ms_frac();
	if (cfg->confine_threads)
		vmm_filter_opts_fill(&v, cfg);
	if (cfg->setup_done &&
	    cfg->setup_done(cfg->setup_opaque, cfg->confine_threads ? &v.confine : NULL, err) < 0)
		goto out;
	/* The hook, when there is one, loaded the base filter itself. */
	if (cfg->confine_threads && vmm_confine(&v, !cfg->setup_done, err) < 0)
		goto out;
	if (ioloop_start(&v.vm.io, err) < 0)
		goto out;
	t_run = now_ms_frac();
	if (cfg->timing && cfg->restore_state_fd > 0)
		log_always("VM restored: vCPUs running %.1f ms after the start (RAM mapped %.1f, KVM "
			   "and devices %.1f, confinement %.1f)",
			   t_run - t0, v.t_loaded - t0, v.t_kvm_done - v.t_loaded, t_run - v.t_kvm_done);
	if (vcpus_start(&v.vm, err) < 0)
		goto out;
	/* Every thread of the VM's is started (see seccomp_vmm.c): the main
	 * thread narrows last. */
	vm_confine_thread(&v.vm, VMM_THREAD_MAIN);
	for (enum vm_ask ask; (ask = vm_wait(&v.vm)) != VM_ASK_END;)
		if (ask == VM_ASK_FREEZE || ask == VM_ASK_THAW)
			vmm_freeze(&v, cfg, ask == VM_ASK_FREEZE);
		else if (cfg->checkpointed && cfg->save_state_fd > 0)
			vmm_checkpoint(&v, cfg);
	vcpus_wait(&v.vm);
	serial_flush(&v.serial);
	/* The devices' work stops first: what they hold is then theirs to
	 * give back to their rings (virtio_dev_save), and no frame or
	 * packet moves under the save. */
	if (atomic_load(&v.vm.saving))
		ioloop_stop(&v.vm.io);
	if (atomic_load(&v.vm.saving) && vmm_save(&v, cfg, err) < 0) {
		gantry_error_prefix(err, "cannot save the VM");
		goto out;
	}

	if (cfg->timing)
		log_always("setup %.1f ms (load %.1f, kvm %.1f, devices %.1f), guest ran %.1f ms; "
			   "vm exits to userspace: %lu (io %lu, mmio %lu, unclaimed %lu); %s",
			   t_run - t0, v.t_loaded - t0, v.t_kvm - v.t_loaded, t_run - v.t_kvm,
			   now_ms_frac() - t_run, atomic_load(&v.vm.stats.exits),
			   atomic_load(&v.vm.stats.io_exits), atomic_load(&v.vm.stats.mmio_exits),
			   atomic_load(&v.vm.stats.unhandled), v.vm.end_reason);
	switch (v.vm.end) {
	case VM_END_EXIT:
		*status = v.vm.exit_status;
		r = 0;
		break;
	case VM_END_RESET:
	case VM_END_SHUTDOWN:
	case VM_END_STOP:
		*status = atomic_load(&v.vm.guest_status);
		r = 0;
		break;
	default:
		gantry_error(err, 0, "VM failed: %s", v.vm.end_reason);
		break;
	}
out:
	vmm_teardown(&v);
	console_close(&v.console);
	return r;
}
