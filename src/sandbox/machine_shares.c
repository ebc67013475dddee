/* A sandbox's shares in its machine (see machine.h): the share server in
 * this process, each host directory opened once and added to it as an
 * export, the virtio-fs device that carries the guest's requests to it,
 * and the kernel command line tokens that tell gantry-init where each
 * share goes in the container (gantry.share=TAG:ro|rw:CTR_PATH in
 * base64url). A sandbox that may take shares while it runs gets the
 * device even with none at boot: virtio-mmio cannot hot-plug one. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/files.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/util.h"
#include "proto/base64.h"
#include "sandbox/machine.h"
#include "sandbox/state.h"
#include "share/server.h"
#include "share/spec.h"


static size_t shares_handle(void *opaque, const struct iovec *in, size_t nr_in,
			    const struct iovec *out, size_t nr_out)
{
	return fs_server_handle(opaque, in, nr_in, out, nr_out);
}

static void shares_reset(void *opaque)
{
	fs_server_reset(opaque);
}

static void shares_restored(void *opaque, uint32_t minor)
{
	fs_server_assume_init(opaque, minor);
}

static size_t shares_save(void *opaque, uint8_t **blob)
{
	size_t n;

	*blob = xmalloc(FS_CARRY_MAX);
	n = fs_server_save(opaque, *blob, FS_CARRY_MAX);
	*blob = xrealloc(*blob, n ? n : 1);
	return n;
}

static void shares_load(void *opaque, const void *blob, size_t len)
{
	if (fs_server_load(opaque, blob, len) < 0)
		log_info("share nodes of the save not taken: the guest looks its paths up again");
}

/* The server's options for sp, its masks found beneath fd, its root. */
static int export_opts(const struct share_spec *sp, int fd, struct fs_export_opts *o,
		       gantry_error_t *err)
{
	*o = (struct fs_export_opts){ .ro = sp->ro,
				      .no_git = sp->nogit,
				      .map_owner = sp->ids,
				      .uid = sp->uid,
				      .gid = sp->gid };
	for (size_t i = 0; i < sp->nr_masks; i++)
		if (fs_export_mask(o, fd, sp->masks[i].rel, sp->masks[i].hide, err) < 0)
			return -1;
	return 0;
}

int machine_share_export(struct fs_server *srv, const struct share_spec *sp, gantry_error_t *err)
{
	struct fs_export_opts o;
	int fd = -1, r;

	r = share_host_check(sp->host_path, &fd, err);
	if (r == 0)
		r = export_opts(sp, fd, &o, err);
	if (r == 0)
		r = fs_server_add_export(srv, sp->tag, fd, &o, err);
	if (fd >= 0)
		close(fd);
	if (r < 0)
		gantry_error_prefix(err, "share `%s`", sp->tag);
	return r;
}

/* TAG:ro|rw:B64PATH, as gantry-init reads gantry.share= (guest/shares.h). */
static char *share_token(const struct share_spec *sp)
{
	cleanup_free char *enc = share_b64url(sp->ctr_path);
	char *t;

	xasprintf(&t, "%s:%s:%s", sp->tag, sp->ro ? "ro" : "rw", enc);
	return t;
}

char **machine_share_tokens(const struct machine *m, size_t *n)
{
	char **v = xzalloc((m->nr_boot_shares + 1) * sizeof(*v));

	size_t k = 0;

	/* The root (gantry.root=) is no share the guest binds. */
	for (size_t i = 0; i < m->nr_boot_shares; i++)
		if (strcmp(m->boot_shares[i].sp.ctr_path, "/") != 0)
			v[k++] = share_token(&m->boot_shares[i].sp);
	*n = k;
	return v;
}

/* One share: checked and opened, its token on the command line. */
static int share_one(struct machine *m, const char *spec, gantry_error_t *err)
{
	struct machine_share *ms = &m->boot_shares[m->nr_boot_shares];
	cleanup_free char *tok = NULL;
	size_t len = strlen(m->append);
	int n;

	if (share_spec_parse(spec, NULL, &ms->sp, err) < 0)
		return -1;
	ms->fd = -1;
	m->nr_boot_shares++;
	if (share_host_check(ms->sp.host_path, &ms->fd, err) < 0)
		return gantry_error_prefix(err, "share `%s`", ms->sp.tag);
	if (m->bare)
		return 0; /* `gantry run`'s guest mounts its shares itself */
	tok = share_token(&ms->sp);
	n = snprintf(m->append + len, sizeof(m->append) - len, " gantry.share=%s", tok);
	if (n < 0 || (size_t)n >= sizeof(m->append) - len) {
		m->append[len] = '\0';
		return gantry_error(err, 0,
				    "share `%s`: too many shares for the kernel command line",
				    ms->sp.tag);
	}
	return 0;
}

/* The server in this process, for a VM on a thread of it. */
static int shares_here(struct machine *m, gantry_error_t *err)
{
	if (fs_server_new(&m->shares, 0, 0, err) < 0)
		return gantry_error_prefix(err, "share server");
	for (size_t i = 0; i < m->nr_boot_shares; i++) {
		const struct share_spec *sp = &m->boot_shares[i].sp;
		struct fs_export_opts o;

		if (export_opts(sp, m->boot_shares[i].fd, &o, err) < 0 ||
		    fs_server_add_export(m->shares, sp->tag, m->boot_shares[i].fd, &o, err) < 0)
			return gantry_error_prefix(err, "share `%s`", sp->tag);
	}
	machine_share_device(m->shares, &m->fs_handler, &m->cfg);
	return 0;
}

/* An OCI bundle's rootfs as the container's root: an export of its own,
 * which gantry-init binds as the root (gantry.root=TAG) instead of
 * assembling the image's. host: the host's own "/" (gantry wrap), served
 * read-only and rebuilt entry by entry in the guest (gantry.hostroot=1). */
/* What the host's "/" hides from the guest, whatever its kernel asks: the
 * user's home (a wrap shares back what a harness needs of it) and
 * Gantry's state (other sandboxes' disks, logs and sockets). */
static void host_root_hides(struct share_spec *sp)
{
	cleanup_free char *state = NULL;
	const char *home = gantry_setting("HOME");
	const char *dirs[] = { home, NULL, "/root" };
	gantry_error_t err = NULL;

	if (gantry_home(&state, &err) < 0)
		gantry_error_free(&err);
	dirs[1] = state;
	for (size_t i = 0; i < ARRAY_SIZE(dirs) && sp->nr_masks < SHARE_MASKS_MAX; i++) {
		cleanup_free char *real = dirs[i] ? realpath(dirs[i], NULL) : NULL;

		if (real && strcmp(real, "/") != 0)
			sp->masks[sp->nr_masks++] = (struct share_mask){ xstrdup(real + 1), true };
	}
}

int machine_hide_inject_files(struct machine *m, gantry_error_t *err)
{
	for (size_t i = 0; i < m->nr_inject_files; i++) {
		cleanup_free char *real = realpath(m->inject_files[i], NULL);

		if (real == NULL)
			continue; /* not there: the start fails on reading it */
		for (size_t j = 0; j < m->nr_boot_shares; j++) {
			struct share_spec *sp = &m->boot_shares[j].sp;
			size_t n = strcmp(sp->host_path, "/") == 0 ? 0 : strlen(sp->host_path);

			/* Beneath the share's directory (the host's root takes
			 * every path). */
			if (strncmp(real, sp->host_path, n) != 0 || real[n] != '/' || real[n + 1] == '\0')
				continue;
			if (sp->nr_masks == SHARE_MASKS_MAX)
				return gantry_error(err, 0, "share `%s`: too many paths to hide",
						    sp->tag);
			sp->masks[sp->nr_masks++] = (struct share_mask){ xstrdup(real + n + 1), true };
		}
	}
	return 0;
}

static int share_root(struct machine *m, const char *root, bool host, gantry_error_t *err)
{
	struct machine_share *ms = &m->boot_shares[m->nr_boot_shares];
	size_t len = strlen(m->append);
	int n;

	ms->fd = -1;
	snprintf(ms->sp.tag, sizeof(ms->sp.tag), "%s", MACHINE_ROOT_TAG);
	ms->sp.host_path = xstrdup(root);
	ms->sp.ctr_path = xstrdup("/");
	ms->sp.ro = host;
	m->nr_boot_shares++;
	if (host) {
		/* "/" is no share a user may name (share_host_check): this one
		 * is read-only, with home and state hidden. */
		host_root_hides(&ms->sp);
		ms->fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (ms->fd < 0)
			return gantry_error_errno(err, "the container's root: open /");
	} else if (share_host_check(root, &ms->fd, err) < 0)
		return gantry_error_prefix(err, "the container's root");
	n = snprintf(m->append + len, sizeof(m->append) - len, " gantry.root=%s%s",
		     MACHINE_ROOT_TAG, host ? " gantry.hostroot=1" : "");
	if (n < 0 || (size_t)n >= sizeof(m->append) - len) {
		m->append[len] = '\0';
		return gantry_error(err, 0, "kernel command line too long");
	}
	return 0;
}

int machine_shares(struct machine *m, char *const *shares, size_t n, bool live,
		   const char *root, bool host_root, gantry_error_t *err)
{
	if (n == 0 && !live && root == NULL)
		return 0;
	if (n + (root != NULL) > FS_MAX_EXPORTS)
		return gantry_error(err, 0, "too many shares (at most %d)", FS_MAX_EXPORTS);
	m->fs_device = true;
	m->shares_live = live;
	m->boot_shares = xzalloc((n + 2) * sizeof(*m->boot_shares));
	if (root && share_root(m, root, host_root, err) < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (share_one(m, shares[i], err) < 0)
			return -1;
	/* The files injected secrets are read from (their values), in any
	 * share that holds them. */
	if (machine_hide_inject_files(m, err) < 0)
		return -1;
	/* A worker's server is the share worker's (shareworker.c gives it
	 * the roots). */
	return m->worker ? 0 : shares_here(m, err);
}

void machine_share_device(struct fs_server *srv, struct virtio_fs_handler *h,
			  struct vmm_config *cfg)
{
	*h = (struct virtio_fs_handler){ .handle = shares_handle,
					 .reset = shares_reset,
					 .restored = shares_restored,
					 .save = shares_save,
					 .load = shares_load,
					 .opaque = srv };
	cfg->fs = (struct vmm_fs){ .tag = MACHINE_SHARES_TAG, .handler = h };
}

/* The slot of tag's live share worker, or NULL. */
static struct machine_live_share *live_find(struct machine *m, const char *tag)
{
	for (size_t i = 0; m->live_shares && i < FS_MAX_EXPORTS; i++)
		if (m->live_shares[i].tag && strcmp(m->live_shares[i].tag, tag) == 0)
			return &m->live_shares[i];
	return NULL;
}

static void live_stop(struct machine_live_share *ls)
{
	share_worker_stop(&ls->w);
	free(ls->tag);
	*ls = (struct machine_live_share){ .w = SHARE_WORKER_NONE };
}

void machine_shares_free(struct machine *m)
{
	for (size_t i = 0; m->live_shares && i < FS_MAX_EXPORTS; i++)
		if (m->live_shares[i].tag)
			live_stop(&m->live_shares[i]);
	free(m->live_shares);
	m->live_shares = NULL;
	if (m->shares)
		fs_server_free(m->shares);
	m->shares = NULL;
	for (size_t i = 0; i < m->nr_boot_shares; i++) {
		if (m->boot_shares[i].fd >= 0)
			close(m->boot_shares[i].fd);
		share_spec_free(&m->boot_shares[i].sp);
	}
	free(m->boot_shares);
	m->boot_shares = NULL;
	m->nr_boot_shares = 0;
}

bool machine_shares_running(const struct machine *m)
{
	return m->shares != NULL || (m->worker && m->fs_device);
}

/* A share added to a running VM whose shares are in a worker: a worker
 * of its own, behind the first, confined to its one directory. */
static int live_add(struct machine *m, const struct share_spec *sp, int fd, gantry_error_t *err)
{
	struct machine_live_share *ls = NULL;
	int r;

	if (m->live_shares == NULL) {
		m->live_shares = xzalloc(FS_MAX_EXPORTS * sizeof(*m->live_shares));
		for (size_t i = 0; i < FS_MAX_EXPORTS; i++)
			m->live_shares[i].w = SHARE_WORKER_NONE;
	}
	for (size_t i = 0; i < FS_MAX_EXPORTS && !ls; i++)
		if (m->live_shares[i].tag == NULL)
			ls = &m->live_shares[i];
	if (ls == NULL)
		return gantry_error(err, ENOSPC, "more than %d shares", FS_MAX_EXPORTS);
	/* A route is never taken twice: the guest may still name nodes of
	 * one that went. */
	if (m->last_route >= FS_ROUTE_MAX)
		return gantry_error(err, ENOSPC,
				    "%u shares were added since the sandbox started: restart it to "
				    "add more",
				    FS_ROUTE_MAX);
	r = share_worker_start_behind(&ls->w, &m->share_worker, sp, fd, ++m->last_route,
				      m->isolation, err);
	if (r < 0) {
		share_worker_stop(&ls->w);
		ls->w = SHARE_WORKER_NONE;
		return -1;
	}
	ls->tag = xstrdup(sp->tag);
	/* A worker of a share of the same tag that died is history now. */
	if (m->workers_gone) {
		cleanup_free char *role = NULL;

		xasprintf(&role, "share:%s", sp->tag);
		json_object_del(m->workers_gone, role);
	}
	machine_isolation_save(m);
	return 0;
}

int machine_share_add(struct machine *m, const struct share_spec *sp, gantry_error_t *err)
{
	int fd = -1, r;

	if (!m->worker)
		return machine_share_export(m->shares, sp, err);
	r = share_host_check(sp->host_path, &fd, err);
	if (r == 0)
		r = live_add(m, sp, fd, err);
	if (fd >= 0)
		close(fd);
	return r < 0 ? gantry_error_prefix(err, "share `%s`", sp->tag) : 0;
}

void machine_share_drop(struct machine *m, const char *tag)
{
	struct machine_live_share *ls = m->worker ? live_find(m, tag) : NULL;
	gantry_error_t err = NULL;

	/* Its worker first: what the front worker passed on to it comes back
	 * at once (EIO), and the route closes without waiting on it. */
	if (ls)
		live_stop(ls);
	if (m->worker)
		share_worker_rm(&m->share_worker, tag, true, &err);
	else
		fs_server_remove_export(m->shares, tag, true, NULL);
	gantry_error_free(&err);
	if (ls)
		machine_isolation_save(m);
}

size_t machine_share_handles(struct machine *m, const char *tag)
{
	struct machine_live_share *ls = m->worker ? live_find(m, tag) : NULL;

	if (ls)
		return share_worker_handles(&ls->w, tag);
	return m->worker ? share_worker_handles(&m->share_worker, tag) :
			   fs_server_export_handles(m->shares, tag);
}

int machine_tmpfs(struct machine *m, char *const *tmpfs, size_t n, gantry_error_t *err)
{
	for (size_t i = 0; i < n; i++) {
		struct sandbox_tmpfs t;
		size_t len = strlen(m->append), plen;
		cleanup_free char *path = NULL;
		int k;

		if (sandbox_tmpfs_parse(tmpfs[i], &t, err) < 0)
			return -1;
		plen = strlen(t.path);
		path = xmalloc(b64_encoded_len(plen, B64_URL) + 1);
		b64_encode(t.path, plen, path, B64_URL);
		k = snprintf(m->append + len, sizeof(m->append) - len, " gantry.tmpfs=%s%s:%llu:%o:%s",
			     t.ro ? "r" : "", t.noexec ? "x" : t.ro ? "" : "-", t.size_kib, t.mode,
			     path);
		if (k < 0 || (size_t)k >= sizeof(m->append) - len) {
			m->append[len] = '\0';
			return gantry_error(err, 0, "tmpfs `%s`: too many for the kernel command line",
					    t.path);
		}
	}
	return 0;
}

int machine_sockets(struct machine *m, char *const *paths, size_t n, bool oauth,
		    const char *mcpfs, gantry_error_t *err)
{
	const char *flags[] = { oauth ? " gantry.oauth=1" : "", mcpfs ? " gantry.mcpfs=" : "",
				mcpfs ? mcpfs : "" };

	for (size_t i = 0; i < ARRAY_SIZE(flags); i++) {
		size_t len = strlen(m->append);
		int k = snprintf(m->append + len, sizeof(m->append) - len, "%s", flags[i]);

		if (k < 0 || (size_t)k >= sizeof(m->append) - len) {
			m->append[len] = '\0';
			return gantry_error(err, 0, "kernel command line too long");
		}
	}
	for (size_t i = 0; i < n; i++) {
		cleanup_free char *enc = share_b64url(paths[i]);
		size_t len = strlen(m->append);
		int k = snprintf(m->append + len, sizeof(m->append) - len, " gantry.sock=%s", enc);

		if (k < 0 || (size_t)k >= sizeof(m->append) - len) {
			m->append[len] = '\0';
			return gantry_error(err, 0, "socket `%s`: too many for the kernel command line",
					    paths[i]);
		}
	}
	return 0;
}
