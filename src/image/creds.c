/* Registry credentials (see creds.h). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/files.h"
#include "common/json.h"
#include "common/settings.h"
#include "common/util.h"
#include "image/creds.h"
#include "image/reference.h"
#include "image/registry_host.h"
#include "proto/base64.h"

#define HELPER_PREFIX "docker-credential-"

extern char **environ;

void creds_free(struct registry_creds *c)
{
	if (c->pass)
		explicit_bzero(c->pass, strlen(c->pass));
	free(c->user);
	free(c->pass);
	free(c->source);
	*c = (struct registry_creds){ 0 };
}

char *creds_basic(const char *user, const char *pass)
{
	cleanup_free char *plain = NULL;
	size_t n;
	char *out;

	n = (size_t)xasprintf(&plain, "%s:%s", user, pass);
	out = xmalloc(b64_encoded_len(n, B64_PADDED) + 1);
	b64_encode(plain, n, out, B64_PADDED);
	explicit_bzero(plain, n);
	return out;
}

/* "user:pass" from base64; 0 on success. */
static int basic_decode(const char *b64, struct registry_creds *c)
{
	size_t n = strlen(b64);
	cleanup_free char *plain = NULL;
	char *colon;
	long len;

	if (n == 0 || n > INT_MAX / 2)
		return -1;
	plain = xmalloc(n / 4 * 3 + 1);
	len = b64_decode(b64, n, plain, n / 4 * 3, B64_PADDED);
	if (len < 0)
		return -1;
	plain[len] = '\0';
	colon = strchr(plain, ':');
	if (colon == NULL || (size_t)len != strlen(plain))
		return -1;
	*colon = '\0';
	c->user = xstrdup(plain);
	c->pass = xstrdup(colon + 1);
	explicit_bzero(plain, (size_t)len);
	return 0;
}

static char *docker_config_path(void)
{
	const char *dir = gantry_setting("DOCKER_CONFIG"), *home = gantry_setting("HOME");
	char *p;

	if (dir && *dir)
		xasprintf(&p, "%s/config.json", dir);
	else if (home && *home)
		xasprintf(&p, "%s/.docker/config.json", home);
	else
		return NULL;
	return p;
}

int creds_file(char **path, gantry_error_t *err)
{
	cleanup_free char *home = NULL;

	if (gantry_home(&home, err) < 0)
		return -1;
	xasprintf(path, "%s/%s", home, CREDS_FILE);
	return 0;
}

/* The JSON object in path, NULL when there is no file. */
static int load_json(const char *path, json_t **out, gantry_error_t *err)
{
	cleanup_free char *buf = NULL;
	size_t len;

	*out = NULL;
	if (path == NULL || read_file_max(path, CREDS_JSON_MAX, &buf, &len, err) < 0)
		return path ? -1 : 0;
	if (buf == NULL)
		return 0;
	*out = jsonh_load(buf, len, path, err);
	if (*out == NULL)
		return -1;
	if (!json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return gantry_error(err, 0, "`%s` is not a JSON object", path);
	}
	return 0;
}

/* The member of obj whose key names registry. */
static json_t *member_for(json_t *obj, const char *registry)
{
	const char *key;
	json_t *v;

	json_object_foreach(obj, key, v)
	{
		cleanup_free char *norm = registry_normalize(key);

		if (norm && strcmp(norm, registry) == 0)
			return v;
	}
	return NULL;
}

/* A helper's name is part of a program name looked up in PATH: no
 * slashes, nothing a shell or a path would read. */
static bool helper_name_valid(const char *name)
{
	if (*name == '\0' || strlen(name) > CREDS_HELPER_NAME_MAX)
		return false;
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '.' && *p != '_' && *p != '-')
			return false;
	return true;
}

/* The helper's output until EOF, CREDS_JSON_MAX bytes or the deadline;
 * false when the deadline passed. */
static bool helper_read(int fd, char *out, size_t *len, uint64_t deadline)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	ssize_t r;

	while (*len < CREDS_JSON_MAX) {
		uint64_t now = now_ms();

		if (now >= deadline)
			return false;
		r = poll(&pfd, 1, (int)(deadline - now));
		if (r == 0 || (r < 0 && errno == EINTR))
			continue;
		if (r < 0)
			return true;
		r = read(fd, out + *len, CREDS_JSON_MAX - *len);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			return true;
		*len += (size_t)r;
	}
	return true;
}

/* The helper's exit status, killing it once the deadline passes; false
 * when it had to be killed. */
static bool helper_wait(pid_t pid, int *status, uint64_t deadline)
{
	pid_t w;

	while ((w = waitpid(pid, status, WNOHANG)) == 0 && now_ms() < deadline) {
		struct timespec nap = { 0, 10 * 1000 * 1000 };

		nanosleep(&nap, NULL);
	}
	if (w == pid)
		return true;
	if (w == 0)
		kill(pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
	return w != 0;
}

/* Run a credential helper: `docker-credential-NAME get` with the server on
 * stdin, JSON on stdout, stderr to /dev/null (a helper may print what it
 * read). 1 with c filled, 0 when it has nothing, -1 on a bad name or a
 * helper that does not answer in time. */
static int helper_get(const char *name, const char *registry, struct registry_creds *c,
		      gantry_error_t *err)
{
	cleanup_free char *prog = NULL, *server = NULL, *out = NULL;
	int in[2], op[2], status;
	posix_spawn_file_actions_t fa;
	uint64_t deadline;
	bool in_time;
	char *argv[3];
	size_t len = 0;
	json_t *j;
	pid_t pid;
	ssize_t r;

	if (!helper_name_valid(name)) {
		gantry_error(err, 0,
			     "credential helper `%.64s`: a name of letters, digits, `.`, "
			     "`_` and `-` only",
			     name);
		return gantry_error_sanitize(err, 0);
	}
	xasprintf(&prog, HELPER_PREFIX "%s", name);
	server = xstrdup(strcmp(registry, REF_DOCKER_HUB) == 0 ? CREDS_HUB_KEY : registry);
	if (pipe2(in, O_CLOEXEC) < 0)
		return 0;
	if (pipe2(op, O_CLOEXEC) < 0) {
		close(in[0]);
		close(in[1]);
		return 0;
	}
	/* Written before the helper runs: a short write to an empty pipe. */
	r = write(in[1], server, strlen(server));
	close(in[1]);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, op[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	argv[0] = prog;
	argv[1] = "get";
	argv[2] = NULL;
	status = r < 0 ? -1 : posix_spawnp(&pid, prog, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(in[0]);
	close(op[1]);
	if (status != 0) {
		close(op[0]);
		return 0;
	}
	out = xmalloc(CREDS_JSON_MAX + 1);
	deadline = now_ms() + CREDS_HELPER_SECONDS * 1000;
	in_time = helper_read(op[0], out, &len, deadline);
	close(op[0]);
	in_time = helper_wait(pid, &status, in_time ? deadline : 0) && in_time;
	if (!in_time) {
		explicit_bzero(out, len);
		return gantry_error(err, 0, "credential helper %s: no answer in %d seconds", prog,
				    CREDS_HELPER_SECONDS);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return 0;
	j = json_loadb(out, len, 0, NULL);
	explicit_bzero(out, len);
	if (json_is_string(json_object_get(j, "Username")) &&
	    json_is_string(json_object_get(j, "Secret")) &&
	    strcmp(json_string_value(json_object_get(j, "Username")), "<token>") != 0) {
		c->user = xstrdup(json_string_value(json_object_get(j, "Username")));
		c->pass = xstrdup(json_string_value(json_object_get(j, "Secret")));
		xasprintf(&c->source, "credential helper %s", prog);
	}
	json_decref(j);
	return c->user != NULL;
}

/* An auths entry: {"auth": base64} or {"username", "password"}. */
static int auths_get(json_t *auths, const char *registry, const char *what, const char *path,
		     struct registry_creds *c)
{
	json_t *e = member_for(auths, registry);
	const char *auth = json_string_value(json_object_get(e, "auth"));
	const char *u = json_string_value(json_object_get(e, "username"));
	const char *p = json_string_value(json_object_get(e, "password"));

	if (auth && *auth && basic_decode(auth, c) == 0) {
		/* decoded */
	} else if (u && p) {
		c->user = xstrdup(u);
		c->pass = xstrdup(p);
	} else {
		return 0;
	}
	xasprintf(&c->source, "%s `%s`", what, path);
	return 1;
}

static int docker_lookup(const char *registry, struct registry_creds *c, gantry_error_t *err)
{
	cleanup_free char *path = docker_config_path();
	json_t *cfg, *helper;
	const char *store;
	int r = 0;

	if (load_json(path, &cfg, err) < 0)
		return gantry_error_prefix(err, "Docker config");
	if (cfg == NULL)
		return 0;
	helper = member_for(json_object_get(cfg, "credHelpers"), registry);
	store = json_string_value(json_object_get(cfg, "credsStore"));
	if (json_is_string(helper))
		r = helper_get(json_string_value(helper), registry, c, err);
	if (r == 0 && store && *store)
		r = helper_get(store, registry, c, err);
	if (r < 0) {
		json_decref(cfg);
		return gantry_error_prefix(err, "Docker config `%s`", path);
	}
	if (r == 0)
		r = auths_get(json_object_get(cfg, "auths"), registry, "Docker config", path, c);
	json_decref(cfg);
	return r;
}

/* Our file must be ours alone. */
static int own_load(json_t **out, char **path, gantry_error_t *err)
{
	struct stat st;

	if (creds_file(path, err) < 0)
		return -1;
	if (stat(*path, &st) == 0 && (st.st_mode & 077))
		return gantry_error(err, 0, "`%s` is readable by other users: chmod 600 it",
				    *path);
	return load_json(*path, out, err);
}

int creds_lookup(const char *registry, struct registry_creds *out, gantry_error_t *err)
{
	cleanup_free char *path = NULL;
	json_t *own;
	int r;

	*out = (struct registry_creds){ 0 };
	r = docker_lookup(registry, out, err);
	if (r != 0)
		return r;
	if (own_load(&own, &path, err) < 0)
		return -1;
	r = own ? auths_get(json_object_get(own, "auths"), registry, "Gantry credentials",
			    path, out)
		: 0;
	json_decref(own);
	return r;
}

int creds_source(const char *registry, char **source, gantry_error_t *err)
{
	struct registry_creds c;
	int r = creds_lookup(registry, &c, err);

	*source = r == 1 ? steal_pointer(&c.source) : NULL;
	creds_free(&c);
	return r < 0 ? -1 : 0;
}

static void add_keys(json_t *obj, char ***v, size_t *n)
{
	const char *key;
	json_t *val;

	json_object_foreach(obj, key, val)
	{
		char *norm = registry_normalize(key);
		bool seen = false;

		for (size_t i = 0; norm && i < *n; i++)
			seen = seen || strcmp((*v)[i], norm) == 0;
		if (norm == NULL || seen) {
			free(norm);
			continue;
		}
		*v = xrealloc(*v, (*n + 2) * sizeof(**v));
		(*v)[(*n)++] = norm;
		(*v)[*n] = NULL;
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int creds_registries(char ***out, size_t *n, gantry_error_t *err)
{
	cleanup_free char *dpath = docker_config_path(), *opath = NULL;
	json_t *docker = NULL, *own = NULL;

	*out = xzalloc(sizeof(**out));
	*n = 0;
	if (load_json(dpath, &docker, err) < 0 || own_load(&own, &opath, err) < 0) {
		json_decref(docker);
		strv_free(*out);
		*out = NULL;
		return -1;
	}
	add_keys(json_object_get(docker, "auths"), out, n);
	add_keys(json_object_get(docker, "credHelpers"), out, n);
	add_keys(json_object_get(own, "auths"), out, n);
	qsort(*out, *n, sizeof(**out), cmp_str);
	json_decref(docker);
	json_decref(own);
	return 0;
}

static int own_save(const char *path, json_t *j, gantry_error_t *err)
{
	cleanup_free char *dir = xstrdup(path);
	char *s, *slash = strrchr(dir, '/');
	int ret;

	if (slash) {
		*slash = '\0';
		if (mkdir_p(dir, err) < 0)
			return -1;
	}
	s = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
	if (s == NULL)
		return gantry_error(err, 0, "encode `%s`", path);
	ret = write_file_atomic(path, s, strlen(s), 0600, err);
	explicit_bzero(s, strlen(s));
	free(s);
	return ret;
}

/* Hold an exclusive lock on "<path>.lock" (the file itself is replaced
 * on every save, so it cannot carry the lock). */
static int own_lock(const char *path, int *fd, gantry_error_t *err)
{
	cleanup_free char *dir = xstrdup(path), *lock = NULL;
	char *slash = strrchr(dir, '/');

	if (slash) {
		*slash = '\0';
		if (mkdir_p(dir, err) < 0)
			return -1;
	}
	xasprintf(&lock, "%s.lock", path);
	*fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (*fd < 0)
		return gantry_error_errno(err, "open `%s`", lock);
	while (flock(*fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			gantry_error_errno(err, "lock `%s`", lock);
			close(*fd);
			*fd = -1;
			return -1;
		}
	}
	return 0;
}

/* Under the lock no save is under way: any "<file>.tmp-XXXXXX" is what a
 * killed save left. */
static void remove_stale_tmp(const char *path)
{
	cleanup_free char *dir = xstrdup(path), *prefix = NULL;
	char *slash = strrchr(dir, '/');
	struct dirent *e;
	DIR *d;

	if (slash == NULL)
		return;
	*slash = '\0';
	xasprintf(&prefix, "%s.tmp-", slash + 1);
	d = opendir(dir);
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL)
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}

/* Remove every auths key that names registry ("https://host/v1/", "HOST"). */
static bool del_all(json_t *auths, const char *registry)
{
	bool removed = false;
	const char *key;
	json_t *v;
	void *tmp;

	json_object_foreach_safe(auths, tmp, key, v)
	{
		cleanup_free char *norm = registry_normalize(key);

		if (norm && strcmp(norm, registry) == 0) {
			json_object_del(auths, key);
			removed = true;
		}
	}
	return removed;
}

/* Lock our credentials file, drop temporary files a killed writer left, and
 * load it (*j NULL when there is none yet); *path is where to save it. */
static int own_open_locked(int *lock, json_t **j, char **path, gantry_error_t *err)
{
	cleanup_free char *file = NULL;

	if (creds_file(&file, err) < 0 || own_lock(file, lock, err) < 0)
		return -1;
	remove_stale_tmp(file);
	return own_load(j, path, err);
}

int creds_store(const char *registry, const char *user, const char *pass, gantry_error_t *err)
{
	cleanup_free char *path = NULL, *auth = creds_basic(user, pass);
	cleanup_close int lock = -1;
	json_t *j, *auths;
	int ret;

	if (own_open_locked(&lock, &j, &path, err) < 0)
		return -1;
	if (j == NULL)
		j = json_object();
	auths = json_object_get(j, "auths");
	if (!json_is_object(auths)) {
		auths = json_object();
		json_object_set_new(j, "auths", auths);
	}
	del_all(auths, registry);
	json_object_set_new(auths, registry, json_pack("{s:s}", "auth", auth));
	ret = own_save(path, j, err);
	json_decref(j);
	explicit_bzero(auth, strlen(auth));
	return ret;
}

int creds_erase(const char *registry, bool *removed, gantry_error_t *err)
{
	cleanup_free char *path = NULL;
	cleanup_close int lock = -1;
	json_t *j, *auths;
	int ret = 0;

	*removed = false;
	if (own_open_locked(&lock, &j, &path, err) < 0)
		return -1;
	auths = json_object_get(j, "auths");
	if (json_is_object(auths) && del_all(auths, registry)) {
		*removed = true;
		ret = own_save(path, j, err);
	}
	json_decref(j);
	return ret;
}
