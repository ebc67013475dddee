/* The device table (see devices.h). */
#include "common/util.h"
#include "confine/vmm_filter.h"
#include "machine/devices.h"
#include "machine/vmm.h"
#include "proto/netplan.h"
#include "virtio/devices.h"

static unsigned int one(const struct vmm_config *cfg)
{
	(void)cfg;
	return 1;
}

static unsigned int blk_count(const struct vmm_config *cfg)
{
	return cfg->nr_disks;
}

static int blk_add(struct machine_slots *s, const struct vmm_config *cfg, gantry_error_t *err)
{
	for (unsigned int i = 0; i < cfg->nr_disks; i++) {
		const struct vmm_disk *disk = &cfg->disks[i];
		struct virtio_dev *d = virtio_blk_create(s->mem, disk->path, disk->fd, disk->ro, err);

		if (d == NULL || s->attach(s, d, err) < 0)
			return -1;
	}
	return 0;
}

static unsigned int net_count(const struct vmm_config *cfg)
{
	return cfg->net_fd > 0;
}

static int net_add(struct machine_slots *s, const struct vmm_config *cfg, gantry_error_t *err)
{
	struct virtio_dev *d =
		virtio_net_create(s->mem, s->io, cfg->net_fd, (const uint8_t[6])NET_GUEST_MAC, err);

	return d ? s->attach(s, d, err) : -1;
}

static int rng_add(struct machine_slots *s, const struct vmm_config *cfg, gantry_error_t *err)
{
	(void)cfg;
	return s->attach(s, virtio_rng_create(s->mem), err);
}

static unsigned int vsock_count(const struct vmm_config *cfg)
{
	return cfg->vsock_dir || cfg->vsock.connect;
}

static int vsock_add(struct machine_slots *s, const struct vmm_config *cfg, gantry_error_t *err)
{
	struct virtio_dev *d = virtio_vsock_create(s->mem, s->io, VMM_GUEST_CID, cfg->vsock_dir,
						   &cfg->vsock, err);

	return d ? s->attach(s, d, err) : -1;
}

/* It connects to the host's Unix sockets itself unless it was handed
 * them (vmm_vsock_host). */
static void vsock_filter(const struct vmm_config *cfg, struct vmm_filter_opts *o)
{
	o->dials = cfg->vsock_dir != NULL && cfg->vsock.connect == NULL;
}

static unsigned int fs_count(const struct vmm_config *cfg)
{
	return cfg->fs.handler != NULL;
}

static int fs_add(struct machine_slots *s, const struct vmm_config *cfg, gantry_error_t *err)
{
	struct virtio_dev *d = virtio_fs_create(s->mem, cfg->fs.tag, cfg->fs.handler, err);

	return d ? s->attach(s, d, err) : -1;
}

/* Its workers are started by the I/O thread, and make the share server's
 * file calls unless the server is another process's. */
static void fs_filter(const struct vmm_config *cfg, struct vmm_filter_opts *o)
{
	o->fs = true;
	o->fs_remote = cfg->fs.remote;
}

static int balloon_add(struct machine_slots *s, const struct vmm_config *cfg, gantry_error_t *err)
{
	(void)cfg;
	return s->attach(s, virtio_balloon_create(s->mem), err);
}

const struct machine_device machine_devices[] = {
	{ blk_count, blk_add, NULL },		   /* disks: /dev/vda on */
	{ net_count, net_add, NULL },		   /* virtio-net */
	{ one, rng_add, NULL },			   /* virtio-rng */
	{ vsock_count, vsock_add, vsock_filter }, /* virtio-vsock */
	{ fs_count, fs_add, fs_filter },	   /* virtio-fs: the shares */
	{ one, balloon_add, NULL },		   /* virtio-balloon */
};
const unsigned int machine_nr_devices = ARRAY_SIZE(machine_devices);

unsigned int machine_count_devices(const struct vmm_config *cfg)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < machine_nr_devices; i++)
		n += machine_devices[i].count(cfg);
	return n;
}
