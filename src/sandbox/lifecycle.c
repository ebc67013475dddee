/* The sandbox lifecycle (see lifecycle.h): options, create, resume,
 * exec, and looking at sandboxes; stop, pause and delete are teardown.c's. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/files.h"
#include "common/assets.h"
#include "common/util.h"
#include "common/json.h"
#include "image/source.h"
#include "sandbox/ctl.h"
#include "sandbox/lifecycle.h"
#include "sandbox/lifecycle_priv.h"
#include "snapshot/files.h"
#include "sandbox/network.h"
#include "sandbox/process.h"
#include "sandbox/rwlayer.h"
#include "sandbox/secrets.h"
#include "sandbox/spawn.h"
#include "machine/vmm.h"

#define SANDBOX_LOG_TAIL 20 /* lines of a log quoted by a failed first boot */

/* A one-shot's entry whose process is gone (killed): nothing of it is
 * worth keeping. Removed under its lock, so a racing look finds it whole
 * or not at all. */
bool lifecycle_oneshot_gone(const char *name, const char *dir)
{
	cleanup_close int lock = -1;

	if (sandbox_lock(dir, true, &lock, NULL) != 1)
		return false;
	sandbox_dir_remove(name, dir, NULL);
	return true;
}

/* A one-shot's live state: running while its process holds the lock
 * (true), else removed (false). */
static bool oneshot_live(const char *name, const char *dir, struct sandbox *sb)
{
	if (!sandbox_is_running(dir) && lifecycle_oneshot_gone(name, dir))
		return false;
	sb->state = SANDBOX_RUNNING;
	return true;
}

/* The sandbox's directory and state, checked to exist; stale leftovers of
 * a supervisor that died are cleaned up. A running one-shot exec's entry
 * is opened only with oneshot_ok (to look at it, stop or delete it); a
 * dead one's is removed and counts as none. */
int lifecycle_open_as(const char *name, bool oneshot_ok, char **dir, struct sandbox *sb,
		      gantry_error_t *err)
{
	if (sandbox_name_check(name, err) < 0 || sandbox_dir(name, dir, err) < 0)
		return -1;
	if (sandbox_load(*dir, sb, err) < 0) {
		if (*err && (*err)->status == ENOENT) {
			gantry_error_free(err);
			return gantry_error(err, 0, "no sandbox named `%s` (see gantry ls)", name);
		}
		return -1;
	}
	if (sb->transient) {
		if (!oneshot_live(name, *dir, sb)) {
			sandbox_free(sb);
			return gantry_error(err, 0, "no sandbox named `%s` (see gantry ls)", name);
		}
		if (!oneshot_ok && sandbox_refuse_oneshot(sb, err) < 0) {
			sandbox_free(sb);
			return -1;
		}
		return 0;
	}
	if (!sandbox_is_running(*dir))
		sandbox_cleanup_stale(*dir, sb);
	return 0;
}

int sandbox_refuse_oneshot(const struct sandbox *sb, gantry_error_t *err)
{
	if (!sb->transient)
		return 0;
	return gantry_error(err, 0,
			    "sandbox `%s` is a one-shot exec (process %ld): it runs its one "
			    "command and is gone when that ends (gantry stop %s ends it)",
			    sb->name, sb->pid, sb->name);
}

/* Refuse a layer another VM holds, or one paired with another image. */
static int rwlayer_check(const struct sandbox *sb, gantry_error_t *err)
{
	if (!sb->writable)
		return 0;
	if (rwlayer_in_use(sb->rwlayer))
		return gantry_error(err, 0, "writable layer `%s` is in use by a running sandbox",
				    sb->rwlayer);
	return rwlayer_pair(sb->rwlayer, sandbox_image_id(sb), false, err);
}

/* A hostname gantry-init takes from the kernel command line: letters,
 * digits, '-' and '.', at most 63, neither starting nor ending with '-' or
 * '.'; nothing that would split the command line. */
static bool hostname_valid(const char *h)
{
	size_t n = strlen(h);

	return n > 0 && n <= 63 &&
	       strspn(h, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-.") == n &&
	       !strchr("-.", h[0]) && !strchr("-.", h[n - 1]);
}

static int validate_opts(const struct sandbox_opts *o, gantry_error_t *err)
{
	if (sandbox_name_check(o->name, err) < 0 || sandbox_opts_resources(o, err) < 0)
		return -1;
	if (o->hostname && !hostname_valid(o->hostname))
		return gantry_error_opt(err, "hostname",
					" `%.64s`: want letters, digits, '-' and '.', at most 63",
					o->hostname);
	if (o->disk_mib < RWLAYER_MIN_MIB || o->disk_mib > RWLAYER_MAX_MIB)
		return gantry_error_opt(err, "disk_mib", " %llu: want %d to %d MiB",
					(unsigned long long)o->disk_mib, RWLAYER_MIN_MIB,
					RWLAYER_MAX_MIB);
	if (o->root && (o->image || o->writable))
		return gantry_error_opt(err, "root", " takes the place of an image and its writable "
						     "layer");
	if (o->nr_shares && !o->writable && !o->root)
		return gantry_error_opt(err, "shares", " needs a writable root (this one is read-only)");
	if (o->rwlayer && !o->writable)
		return gantry_error_opt(err, "rwlayer",
					" needs a writable root (this one is read-only)");
	if (o->rwlayer && *o->rwlayer == '\0')
		return gantry_error_opt(err, "rwlayer", ": empty path");
	if (o->nr_ports && !o->net)
		return gantry_error_opt(err, "ports", " needs a network (this sandbox has none)");
	return 0;
}

/* The user's -rwlayer as an absolute path (its directory must exist). */
static int rwlayer_abs(const char *path, char **out, gantry_error_t *err)
{
	cleanup_free char *copy = xstrdup(path), *dir = NULL;
	char *slash = strrchr(copy, '/');
	const char *base = slash ? slash + 1 : copy;
	char real[PATH_MAX];

	if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
		return gantry_error_opt(err, "rwlayer", " `%s`: not a file name", path);
	if (slash == copy)
		dir = xstrdup("/");
	else if (slash) {
		*slash = '\0';
		dir = xstrdup(copy);
	} else {
		dir = xstrdup(".");
	}
	if (realpath(dir, real) == NULL)
		return gantry_error_opt(err, "rwlayer", " `%s`: %s", path, strerror(errno));
	xasprintf(out, "%s%s%s", real, strcmp(real, "/") ? "/" : "", base);
	return 0;
}

/* A -rwlayer among the layers Gantry manages (itself, or through a link)
 * could be removed by the sandbox that layer belongs to. */
static int rwlayer_outside_managed(const char *path, const char *given, gantry_error_t *err)
{
	cleanup_free char *home = NULL, *managed = NULL;
	char real[PATH_MAX], mreal[PATH_MAX];
	const char *p = realpath(path, real) ? real : path;
	size_t n;

	if (gantry_home(&home, err) < 0)
		return -1;
	xasprintf(&managed, "%s/%s", home, RWLAYERS_SUBDIR);
	if (realpath(managed, mreal) == NULL)
		return 0;
	n = strlen(mreal);
	if (strncmp(p, mreal, n) == 0 && (p[n] == '/' || p[n] == '\0'))
		return gantry_error_opt(err, "rwlayer",
					" `%s` is in `%s`, where Gantry keeps the layers it "
					"manages: use a path outside it",
					given, mreal);
	return 0;
}

void sandbox_opts_init(struct sandbox_opts *o)
{
	*o = (struct sandbox_opts){ .cpus = SANDBOX_DEFAULT_CPUS,
				    .mem_mib = VMM_DEFAULT_MEM,
				    .disk_mib = RWLAYER_DEFAULT_MIB,
				    .writable = true,
				    .net = true };
}

int sandbox_image_resolve(const char *src, int progress_fd, const struct gantry_cancel *cancel,
			  struct image *img, gantry_error_t *err)
{
	/* A pull that start or exec makes shows its layers as image pull
	 * does, on the caller's terminal only. */
	const struct image_resolve_opts o = { .progress_fd = progress_fd, .cancel = cancel };
	cleanup_free char *default_image = NULL;

	if (src == NULL) {
		if (assets_path(ASSET_DEFAULT_IMAGE, &default_image, err) < 0)
			return -1;
		src = default_image;
	}
	return image_resolve_with(src, &o, img, err);
}

static int describe(const struct sandbox_opts *o, const struct gantry_cancel *cancel,
		    struct sandbox *sb, gantry_error_t *err)
{
	struct image img = { 0 };
	struct stat st;

	if (o->root) {
		char real[PATH_MAX];

		if (realpath(o->root, real) == NULL)
			return gantry_error_errno(err, "root `%s`", o->root);
		sb->root = xstrdup(real);
		sb->root_readonly = o->root_readonly;
		sb->image = xstrdup(real);
	} else {
		if (sandbox_image_resolve(o->image, o->progress_fd, cancel, &img, err) < 0)
			return -1;
		sb->image = xstrdup(o->image ? o->image : "(built-in)");
		sb->image_digest = steal_pointer(&img.digest);
		sb->image_path = steal_pointer(&img.path);
		sb->config = steal_pointer(&img.config);
		image_free(&img);
	}
	sb->name = xstrdup(o->name);
	if (o->hostname)
		sb->hostname = xstrdup(o->hostname);
	/* -e, -w, -u, -entrypoint: the sandbox's own, over its image's. */
	if (sandbox_process_apply(&sb->config, &o->process, err) < 0)
		return -1;
	sb->cpus = o->cpus;
	sb->mem_mib = o->mem_mib;
	sb->disk_mib = o->disk_mib;
	sb->writable = o->writable;
	sb->oauth_custody = o->oauth_custody != NULL;
	if (sb->oauth_custody && o->oauth_providers)
		sb->oauth_providers = xstrdup(o->oauth_providers);
	if (sandbox_opts_net(o, sb, err) < 0 || sandbox_secrets_describe(o->secrets, sb, err) < 0)
		return -1;
	/* Stored as chosen, so the next boot forwards the same port. */
	if (ports_pick(sb->ports, sb->nr_ports, err) < 0)
		return -1;
	sb->state = SANDBOX_CREATING;
	sb->pid = (long)getpid(); /* the creator, until its supervisor runs */
	sandbox_time_now(&sb->created);
	if (o->writable && o->rwlayer) {
		if (rwlayer_abs(o->rwlayer, &sb->rwlayer, err) < 0 ||
		    rwlayer_outside_managed(sb->rwlayer, o->rwlayer, err) < 0)
			return -1;
		if (stat(sb->rwlayer, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
			return gantry_error_opt(err, "rwlayer", " `%s` is not a file", o->rwlayer);
	} else if (o->writable) {
		sb->rwlayer_managed = true;
		if (sandbox_rwlayer_default(o->name, &sb->rwlayer, err) < 0)
			return -1;
	}
	return 0;
}

/* Append the last lines of the log a failed first boot's error points to
 * (the console's when it names it, else the supervisor's), each on a line
 * of its own: the directory holding them is about to be removed. */
static void error_add_log_tail(gantry_error_t *err, const char *dir)
{
	cleanup_free char *path = NULL, *header = NULL;
	const char *log;

	if (err == NULL || *err == NULL)
		return;
	log = strstr(gantry_error_str(*err), SANDBOX_CONSOLE) ? SANDBOX_CONSOLE : SANDBOX_LOG;
	xasprintf(&path, "%s/%s", dir, log);
	xasprintf(&header, "last lines of its %s (removed with it):", log);
	error_add_tail(err, path, SANDBOX_LOG_TAIL, header);
}

/* *created: whether this call made the layer file (then it is ours to
 * remove should the start fail). */
static int prepare_rwlayer(struct sandbox *sb, bool *created, gantry_error_t *err)
{
	struct stat st;

	if (!sb->writable)
		return 0;
	if (!sb->rwlayer_managed && stat(sb->rwlayer, &st) == 0) {
		if (rwlayer_in_use(sb->rwlayer))
			return gantry_error(err, 0,
					    "writable layer `%s` is in use by a running sandbox",
					    sb->rwlayer);
		return rwlayer_pair(sb->rwlayer, sandbox_image_id(sb), false, err);
	}
	/* Ours, or the user's not made yet. A managed one left by a crash
	 * while creating belongs to us now: we hold the name. */
	if (sb->rwlayer_managed)
		rwlayer_remove(sb->rwlayer);
	if (rwlayer_create(sb->rwlayer, sb->disk_mib, err) < 0)
		return -1;
	*created = true;
	return rwlayer_pair(sb->rwlayer, sandbox_image_id(sb), true, err);
}

int sandbox_create(const struct sandbox_opts *o, const struct gantry_cancel *cancel,
		   gantry_error_t *err)
{
	cleanup_free char *dir = NULL;
	struct sandbox sb = { 0 };
	bool claimed = false, layer_made = false, spawned = false;
	struct stat st;

	if (validate_opts(o, err) < 0 || sandbox_dir(o->name, &dir, err) < 0)
		return -1;
	if (stat(dir, &st) == 0)
		return gantry_error(err, 0,
				    "sandbox name `%s` is taken: it exists (gantry resume %s, or "
				    "gantry delete %s)",
				    o->name, o->name, o->name);
	if (cancel_check(cancel, err) < 0 || sandbox_dirs_make(err) < 0 ||
	    describe(o, cancel, &sb, err) < 0 || cancel_check(cancel, err) < 0)
		goto fail;
	{
		/* The VM's limits are checked before anything is made. */
		struct vmm_config cfg = { .cpus = (unsigned int)sb.cpus, .mem_mib = sb.mem_mib };
		cleanup_free char *kernel = NULL;

		if (assets_path(ASSET_KERNEL, &kernel, err) < 0)
			goto fail;
		cfg.kernel = kernel;
		if (vmm_validate(&cfg, err) < 0)
			goto fail;
	}
	if (sandbox_claim(&sb, dir, NULL, err) != 0)
		goto fail;
	claimed = true;
	/* "creating" (with our pid) until the supervisor saves "running": a
	 * delete meanwhile is refused. */
	if (prepare_rwlayer(&sb, &layer_made, err) < 0 || cancel_check(cancel, err) < 0)
		goto fail;
	spawned = true;
	if (supervisor_spawn(sb.name, dir, o->secrets, cancel, err) < 0)
		goto fail;
	sandbox_free(&sb);
	return 0;
fail:
	if (claimed) {
		/* The logs the error points to go with the directory: quote them
		 * (a cancel is the caller's doing, not the logs'). */
		if (spawned && !cancel_fired(cancel))
			error_add_log_tail(err, dir);
		if (layer_made)
			rwlayer_remove(sb.rwlayer);
		rm_tree(dir);
	}
	sandbox_free(&sb);
	return gantry_error_prefix(err, "start `%s`", o->name);
}

/* Whether a `gantry start` is still making this sandbox. */
bool lifecycle_creator_alive(const struct sandbox *sb)
{
	if (sb->state != SANDBOX_CREATING || sb->pid <= 0 || sb->pid == (long)getpid())
		return false;
	return kill((pid_t)sb->pid, 0) == 0 || errno == EPERM;
}

int sandbox_resume(const char *name, sandbox_env_fn env, const struct gantry_cancel *cancel,
		   gantry_error_t *err)
{
	cleanup_free char *dir = NULL;
	struct secret_store *secrets = NULL;
	struct sandbox sb = { 0 };
	int r = -1;

	if (lifecycle_open_as(name, false, &dir, &sb, err) < 0)
		return -1;
	if (sandbox_is_running(dir)) {
		gantry_error(err, 0, "sandbox `%s` is already running", name);
		goto out;
	}
	if (sb.state == SANDBOX_CREATING) {
		if (lifecycle_creator_alive(&sb))
			gantry_error(err, 0, "sandbox `%s` is still being created", name);
		else
			gantry_error(err, 0,
				     "sandbox `%s` was never fully created (its start was "
				     "interrupted): gantry delete %s",
				     name, name);
		goto out;
	}
	if (access(sb.root ? sb.root : sb.image_path, R_OK) < 0) {
		gantry_error_errno(err, "its %s `%s`", sb.root ? "root" : "image",
				   sb.root ? sb.root : sb.image_path);
		goto out;
	}
	if (rwlayer_check(&sb, err) < 0 || sandbox_secrets_from_env(&sb, env, &secrets, err) < 0)
		goto out;
	if (supervisor_spawn(name, dir, secrets, cancel, err) < 0) {
		if (sandbox_saved(dir))
			gantry_error_prefix(err, "its save (stop -snapshot) did not restore, and is "
						 "kept (gantry resume -fresh %s boots it afresh)",
					    name);
		goto out;
	}
	r = 0;
out:
	sandbox_secrets_free(&secrets);
	sandbox_free(&sb);
	return r < 0 ? gantry_error_prefix(err, "resume `%s`", name) : 0;
}

static void live_state(const char *dir, struct sandbox *sb)
{
	cleanup_free char *frozen = NULL;

	if (sandbox_is_running(dir))
		sb->state = SANDBOX_RUNNING;
	else
		sandbox_cleanup_stale(dir, sb);
	if (sb->state != SANDBOX_RUNNING)
		sb->pid = 0;
	xasprintf(&frozen, "%s/%s", dir, SANDBOX_FROZEN);
	sb->paused = sb->state == SANDBOX_RUNNING && access(frozen, F_OK) == 0;
}

int sandbox_open_locked(const char *name, struct sandbox *sb, char **dir, int *lock,
			gantry_error_t *err)
{
	struct sandbox now;
	int r;

	*lock = -1;
	if (lifecycle_open_as(name, false, dir, sb, err) < 0)
		return -1;
	live_state(*dir, sb);
	r = sandbox_lock(*dir, true, lock, err);
	if (r < 0)
		return -1;
	if (r == 1) {
		/* Stopped, and stays so while we hold it: its file as it is now. */
		if (sandbox_load(*dir, &now, err) < 0)
			return -1;
		sandbox_free(sb);
		*sb = now;
	}
	return 0;
}

int sandbox_request(const char *name, const char *dir, json_t *req, int timeout_ms,
		    json_t **reply, gantry_error_t *err)
{
	cleanup_close int fd = -1;
	int r;

	r = ctl_connect(dir, &fd, err);
	if (r == 0)
		r = ctl_request(fd, req, timeout_ms, reply, err);
	json_decref(req);
	if (r < 0)
		return gantry_error_prefix(err, "sandbox `%s`", name);
	return 0;
}

int sandbox_inspect(const char *name, struct sandbox *sb, char **dir, gantry_error_t *err)
{
	if (lifecycle_open_as(name, true, dir, sb, err) < 0)
		return -1;
	if (!sb->transient)
		live_state(*dir, sb);
	return 0;
}

int sandbox_list(struct sandbox **out, size_t *n, gantry_error_t *err)
{
	char **dirs, **names;
	size_t ndirs;

	*out = NULL;
	*n = 0;
	if (sandbox_dirs_list(&dirs, &names, &ndirs, err) < 0)
		return -1;
	*out = xzalloc((ndirs ? ndirs : 1) * sizeof(**out));
	for (size_t i = 0; i < ndirs; i++) {
		struct sandbox *sb = &(*out)[*n];
		gantry_error_t why = NULL;

		if (sandbox_load(dirs[i], sb, &why) == 0) {
			if (!sb->transient) {
				live_state(dirs[i], sb);
			} else if (!oneshot_live(names[i], dirs[i], sb)) {
				sandbox_free(sb);
				continue;
			}
			(*n)++;
		} else if (why && why->status != ENOENT) {
			/* Listed, with why: delete --force is the way out. */
			sandbox_free(sb);
			*sb = (struct sandbox){ .name = xstrdup(names[i]),
						.state = SANDBOX_BROKEN,
						.reason = xstrdup(gantry_error_str(why)) };
			(*n)++;
		} /* else being created or deleted */
		gantry_error_free(&why);
	}
	strv_free(dirs);
	strv_free(names);
	return 0;
}

void sandbox_list_free(struct sandbox *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sandbox_free(&v[i]);
	free(v);
}

int sandbox_exec(const char *name, const struct sandbox_process_opts *po,
		 const struct sandbox_stdio *io, const struct gantry_cancel *cancel,
		 struct agent_result *res, gantry_error_t *err)
{
	cleanup_free char *dir = NULL;
	struct sandbox sb = { 0 };
	struct sandbox_process sp = { 0 };
	struct sandbox_process_opts as_given;
	struct agent *a = NULL;
	json_t *req;
	int fd = -1, r = -1;

	memset(res, 0, sizeof(*res));
	/* As docker exec and the reference: a command runs as given, the
	 * container's Entrypoint not before it; none runs Entrypoint and Cmd
	 * (else /bin/sh). -entrypoint still puts one before it. */
	if (po && po->nargs > 0 && po->entrypoint == NULL) {
		as_given = *po;
		as_given.entrypoint = "";
		po = &as_given;
	}
	if (lifecycle_open_as(name, false, &dir, &sb, err) < 0)
		return -1;
	if (!sandbox_is_running(dir)) {
		gantry_error(err, 0, "sandbox `%s` is %s (gantry resume %s)", name,
			     sb.state == SANDBOX_CRASHED ? "not running: it crashed" : "stopped",
			     name);
		goto out;
	}
	if (sandbox_process_init(&sp, sb.config, po, &sb, io, err) < 0)
		goto out;
	/* A session with secrets of its own says so: a live snapshot would
	 * write their values to disk with the guest's memory. */
	req = json_pack("{s:s,s:b}", "op", CTL_OP_EXEC, "secrets", po && po->secrets);
	r = ctl_connect(dir, &fd, err);
	if (r == 0)
		r = ctl_request(fd, req, 30000, NULL, err);
	json_decref(req);
	if (r < 0) {
		gantry_error_prefix(err, "sandbox `%s`", name);
		goto out;
	}
	r = -1;
	if (agent_attach(fd, &a, err) < 0)
		goto out;
	fd = -1;
	/* A cancel hangs up: the supervisor sends the process SIGHUP. */
	agent_watch_cancel(a, cancel_fd(cancel));
	r = sandbox_process_run(a, &sp, io, res, err);
out:
	if (fd >= 0)
		close(fd);
	agent_free(a);
	sandbox_process_free(&sp);
	sandbox_free(&sb);
	return r;
}
