/* KVM VM lifecycle (see vm.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/settings.h"
#include "common/util.h"
#include "confine/vmm_filter.h"
#include "vmm/mptable.h"
#include "vmm/vm.h"

const char *vm_kvm_device(void)
{
	const char *p = gantry_setting("GANTRY_KVM_DEVICE");

	return p && *p ? p : "/dev/kvm";
}

/* PVM (kvm_pvm) offers /dev/kvm without hardware virtualization, but it
 * runs only guest kernels built for it: ours would hang in early boot. */
static bool kvm_is_pvm(void)
{
	return access("/sys/module/kvm_pvm", F_OK) == 0 &&
	       access("/sys/module/kvm_intel", F_OK) != 0 &&
	       access("/sys/module/kvm_amd", F_OK) != 0;
}

int vm_kvm_usable(gantry_error_t *err)
{
	if (kvm_is_pvm() && strcmp(vm_kvm_device(), "/dev/kvm") == 0)
		return gantry_error(err, 0,
				    "%s is PVM (kvm_pvm), which runs only PVM-enabled guest kernels "
				    "(see `gantry doctor`)",
				    vm_kvm_device());
	return 0;
}

static int kvm_check_caps(int kvm_fd, gantry_error_t *err)
{
	static const struct {
		int cap;
		const char *name;
	} need[] = {
		{ KVM_CAP_IRQCHIP, "in-kernel irqchip" },
		{ KVM_CAP_PIT2, "in-kernel PIT" },
		{ KVM_CAP_USER_MEMORY, "user memory" },
		{ KVM_CAP_IOEVENTFD, "ioeventfd" },
		{ KVM_CAP_IRQFD, "irqfd" },
		{ KVM_CAP_EXT_CPUID, "CPUID" },
		{ KVM_CAP_IMMEDIATE_EXIT, "immediate exit" },
		{ KVM_CAP_SET_TSS_ADDR, "TSS address" },
	};
	int version = ioctl(kvm_fd, KVM_GET_API_VERSION, 0);

	if (version != KVM_API_VERSION)
		return gantry_error(err, 0, "KVM API version %d, want %d", version, KVM_API_VERSION);
	for (size_t i = 0; i < ARRAY_SIZE(need); i++) {
		if (ioctl(kvm_fd, KVM_CHECK_EXTENSION, need[i].cap) <= 0)
			return gantry_error(err, 0, "KVM lacks %s support", need[i].name);
	}
	return 0;
}

/* The caller's /dev/kvm (> 0), or ours. */
int vm_kvm_open_error(int errnum, gantry_error_t *err)
{
	if (errnum == ENOENT)
		return gantry_error(err, 0,
				    "%s does not exist: this machine offers no KVM "
				    "(`gantry doctor` says what it needs)",
				    vm_kvm_device());
	return gantry_error(err, errnum, "cannot open %s (is your user in group kvm? see `gantry doctor`)",
			    vm_kvm_device());
}

static int kvm_open(int given)
{
	return given > 0 ? fcntl(given, F_DUPFD_CLOEXEC, 3) : open(vm_kvm_device(), O_RDWR | O_CLOEXEC);
}

int vm_kvm_check(gantry_error_t *err)
{
	int fd, r;

	if (vm_kvm_usable(err) < 0)
		return -1;
	fd = kvm_open(-1);
	if (fd < 0)
		return vm_kvm_open_error(errno, err);
	r = kvm_check_caps(fd, err);
	close(fd);
	return r;
}

unsigned int vm_max_vcpus(int kvm_fd)
{
	long host = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned int max = MPTABLE_MAX_CPUS;
	int fd = kvm_open(kvm_fd);

	if (host > 0 && (unsigned long)host < max)
		max = (unsigned int)host;
	if (fd >= 0) {
		int k = ioctl(fd, KVM_CHECK_EXTENSION, KVM_CAP_MAX_VCPUS);

		if (k > 0 && (unsigned int)k < max)
			max = (unsigned int)k;
		close(fd);
	}
	return max;
}

static int vm_map_memory(struct vm *vm, gantry_error_t *err)
{
	for (unsigned int i = 0; i < vm->mem.nr_regions; i++) {
		struct guest_region *r = &vm->mem.regions[i];
		struct kvm_userspace_memory_region region = {
			.slot = i,
			.guest_phys_addr = r->gpa,
			.memory_size = r->size,
			.userspace_addr = (uintptr_t)r->hva,
		};

		if (ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &region) < 0)
			return gantry_error_errno(err, "KVM_SET_USER_MEMORY_REGION");
	}
	return 0;
}

void vm_init(struct vm *vm, unsigned int nr_vcpus)
{
	memset(vm, 0, sizeof(*vm));
	vm->kvm_fd = vm->vm_fd = vm->end_fd = vm->profile_fd = -1;
	vm->io.epfd = vm->io.stopfd = -1;
	vm->nr_vcpus = nr_vcpus;
	pthread_mutex_init(&vm->pause_lock, NULL);
	pthread_cond_init(&vm->pause_cond, NULL);
}

int vm_create(struct vm *vm, int kvm_fd, gantry_error_t *err)
{
	struct kvm_pit_config pit = { .flags = KVM_PIT_SPEAKER_DUMMY };
	uint64_t map_addr = VM_IDENTITY_MAP_ADDR;

	if (vm_kvm_usable(err) < 0)
		return -1;
	vm->kvm_fd = kvm_open(kvm_fd);
	if (vm->kvm_fd < 0)
		return vm_kvm_open_error(errno, err);
	if (kvm_check_caps(vm->kvm_fd, err) < 0)
		return -1;
	vm->vcpu_mmap_size = ioctl(vm->kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (vm->vcpu_mmap_size <= 0)
		return gantry_error_errno(err, "KVM_GET_VCPU_MMAP_SIZE");

	vm->vm_fd = ioctl(vm->kvm_fd, KVM_CREATE_VM, 0);
	if (vm->vm_fd < 0)
		return gantry_error_errno(err, "KVM_CREATE_VM");
	if (ioctl(vm->vm_fd, KVM_SET_TSS_ADDR, VM_TSS_ADDR) < 0)
		return gantry_error_errno(err, "KVM_SET_TSS_ADDR");
	if (ioctl(vm->vm_fd, KVM_SET_IDENTITY_MAP_ADDR, &map_addr) < 0)
		return gantry_error_errno(err, "KVM_SET_IDENTITY_MAP_ADDR");
	if (ioctl(vm->vm_fd, KVM_CREATE_IRQCHIP, 0) < 0)
		return gantry_error_errno(err, "KVM_CREATE_IRQCHIP");
	if (ioctl(vm->vm_fd, KVM_CREATE_PIT2, &pit) < 0)
		return gantry_error_errno(err, "KVM_CREATE_PIT2");

	vm->end_fd = eventfd(0, EFD_CLOEXEC);
	if (vm->end_fd < 0)
		return gantry_error_errno(err, "eventfd");
	if (vm_map_memory(vm, err) < 0)
		return -1;
	return ioloop_init(&vm->io, err);
}

void vm_destroy(struct vm *vm)
{
	ioloop_destroy(&vm->io);
	vcpus_destroy(vm);
	free(vm->cpuid);
	vm->cpuid = NULL;
	free(vm->msr_list);
	vm->msr_list = NULL;
	bus_free(&vm->pio);
	bus_free(&vm->mmio);
	guest_mem_destroy(&vm->mem);
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	if (vm->kvm_fd >= 0)
		close(vm->kvm_fd);
	if (vm->end_fd >= 0)
		close(vm->end_fd);
	vm->vm_fd = vm->kvm_fd = vm->end_fd = -1;
	pthread_cond_destroy(&vm->pause_cond);
	pthread_mutex_destroy(&vm->pause_lock);
}

int vm_irqfd(struct vm *vm, unsigned int gsi, gantry_error_t *err)
{
	struct kvm_irqfd irqfd = { .gsi = gsi };
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

	if (fd < 0)
		return gantry_error_errno(err, "eventfd");
	irqfd.fd = (uint32_t)fd;
	if (ioctl(vm->vm_fd, KVM_IRQFD, &irqfd) < 0) {
		close(fd);
		return gantry_error_errno(err, "KVM_IRQFD gsi %u", gsi);
	}
	return fd;
}

int vm_ioeventfd(struct vm *vm, uint64_t addr, uint32_t datamatch, gantry_error_t *err)
{
	struct kvm_ioeventfd ioev = {
		.datamatch = datamatch,
		.addr = addr,
		.len = 4,
		.flags = KVM_IOEVENTFD_FLAG_DATAMATCH,
	};
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

	if (fd < 0)
		return gantry_error_errno(err, "eventfd");
	ioev.fd = fd;
	if (ioctl(vm->vm_fd, KVM_IOEVENTFD, &ioev) < 0) {
		close(fd);
		return gantry_error_errno(err, "KVM_IOEVENTFD at %#llx", (unsigned long long)addr);
	}
	return fd;
}

void vm_request_end(struct vm *vm, enum vm_end how, int status, const char *fmt, ...)
{
	uint64_t one = 1;
	va_list ap;
	int expected = 0;

	if (!atomic_compare_exchange_strong(&vm->ending, &expected, 1))
		return;
	vm->end = how;
	vm->exit_status = status;
	atomic_store(&vm->saving,
		     how == VM_END_STOP && vm->save_on_stop && atomic_load(&vm->save_asked));
	va_start(ap, fmt);
	vsnprintf(vm->end_reason, sizeof(vm->end_reason), fmt, ap);
	va_end(ap);
	atomic_store(&vm->ending, 2);
	(void)!write(vm->end_fd, &one, sizeof(one));
	/* A vCPU parked for a live save ends too. */
	pthread_mutex_lock(&vm->pause_lock);
	pthread_cond_broadcast(&vm->pause_cond);
	pthread_mutex_unlock(&vm->pause_lock);
}

void vm_request_checkpoint(struct vm *vm)
{
	uint64_t one = 1;

	atomic_store(&vm->checkpoint_asked, true);
	(void)!write(vm->end_fd, &one, sizeof(one));
}

void vm_request_freeze(struct vm *vm, bool freeze)
{
	uint64_t one = 1;

	atomic_store(&vm->freeze_asked, freeze ? VM_ASK_FREEZE : VM_ASK_THAW);
	(void)!write(vm->end_fd, &one, sizeof(one));
}

enum vm_ask vm_wait(struct vm *vm)
{
	uint64_t n;
	int ask;

	/* Each asker sets its flag before it writes end_fd: looked at
	 * before every read, none is missed. */
	for (;;) {
		if (atomic_load(&vm->ending) == 2)
			return VM_ASK_END;
		if (atomic_exchange(&vm->checkpoint_asked, false))
			return VM_ASK_CHECKPOINT;
		ask = atomic_exchange(&vm->freeze_asked, 0);
		if (ask)
			return (enum vm_ask)ask;
		if (read(vm->end_fd, &n, sizeof(n)) < 0 && errno != EINTR)
			return VM_ASK_END;
	}
}

bool vm_confine_thread(struct vm *vm, int t)
{
	gantry_error_t err = NULL;

	if (vm->confine == NULL || confine_filter_vmm((enum vmm_thread)t, vm->confine, &err) == 0)
		return true;
	vm_request_end(vm, VM_END_FAILURE, -1, "%s thread: %s", vmm_thread_name(t),
		       gantry_error_str(err));
	gantry_error_free(&err);
	return false;
}
