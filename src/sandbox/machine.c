/* A sandbox's guest VM (see machine.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/assets.h"
#include "common/door.h"
#include "common/files.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "net/net.h"
#include "net/proxy.h"
#include "egress/egress.h"
#include "sandbox/machine.h"
#include "sandbox/template.h"
#include "sandbox/state.h"
#include "share/server.h"
#include "worker/worker.h"

#define MACHINE_APPEND_BASE "root=/dev/vda rootfstype=erofs ro init=/sbin/gantry-init"
#define NET_LOG_ROTATE	    (1u << 20)
#define NET_LOG_TAIL	    10

int machine_dial(void *machine, uint32_t port)
{
	struct machine *m = machine;

	return doors_dial(m->doors, port);
}

int machine_config(struct machine *m, const struct sandbox *sb, const char *dir, int console_fd,
		   struct doors *doors, gantry_error_t *err)
{
	bool timing = vmm_timing_requested();
	const char *net = sb->net ? " " NET_GUEST_CMDLINE : "";
	int n;

	*m = MACHINE_NONE;
	if (assets_path(ASSET_KERNEL, &m->kernel, err) < 0 ||
	    assets_path(ASSET_SYSROOT, &m->sysroot, err) < 0)
		return -1;
	/* With timing, gantry-init logs its milestones on the console too. */
	if (sb->transient)
		n = snprintf(m->append, sizeof(m->append), "%s%s%s", MACHINE_APPEND_BASE, net,
			     timing ? " gantry.debug=1" : "");
	else
		n = snprintf(m->append, sizeof(m->append),
			     "%s gantry.persist=1 gantry.hostname=%s %s%s%s", MACHINE_APPEND_BASE,
			     sb->hostname ? sb->hostname : sb->name,
			     sb->root ? (sb->root_readonly ? "gantry.readonly=1" : "") :
			     sb->writable ? "gantry.rw=1" :
					    "gantry.readonly=1",
			     net,
			     timing ? " gantry.debug=1" : "");
	if (n < 0 || (size_t)n >= sizeof(m->append))
		return gantry_error(err, 0, "kernel command line too long");
	m->doors = doors;
	m->isolation = sb->isolation;
	m->worker = sb->isolation != CONFINE_OFF;
	m->transient = sb->transient;
	xasprintf(&m->isolation_path, "%s/%s", dir, CONFINE_FILE);
	if (sb->net) {
		m->net = true;
		m->ports = strv_dup(sb->ports, sb->nr_ports);
		m->nr_ports = sb->nr_ports;
		m->net_policy = sb->net_policy ? json_incref(sb->net_policy) : NULL;
		m->allow_local_net = sb->allow_local_net;
		m->proxy = sb->proxy ? xstrdup(sb->proxy) : NULL;
		m->proxy_enforce = sb->proxy_enforce;
		xasprintf(&m->net_log, "%s/%s", dir, NET_WORKER_LOG);
		xasprintf(&m->egress_log, "%s/%s", dir, EGRESS_WORKER_LOG);
	}
	if (machine_inject(m, sb->secrets, sb->nr_secrets, err) < 0)
		return -1;
	m->cfg = (struct vmm_config){
		.kernel = m->kernel,
		.append = m->append,
		.vsock_dir = dir,
		.vsock = { .connect = machine_dial, .opaque = m },
		.cpus = (unsigned int)sb->cpus,
		.mem_mib = sb->mem_mib,
		.timing = timing,
		.stop_fd = -1,
		/* A persistent sandbox's RAM in 4 KiB pages (vmm.h). */
		.small_pages = !sb->transient,
	};
	if (console_fd >= 0) {
		m->cfg.console_fd = console_fd;
	} else {
		xasprintf((char **)&m->cfg.console, "%s/%s", dir, SANDBOX_CONSOLE);
	}
	/* A sandbox's shares may change while it runs (they need its
	 * writable root for their mount points); each one added then gets a
	 * share worker of its own, as a Landlock ruleset cannot be widened. */
	if (machine_shares(m, sb->shares, sb->nr_shares,
			   !sb->transient && (sb->writable || sb->root), sb->root, sb->host_root,
			   err) < 0 ||
	    machine_tmpfs(m, sb->tmpfs, sb->nr_tmpfs, err) < 0 ||
	    machine_sockets(m, sb->sockets, sb->nr_sockets, sb->oauth_bridge, sb->mcp_fs, err) < 0)
		return -1;
	m->cfg.disks[m->cfg.nr_disks++] = (struct vmm_disk){ .path = m->sysroot, .ro = true };
	/* An OCI bundle's root is served (gantry.root=), not attached. */
	if (sb->root == NULL)
		m->cfg.disks[m->cfg.nr_disks++] =
			(struct vmm_disk){ .path = sb->image_path, .ro = true };
	if (sb->writable)
		m->cfg.disks[m->cfg.nr_disks++] = (struct vmm_disk){ .path = sb->rwlayer };
	return 0;
}

int machine_config_run(struct machine *m, const struct machine_run *r, gantry_error_t *err)
{
	const char *append = r->cfg.append ? r->cfg.append : "";

	*m = MACHINE_NONE;
	m->bare = true;
	if (strlen(append) >= sizeof(m->append))
		return gantry_error(err, 0, "kernel command line too long (at most %zu bytes)",
				    sizeof(m->append) - 1);
	strcpy(m->append, append);
	m->kernel = r->cfg.kernel ? xstrdup(r->cfg.kernel) : NULL;
	m->isolation = r->isolation;
	m->worker = r->isolation != CONFINE_OFF;
	if (r->net) {
		m->net = true;
		m->ports = strv_dup((char **)r->ports, r->nr_ports);
		m->nr_ports = r->nr_ports;
		m->allow_local_net = r->allow_local_net;
	}
	m->cfg = r->cfg;
	m->cfg.kernel = m->kernel;
	m->cfg.append = *m->append ? m->append : NULL;
	m->cfg.stop_fd = -1;
	m->cfg.net_fd = 0;
	m->cfg.fs = (struct vmm_fs){ 0 };
	/* Ours to free, as a sandbox's console.log path is. */
	m->cfg.console = r->cfg.console ? xstrdup(r->cfg.console) : NULL;
	if (m->cfg.console == NULL && m->cfg.console_fd <= 0)
		m->cfg.console_fd = STDOUT_FILENO;
	return machine_shares(m, r->shares, r->nr_shares, false, NULL, false, err);
}

static void rotate_log(const char *path)
{
	cleanup_free char *prev = NULL;
	struct stat st;

	if (stat(path, &st) < 0 || (uint64_t)st.st_size < NET_LOG_ROTATE)
		return;
	xasprintf(&prev, "%s.previous", path);
	rename(path, prev);
}

/* The worker's error, with the tail of its log when it died or hung. */
static int net_error(struct machine *m, gantry_error_t *err)
{
	if (m->net_log && strncmp(gantry_error_str(*err), "the network worker", 18) == 0)
		error_add_tail(err, m->net_log, NET_LOG_TAIL, "last lines of the network worker's log:");
	return -1;
}

int machine_inject(struct machine *m, char *const *specs, size_t n, gantry_error_t *err)
{
	size_t nr;
	char **hosts = egress_hosts(specs, n, &nr);

	if (nr && !m->net) {
		strv_free(hosts);
		return gantry_error_usage(err, "an injected secret needs the sandbox's network "
					       "(this sandbox has none)");
	}
	strv_free(m->inject_hosts);
	m->inject_hosts = hosts;
	m->nr_inject = nr;
	strv_free(m->inject_files);
	m->inject_files = xzalloc((n + 1) * sizeof(*m->inject_files));
	m->nr_inject_files = 0;
	for (size_t i = 0; i < n; i++) {
		struct secret_spec sp;
		gantry_error_t why = NULL;

		if (secret_spec_parse(specs[i], &sp, &why) < 0) {
			gantry_error_free(&why);
			continue;
		}
		if (sp.inject && sp.source == SECRET_FROM_FILE)
			m->inject_files[m->nr_inject_files++] = xstrdup(sp.path);
		secret_spec_free(&sp);
	}
	return machine_hide_inject_files(m, err);
}

/* The egress worker, for the hosts of injected secrets, before the
 * network worker that hands it their connections; its CA goes on the
 * guest's command line (gantry-init has the guest trust it). */
static int egress_start(struct machine *m, gantry_error_t *err)
{
	cleanup_close int log = -1;
	cleanup_free char *ca = NULL;
	size_t len = strlen(m->append);

	rotate_log(m->egress_log);
	log = open(m->egress_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (log < 0)
		return gantry_error_errno(err, "open `%s`", m->egress_log);
	if (egress_worker_start(&m->egress, m->inject_hosts, m->nr_inject, m->allow_local_net,
				m->isolation, log, err) < 0)
		return -1;
	ca = egress_ca_cmdline(m->egress.ca_pem);
	if (ca == NULL || len + strlen(" gantry.ca=") + strlen(ca) >= sizeof(m->append))
		return gantry_error(err, 0, "kernel command line too long for the egress CA");
	snprintf(m->append + len, sizeof(m->append) - len, " gantry.ca=%s", ca);
	return 0;
}

/* Start the network worker; net_ready waits for it. */
static int net_start(struct machine *m, gantry_error_t *err)
{
	struct net_worker_opts *o = &m->net_opts;
	cleanup_close int log = -1;
	struct net_proxy proxy;
	int fd = STDERR_FILENO;

	*o = (struct net_worker_opts){ .ports = m->ports,
				       .nr_ports = m->nr_ports,
				       .policy = m->net_policy,
				       .allow_local = m->allow_local_net,
				       .proxy_enforce = m->proxy_enforce,
				       .isolation = m->isolation };
	if (m->nr_inject) {
		if (egress_start(m, err) < 0)
			return -1;
		o->inject_fd = m->egress.net_fd;
		o->inject_hosts = m->inject_hosts;
		o->nr_inject = m->nr_inject;
	}
	if (m->proxy) {
		if (net_proxy_parse(m->proxy, &proxy, err) < 0 ||
		    net_proxy_addrs(&proxy, o->proxy_ips, NET_PROXY_IPS_MAX, &o->nr_proxy_ips, err) < 0)
			return -1;
		o->proxy_port = proxy.port;
	}
	/* A sandbox's has a log of its own; `gantry run`'s is our stderr. */
	if (m->net_log) {
		rotate_log(m->net_log);
		fd = log = open(m->net_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (log < 0)
			return gantry_error_errno(err, "open `%s`", m->net_log);
	}
	if (net_worker_spawn(&m->net_worker, o, fd, err) < 0)
		return net_error(m, err);
	m->net_started = true;
	if (m->egress.net_fd >= 0) { /* the network worker has it */
		close(m->egress.net_fd);
		m->egress.net_fd = -1;
	}
	m->cfg.net_fd = m->net_worker.vmm_fd;
	return 0;
}

static void isolation_role(json_t *roles, json_t *degraded, const char *role, json_t *report)
{
	size_t i;
	json_t *v;

	json_object_set(roles, role, report);
	json_array_foreach(json_object_get(report, "degraded"), i, v)
		json_array_append_new(degraded, json_sprintf("%s.%s", role, json_string_value(v)));
}

json_t *machine_isolation(struct machine *m)
{
	json_t *roles, *degraded;

	roles = json_object();
	degraded = json_array();
	if (m->vmm_worker.isolation)
		isolation_role(roles, degraded, "vmm", m->vmm_worker.isolation);
	else
		json_object_set_new(roles, "vmm",
				    json_pack("{s:s,s:s}", "state", "unconfined", "detail",
					      "process isolation is off: the VM runs in the "
					      "supervisor's process (one-shot exec: gantry's)"));
	if (m->net_worker.isolation)
		isolation_role(roles, degraded, "net", m->net_worker.isolation);
	if (m->share_worker.isolation)
		isolation_role(roles, degraded, "share", m->share_worker.isolation);
	if (m->egress.isolation)
		isolation_role(roles, degraded, "egress", m->egress.isolation);
	for (size_t i = 0; m->live_shares && i < FS_MAX_EXPORTS; i++) {
		const struct machine_live_share *ls = &m->live_shares[i];
		cleanup_free char *role = NULL;

		if (ls->tag == NULL || ls->w.isolation == NULL)
			continue;
		xasprintf(&role, "share:%s", ls->tag);
		isolation_role(roles, degraded, role, ls->w.isolation);
	}
	{
		const char *role;
		json_t *how;

		/* A worker that ended: its line replaces what held of it. */
		json_object_foreach(m->workers_gone, role, how)
			json_object_set_new(roles, role, json_pack("{s:O}", "state", how));
	}
	return json_pack("{s:i,s:s,s:o,s:o}", "version", 1, "mode", confine_mode_name(m->isolation),
			 "roles", roles, "degraded", degraded);
}

void machine_isolation_save(struct machine *m)
{
	cleanup_free char *text = NULL;
	json_t *j;

	if (m->isolation_path == NULL)
		return; /* `gantry run`'s: no sandbox to show it */
	j = machine_isolation(m);
	text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(j);
	if (text == NULL || write_file_atomic(m->isolation_path, text, strlen(text), 0600, NULL) < 0)
		log_warn("cannot write %s", m->isolation_path);
}

/* The share worker (where the VM has the virtio-fs device) and the VMM
 * worker, which is handed the share worker's sockets; both set up at
 * once, the share worker's confinement checked before the guest runs. */
static int machine_workers_start(struct machine *m, gantry_error_t *err)
{
	int r;

	if (m->fs_device) {
		m->share_started = true;
		if (share_worker_start(&m->share_worker, m, err) < 0)
			return -1;
		/* The device's requests go to it, over these. */
		m->cfg.fs = (struct vmm_fs){ .tag = MACHINE_SHARES_TAG,
					     .remote = true,
					     .rpc = m->share_worker.rpc,
					     .nr_rpc = m->share_worker.nr_rpc };
	}
	r = vmm_worker_start(&m->vmm_worker, m, err);
	share_worker_rpc_given(&m->share_worker);
	m->cfg.fs.rpc = NULL;
	m->cfg.fs.nr_rpc = 0;
	if (m->fs_device) {
		gantry_error_t why = NULL;

		/* Its own line wins: a share worker that failed to confine
		 * itself is why the VMM worker could not hand it guest RAM. */
		if (share_worker_ready(&m->share_worker, &why) < 0) {
			gantry_error_free(err);
			*err = why;
			return -1;
		}
	}
	return r;
}

static void *machine_thread(void *arg)
{
	struct machine *m = arg;
	uint64_t one = 1;

	if (m->worker)
		vmm_worker_serve(&m->vmm_worker, m, &m->rc, &m->status, &m->err);
	else
		m->rc = vmm_run(&m->cfg, &m->status, &m->err);
	atomic_store(&m->ended, true);
	/* The guest is gone: whatever waits on it must stop waiting. */
	if (m->agent)
		agent_cancel(m->agent);
	(void)!write(m->done_fd, &one, sizeof(one));
	return NULL;
}

/* A live save's course (machine.h ckpt_state): asked, then saved (the
 * VM paused until go), or given up by its asker, whose VM, once saved,
 * goes on at once. */
enum { CKPT_IDLE, CKPT_ASKED, CKPT_SAVED, CKPT_ABANDONED };

/* The saved VM told to go on (the state and memory files to read first,
 * or -1); ckpt_state is the caller's. */
static void checkpoint_send_go(struct machine *m, int state_fd, int mem_fd)
{
	int fds[2] = { state_fd, mem_fd };
	uint64_t one = 1;

	if (m->worker) {
		if (worker_send_json(m->vmm_worker.chan, json_pack("{s:s}", "op", "go"), fds,
				     state_fd >= 0 ? 2 : 0) < 0)
			log_warn("VMM worker: let the VM go on: %s", strerror(errno));
		return;
	}
	/* The VM's main thread waits in machine_checkpointed: the files
	 * are read once it goes on. */
	if (state_fd >= 0) {
		m->cfg.save_state_fd = state_fd;
		m->cfg.save_mem_fd = mem_fd;
	}
	(void)!write(m->ckpt_go_fd, &one, sizeof(one));
}

void machine_checkpoint_go(struct machine *m, int state_fd, int mem_fd)
{
	atomic_store(&m->ckpt_state, CKPT_IDLE);
	checkpoint_send_go(m, state_fd, mem_fd);
}

void machine_checkpoint_saved(struct machine *m, const char *error)
{
	int asked = CKPT_ASKED, abandoned = CKPT_ABANDONED;
	uint64_t one = 1;

	snprintf(m->ckpt_error, sizeof(m->ckpt_error), "%s", error ? error : "");
	if (atomic_compare_exchange_strong(&m->ckpt_state, &asked, CKPT_SAVED)) {
		(void)!write(m->ckpt_fd, &one, sizeof(one));
	} else if (atomic_load(&m->ckpt_state) == abandoned) {
		/* Let go before a new save may be asked: the ask of one that
		 * came between would otherwise be overwritten, and its VM
		 * wait for a go nobody sends. */
		checkpoint_send_go(m, -1, -1);
		atomic_store(&m->ckpt_state, CKPT_IDLE);
	}
}

/* A VM on a thread here: told, it waits for machine_checkpoint_go. */
static void machine_checkpointed(void *opaque, const char *error)
{
	struct machine *m = opaque;
	uint64_t n;

	machine_checkpoint_saved(m, error);
	while (read(m->ckpt_go_fd, &n, sizeof(n)) < 0 && errno == EINTR)
		;
}

int machine_checkpoint(struct machine *m, int timeout_ms, gantry_error_t *err)
{
	uint64_t ask = VMM_CHECKPOINT, n;
	struct pollfd p[2] = { { m->ckpt_fd, POLLIN, 0 }, { m->done_fd, POLLIN, 0 } };
	int idle = CKPT_IDLE, asked = CKPT_ASKED, r;

	if (!m->started || atomic_load(&m->ended))
		return gantry_error(err, 0, "its VM is not running");
	if (m->ckpt_fd < 0)
		return gantry_error(err, 0, "its VM makes no save");
	if (!atomic_compare_exchange_strong(&m->ckpt_state, &idle, CKPT_ASKED))
		return gantry_error(err, EBUSY, "an earlier save of its VM is still under way");
	while (read(m->ckpt_fd, &n, sizeof(n)) > 0)
		;
	if (write(m->cfg.stop_fd, &ask, sizeof(ask)) != sizeof(ask)) {
		atomic_store(&m->ckpt_state, CKPT_IDLE);
		return gantry_error_errno(err, "ask the VM for a save");
	}
	while ((r = poll(p, 2, timeout_ms)) < 0 && errno == EINTR)
		;
	/* Given up unless it was saved meanwhile: then it goes on once saved. */
	if (!(r > 0 && (p[0].revents & POLLIN)) &&
	    atomic_compare_exchange_strong(&m->ckpt_state, &asked, CKPT_ABANDONED))
		return r > 0 ? gantry_error(err, 0, "its VM ended before it was saved") :
			       gantry_error(err, 0, "its VM was not saved within %d s",
					    timeout_ms / 1000);
	(void)!read(m->ckpt_fd, &n, sizeof(n));
	if (m->ckpt_error[0] == '\0')
		return 0;
	machine_checkpoint_go(m, -1, -1);
	return gantry_error(err, 0, "%s", m->ckpt_error);
}

void machine_frozen(struct machine *m, bool frozen)
{
	uint64_t one = 1;

	atomic_store(&m->frozen, frozen);
	(void)!write(m->freeze_fd, &one, sizeof(one));
}

static void machine_frozen_cb(void *opaque, bool frozen)
{
	machine_frozen(opaque, frozen);
}

int machine_freeze(struct machine *m, bool freeze, int timeout_ms, gantry_error_t *err)
{
	uint64_t ask = freeze ? VMM_FREEZE : VMM_THAW, n;
	struct pollfd p[2] = { { m->freeze_fd, POLLIN, 0 }, { m->done_fd, POLLIN, 0 } };
	int r;

	if (!m->started || atomic_load(&m->ended))
		return gantry_error(err, 0, "its VM is not running");
	while (read(m->freeze_fd, &n, sizeof(n)) > 0)
		;
	if (write(m->cfg.stop_fd, &ask, sizeof(ask)) != sizeof(ask))
		return gantry_error_errno(err, "ask the VM to %s", freeze ? "pause" : "run on");
	while ((r = poll(p, 2, timeout_ms)) < 0 && errno == EINTR)
		;
	if (r == 0)
		return gantry_error(err, 0, "its VM did not %s within %d s",
				    freeze ? "pause" : "run on", timeout_ms / 1000);
	if (!(p[0].revents & POLLIN) || atomic_load(&m->frozen) != freeze)
		return gantry_error(err, 0, "its VM ended before it %s",
				    freeze ? "paused" : "ran on");
	(void)!read(m->freeze_fd, &n, sizeof(n));
	return 0;
}

int machine_start(struct machine *m, gantry_error_t *err)
{
	/* GANTRY_BOOT_TIMING milestones, ms from here */
	double t0 = now_ms_frac(), t_net = 0, t_vmm = 0;

	if (vmm_validate(&m->cfg, err) < 0)
		return -1;
	m->cfg.stop_fd = eventfd(0, EFD_CLOEXEC);
	m->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	m->freeze_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (m->cfg.stop_fd < 0 || m->done_fd < 0 || m->freeze_fd < 0)
		return gantry_error_errno(err, "eventfd");
	m->cfg.frozen = machine_frozen_cb;
	m->cfg.frozen_opaque = m;
	if (m->cfg.save_state_fd > 0) {
		m->ckpt_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		m->ckpt_go_fd = eventfd(0, EFD_CLOEXEC);
		if (m->ckpt_fd < 0 || m->ckpt_go_fd < 0)
			return gantry_error_errno(err, "eventfd");
		m->cfg.checkpointed = machine_checkpointed;
		m->cfg.checkpoint_opaque = m;
	}
	/* Before the guest boots, so its first dial lands. */
	if (!m->bare && agent_open_doors(m->doors, &m->agent, err) < 0)
		return -1;
	/* Before the VM thread: the device's socket is there from its first
	 * frame (what the guest sends before the worker reads waits in it). */
	if (m->net && net_start(m, err) < 0)
		return -1;
	t_net = now_ms_frac() - t0;
	/* The command line whole now (the egress CA is on it): a template's
	 * boot takes its gantry.* part with RENEW. */
	if (m->template && template_split_append(m, &m->template_config, err) < 0)
		return -1;
	/* Set up and confined before the guest runs: its failure is the
	 * start's (the network worker, set up meanwhile, is stopped by
	 * machine_free). */
	if (m->worker && machine_workers_start(m, err) < 0)
		return -1;
	t_vmm = now_ms_frac() - t0;
	if (pthread_create(&m->thread, NULL, machine_thread, m) != 0)
		return gantry_error(err, 0, "cannot start the VM thread");
	m->started = true;
	/* The worker sets itself up and confines itself while the guest
	 * boots; a port that cannot be published still fails the start. */
	if (m->net && net_worker_ready(&m->net_worker, &m->net_opts, err) < 0) {
		machine_kill(m);
		machine_join(m);
		net_worker_stop(&m->net_worker);
		m->net_started = false;
		return net_error(m, err);
	}
	if (m->cfg.timing && m->net)
		log_always("machine: network worker spawned %.1f ms, VM %s %.1f ms, network "
			   "worker ready %.1f ms",
			   t_net, m->worker ? "worker ready" : "thread started", t_vmm,
			   now_ms_frac() - t0);
	else if (m->cfg.timing)
		log_always("machine: VM %s %.1f ms", m->worker ? "worker ready" : "thread started",
			   t_vmm);
	machine_isolation_save(m);
	return 0;
}

/* A template's first boot, its guest waiting at HELLO: the template
 * written (a live save), then the boot goes on. A save that fails is no
 * failure of the run: it goes on without one. */
static int template_hello(void *opaque, gantry_error_t *err)
{
	struct machine *m = opaque;
	gantry_error_t why = NULL;

	(void)err;
	if (machine_checkpoint(m, TEMPLATE_SAVE_MS, &why) < 0) {
		log_info("template not saved: %s", gantry_error_str(why));
		gantry_error_free(&why);
		return 0;
	}
	template_commit(m->template);
	machine_checkpoint_go(m, -1, -1);
	return 0;
}

int machine_wait_ready(struct machine *m, int timeout_ms, gantry_error_t *err)
{
	int r;

	if (m->template) {
		r = agent_wait_configured(m->agent, timeout_ms, m->template_config,
					  m->template->tmp ? template_hello : NULL, m,
					  &m->template_renewed, err);
	} else if (m->cfg.restore_state_fd > 0) {
		size_t n;
		char **shares = machine_share_tokens(m, &n);
		/* A new egress worker's CA: the guest trusts it in place of the old. */
		cleanup_free char *ca = m->egress.ca_pem ? egress_ca_cmdline(m->egress.ca_pem) : NULL;

		r = agent_wait_renewed(m->agent, timeout_ms, m->renew_hostname, shares, n, ca, err);
		strv_free(shares);
	} else {
		r = agent_wait_ready(m->agent, timeout_ms, NULL, err);
	}
	if (r == 0) {
		/* The guest has its one control connection: later dials find nobody. */
		doors_shut(m->doors, PROTO_CONTROL_PORT);
		return 0;
	}
	if (atomic_load(&m->ended)) {
		machine_join(m);
		if (m->rc < 0) {
			gantry_error_free(err);
			return gantry_error(err, 0, "%s", gantry_error_str(m->err));
		}
	}
	return -1;
}

void machine_kill(struct machine *m)
{
	uint64_t one = 1;

	if (m->cfg.stop_fd >= 0)
		(void)!write(m->cfg.stop_fd, &one, sizeof(one));
}

void machine_save_stop(struct machine *m)
{
	uint64_t save = VMM_STOP_SAVE;

	if (m->cfg.stop_fd >= 0)
		(void)!write(m->cfg.stop_fd, &save, sizeof(save));
}

void machine_worker_gone(struct machine *m, const char *role, const char *how,
			 const char *meaning)
{
	if (m->workers_gone == NULL)
		m->workers_gone = json_object();
	json_object_set_new(m->workers_gone, role, json_sprintf("exited (%s): %s", how, meaning));
	if (m->isolation_path)
		machine_isolation_save(m);
}

void machine_join(struct machine *m)
{
	if (!m->started)
		return;
	pthread_join(m->thread, NULL);
	m->started = false;
}

void machine_free(struct machine *m)
{
	if (m->started) {
		machine_kill(m);
		machine_join(m);
	}
	/* A one-shot VM's disks are read-only and its guest's state goes
	 * with it: the CLI exits while the worker is still tearing down. A
	 * sandbox's writable layer is free again only once it is gone. */
	vmm_worker_stop(&m->vmm_worker, !m->transient);
	if (m->share_started)
		share_worker_stop(&m->share_worker);
	m->share_started = false;
	if (m->net_started)
		net_worker_stop(&m->net_worker);
	egress_worker_stop(&m->egress);
	strv_free(m->inject_hosts);
	strv_free(m->inject_files);
	free(m->egress_log);
	/* The VM and its device's workers are gone: nothing calls it now. */
	machine_shares_free(m);
	strv_free(m->ports);
	free(m->template_config);
	json_decref(m->net_policy);
	free(m->proxy);
	free(m->net_log);
	free(m->isolation_path);
	json_decref(m->workers_gone);
	if (m->agent)
		agent_free(m->agent);
	if (m->cfg.stop_fd >= 0)
		close(m->cfg.stop_fd);
	if (m->done_fd >= 0)
		close(m->done_fd);
	if (m->ckpt_fd >= 0)
		close(m->ckpt_fd);
	if (m->ckpt_go_fd >= 0)
		close(m->ckpt_go_fd);
	if (m->freeze_fd >= 0)
		close(m->freeze_fd);
	gantry_error_free(&m->err);
	free((char *)m->cfg.console);
	free(m->kernel);
	free(m->sysroot);
	*m = MACHINE_NONE;
}
