/* The devices a VM is assembled from, one line each in machine_devices[]
 * (devices.c), in the order they take their places on the MMIO bus (and
 * so their interrupt lines and the guest's names for them: the first
 * disk is /dev/vda). Adding a device is one file under src/virtio/ for
 * its emulation and one line here for when the VM has it. */
#ifndef GANTRY_MACHINE_DEVICES_H
#define GANTRY_MACHINE_DEVICES_H

#include "common/error.h"

struct guest_mem;
struct ioloop;
struct virtio_dev;
struct vmm_config;
struct vmm_filter_opts;

/* What a device's add is handed: the VM's RAM and I/O loop, and attach,
 * which places a device on the bus (and takes it, even on failure). */
struct machine_slots {
	const struct guest_mem *mem;
	struct ioloop *io;
	int (*attach)(struct machine_slots *s, struct virtio_dev *d, gantry_error_t *err);
};

struct machine_device {
	/* How many of it cfg asks for (0: none). */
	unsigned int (*count)(const struct vmm_config *cfg);
	/* Create them and attach each. 0, or -1 with why. */
	int (*add)(struct machine_slots *s, const struct vmm_config *cfg, gantry_error_t *err);
	/* What its threads need beyond what every VMM thread holds (the
	 * filters of vmm_filter.h); NULL: nothing. Called only when it is
	 * present. */
	void (*filter)(const struct vmm_config *cfg, struct vmm_filter_opts *o);
};

extern const struct machine_device machine_devices[];
extern const unsigned int machine_nr_devices;

/* The devices cfg asks for, all kinds together. */
unsigned int machine_count_devices(const struct vmm_config *cfg);

#endif
