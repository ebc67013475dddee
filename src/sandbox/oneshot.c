/* One-shot `gantry exec` (see lifecycle.h): a transient sandbox, its VM
 * on a thread of this process, one session, and nothing left behind. While
 * it runs it has an entry among the sandboxes, so `ls` lists it and `stop`
 * ends it; the entry is its run directory too, so `logs -console` reads
 * its guest's console. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/door.h"
#include "common/files.h"
#include "common/log.h"
#include "common/util.h"
#include "image/source.h"
#include "mcp/gateway.h"
#include "sandbox/lifecycle.h"
#include "sandbox/oneshot_broker.h"
#include "sandbox/oneshot_oauth.h"
#include "share/spec.h"
#include "sandbox/oneshot_sockets.h"
#include "common/json.h"
#include "sandbox/machine.h"
#include "sandbox/network.h"
#include "sandbox/process.h"
#include "sandbox/secrets.h"
#include "sandbox/template.h"

#define ONESHOT_READY_TIMEOUT 120000
#define ONESHOT_CONSOLE_TAIL  20
#define ONESHOT_NAME_TRIES    8

/* A one-shot's entry among the sandboxes, and where its VM keeps its
 * sockets and logs: the entry itself, or a private directory in /tmp. */
struct oneshot_dir {
	char *entry, *name; /* NULL: not listed */
	int lock;
	char *run;
	bool run_own; /* run is not the entry: removed on its own */
};

char *sandbox_oneshot_name(void)
{
	unsigned char r[4] = { 0 };
	char *name;

	if (getrandom(r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		xasprintf(&name, "exec-%08x", (unsigned)getpid() ^ (unsigned)now_ms());
	else
		xasprintf(&name, "exec-%02x%02x%02x%02x", r[0], r[1], r[2], r[3]);
	return name;
}

/* Its entry among the sandboxes, sb (borrowed fields) as what ls shows,
 * locked as a running supervisor's is. A name given must be free; a name
 * made up is tried again when taken. */
static int oneshot_claim(const char *given, struct sandbox *sb, struct oneshot_dir *d,
			 gantry_error_t *err)
{
	int r = -1;

	for (int i = 0; i < ONESHOT_NAME_TRIES; i++) {
		cleanup_free char *name = given ? xstrdup(given) : sandbox_oneshot_name(), *dir = NULL;

		if (sandbox_dir(name, &dir, err) < 0)
			return -1;
		sb->name = name;
		r = sandbox_claim(sb, dir, &d->lock, err);
		sb->name = NULL;
		if (r == 0) {
			d->entry = steal_pointer(&dir);
			d->name = steal_pointer(&name);
			return 0;
		}
		if (given || r < 0 || i + 1 == ONESHOT_NAME_TRIES)
			break;
		gantry_error_free(err);
	}
	if (given && r == 1) {
		gantry_error_free(err);
		gantry_error(err, 0, "sandbox name `%s` is taken (gantry ls)", given);
		return gantry_error_as_conflict(err);
	}
	return -1;
}

/* The entry; where $GANTRY_HOME cannot hold one (read-only, say) and no
 * name was asked for, none. The run directory is the entry unless its
 * path is too long for a socket's (sun_path) or there is none. */
static int oneshot_dir_make(const struct sandbox_opts *o, struct sandbox *sb, struct oneshot_dir *d,
			    gantry_error_t *err)
{
	char tmp[] = "/tmp/gantry-exec.XXXXXX";

	*d = (struct oneshot_dir){ .lock = -1 };
	if (sandbox_dirs_make(err) < 0 || oneshot_claim(o->name, sb, d, err) < 0) {
		if (o->name)
			return -1;
		log_debug("exec: not listed: %s", gantry_error_str(*err));
		gantry_error_free(err);
	}
	if (d->entry && strlen(d->entry) + sizeof("/4294967295.sock") <=
				sizeof(((struct sockaddr_un *)0)->sun_path)) {
		d->run = d->entry;
		return 0;
	}
	if (mkdtemp(tmp) == NULL)
		return gantry_error_errno(err, "cannot create a run directory");
	d->run = xstrdup(tmp);
	d->run_own = true;
	return 0;
}

static void oneshot_dir_remove(struct oneshot_dir *d)
{
	if (d->run_own) {
		rm_tree(d->run);
		free(d->run);
	}
	/* Removed while still locked: nobody sees an entry without its process. */
	if (d->entry)
		sandbox_dir_remove(d->name, d->entry, NULL);
	if (d->lock >= 0)
		close(d->lock);
	free(d->entry);
	free(d->name);
	*d = (struct oneshot_dir){ .lock = -1 };
}

/* Its process's injected secrets' hosts, for its machine's egress worker
 * (its entry keeps no secret, not even a name). */
static int oneshot_inject(struct machine *m, struct secret_store *st, gantry_error_t *err)
{
	struct sandbox specs = { 0 };
	int r;

	if (st == NULL || !secret_store_has_injected(st))
		return 0;
	sandbox_secrets_describe(st, &specs, NULL);
	r = machine_inject(m, specs.secrets, specs.nr_secrets, err);
	strv_free(specs.secrets);
	return r;
}

/* Its egress worker, where it has injected secrets: their values, and
 * the bound hosts its policy lets it reach. Its events have no audit to
 * go to (a one-shot has none): the worker drops them. */
static int oneshot_egress(struct machine *m, const struct sandbox *sb, struct secret_store *st,
			  gantry_error_t *err)
{
	char **ok;
	size_t n = 0;
	int r;

	if (m->egress.pid < 0 || st == NULL)
		return 0;
	ok = xzalloc((m->nr_inject + 1) * sizeof(*ok));
	for (size_t i = 0; i < m->nr_inject; i++) {
		const char *why = NULL;

		if (sandbox_net_reaches(sb, m->inject_hosts[i], &why))
			ok[n++] = m->inject_hosts[i];
	}
	r = egress_worker_allowed(&m->egress, ok, sb->allow_local_net, err);
	free(ok);
	return r < 0 ? -1 : egress_worker_bindings(&m->egress, st, err);
}

/* The guest's last words, for an error that says the VM failed. */
static void error_add_console(gantry_error_t *err, const char *console, bool ended)
{
	if (ended) {
		cleanup_free char *msg = NULL;

		xasprintf(&msg, "%s\nthe VM ended before the command finished",
			  gantry_error_str(*err));
		gantry_error_free(err);
		gantry_error(err, 0, "%s", msg);
	}
	if (console)
		error_add_tail(err, console, ONESHOT_CONSOLE_TAIL,
			       "last lines of the guest console:");
}

/* The MCP gateway, confined as the sandbox's other workers are, its log
 * in the run directory. */
static int oneshot_mcp(struct mcp_gateway *g, const char *dir, struct doors *doors,
		       enum confine_mode mode, gantry_error_t *err)
{
	cleanup_free char *path = NULL;
	cleanup_close int log = -1;

	xasprintf(&path, "%s/%s", dir, MCP_WORKER_LOG);
	log = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (log < 0)
		return gantry_error_errno(err, "open `%s`", path);
	return mcp_gateway_open(g, doors, dir, mode, log, err);
}

/* Its machine made, started beside the run's services, and ready: from
 * the template where asked for (tpl, prepared when it is none). -3 when
 * the machine did not start, -2 when a service of the run's did not, -1
 * when its guest did not come up. */
static int oneshot_boot(struct machine *m, const struct sandbox *sb, const struct sandbox_opts *o,
			const struct sandbox_process_opts *po, const char *run, struct doors *doors,
			int console_fd, struct sandbox_template *tpl, struct oneshot_broker *broker,
			struct oneshot_sockets *relay, struct oneshot_oauth *oauth,
			const struct gantry_cancel *cancel, gantry_error_t *err)
{
	if (machine_config(m, sb, run, console_fd, doors, err) < 0 ||
	    oneshot_inject(m, po->secrets, err) < 0)
		return -2;
	if (o->template && tpl->dir == NULL)
		template_prepare(m, tpl);
	if (machine_start(m, err) < 0)
		return -3;
	if (oneshot_broker_run(broker, err) < 0 || oneshot_sockets_run(relay, err) < 0 ||
	    oneshot_oauth_run(oauth, err) < 0 || (o->mcp && mcp_gateway_run(o->mcp, err) < 0) ||
	    oneshot_egress(m, sb, po->secrets, err) < 0)
		return -2;
	agent_watch_cancel(m->agent, cancel_fd(cancel));
	return machine_wait_ready(m, ONESHOT_READY_TIMEOUT, err);
}

int sandbox_run_once(const struct sandbox_opts *o, bool show_console,
		     const struct sandbox_process_opts *po, const struct sandbox_stdio *io,
		     const struct gantry_cancel *cancel, struct agent_result *res,
		     gantry_error_t *err)
{
	struct oneshot_dir rundir = { .lock = -1 };
	struct sandbox sb = { .transient = true, .cpus = o->cpus, .mem_mib = o->mem_mib };
	cleanup_free char *created = NULL;
	struct machine m = MACHINE_NONE;
	struct image img = { 0 };
	struct sandbox_process proc = { 0 };
	struct oneshot_broker broker = { .acc = ACCEPTOR_NONE };
	struct oneshot_sockets relay = { .acc = ACCEPTOR_NONE };
	struct oneshot_oauth oauth = { .acc = ACCEPTOR_NONE, .lock = PTHREAD_MUTEX_INITIALIZER };
	struct sandbox_template tpl = TEMPLATE_NONE;
	struct doors doors = DOORS_INIT;
	struct sandbox_process_opts with = po ? *po : (struct sandbox_process_opts){ 0 };
	/* GANTRY_BOOT_TIMING milestones, ms from the start */
	double t0 = now_ms_frac(), t_image = 0, t_ready = 0, t_done = 0;
	int r = -1;

	memset(res, 0, sizeof(*res));
	/* The one-shot's secrets are its process's; those bound to hosts its
	 * broker serves. */
	if (with.secrets == NULL)
		with.secrets = o->secrets;
	with.serves_bound = true;
	po = &with;
	/* Every value checked before an image is pulled for it. */
	if ((o->name && sandbox_name_check(o->name, err) < 0) ||
	    sandbox_process_opts_check(po, err) < 0)
		return -1;
	if (sandbox_opts_net(o, &sb, err) < 0 || ports_pick(sb.ports, sb.nr_ports, err) < 0) {
		sandbox_transient_free(&sb);
		return -1;
	}
	if (o->mcp && o->mcp->fs) {
		cleanup_free char *root = share_b64url(o->mcp->fs_root);

		xasprintf(&sb.mcp_fs, "%s,%u,%u", root, o->mcp->fs_uid, o->mcp->fs_gid);
	}
	/* A port picked for the user is one they could not know otherwise. */
	for (size_t i = 0; i < sb.nr_ports; i++)
		if (strcmp(sb.ports[i], o->ports[i]) != 0)
			log_info("exec: publishing %s", sb.ports[i]);
	if (o->root) {
		/* A host directory is the root (gantry wrap's "/"): no image. */
		sb.root = realpath(o->root, NULL);
		if (sb.root == NULL) {
			gantry_error_errno(err, "root `%s`", o->root);
			sandbox_transient_free(&sb);
			return -1;
		}
		sb.root_readonly = o->root_readonly;
		sb.host_root = o->host_root;
	} else if (sandbox_image_resolve(o->image, o->progress_fd, cancel, &img, err) < 0) {
		sandbox_transient_free(&sb);
		return -1;
	}
	t_image = now_ms_frac() - t0;
	sb.image_path = img.path;
	if (cancel_check(cancel, err) < 0 ||
	    sandbox_process_init(&proc, img.config, po, &sb, io, err) < 0)
		goto out;
	/* What ls shows of it: the fields are borrowed, and given back below. */
	sb.image = (char *)(o->root ? o->root : o->image ? o->image : "(built-in)");
	sb.image_digest = img.digest;
	sb.config = img.config;
	sandbox_time_now(&created);
	sb.created = created;
	sb.state = SANDBOX_RUNNING;
	sb.pid = (long)getpid();
	r = oneshot_dir_make(o, &sb, &rundir, err);
	sb.image = sb.image_digest = sb.created = NULL;
	sb.config = NULL;
	if (r < 0)
		goto out;
	r = -1;
	if (oneshot_broker_start(&broker, &doors, po->secrets, &sb, err) < 0 ||
	    oneshot_sockets_start(&relay, &doors, sb.sockets, sb.nr_sockets, err) < 0 ||
	    oneshot_oauth_start(&oauth, rundir.run, &doors, sb.oauth_bridge, o->oauth_custody,
				err) < 0 ||
	    (o->mcp && oneshot_mcp(o->mcp, rundir.run, &doors, sb.isolation, err) < 0))
		goto out;
	/* A template the VM refuses is gone, and the run boots cold (writing
	 * it anew). */
	for (int tries = 0;; tries++) {
		r = oneshot_boot(&m, &sb, o, po, rundir.run, &doors, show_console ? io->err : -1,
				 &tpl, &broker, &relay, &oauth, cancel, err);
		/* Only the VM's failing to go on from it is the template's:
		 * not a run's own trouble once its guest took RENEW, nor one of
		 * its services (they fail the same cold). */
		if (r == 0 || !tpl.restore || tries > 0 || cancel_fired(cancel) ||
		    m.template_renewed || r == -2)
			break;
		log_info("from template `%s`: %s", tpl.dir, gantry_error_str(*err));
		machine_free(&m);
		m = MACHINE_NONE;
		template_discard(&tpl);
		template_free(&tpl);
		gantry_error_free(err);
	}
	if (r == -2 || r == -3) {
		r = -1;
		goto out;
	}
	if (r == 0)
		t_ready = now_ms_frac() - t0;
	r = -1;
	if (*err || sandbox_process_run(m.agent, &proc, io, res, err) < 0) {
		bool ended = atomic_load(&m.ended);

		/* A guest still up (not ready in time, or its agent broke) ends here. */
		machine_kill(&m);
		machine_join(&m);
		if (cancel_fired(cancel)) {
			gantry_error_free(err);
			cancel_check(cancel, err);
			goto out;
		}
		if (m.rc < 0) {
			gantry_error_free(err);
			gantry_error(err, 0, "%s", gantry_error_str(m.err));
		}
		error_add_console(err, show_console ? NULL : m.cfg.console, ended && m.rc >= 0);
		goto out;
	}
	t_done = now_ms_frac() - t0;
	/* The status and every byte of output are here, and the guest has
	 * nothing to save (both its disks are read-only; the container's
	 * writable layer is guest memory): end the VM now rather than wait for
	 * the guest to power itself off. */
	machine_kill(&m);
	r = 0;
out:
	machine_join(&m);
	oneshot_broker_stop(&broker);
	if (o->mcp)
		mcp_gateway_stop(o->mcp);
	oneshot_sockets_stop(&relay);
	oneshot_oauth_stop(&oauth);
	/* Its servers gone, so none waits on a door shut under it. */
	doors_free(&doors);
	if (m.cfg.timing && t_done > 0)
		log_always("exec: image ready %.1f ms, guest ready %.1f ms, command done %.1f ms, "
			   "VM gone %.1f ms",
			   t_image, t_ready, t_done, now_ms_frac() - t0);
	machine_free(&m);
	template_free(&tpl);
	oneshot_dir_remove(&rundir);
	sandbox_process_free(&proc);
	image_free(&img);
	sandbox_transient_free(&sb);
	return r;
}
