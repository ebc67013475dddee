/* sandbox.json, names, paths and the lifetime lock (see state.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "common/files.h"
#include "common/json.h"
#include "common/text.h"
#include "common/util.h"
#include "net/policy.h"
#include "net/portspec.h"
#include "net/proxy.h"
#include "share/spec.h"
#include "secret/store.h"
#include "sandbox/state.h"
#include "snapshot/files.h"

#define SANDBOX_JSON_MAX  (4u << 20)
#define SANDBOX_PORTS_MAX 256 /* PORTS_MAX (network.h) */

/* What the supervisor and the VMM leave in the directory while running
 * (the guest's dials come through doors, common/door.h). */
static const char *const run_sockets[] = { SANDBOX_CTL, "vsock.sock" };

static const char *const state_names[] = {
	[SANDBOX_CREATING] = "creating",
	[SANDBOX_RUNNING] = "running",
	[SANDBOX_STOPPED] = "stopped",
	[SANDBOX_CRASHED] = "crashed",
	[SANDBOX_BROKEN] = "broken",
};

bool sandbox_name_valid(const char *name)
{
	size_t n = strlen(name);

	/* A leading '-' would read as a flag to every command taking NAME. */
	if (n == 0 || n > SANDBOX_NAME_MAX || name[0] == '-' || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0)
		return false;
	return strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
	       n;
}

int sandbox_name_check(const char *name, gantry_error_t *err)
{
	cleanup_free char *shown = NULL;

	if (sandbox_name_valid(name))
		return 0;
	/* Quote at most a line's worth, safe for a terminal. */
	shown = text_sanitized(name, strlen(name), SANDBOX_NAME_MAX + 4);
	if (name[0] == '-')
		return gantry_error_usage(
			err, "invalid sandbox name `%s`: names may not start with '-'", shown);
	return gantry_error_usage(err,
				  "invalid sandbox name `%s`: use 1 to %d of A-Z a-z 0-9 . _ - "
				  "(not . or .., no leading -)",
				  shown, SANDBOX_NAME_MAX);
}

const char *sandbox_state_name(enum sandbox_state s)
{
	return (unsigned)s < ARRAY_SIZE(state_names) ? state_names[s] : "unknown";
}

int sandbox_tmpfs_parse(const char *spec, struct sandbox_tmpfs *t, gantry_error_t *err)
{
	const char *p = spec;
	char *end;

	*t = (struct sandbox_tmpfs){ 0 };
	for (; *p && *p != ':'; p++) {
		if (*p == 'r')
			t->ro = true;
		else if (*p == 'x')
			t->noexec = true;
		else if (*p != '-')
			break;
	}
	if (*p != ':' || p == spec)
		goto bad;
	errno = 0;
	t->size_kib = strtoull(p + 1, &end, 10);
	if (errno || end == p + 1 || *end != ':' || t->size_kib > (1ULL << 40))
		goto bad;
	p = end + 1;
	t->mode = (unsigned int)strtoul(p, &end, 8);
	if (end == p || *end != ':' || t->mode > 07777)
		goto bad;
	t->path = end + 1;
	if (t->path[0] != '/' || t->path[1] == '\0' || strlen(t->path) > 4095 ||
	    strstr(t->path, "/../") || strcmp(t->path + strlen(t->path) - 3, "/..") == 0 ||
	    strchr(t->path, '\n'))
		goto bad;
	return 0;
bad:
	return gantry_error(err, 0, "tmpfs `%.64s`: want FLAGS:SIZE_KIB:MODE:/PATH", spec);
}

const char *sandbox_shown_state(const struct sandbox *sb)
{
	return sb->state == SANDBOX_RUNNING && sb->paused ? "paused" : sandbox_state_name(sb->state);
}

static int state_parse(const char *s, enum sandbox_state *out)
{
	for (size_t i = 0; i < ARRAY_SIZE(state_names); i++) {
		if (strcmp(s, state_names[i]) == 0) {
			*out = (enum sandbox_state)i;
			return 0;
		}
	}
	return -1;
}

int sandbox_dir(const char *name, char **out, gantry_error_t *err)
{
	cleanup_free char *home = NULL;

	if (gantry_home(&home, err) < 0)
		return -1;
	if (name)
		xasprintf(out, "%s/%s/%s", home, SANDBOXES_SUBDIR, name);
	else
		xasprintf(out, "%s/%s", home, SANDBOXES_SUBDIR);
	return 0;
}

int sandbox_rwlayer_default(const char *name, char **out, gantry_error_t *err)
{
	cleanup_free char *home = NULL;

	if (gantry_home(&home, err) < 0)
		return -1;
	xasprintf(out, "%s/%s/%s.ext4", home, RWLAYERS_SUBDIR, name);
	return 0;
}

void sandbox_time_now(char **out)
{
	char buf[32];
	time_t t = time(NULL);
	struct tm tm;

	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
	*out = xstrdup(buf);
}

int sandbox_dir_remove(const char *name, const char *dir, gantry_error_t *err)
{
	cleanup_free char *parent = NULL, *tmp = NULL;

	if (sandbox_dir(NULL, &parent, err) < 0)
		return -1;
	xasprintf(&tmp, "%s/~del-%s-%d", parent, name, (int)getpid());
	if (rename(dir, tmp) < 0)
		return gantry_error_errno(err, "remove `%s`", dir);
	rm_tree(tmp);
	return 0;
}

static int by_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int sandbox_names_in(const char *parent, char ***names, size_t *n, gantry_error_t *err)
{
	char **v = NULL;
	struct dirent *e;
	size_t cap = 0;
	DIR *d;

	*n = 0;
	*names = NULL;
	d = opendir(parent);
	if (d == NULL && errno != ENOENT)
		return gantry_error_errno(err, "open `%s`", parent);
	while (d && (e = readdir(d)) != NULL) {
		/* Not "." or "..", nor one being created or deleted (~...). */
		if (!sandbox_name_valid(e->d_name))
			continue;
		if (*n + 1 >= cap) {
			cap = cap ? 2 * cap : 8;
			v = xrealloc(v, cap * sizeof(*v));
		}
		v[(*n)++] = xstrdup(e->d_name);
	}
	if (d)
		closedir(d);
	if (*n)
		qsort(v, *n, sizeof(*v), by_str);
	if (v)
		v[*n] = NULL;
	*names = v ? v : xzalloc(sizeof(*v));
	return 0;
}

int sandbox_dirs_list(char ***dirs, char ***names, size_t *n, gantry_error_t *err)
{
	cleanup_free char *parent = NULL;
	char **v;

	*n = 0;
	if (dirs)
		*dirs = NULL;
	if (names)
		*names = NULL;
	if (sandbox_dir(NULL, &parent, err) < 0 || sandbox_names_in(parent, &v, n, err) < 0)
		return -1;
	if (dirs) {
		*dirs = xzalloc((*n + 1) * sizeof(**dirs));
		for (size_t i = 0; i < *n; i++)
			xasprintf(&(*dirs)[i], "%s/%s", parent, v[i]);
	}
	if (names)
		*names = v;
	else
		strv_free(v);
	return 0;
}

bool sandbox_saved(const char *dir)
{
	cleanup_free char *pause = NULL;

	xasprintf(&pause, "%s/%s", dir, SANDBOX_PAUSE);
	return snap_exists(pause);
}

int sandbox_dirs_make(gantry_error_t *err)
{
	cleanup_free char *home = NULL, *a = NULL, *b = NULL;

	if (gantry_home(&home, err) < 0)
		return -1;
	xasprintf(&a, "%s/%s", home, SANDBOXES_SUBDIR);
	xasprintf(&b, "%s/%s", home, RWLAYERS_SUBDIR);
	if (mkdir_p(a, err) < 0 || mkdir_p(b, err) < 0)
		return -1;
	return 0;
}

const char *sandbox_image_id(const struct sandbox *sb)
{
	return sb->image_digest ? sb->image_digest : sb->image_path;
}

void sandbox_free(struct sandbox *sb)
{
	free(sb->name);
	free(sb->image);
	free(sb->image_digest);
	free(sb->image_path);
	free(sb->hostname);
	if (sb->config) {
		image_config_free(sb->config);
		free(sb->config);
	}
	free(sb->rwlayer);
	free(sb->created);
	free(sb->reason);
	free(sb->oauth_providers);
	sandbox_transient_free(sb);
	memset(sb, 0, sizeof(*sb));
}

void sandbox_transient_free(struct sandbox *sb)
{
	strv_free(sb->secrets);
	sb->secrets = NULL;
	sb->nr_secrets = 0;
	strv_free(sb->shares);
	sb->shares = NULL;
	sb->nr_shares = 0;
	strv_free(sb->tmpfs);
	sb->tmpfs = NULL;
	sb->nr_tmpfs = 0;
	strv_free(sb->ports);
	json_decref(sb->net_policy);
	free(sb->proxy);
	free(sb->no_proxy);
	sb->ports = NULL;
	sb->nr_ports = 0;
	sb->net_policy = NULL;
	sb->proxy = sb->no_proxy = NULL;
	free(sb->root);
	sb->root = NULL;
	strv_free(sb->sockets);
	sb->sockets = NULL;
	sb->nr_sockets = 0;
	free(sb->mcp_fs);
	sb->mcp_fs = NULL;
}

/* The file may have been edited: each port is checked and stored as its
 * canonical spec, with a host port chosen. */
static int ports_canonical(struct sandbox *sb, gantry_error_t *err)
{
	for (size_t i = 0; i < sb->nr_ports; i++) {
		char buf[PORT_SPEC_MAX];
		struct port_spec p;

		if (port_spec_parse(sb->ports[i], &p, err) < 0)
			return gantry_error_prefix(err, "field `ports`");
		if (p.host_port == 0)
			return gantry_error(err, 0, "field `ports`: `%s` has no host port",
					    sb->ports[i]);
		port_spec_format(&p, buf);
		free(sb->ports[i]);
		sb->ports[i] = xstrdup(buf);
	}
	if (sb->nr_ports && !sb->net)
		return gantry_error(err, 0, "field `ports`: published ports without a network");
	return 0;
}

/* The network fields a sandbox.json may have: each checked as strictly as
 * the flags that set them. */
static int net_fields(json_t *j, struct sandbox *sb, gantry_error_t *err)
{
	json_t *pj = json_object_get(j, "net_policy");
	struct net_proxy proxy;
	struct policy *p;

	if (pj && !json_is_null(pj)) {
		if (policy_from_json(pj, &p, err) < 0)
			return gantry_error_prefix(err, "field `net_policy`");
		sb->net_policy = policy_to_json(p);
		policy_free(p);
	}
	sb->allow_local_net = json_is_true(json_object_get(j, "allow_local_net"));
	sb->proxy_enforce = json_is_true(json_object_get(j, "proxy_enforce"));
	/* Absent in older files: auto, as for a new sandbox. */
	sb->isolation = CONFINE_AUTO;
	if (json_is_string(json_object_get(j, "process_isolation")) &&
	    confine_mode_parse(json_string_value(json_object_get(j, "process_isolation")),
			       &sb->isolation, err) < 0)
		return gantry_error_prefix(err, "field `process_isolation`");
	if (jsonh_string(j, "proxy", false, &sb->proxy, err) < 0 ||
	    jsonh_string(j, "no_proxy", false, &sb->no_proxy, err) < 0)
		return -1;
	if (sb->proxy && net_proxy_parse(sb->proxy, &proxy, err) < 0)
		return gantry_error_prefix(err, "field `proxy`");
	if (sb->no_proxy && net_no_proxy_check(sb->no_proxy, err) < 0)
		return gantry_error_prefix(err, "field `no_proxy`");
	if (sb->proxy_enforce && !sb->proxy)
		return gantry_error(err, 0, "field `proxy_enforce` without a proxy");
	return 0;
}

/* Shares as stored: each checked and kept in its canonical form; a tag
 * or container path twice is an error as it is for -share. */
static int shares_field(json_t *j, struct sandbox *sb, gantry_error_t *err)
{
	char **v = NULL;
	size_t n = 0;

	if (jsonh_strv(j, "shares", SHARES_MAX, &v, &n, err) < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (shares_add(&sb->shares, &sb->nr_shares, v[i], NULL, err) < 0) {
			strv_free(v);
			return gantry_error_prefix(err, "field `shares`");
		}
	strv_free(v);
	if (sb->nr_shares && !sb->writable && !sb->root && !sb->transient)
		return gantry_error(err, 0, "field `shares`: shares need a writable root");
	return 0;
}

/* tmpfs mounts as stored: each one that parses. */
static int tmpfs_field(json_t *j, struct sandbox *sb, gantry_error_t *err)
{
	struct sandbox_tmpfs t;

	if (jsonh_strv(j, "tmpfs", SANDBOX_TMPFS_MAX, &sb->tmpfs, &sb->nr_tmpfs, err) < 0)
		return -1;
	for (size_t i = 0; i < sb->nr_tmpfs; i++)
		if (sandbox_tmpfs_parse(sb->tmpfs[i], &t, err) < 0)
			return gantry_error_prefix(err, "field `tmpfs`");
	return 0;
}

/* Secrets as stored: specs that parse, each name once, no value. */
static int secrets_field(json_t *j, struct sandbox *sb, gantry_error_t *err)
{
	if (jsonh_strv(j, "secrets", SECRETS_MAX, &sb->secrets, &sb->nr_secrets, err) < 0)
		return -1;
	for (size_t i = 0; i < sb->nr_secrets; i++) {
		struct secret_spec s;

		if (secret_spec_parse(sb->secrets[i], &s, err) < 0)
			return gantry_error_prefix(err, "field `secrets`");
		for (size_t k = 0; k < i; k++)
			if (secret_spec_name_len(sb->secrets[k]) == strlen(s.name) &&
			    strncmp(sb->secrets[k], s.name, strlen(s.name)) == 0) {
				secret_spec_free(&s);
				return gantry_error(err, 0, "field `secrets`: `%s` twice", s.name);
			}
		secret_spec_free(&s);
	}
	return 0;
}

int sandbox_load(const char *dir, struct sandbox *sb, gantry_error_t *err)
{
	cleanup_free char *path = NULL, *buf = NULL, *state = NULL;
	size_t len;
	json_t *j, *cfg;
	int ret = -1;

	memset(sb, 0, sizeof(*sb));
	xasprintf(&path, "%s/%s", dir, SANDBOX_JSON);
	if (read_file_max(path, SANDBOX_JSON_MAX, &buf, &len, err) < 0)
		return -1;
	if (buf == NULL)
		return gantry_error(err, ENOENT, "`%s`", path);
	j = jsonh_load(buf, len, path, err);
	if (j == NULL)
		return -1;
	if (jsonh_string(j, "name", true, &sb->name, err) < 0 ||
	    jsonh_string(j, "image", true, &sb->image, err) < 0 ||
	    jsonh_string(j, "image_digest", false, &sb->image_digest, err) < 0 ||
	    jsonh_string(j, "image_path", false, &sb->image_path, err) < 0 ||
	    jsonh_string(j, "root", false, &sb->root, err) < 0 ||
	    jsonh_string(j, "hostname", false, &sb->hostname, err) < 0 ||
	    jsonh_string(j, "rwlayer", false, &sb->rwlayer, err) < 0 ||
	    jsonh_string(j, "created", false, &sb->created, err) < 0 ||
	    jsonh_string(j, "state", true, &state, err) < 0 ||
	    jsonh_string(j, "reason", false, &sb->reason, err) < 0 ||
	    jsonh_u64(j, "cpus", true, &sb->cpus, err) < 0 ||
	    jsonh_u64(j, "mem_mib", true, &sb->mem_mib, err) < 0 ||
	    jsonh_u64(j, "disk_mib", true, &sb->disk_mib, err) < 0)
		goto out;
	if (state_parse(state, &sb->state) < 0) {
		gantry_error(err, 0, "field `state`: unknown state");
		goto out;
	}
	sb->writable = json_is_true(json_object_get(j, "writable"));
	sb->root_readonly = sb->root && json_is_true(json_object_get(j, "root_readonly"));
	sb->transient = json_is_true(json_object_get(j, "oneshot"));
	sb->rwlayer_managed = json_is_true(json_object_get(j, "rwlayer_managed"));
	sb->pid = (long)json_integer_value(json_object_get(j, "pid"));
	/* Sandboxes made before guest networking had it on, like new ones. */
	sb->net = !json_is_false(json_object_get(j, "net"));
	if (jsonh_strv(j, "ports", SANDBOX_PORTS_MAX, &sb->ports, &sb->nr_ports, err) < 0 ||
	    ports_canonical(sb, err) < 0 || net_fields(j, sb, err) < 0 ||
	    shares_field(j, sb, err) < 0 || tmpfs_field(j, sb, err) < 0 ||
	    secrets_field(j, sb, err) < 0)
		goto out;
	if (sb->writable && sb->rwlayer == NULL) {
		gantry_error(err, 0, "writable without a field `rwlayer`");
		goto out;
	}
	sb->oauth_custody = json_is_true(json_object_get(j, "oauth_custody"));
	if (jsonh_string(j, "oauth_providers", false, &sb->oauth_providers, err) < 0)
		goto out;
	if (sb->oauth_providers && (!sb->oauth_custody || sb->oauth_providers[0] != '/')) {
		gantry_error(err, 0, "field `oauth_providers`: an absolute path, with custody");
		goto out;
	}
	if ((sb->image_path == NULL) == (sb->root == NULL)) {
		gantry_error(err, 0, "want one of the fields `image_path` and `root`");
		goto out;
	}
	cfg = json_object_get(j, "image_config");
	if (cfg && !json_is_null(cfg)) {
		sb->config = xzalloc(sizeof(*sb->config));
		if (image_config_from_json(cfg, sb->config, err) < 0)
			goto out;
	}
	ret = 0;
out:
	json_decref(j);
	if (ret < 0) {
		sandbox_free(sb);
		gantry_error_prefix(err, "`%s`", path);
	}
	return ret;
}

static void set_str(json_t *j, const char *key, const char *v)
{
	if (v)
		json_object_set_new(j, key, json_string(v));
}

/* durable: synced to disk, as a persistent sandbox's must be; a one-shot's
 * record ends with its process and is only renamed into place. */
static int save(const char *dir, const struct sandbox *sb, bool durable, gantry_error_t *err)
{
	cleanup_free char *path = NULL, *text = NULL;
	json_t *j = json_object();
	int r;

	set_str(j, "name", sb->name);
	set_str(j, "image", sb->image);
	set_str(j, "image_digest", sb->image_digest);
	set_str(j, "image_path", sb->image_path);
	set_str(j, "root", sb->root);
	set_str(j, "hostname", sb->hostname);
	json_object_set_new(j, "image_config",
			    sb->config ? image_config_to_json(sb->config) : json_null());
	json_object_set_new(j, "cpus", json_integer((json_int_t)sb->cpus));
	json_object_set_new(j, "mem_mib", json_integer((json_int_t)sb->mem_mib));
	json_object_set_new(j, "disk_mib", json_integer((json_int_t)sb->disk_mib));
	json_object_set_new(j, "writable", json_boolean(sb->writable));
	if (sb->root)
		json_object_set_new(j, "root_readonly", json_boolean(sb->root_readonly));
	set_str(j, "rwlayer", sb->rwlayer);
	json_object_set_new(j, "rwlayer_managed", json_boolean(sb->rwlayer_managed));
	set_str(j, "created", sb->created);
	set_str(j, "state", sandbox_state_name(sb->state));
	set_str(j, "reason", sb->reason);
	if (sb->pid > 0)
		json_object_set_new(j, "pid", json_integer(sb->pid));
	json_object_set_new(j, "net", json_boolean(sb->net));
	json_object_set_new(j, "ports", jsonh_from_strv(sb->ports, sb->nr_ports));
	json_object_set(j, "net_policy", sb->net_policy ? sb->net_policy : json_null());
	json_object_set_new(j, "allow_local_net", json_boolean(sb->allow_local_net));
	set_str(j, "proxy", sb->proxy);
	set_str(j, "no_proxy", sb->no_proxy);
	json_object_set_new(j, "proxy_enforce", json_boolean(sb->proxy_enforce));
	json_object_set_new(j, "process_isolation", json_string(confine_mode_name(sb->isolation)));
	json_object_set_new(j, "shares", jsonh_from_strv(sb->shares, sb->nr_shares));
	if (sb->nr_tmpfs)
		json_object_set_new(j, "tmpfs", jsonh_from_strv(sb->tmpfs, sb->nr_tmpfs));
	if (sb->nr_secrets)
		json_object_set_new(j, "secrets", jsonh_from_strv(sb->secrets, sb->nr_secrets));
	if (sb->transient)
		json_object_set_new(j, "oneshot", json_true());
	if (sb->oauth_custody) {
		json_object_set_new(j, "oauth_custody", json_true());
		set_str(j, "oauth_providers", sb->oauth_providers);
	}
	text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(j);
	if (text == NULL)
		return gantry_error(err, ENOMEM, "encode `%s`", SANDBOX_JSON);
	xasprintf(&path, "%s/%s", dir, SANDBOX_JSON);
	if (durable)
		r = write_file_atomic(path, text, strlen(text), 0600, err);
	else
		r = write_file_new(path, text, strlen(text), 0600, err);
	return r;
}

int sandbox_save(const char *dir, const struct sandbox *sb, gantry_error_t *err)
{
	return save(dir, sb, true, err);
}

int sandbox_claim(const struct sandbox *sb, const char *dir, int *lock, gantry_error_t *err)
{
	cleanup_free char *parent = NULL, *tmp = NULL;
	cleanup_close int fd = -1;

	if (lock)
		*lock = -1;
	if (sandbox_dir(NULL, &parent, err) < 0)
		return -1;
	/* '~' is not allowed in names: listing never shows it. */
	xasprintf(&tmp, "%s/~new-XXXXXX", parent);
	if (mkdtemp(tmp) == NULL)
		return gantry_error_errno(err, "create a directory in `%s`", parent);
	if (save(tmp, sb, !sb->transient, err) < 0 ||
	    (lock && sandbox_lock(tmp, true, &fd, err) != 1)) {
		rm_tree(tmp);
		return -1;
	}
	if (rename(tmp, dir) < 0) {
		int e = errno;

		rm_tree(tmp);
		if (e == EEXIST || e == ENOTEMPTY) {
			gantry_error(err, 0, "sandbox name `%s` is taken", sb->name);
			return 1;
		}
		errno = e;
		return gantry_error_errno(err, "create `%s`", dir);
	}
	if (lock)
		*lock = steal_fd(&fd);
	return 0;
}

int sandbox_lock(const char *dir, bool exclusive, int *fd, gantry_error_t *err)
{
	cleanup_free char *path = NULL;
	cleanup_close int lfd = -1;

	*fd = -1;
	xasprintf(&path, "%s/%s", dir, SANDBOX_LOCK);
	lfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lfd < 0)
		return gantry_error_errno(err, "open `%s`", path);
	if (flock(lfd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK)
			return 0;
		return gantry_error_errno(err, "lock `%s`", path);
	}
	*fd = steal_fd(&lfd);
	return 1;
}

bool sandbox_is_running(const char *dir)
{
	int fd, r = sandbox_lock(dir, false, &fd, NULL);

	if (r == 1)
		close(fd);
	return r == 0;
}

/* Other commands hold the lock only a moment (to look, or to remove). */
#define SANDBOX_LOOK_WAIT_MS 250

void sandbox_cleanup_stale(const char *dir, struct sandbox *sb)
{
	struct timespec pause = { .tv_nsec = 10 * 1000000L };
	cleanup_close int fd = -1;
	struct sandbox now;
	int r;

	for (int waited = 0;; waited += 10) {
		r = sandbox_lock(dir, true, &fd, NULL);
		if (r != 0 || waited >= SANDBOX_LOOK_WAIT_MS)
			break;
		nanosleep(&pause, NULL);
	}
	if (r == 0) {
		/* A supervisor holds it: running, or booting (a resume). */
		sb->state = SANDBOX_RUNNING;
		return;
	}
	if (r < 0)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(run_sockets); i++) {
		cleanup_free char *p = NULL;

		xasprintf(&p, "%s/%s", dir, run_sockets[i]);
		unlink(p);
	}
	/* The supervisor may have written "stopped" after sb was read. */
	if (sandbox_load(dir, &now, NULL) == 0) {
		sandbox_free(sb);
		*sb = now;
	}
	if (sb->state != SANDBOX_RUNNING)
		return;
	sb->state = SANDBOX_CRASHED;
	sb->pid = 0;
	free(sb->reason);
	sb->reason = xstrdup("its supervisor ended without stopping it (killed?)");
	sandbox_save(dir, sb, NULL);
}
