/* Snapshots of sandboxes (see snapshots.h). */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/files.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "sandbox/ctl.h"
#include "sandbox/lifecycle.h"
#include "sandbox/network.h"
#include "sandbox/rwlayer.h"
#include "sandbox/secrets.h"
#include "sandbox/snapseal.h"
#include "sandbox/snapshots.h"
#include "sandbox/spawn.h"
#include "sandbox/state.h"
#include "snapshot/files.h"

#define SNAP_META    "snapshot.json"
#define SNAP_CONFIG  SANDBOX_JSON
#define SNAP_META_MAX (64 * 1024)
/* The VM saved and its writable layer copied, the copy a sparse one where
 * the filesystem cannot reflink. */
#define SNAPSHOT_WAIT_MS (10 * 60 * 1000)

static int snapshots_dir(const char *snap, char **out, gantry_error_t *err)
{
	cleanup_free char *home = NULL;

	if (snap && !sandbox_name_valid(snap))
		return gantry_error(err, 0,
				    "snapshot name `%.64s`: want 1 to %d of A-Z a-z 0-9 . _ -, not "
				    "starting with -",
				    snap, SANDBOX_NAME_MAX);
	if (gantry_home(&home, err) < 0)
		return -1;
	if (snap)
		xasprintf(out, "%s/%s/%s", home, SNAPSHOTS_SUBDIR, snap);
	else
		xasprintf(out, "%s/%s", home, SNAPSHOTS_SUBDIR);
	return 0;
}

int sandbox_snapshot_copy(const char *from, const char *to, gantry_error_t *err)
{
	cleanup_close int in = open(from, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	cleanup_close int out = -1;
	cleanup_free char *tmp = NULL;
	struct timespec times[2];
	struct stat st;
	off_t at = 0, hole;

	if (in < 0 || fstat(in, &st) < 0)
		return gantry_error_errno(err, "`%s`", from);
	if (!S_ISREG(st.st_mode))
		return gantry_error(err, 0, "`%s` is not a file", from);
	xasprintf(&tmp, "%s.new", to);
	unlink(tmp);
	out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return gantry_error_errno(err, "%s", tmp);
	if (ioctl(out, FICLONE, in) < 0) {
		if (ftruncate(out, st.st_size) < 0)
			goto fail;
		while (at < st.st_size && (at = lseek(in, at, SEEK_DATA)) >= 0) {
			if ((hole = lseek(in, at, SEEK_HOLE)) < 0)
				goto fail;
			while (at < hole) {
				loff_t src = at, dst = at;
				ssize_t n = copy_file_range(in, &src, out, &dst, (size_t)(hole - at), 0);

				if (n <= 0)
					goto fail;
				at += n;
			}
		}
		if (at < 0 && errno != ENXIO)
			goto fail;
	}
	times[0] = st.st_atim;
	times[1] = st.st_mtim;
	if (futimens(out, times) < 0 || fsync(out) < 0 || rename(tmp, to) < 0)
		goto fail;
	return 0;
fail:
	gantry_error_errno(err, "copy `%s` to `%s`", from, to);
	unlink(tmp);
	return -1;
}

/* The save's files from one directory into another: hard links (a save
 * is never written in place), else copies. */
static int link_save(const char *from, const char *to, gantry_error_t *err)
{
	static const char *const names[] = { SNAP_STATE, SNAP_MEMORY, SNAP_ORIGIN };

	if (mkdir(to, 0700) < 0 && errno != EEXIST)
		return gantry_error_errno(err, "%s", to);
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		cleanup_free char *a = NULL, *b = NULL;

		xasprintf(&a, "%s/%s", from, names[i]);
		xasprintf(&b, "%s/%s", to, names[i]);
		if (link(a, b) == 0)
			continue;
		if (errno != EXDEV && errno != EPERM)
			return gantry_error_errno(err, "%s", b);
		if (sandbox_snapshot_copy(a, b, err) < 0)
			return -1;
	}
	return 0;
}

static json_t *meta_json(const char *snap, const struct sandbox *sb, const char *created)
{
	return json_pack("{s:s,s:s,s:s,s:s?,s:s?,s:I,s:I,s:b,s:o}", "name", snap, "source",
			 sb->name, "created", created, "image", sb->image, "image_digest",
			 sb->image_digest, "cpus", (json_int_t)sb->cpus, "mem_mib",
			 (json_int_t)sb->mem_mib, "net", sb->net, "shares",
			 jsonh_from_strv(sb->shares, sb->nr_shares));
}

/* The seal of the snapshot's configuration, beside it in dir: a clone
 * takes that configuration only from this home (snapseal.h). */
static int seal_write(const char *dir, const char *config, size_t len, gantry_error_t *err)
{
	cleanup_free char *path = NULL;
	char hex[SNAP_SEAL_HEX + 1];

	xasprintf(&path, "%s/%s", dir, SNAP_SEAL);
	if (snap_seal_make(config, len, hex, err) < 0 ||
	    write_file_new(path, hex, SNAP_SEAL_HEX, 0600, err) < 0)
		return gantry_error_prefix(err, "seal");
	return 0;
}

/* The sandbox's supervisor saves it live into tmp (its VM's save and
 * writable layer); its configuration and snapshot.json join them, and tmp
 * is renamed into place whole. */
static int snapshot_write(const char *dir, const struct sandbox *sb, const char *snap,
			  bool with_secrets, const char *tmp, const char *sdir, gantry_error_t *err)
{
	cleanup_free char *path = NULL, *text = NULL, *config = NULL, *created = NULL;
	cleanup_close int fd = -1;
	json_t *req = json_pack("{s:s,s:s,s:b}", "op", CTL_OP_SNAPSHOT, "dir", tmp, "secrets",
				with_secrets),
	       *meta;
	size_t len;
	int r;

	if (!sandbox_is_running(dir)) {
		json_decref(req);
		return gantry_error(err, 0, "it is not running");
	}
	r = ctl_connect(dir, &fd, err);
	if (r == 0)
		r = ctl_request(fd, req, SNAPSHOT_WAIT_MS, NULL, err);
	json_decref(req);
	if (r < 0)
		return -1;
	xasprintf(&path, "%s/%s", dir, SANDBOX_JSON);
	if (read_file_max(path, SNAP_META_MAX, &config, &len, err) < 0)
		return -1;
	if (config == NULL)
		return gantry_error(err, ENOENT, "%s", path);
	free(path);
	xasprintf(&path, "%s/%s", tmp, SNAP_CONFIG);
	if (write_file_new(path, config, len, 0600, err) < 0)
		return -1;
	if (seal_write(tmp, config, len, err) < 0)
		return -1;
	sandbox_time_now(&created);
	meta = meta_json(snap, sb, created);
	text = json_dumps(meta, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(meta);
	free(path);
	xasprintf(&path, "%s/%s", tmp, SNAP_META);
	if (text == NULL || write_file_new(path, text, strlen(text), 0600, err) < 0)
		return -1;
	if (rename(tmp, sdir) < 0)
		return gantry_error_errno(err, "snapshot `%s`", snap);
	return 0;
}

int sandbox_snapshot_take(const char *name, const char *as, bool with_secrets, char **made,
			  gantry_error_t *err)
{
	cleanup_free char *dir = NULL, *sdir = NULL, *def = NULL, *parent = NULL, *tmp = NULL;
	struct sandbox sb = { 0 };
	struct stat st;
	int r = -1;

	if (as == NULL) {
		char stamp[32];
		time_t now = time(NULL);
		struct tm tm;

		gmtime_r(&now, &tm);
		strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm);
		xasprintf(&def, "%.40s-%s", name, stamp);
		as = def;
	}
	if (snapshots_dir(as, &sdir, err) < 0 || !sandbox_name_valid(name) ||
	    sandbox_dir(name, &dir, err) < 0)
		return *err ? -1 : gantry_error(err, 0, "`%.64s` is no sandbox name", name);
	if (lstat(sdir, &st) == 0)
		return gantry_error(err, 0, "snapshot `%s` exists (gantry snapshot rm %s)", as, as);
	if (stat(dir, &st) < 0)
		return gantry_error(err, 0, "no sandbox `%s`", name);
	if (sandbox_load(dir, &sb, err) < 0)
		return gantry_error_prefix(err, "sandbox `%s`", name);
	if (sb.transient) {
		gantry_error(err, 0, "a one-shot exec is not saved");
		goto out;
	}
	if (!sb.writable) {
		gantry_error(err, 0, "sandbox `%s` has no writable layer to snapshot", name);
		goto out;
	}
	if (snapshots_dir(NULL, &parent, err) < 0 || mkdir_p(parent, err) < 0)
		goto out;
	xasprintf(&tmp, "%s/~new-XXXXXX", parent);
	if (mkdtemp(tmp) == NULL) {
		gantry_error_errno(err, "create a directory in `%s`", parent);
		goto out;
	}
	r = snapshot_write(dir, &sb, as, with_secrets, tmp, sdir, err);
	if (r < 0)
		rm_tree(tmp);
	if (r == 0 && made)
		*made = xstrdup(as);
out:
	sandbox_free(&sb);
	return r < 0 ? gantry_error_prefix(err, "snapshot `%s`", name) : 0;
}

json_t *sandbox_snapshot_inspect(const char *snap, gantry_error_t *err)
{
	cleanup_free char *sdir = NULL, *path = NULL, *text = NULL;
	json_error_t jerr;
	size_t len;
	json_t *j;

	if (snapshots_dir(snap, &sdir, err) < 0)
		return NULL;
	xasprintf(&path, "%s/%s", sdir, SNAP_META);
	if (read_file_max(path, SNAP_META_MAX, &text, &len, err) < 0)
		return NULL;
	if (text == NULL) {
		gantry_error(err, 0, "no snapshot `%s`", snap);
		return NULL;
	}
	j = json_loadb(text, len, 0, &jerr);
	if (!json_is_object(j)) {
		json_decref(j);
		gantry_error(err, 0, "snapshot `%s`: %s does not read", snap, SNAP_META);
		return NULL;
	}
	json_object_set_new(j, "path", json_string(sdir));
	return j;
}

int sandbox_snapshot_list(json_t **out, gantry_error_t *err)
{
	cleanup_free char *parent = NULL;
	char **names = NULL;
	size_t n = 0;

	*out = json_array();
	if (snapshots_dir(NULL, &parent, err) < 0 || sandbox_names_in(parent, &names, &n, err) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		gantry_error_t why = NULL;
		json_t *j = sandbox_snapshot_inspect(names[i], &why);

		if (j == NULL)
			j = json_pack("{s:s,s:s}", "name", names[i], "error", gantry_error_str(why));
		gantry_error_free(&why);
		json_array_append_new(*out, j);
	}
	strv_free(names);
	return 0;
}

int sandbox_snapshot_remove(const char *snap, gantry_error_t *err)
{
	cleanup_free char *sdir = NULL, *tmp = NULL;
	struct stat st;

	if (snapshots_dir(snap, &sdir, err) < 0)
		return -1;
	if (lstat(sdir, &st) < 0 || !S_ISDIR(st.st_mode))
		return gantry_error(err, ENOENT, "no snapshot `%s`", snap);
	/* Out of the name first: a listing never shows half of it. */
	xasprintf(&tmp, "%s.~del-%d", sdir, (int)getpid());
	if (rename(sdir, tmp) < 0)
		return gantry_error_errno(err, "remove snapshot `%s`", snap);
	rm_tree(tmp);
	return 0;
}

/* The clone's sandbox.json: the snapshot's, as name, with its own layer
 * and ports, being created by us. */
static int clone_describe(struct sandbox *sb, const char *name, char *const *ports, size_t nr,
			  gantry_error_t *err)
{
	free(sb->name);
	sb->name = xstrdup(name);
	free(sb->rwlayer);
	sb->rwlayer = NULL;
	sb->rwlayer_managed = true;
	if (sandbox_rwlayer_default(name, &sb->rwlayer, err) < 0)
		return -1;
	strv_free(sb->ports);
	sb->ports = NULL;
	sb->nr_ports = 0;
	for (size_t i = 0; i < nr; i++)
		if (ports_add(&sb->ports, &sb->nr_ports, ports[i], err) < 0)
			return -1;
	if (ports_pick(sb->ports, sb->nr_ports, err) < 0)
		return -1;
	free(sb->reason);
	sb->reason = NULL;
	free(sb->created);
	sandbox_time_now(&sb->created);
	sb->state = SANDBOX_CREATING;
	sb->pid = (long)getpid();
	return 0;
}

int sandbox_start_from(const char *name, const char *snap, char *const *ports, size_t nr_ports,
		       sandbox_env_fn env, const struct gantry_cancel *cancel, gantry_error_t *err)
{
	cleanup_free char *sdir = NULL, *dir = NULL, *layer = NULL, *pause = NULL;
	struct secret_store *secrets = NULL;
	struct sandbox sb = { 0 };
	bool claimed = false, layer_made = false;
	struct stat st;

	if (!sandbox_name_valid(name))
		return gantry_error(err, 0, "`%.64s` is no sandbox name", name);
	if (snapshots_dir(snap, &sdir, err) < 0 || sandbox_dir(name, &dir, err) < 0)
		return -1;
	if (stat(dir, &st) == 0)
		return gantry_error(err, 0, "sandbox name `%s` is taken", name);
	if (lstat(sdir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		gantry_error(err, 0, "no snapshot `%s`", snap);
		goto fail;
	}
	if (snap_seal_check(sdir, SNAP_CONFIG, SNAP_META_MAX, err) < 0 ||
	    sandbox_load(sdir, &sb, err) < 0 || clone_describe(&sb, name, ports, nr_ports, err) < 0)
		goto fail;
	if (access(sb.image_path, R_OK) < 0) {
		gantry_error_errno(err, "its image `%s`", sb.image_path);
		goto fail;
	}
	/* Saved -with-secrets: their values from the environment again. */
	if (sandbox_secrets_from_env(&sb, env, &secrets, err) < 0)
		goto fail;
	if (sandbox_dirs_make(err) < 0 || sandbox_claim(&sb, dir, NULL, err) != 0)
		goto fail;
	claimed = true;
	xasprintf(&layer, "%s/%s", sdir, SNAPSHOT_LAYER);
	xasprintf(&pause, "%s/%s", dir, SANDBOX_PAUSE);
	if (sandbox_snapshot_copy(layer, sb.rwlayer, err) < 0)
		goto fail;
	layer_made = true;
	if (rwlayer_pair(sb.rwlayer, sandbox_image_id(&sb), true, err) < 0 ||
	    link_save(sdir, pause, err) < 0 || supervisor_spawn(name, dir, secrets, cancel, err) < 0)
		goto fail;
	sandbox_secrets_free(&secrets);
	sandbox_free(&sb);
	return 0;
fail:
	if (layer_made)
		rwlayer_remove(sb.rwlayer);
	if (claimed)
		rm_tree(dir);
	sandbox_secrets_free(&secrets);
	sandbox_free(&sb);
	return gantry_error_prefix(err, "start `%s` from snapshot `%s`", name, snap);
}

int sandbox_exec_from(const char *snap, const char *name, char *const *ports, size_t nr_ports,
		      sandbox_env_fn env, const struct sandbox_process_opts *po,
		      const struct sandbox_stdio *io,
		      const struct gantry_cancel *cancel, struct agent_result *res,
		      gantry_error_t *err)
{
	cleanup_free char *made = name ? NULL : sandbox_oneshot_name();
	gantry_error_t why = NULL;
	int r;

	memset(res, 0, sizeof(*res));
	if (made)
		name = made;
	if (sandbox_start_from(name, snap, ports, nr_ports, env, cancel, err) < 0)
		return -1;
	r = sandbox_exec(name, po, io, cancel, res, err);
	if (sandbox_delete(name, true, &why) < 0) {
		log_warn("exec from snapshot `%s`: sandbox `%s` is left (gantry delete %s): %s",
			 snap, name, name, gantry_error_str(why));
		gantry_error_free(&why);
	}
	return r;
}

int sandbox_fork(const char *name, unsigned int n, const char *prefix, bool with_secrets,
		 sandbox_env_fn env, unsigned int *started, gantry_error_t *err)
{
	cleanup_free char *def = NULL, *snap = NULL;
	pid_t pids[FORK_MAX];
	unsigned int ok = 0;

	*started = 0;
	if (n == 0 || n > FORK_MAX)
		return gantry_error_opt(err, "n", " %u: want 1 to %d clones", n, FORK_MAX);
	if (prefix == NULL) {
		xasprintf(&def, "%.50s-fork", name);
		prefix = def;
	}
	if (strlen(prefix) + 4 > SANDBOX_NAME_MAX || !sandbox_name_valid(prefix))
		return gantry_error_opt(err, "prefix",
					" `%.64s`: not a name that takes -N after it", prefix);
	if (sandbox_snapshot_take(name, prefix, with_secrets, &snap, err) < 0)
		return -1;
	/* Each clone in a process of its own, all at once. */
	for (unsigned int i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			gantry_error_t why = NULL;
			char clone[SANDBOX_NAME_MAX + 1];

			snprintf(clone, sizeof(clone), "%s-%u", prefix, i + 1);
			if (sandbox_start_from(clone, snap, NULL, 0, env, NULL, &why) < 0) {
				log_error("%s", gantry_error_str(why));
				_exit(1);
			}
			_exit(0);
		}
	}
	for (unsigned int i = 0; i < n; i++) {
		int status = 0;

		if (pids[i] < 0)
			continue;
		while (waitpid(pids[i], &status, 0) < 0 && errno == EINTR)
			;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			ok++;
	}
	*started = ok;
	if (ok < n)
		return gantry_error(err, 0, "%u of %u clones of `%s` started (snapshot `%s`)", ok,
				    n, name, snap);
	return 0;
}
