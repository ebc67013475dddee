/* The image cache directory (see cache.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/files.h"
#include "common/json.h"
#include "common/settings.h"
#include "common/util.h"
#include "image/cache.h"
#include "image/digest.h"

#define INDEX_FILE    "index.json"
#define INDEX_VERSION 1
#define META_VERSION  1
/* Our own JSON files are small; a bigger one is not ours. */
#define CACHE_JSON_MAX (16u << 20)

int image_cache_open(struct image_cache *c, gantry_error_t *err)
{
	const char *images = gantry_setting("GANTRY_IMAGES");
	char *dir, *home;

	*c = (struct image_cache){ 0 };
	if (images && *images) {
		dir = xstrdup(images);
	} else {
		if (gantry_home(&home, err) < 0)
			return gantry_error_prefix(err, "image cache");
		xasprintf(&dir, "%s/images", home);
		free(home);
	}
	if (mkdir_p(dir, err) < 0) {
		free(dir);
		return gantry_error_prefix(err, "image cache");
	}
	c->dir = dir;
	return 0;
}

void image_cache_close(struct image_cache *c)
{
	free(c->dir);
	c->dir = NULL;
}

char *image_cache_path(const struct image_cache *c, const char *digest, const char *ext)
{
	char *p;

	xasprintf(&p, "%s/sha256-%s%s", c->dir, digest_hex(digest), ext);
	return p;
}

static int lock_take(const struct image_cache *c, const char *name, struct cache_lock *l,
		     bool wait, gantry_error_t *err)
{
	char *path;

	xasprintf(&path, "%s/.lock-%s", c->dir, name);
	for (;;) {
		struct stat a, b;
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

		if (fd < 0) {
			gantry_error_errno(err, "create lock `%s`", path);
			free(path);
			return -1;
		}
		while (flock(fd, wait ? LOCK_EX : LOCK_EX | LOCK_NB) < 0) {
			if (errno == EWOULDBLOCK && !wait) {
				close(fd);
				free(path);
				return 1;
			}
			if (errno != EINTR) {
				gantry_error_errno(err, "lock `%s`", path);
				close(fd);
				free(path);
				return -1;
			}
		}
		if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino) {
			l->path = path;
			l->fd = fd;
			return 0;
		}
		close(fd);
	}
}

/* A lock file exists only while held: the holder unlinks it before it lets
 * go, so a waiter that wakes up on an unlinked file tries again. */
int image_cache_lock(const struct image_cache *c, const char *name, struct cache_lock *l,
		     gantry_error_t *err)
{
	return lock_take(c, name, l, true, err);
}

int image_cache_trylock(const struct image_cache *c, const char *name, struct cache_lock *l,
			gantry_error_t *err)
{
	return lock_take(c, name, l, false, err);
}

int image_cache_lock_digest(const struct image_cache *c, const char *digest, bool wait,
			    struct cache_lock *l, gantry_error_t *err)
{
	cleanup_free char *name = NULL;

	xasprintf(&name, "sha256-%s", digest_hex(digest));
	return lock_take(c, name, l, wait, err);
}

void image_cache_unlock(struct cache_lock *l)
{
	if (l->path == NULL)
		return;
	unlink(l->path);
	close(l->fd);
	free(l->path);
	l->path = NULL;
	l->fd = -1;
}

char *cache_now(void)
{
	time_t now = time(NULL);
	char buf[32];
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return xstrdup(buf);
}

int cache_write_atomic(const char *path, const char *data, size_t len, gantry_error_t *err)
{
	return write_file_atomic(path, data, len, 0644, err);
}

static int write_json(const char *path, json_t *j, gantry_error_t *err)
{
	char *s = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
	int ret;

	if (s == NULL)
		return gantry_error(err, 0, "encode `%s`", path);
	ret = cache_write_atomic(path, s, strlen(s), err);
	free(s);
	return ret;
}

/* NULL with *missing when the file is not there. */
static json_t *read_json(const char *path, bool *missing, gantry_error_t *err)
{
	cleanup_free char *buf = NULL;
	size_t len;

	*missing = false;
	if (read_file_max(path, CACHE_JSON_MAX, &buf, &len, err) < 0)
		return NULL;
	if (buf == NULL) {
		*missing = true;
		return NULL;
	}
	return jsonh_load(buf, len, path, err);
}

void image_meta_free(struct image_meta *m)
{
	free(m->digest);
	free(m->keyed_by);
	free(m->source);
	free(m->created);
	image_config_free(&m->config);
	*m = (struct image_meta){ 0 };
}

int image_cache_load(const struct image_cache *c, const char *digest, struct image_meta *m,
		     gantry_error_t *err)
{
	cleanup_free char *erofs = image_cache_path(c, digest, ".erofs");
	cleanup_free char *meta = image_cache_path(c, digest, ".json");
	gantry_error_t jerr = NULL;
	struct stat st;
	bool missing;
	json_t *j;
	char *d = NULL;

	(void)err;
	*m = (struct image_meta){ 0 };
	if (stat(erofs, &st) < 0 || !S_ISREG(st.st_mode))
		return 0;
	/* Metadata that cannot be read is a miss: converting again rewrites it. */
	j = read_json(meta, &missing, &jerr);
	gantry_error_free(&jerr);
	if (j == NULL)
		return 0;
	if (!json_is_object(j) || jsonh_string(j, "digest", true, &d, &jerr) < 0 ||
	    strcmp(d, digest) != 0 || jsonh_string(j, "keyed_by", false, &m->keyed_by, &jerr) < 0 ||
	    jsonh_string(j, "source", false, &m->source, &jerr) < 0 ||
	    jsonh_string(j, "created", false, &m->created, &jerr) < 0 ||
	    image_config_from_json(json_object_get(j, "config"), &m->config, &jerr) < 0) {
		gantry_error_free(&jerr);
		free(d);
		json_decref(j);
		image_meta_free(m);
		return 0;
	}
	m->digest = d;
	json_decref(j);
	return 1;
}

int image_cache_store(const struct image_cache *c, const struct image_meta *m, gantry_error_t *err)
{
	cleanup_free char *path = image_cache_path(c, m->digest, ".json");
	json_t *j = json_object();
	int ret;

	json_object_set_new(j, "version", json_integer(META_VERSION));
	json_object_set_new(j, "digest", json_string(m->digest));
	if (m->keyed_by)
		json_object_set_new(j, "keyed_by", json_string(m->keyed_by));
	json_object_set_new(j, "source", jsonh_string_or_null(m->source));
	json_object_set_new(j, "created", json_string(m->created));
	json_object_set_new(j, "config", image_config_to_json(&m->config));
	ret = write_json(path, j, err);
	json_decref(j);
	return ret;
}

void image_cache_remove(const struct image_cache *c, const char *digest)
{
	cleanup_free char *erofs = image_cache_path(c, digest, ".erofs");
	cleanup_free char *meta = image_cache_path(c, digest, ".json");

	unlink(meta);
	unlink(erofs);
}

void image_cache_sweep(const struct image_cache *c, const char *digest)
{
	cleanup_free char *prefix = NULL;
	DIR *d = opendir(c->dir);
	struct dirent *e;

	if (d == NULL)
		return;
	xasprintf(&prefix, "sha256-%s.", digest_hex(digest));
	while ((e = readdir(d)) != NULL)
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && strstr(e->d_name, ".tmp-"))
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}

/* The index, or a new empty one when there is none or it is unreadable
 * (it is only a shortcut; the entries themselves are the truth). */
static json_t *index_load(const struct image_cache *c)
{
	cleanup_free char *path = NULL;
	gantry_error_t err = NULL;
	bool missing;
	json_t *j;

	xasprintf(&path, "%s/%s", c->dir, INDEX_FILE);
	j = read_json(path, &missing, &err);
	gantry_error_free(&err);
	if (j == NULL || !json_is_object(json_object_get(j, "refs"))) {
		json_decref(j);
		j = json_object();
		json_object_set_new(j, "version", json_integer(INDEX_VERSION));
		json_object_set_new(j, "refs", json_object());
	}
	return j;
}

int image_cache_ref_get(const struct image_cache *c, const char *ref, char **digest,
			char **fingerprint, gantry_error_t *err)
{
	json_t *j = index_load(c);
	json_t *e = json_object_get(json_object_get(j, "refs"), ref);
	const char *d = json_string_value(json_object_get(e, "digest"));
	const char *fp = json_string_value(json_object_get(e, "fingerprint"));

	(void)err;
	*digest = NULL;
	if (fingerprint)
		*fingerprint = NULL;
	if (!digest_valid(d)) {
		json_decref(j);
		return 0;
	}
	*digest = xstrdup(d);
	if (fingerprint && fp)
		*fingerprint = xstrdup(fp);
	json_decref(j);
	return 1;
}

static bool same_string(json_t *v, const char *s)
{
	return s ? json_is_string(v) && strcmp(json_string_value(v), s) == 0 : v == NULL;
}

int image_cache_ref_set(const struct image_cache *c, const char *ref, const char *digest,
			const char *fingerprint, gantry_error_t *err)
{
	cleanup_free char *path = NULL, *now = cache_now();
	struct cache_lock l = { 0 };
	json_t *j, *e;
	int ret;

	/* A cache hit must not cost a write and two fsyncs. */
	j = index_load(c);
	e = json_object_get(json_object_get(j, "refs"), ref);
	if (same_string(json_object_get(e, "digest"), digest) &&
	    same_string(json_object_get(e, "fingerprint"), fingerprint)) {
		json_decref(j);
		return 0;
	}
	json_decref(j);
	if (image_cache_lock(c, "index", &l, err) < 0)
		return -1;
	j = index_load(c);
	e = json_object();
	json_object_set_new(e, "digest", json_string(digest));
	if (fingerprint)
		json_object_set_new(e, "fingerprint", json_string(fingerprint));
	json_object_set_new(e, "updated", json_string(now));
	json_object_set_new(json_object_get(j, "refs"), ref, e);
	xasprintf(&path, "%s/%s", c->dir, INDEX_FILE);
	ret = write_json(path, j, err);
	json_decref(j);
	image_cache_unlock(&l);
	return ret;
}

json_t *image_cache_refs(const struct image_cache *c)
{
	json_t *j = index_load(c), *refs = json_incref(json_object_get(j, "refs"));

	json_decref(j);
	return refs;
}

int image_cache_refs_drop(const struct image_cache *c, const char *ref, const char *digest,
			  size_t *dropped, gantry_error_t *err)
{
	cleanup_free char *path = NULL;
	struct cache_lock l = { 0 };
	const char *key;
	json_t *j, *refs, *e, *tmp;
	int ret = 0;

	*dropped = 0;
	if (image_cache_lock(c, "index", &l, err) < 0)
		return -1;
	j = index_load(c);
	refs = json_object_get(j, "refs");
	json_object_foreach_safe(refs, tmp, key, e)
	{
		const char *d = json_string_value(json_object_get(e, "digest"));

		if ((ref && strcmp(key, ref) == 0) || (digest && d && strcmp(d, digest) == 0)) {
			json_object_del(refs, key);
			(*dropped)++;
		}
	}
	xasprintf(&path, "%s/%s", c->dir, INDEX_FILE);
	if (*dropped)
		ret = write_json(path, j, err);
	json_decref(j);
	image_cache_unlock(&l);
	return ret;
}
