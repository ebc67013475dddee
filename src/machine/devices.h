/* The devices a VM is assembled from, one line each in machine_devices[]
 * (devices.c), in the order they take their places on the MMIO bus (and
 * so their interrupt lines and the guest's names for them: the first
 * disk is /dev/vda). Adding a device is one file under src/virtio/ for
 * its emulation and one line here for when the VM has it. */
#ifndef GANTRY_MACHINE_DEVICES_H
#define GANTRY_MACHINE_DEVICES_H

#include <jansson.h>
#include <stdbool.h>

#include "common/error.h"
#include "machine/vmm.h"
#include "share/rpc.h"
#include "virtio/devices.h"

struct guest_mem;
struct ioloop;
struct virtio_dev;
struct vmm_filter_opts;
struct worker_handover;

/* The VMM worker's side of the handover (worker_main.c): the descriptors
 * its configuration brought, taken in the order they were given, and
 * what the worker lends its devices. */
struct machine_take {
	struct vmm_config *cfg;
	int *fds;
	size_t nr_fds, next;
	struct vmm_vsock_host vsock; /* how the guest's dials reach the host */
	struct share_rpc_client rpc; /* virtio-fs: the share worker's server */
	struct virtio_fs_handler fsh;
};

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
	/* Its handover to a VMM worker, as key in the configuration's
	 * "devices": give (the caller's side, which opens what the device
	 * needs) sets *v and adds its descriptors to h; take (the worker's)
	 * sets t->cfg from v and takes those descriptors in the same order.
	 * NULL: nothing crosses but the configuration's own fields. Called
	 * only when it is present. Save and restore are the device's own
	 * (struct virtio_dev_ops in virtio/dev.h: save, restore, resumed),
	 * so a device added here is carried by snapshots with its file. */
	const char *key;
	int (*give)(const struct vmm_config *cfg, struct worker_handover *h, json_t **v,
		    gantry_error_t *err);
	int (*take)(json_t *v, struct machine_take *t, gantry_error_t *err);
};

extern const struct machine_device machine_devices[];
extern const unsigned int machine_nr_devices;

/* The devices cfg asks for, all kinds together. */
unsigned int machine_count_devices(const struct vmm_config *cfg);

/* The caller's side of the handover: every present device's give, as one
 * object (NULL with why). */
json_t *machine_devices_give(const struct vmm_config *cfg, struct worker_handover *h,
			     gantry_error_t *err);
/* The worker's: every present device's take, from that object. */
int machine_devices_take(json_t *devices, struct machine_take *t, gantry_error_t *err);
/* The next descriptor the handover brought (what: its name in the
 * error); keep: the device owns it now, the worker closes it no more. */
int machine_take_fd(struct machine_take *t, const char *what, bool keep, gantry_error_t *err);

#endif
