/* A sandbox's shares in its machine (see machine.h): the share server in
 * this process, each host directory opened once and added to it as an
 * export, the virtio-fs device that carries the guest's requests to it,
 * and the kernel command line tokens that tell gantry-init where each
 * share goes in the container (gantry.share=TAG:ro|rw:CTR_PATH in
 * base64url). A sandbox that may take shares while it runs gets the
 * device even with none at boot: virtio-mmio cannot hot-plug one. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox/machine.h"
#include "share/server.h"
#include "share/spec.h"

#define SHARES_TAG "gantry-shares" /* the virtio-fs tag gantry-init mounts */

static size_t shares_handle(void *opaque, const struct iovec *in, size_t nr_in,
			    const struct iovec *out, size_t nr_out)
{
	return fs_server_handle(opaque, in, nr_in, out, nr_out);
}

static void shares_reset(void *opaque)
{
	fs_server_reset(opaque);
}

int machine_share_export(struct fs_server *srv, const struct share_spec *sp, gantry_error_t *err)
{
	struct fs_export_opts o = { .ro = sp->ro, .map_owner = sp->ids, .uid = sp->uid, .gid = sp->gid };
	int fd = -1, r;

	r = share_host_check(sp->host_path, &fd, err);
	if (r == 0)
		r = fs_server_add_export(srv, sp->tag, fd, &o, err);
	if (fd >= 0)
		close(fd);
	if (r < 0)
		gantry_error_prefix(err, "share `%s`", sp->tag);
	return r;
}

/* One share: an export of the server, its token on the command line. */
static int share_one(struct machine *m, const char *spec, gantry_error_t *err)
{
	struct share_spec sp;
	cleanup_free char *enc = NULL;
	size_t len = strlen(m->append);
	int r = -1, n;

	if (share_spec_parse(spec, NULL, &sp, err) < 0)
		return -1;
	if (machine_share_export(m->shares, &sp, err) < 0)
		goto out;
	enc = share_b64url(sp.ctr_path);
	n = snprintf(m->append + len, sizeof(m->append) - len, " gantry.share=%s:%s:%s", sp.tag,
		     sp.ro ? "ro" : "rw", enc);
	if (n < 0 || (size_t)n >= sizeof(m->append) - len) {
		m->append[len] = '\0';
		gantry_error(err, 0, "share `%s`: too many shares for the kernel command line",
			     sp.tag);
		goto out;
	}
	r = 0;
out:
	share_spec_free(&sp);
	return r;
}

int machine_shares(struct machine *m, char *const *shares, size_t n, bool live,
		   gantry_error_t *err)
{
	if (n == 0 && !live)
		return 0;
	if (fs_server_new(&m->shares, 0, err) < 0)
		return gantry_error_prefix(err, "share server");
	for (size_t i = 0; i < n; i++)
		if (share_one(m, shares[i], err) < 0)
			return -1;
	machine_share_device(m->shares, &m->fs_handler, &m->cfg);
	return 0;
}

void machine_share_device(struct fs_server *srv, struct virtio_fs_handler *h,
			  struct vmm_config *cfg)
{
	*h = (struct virtio_fs_handler){ .handle = shares_handle,
					 .reset = shares_reset,
					 .opaque = srv };
	cfg->fs = (struct vmm_fs){ .tag = SHARES_TAG, .handler = h };
}

void machine_shares_free(struct machine *m)
{
	if (m->shares)
		fs_server_free(m->shares);
	m->shares = NULL;
}
