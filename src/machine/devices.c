/* The device table (see devices.h). */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "common/unixsock.h"
#include "common/util.h"
#include "confine/vmm_filter.h"
#include "machine/devices.h"
#include "machine/vmm.h"
#include "proto/netplan.h"
#include "virtio/devices.h"
#include "worker/worker.h"

#define VSOCK_BACKLOG 16

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

/* Each disk opened here as it will be used; the worker opens nothing. */
static int blk_give(const struct vmm_config *cfg, struct worker_handover *h, json_t **v,
		    gantry_error_t *err)
{
	*v = json_array();
	for (unsigned int i = 0; i < cfg->nr_disks; i++) {
		const struct vmm_disk *d = &cfg->disks[i];
		int fd = open(d->path, (d->ro ? O_RDONLY : O_RDWR) | O_CLOEXEC);

		if (fd < 0)
			return gantry_error_errno(err, "disk `%s`", d->path);
		worker_give(h, fd, true);
		json_array_append_new(*v, json_pack("{s:s,s:b}", "path", d->path, "ro", d->ro));
	}
	return 0;
}

static int blk_take(json_t *v, struct machine_take *t, gantry_error_t *err)
{
	struct vmm_config *cfg = t->cfg;
	size_t i;
	json_t *d;

	if (json_array_size(v) > VMM_MAX_DISKS)
		return gantry_error(err, 0, "configuration: too many disks");
	json_array_foreach(v, i, d) {
		struct vmm_disk *k = &cfg->disks[cfg->nr_disks++];

		k->path = json_string_value(json_object_get(d, "path"));
		k->ro = json_is_true(json_object_get(d, "ro"));
		if (k->path == NULL)
			return gantry_error(err, 0, "configuration: a disk without path");
		if ((k->fd = machine_take_fd(t, "disk", true, err)) < 0)
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

/* The network worker's frame socket, as the caller has it. */
static int net_give(const struct vmm_config *cfg, struct worker_handover *h, json_t **v,
		    gantry_error_t *err)
{
	(void)err;
	worker_give(h, cfg->net_fd, false);
	*v = json_true();
	return 0;
}

static int net_take(json_t *v, struct machine_take *t, gantry_error_t *err)
{
	(void)v;
	t->cfg->net_fd = machine_take_fd(t, "frame socket", true, err);
	return t->cfg->net_fd < 0 ? -1 : 0;
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

/* The host's side listens here (<dir>/vsock.sock); the guest's dials to
 * host ports go through the worker's caller (t->vsock). */
static int vsock_give(const struct vmm_config *cfg, struct worker_handover *h, json_t **v,
		      gantry_error_t *err)
{
	cleanup_free char *path = NULL;
	int fd;

	xasprintf(&path, "%s/vsock.sock", cfg->vsock_dir);
	fd = unix_listen(path, VSOCK_BACKLOG, err);
	if (fd < 0)
		return -1;
	worker_give(h, fd, true);
	*v = json_true();
	return 0;
}

static int vsock_take(json_t *v, struct machine_take *t, gantry_error_t *err)
{
	(void)v;
	t->cfg->vsock = t->vsock;
	t->cfg->vsock.listen_fd = machine_take_fd(t, "vsock listener", true, err);
	return t->cfg->vsock.listen_fd < 0 ? -1 : 0;
}

static unsigned int fs_count(const struct vmm_config *cfg)
{
	return cfg->fs.handler != NULL || cfg->fs.nr_rpc > 0;
}

/* The share worker's sockets: its server serves the device. */
static int fs_give(const struct vmm_config *cfg, struct worker_handover *h, json_t **v,
		   gantry_error_t *err)
{
	if (cfg->fs.nr_rpc == 0)
		return gantry_error(err, 0, "VMM worker: the shares' server is in this process");
	for (size_t i = 0; i < cfg->fs.nr_rpc; i++)
		worker_give(h, cfg->fs.rpc[i], false);
	*v = json_pack("{s:s,s:I}", "tag", cfg->fs.tag, "rpc", (json_int_t)cfg->fs.nr_rpc);
	return 0;
}

static int fs_take(json_t *v, struct machine_take *t, gantry_error_t *err)
{
	json_int_t n = json_integer_value(json_object_get(v, "rpc"));
	int socks[SHARE_RPC_SOCKS_MAX];

	if (n < 1 || n > SHARE_RPC_SOCKS_MAX)
		return gantry_error(err, 0, "configuration: a bad count of share sockets");
	for (json_int_t i = 0; i < n; i++)
		if ((socks[i] = machine_take_fd(t, "share socket", true, err)) < 0)
			return -1;
	share_rpc_client_init(&t->rpc, socks, (size_t)n, &t->fsh);
	t->cfg->fs = (struct vmm_fs){ .tag = json_string_value(json_object_get(v, "tag")),
				      .handler = &t->fsh,
				      .remote = true };
	if (t->cfg->fs.tag == NULL)
		return gantry_error(err, 0, "configuration: no share tag");
	return 0;
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
	/* disks: /dev/vda on */
	{ blk_count, blk_add, NULL, "disks", blk_give, blk_take },
	{ net_count, net_add, NULL, "net", net_give, net_take },
	{ one, rng_add, NULL, NULL, NULL, NULL },
	{ vsock_count, vsock_add, vsock_filter, "vsock", vsock_give, vsock_take },
	/* virtio-fs: the shares */
	{ fs_count, fs_add, fs_filter, "fs", fs_give, fs_take },
	/* virtio-balloon: free page reporting */
	{ one, balloon_add, NULL, NULL, NULL, NULL },
};
const unsigned int machine_nr_devices = ARRAY_SIZE(machine_devices);

unsigned int machine_count_devices(const struct vmm_config *cfg)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < machine_nr_devices; i++)
		n += machine_devices[i].count(cfg);
	return n;
}

json_t *machine_devices_give(const struct vmm_config *cfg, struct worker_handover *h,
			     gantry_error_t *err)
{
	json_t *all = json_object();

	for (unsigned int i = 0; i < machine_nr_devices; i++) {
		const struct machine_device *d = &machine_devices[i];
		json_t *v = NULL;

		if (!d->give || d->count(cfg) == 0)
			continue;
		if (d->give(cfg, h, &v, err) < 0) {
			json_decref(v);
			json_decref(all);
			return NULL;
		}
		json_object_set_new(all, d->key, v);
	}
	return all;
}

int machine_devices_take(json_t *devices, struct machine_take *t, gantry_error_t *err)
{
	for (unsigned int i = 0; i < machine_nr_devices; i++) {
		const struct machine_device *d = &machine_devices[i];
		json_t *v = d->key ? json_object_get(devices, d->key) : NULL;

		if (v && d->take(v, t, err) < 0)
			return gantry_error_prefix(err, "%s", d->key);
	}
	return 0;
}

int machine_take_fd(struct machine_take *t, const char *what, bool keep, gantry_error_t *err)
{
	int fd;

	if (t->next >= t->nr_fds)
		return gantry_error(err, 0, "configuration: no descriptor for the %s", what);
	fd = t->fds[t->next];
	if (keep)
		t->fds[t->next] = -1;
	t->next++;
	return fd;
}
