/* Share specs and the host-directory check (see spec.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/files.h"
#include "common/text.h"
#include "common/util.h"
#include "proto/base64.h"
#include "share/spec.h"

#define SHOW_MAX 200 /* bytes of a spec quoted in an error */

/* Trees the guest's own kernel and init own: a share there would hide them. */
static const char *const ctr_refused[] = { "/proc", "/sys", "/dev", "/run/gantry" };

static int spec_error(gantry_error_t *err, const char *s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int spec_error(gantry_error_t *err, const char *s, const char *fmt, ...)
{
	cleanup_free char *shown = text_sanitized(s, strlen(s), SHOW_MAX);
	cleanup_free char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		abort();
	va_end(ap);
	return gantry_error_opt(err, "shares", " `%s`: %s", shown, msg);
}

static bool path_within(const char *a, const char *b)
{
	size_t lb = strlen(b);

	if (strcmp(b, "/") == 0)
		return true;
	return strncmp(a, b, lb) == 0 && (a[lb] == '\0' || a[lb] == '/');
}

/* Drop empty and `.` components and a trailing /; `..` is kept when
 * dotdot, else refused (-1). p is absolute. */
static int path_normal(const char *p, bool dotdot, char **out)
{
	size_t len = strlen(p);
	char *o = xmalloc(len + 2);
	size_t n = 0;

	while (*p) {
		const char *c = p + strspn(p, "/");
		size_t l = strcspn(c, "/");

		p = c + l;
		if (l == 0 || (l == 1 && c[0] == '.'))
			continue;
		if (l == 2 && c[0] == '.' && c[1] == '.' && !dotdot) {
			free(o);
			return -1;
		}
		o[n++] = '/';
		memcpy(o + n, c, l);
		n += l;
	}
	if (n == 0)
		o[n++] = '/';
	o[n] = '\0';
	*out = o;
	return 0;
}

char *share_b64url(const char *s)
{
	size_t n = strlen(s);
	char *o = xmalloc(b64_encoded_len(n, B64_URL) + 1);

	b64_encode(s, n, o, B64_URL);
	return o;
}

/* Unpadded base64url, its unused low bits zero (one spelling per path).
 * NULL when s is not that or decodes to a NUL byte. */
static char *b64url_decode(const char *s)
{
	size_t len = strlen(s);
	char *o = xmalloc(len / 4 * 3 + 3);
	long n = b64_decode(s, len, o, len / 4 * 3 + 2, B64_URL);

	if (n < 0 || memchr(o, '\0', (size_t)n)) {
		free(o);
		return NULL;
	}
	o[n] = '\0';
	return o;
}

static bool tag_valid(const char *t, size_t len)
{
	if (len == 0 || len > SHARE_TAG_MAX)
		return false;
	if ((len == 1 && t[0] == '.') || (len == 2 && t[0] == '.' && t[1] == '.'))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
			    t[i]) ||
		    t[i] == '\0')
			return false;
	return true;
}

struct spec_opts {
	bool ro, nogit, uid, gid, b64;
	uint32_t uid_v, gid_v;
	struct share_mask masks[SHARE_MASKS_MAX];
	size_t nr_masks;
};

static void masks_free(struct share_mask *m, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(steal_pointer(&m[i].rel));
}

/* protect=REL or hide=REL: REL in base64url, a relative path beneath the
 * share without `..`. */
static int opt_mask(const char *s, const char *v, bool hide, struct spec_opts *o,
		    gantry_error_t *err)
{
	cleanup_free char *rel = b64url_decode(v), *norm = NULL;

	if (o->nr_masks == SHARE_MASKS_MAX)
		return spec_error(err, s, "more than %d protect= and hide=", SHARE_MASKS_MAX);
	if (rel == NULL || *rel == '\0' || *rel == '/')
		return spec_error(err, s, "%s= takes a relative path in base64url",
				  hide ? "hide" : "protect");
	xasprintf(&norm, "/%s", rel);
	free(steal_pointer(&rel));
	if (path_normal(norm, false, &rel) < 0 || strcmp(rel, "/") == 0)
		return spec_error(err, s, "%s=: a path beneath the share, without `..`",
				  hide ? "hide" : "protect");
	o->masks[o->nr_masks].rel = xstrdup(rel + 1);
	o->masks[o->nr_masks++].hide = hide;
	return 0;
}

static int opt_id(const char *s, const char *name, const char *v, bool *seen, uint32_t *out,
		  gantry_error_t *err)
{
	uint64_t n;

	if (*seen)
		return spec_error(err, s, "%s given twice", name);
	if (parse_u64(v, SHARE_ID_MAX, &n) < 0)
		return spec_error(err, s, "%s must be a number from 0 to %u", name, SHARE_ID_MAX);
	*seen = true;
	*out = (uint32_t)n;
	return 0;
}

/* Strip the trailing options off body, which keeps the paths. */
static int spec_opts(const char *s, char *body, struct spec_opts *o, gantry_error_t *err)
{
	char *comma;

	while ((comma = strrchr(body, ',')) != NULL) {
		char *opt = comma + 1, *eq = strchr(opt, '=');
		size_t klen = eq ? (size_t)(eq - opt) : 0;

		if (strcmp(opt, "ro") == 0) {
			if (o->ro)
				return spec_error(err, s, "ro given twice");
			o->ro = true;
		} else if (strcmp(opt, "nogit") == 0) {
			if (o->nogit)
				return spec_error(err, s, "nogit given twice");
			o->nogit = true;
		} else if (eq == NULL || klen == 0 ||
			   strspn(opt, "abcdefghijklmnopqrstuvwxyz") != klen) {
			break; /* a comma of the path */
		} else if (klen == 3 && strncmp(opt, "uid", 3) == 0) {
			if (opt_id(s, "uid", eq + 1, &o->uid, &o->uid_v, err) < 0)
				return -1;
		} else if (klen == 3 && strncmp(opt, "gid", 3) == 0) {
			if (opt_id(s, "gid", eq + 1, &o->gid, &o->gid_v, err) < 0)
				return -1;
		} else if (klen == 8 && strncmp(opt, "encoding", 8) == 0) {
			if (o->b64)
				return spec_error(err, s, "encoding given twice");
			if (strcmp(eq + 1, "base64url") != 0)
				return spec_error(err, s, "the only encoding is base64url");
			o->b64 = true;
		} else if ((klen == 7 && strncmp(opt, "protect", 7) == 0) ||
			   (klen == 4 && strncmp(opt, "hide", 4) == 0)) {
			if (opt_mask(s, eq + 1, klen == 4, o, err) < 0)
				return -1;
		} else {
			*eq = '\0';
			return spec_error(
				err, s,
				"unknown option `%s` (ro, nogit, uid=N, gid=N, encoding=base64url, "
				"protect=REL, hide=REL)",
				opt);
		}
		*comma = '\0';
	}
	if (o->uid != o->gid)
		return spec_error(err, s, "uid and gid go together");
	/* Taken from the end: put back in the order they were written, so
	 * that the canonical form parses back to itself. */
	for (size_t i = 0; i < o->nr_masks / 2; i++) {
		struct share_mask t = o->masks[i];

		o->masks[i] = o->masks[o->nr_masks - 1 - i];
		o->masks[o->nr_masks - 1 - i] = t;
	}
	return 0;
}

static int spec_host(const char *s, const char *path, const char *cwd, char **out,
		     gantry_error_t *err)
{
	cleanup_free char *joined = NULL;

	if (*path == '\0')
		return spec_error(err, s, "no host path");
	if (*path != '/') {
		if (cwd == NULL || *cwd != '/')
			return spec_error(err, s, "the host path must be absolute");
		xasprintf(&joined, "%s/%s", cwd, path);
		path = joined;
	}
	path_normal(path, true, out);
	if (strlen(*out) >= PATH_MAX) {
		free(steal_pointer(out));
		return spec_error(err, s, "the host path is longer than %d bytes", PATH_MAX - 1);
	}
	return 0;
}

static int spec_ctr(const char *s, const char *path, char **out, gantry_error_t *err)
{
	if (*path != '/')
		return spec_error(err, s, "the container path must be absolute");
	if (path_normal(path, false, out) < 0)
		return spec_error(err, s, "the container path may not hold `..`");
	if (strcmp(*out, "/") == 0)
		goto refuse;
	if (strlen(*out) >= PATH_MAX) {
		free(steal_pointer(out));
		return spec_error(err, s, "the container path is longer than %d bytes",
				  PATH_MAX - 1);
	}
	for (size_t i = 0; i < ARRAY_SIZE(ctr_refused); i++)
		if (path_within(*out, ctr_refused[i]))
			goto refuse;
	return 0;
refuse:
	free(steal_pointer(out));
	return spec_error(
		err, s,
		"the container path may not be /, nor under /proc, /sys, /dev or /run/gantry");
}

int share_spec_parse(const char *s, const char *cwd, struct share_spec *sp, gantry_error_t *err)
{
	const char *eq = strchr(s, '=');
	cleanup_free char *body = NULL, *host = NULL, *ctr = NULL;
	struct spec_opts o = { 0 };
	char *at;

	memset(sp, 0, sizeof(*sp));
	if (eq == NULL)
		return spec_error(err, s, "expected TAG=HOST_PATH[@CTR_PATH][,ro][,uid=N,gid=N]");
	if (!tag_valid(s, (size_t)(eq - s)))
		return spec_error(err, s, "a tag is 1 to %d of A-Z a-z 0-9 . _ - and not . or ..",
				  SHARE_TAG_MAX);
	body = xstrdup(eq + 1);
	if (spec_opts(s, body, &o, err) < 0) {
		masks_free(o.masks, o.nr_masks);
		return -1;
	}
	at = strrchr(body, '@');
	if (at)
		*at++ = '\0';
	if (o.b64) {
		host = b64url_decode(body);
		ctr = at ? b64url_decode(at) : NULL;
		if (host == NULL || (at && ctr == NULL)) {
			masks_free(o.masks, o.nr_masks);
			return spec_error(err, s,
					  "a path is not unpadded base64url of bytes without NUL");
		}
	} else {
		host = xstrdup(body);
		ctr = at ? xstrdup(at) : NULL;
	}
	if (ctr == NULL)
		xasprintf(&ctr, "/host/%.*s", (int)(eq - s), s);
	memcpy(sp->masks, o.masks, sizeof(o.masks));
	sp->nr_masks = o.nr_masks;
	if (spec_host(s, host, cwd, &sp->host_path, err) < 0 ||
	    spec_ctr(s, ctr, &sp->ctr_path, err) < 0) {
		share_spec_free(sp);
		return -1;
	}
	memcpy(sp->tag, s, (size_t)(eq - s));
	sp->tag[eq - s] = '\0';
	sp->ro = o.ro;
	sp->nogit = o.nogit;
	sp->ids = o.uid;
	sp->uid = o.uid_v;
	sp->gid = o.gid_v;
	return 0;
}

/* A path the plain form cannot carry: a delimiter, or a byte that is not
 * printable ASCII (sandbox.json takes UTF-8 only; messages are one line). */
static bool needs_encoding(const char *p)
{
	for (const unsigned char *c = (const unsigned char *)p; *c; c++)
		if (*c < 0x20 || *c >= 0x7f || *c == ',' || *c == '@' || *c == '=')
			return true;
	return false;
}

char *share_spec_format(const struct share_spec *sp)
{
	bool b64 = needs_encoding(sp->host_path) || needs_encoding(sp->ctr_path);
	cleanup_free char *host = b64 ? share_b64url(sp->host_path) : xstrdup(sp->host_path);
	cleanup_free char *ctr = b64 ? share_b64url(sp->ctr_path) : xstrdup(sp->ctr_path);
	char ids[40] = "";
	char *out;

	if (sp->ids)
		snprintf(ids, sizeof(ids), ",uid=%u,gid=%u", sp->uid, sp->gid);
	xasprintf(&out, "%s=%s@%s%s%s%s%s", sp->tag, host, ctr, sp->ro ? ",ro" : "",
		  sp->nogit ? ",nogit" : "", ids, b64 ? ",encoding=base64url" : "");
	for (size_t i = 0; i < sp->nr_masks; i++) {
		cleanup_free char *rel = share_b64url(sp->masks[i].rel), *prev = out;

		xasprintf(&out, "%s,%s=%s", prev, sp->masks[i].hide ? "hide" : "protect", rel);
	}
	return out;
}

void share_spec_free(struct share_spec *sp)
{
	free(steal_pointer(&sp->host_path));
	free(steal_pointer(&sp->ctr_path));
	masks_free(sp->masks, sp->nr_masks);
	sp->nr_masks = 0;
}

int shares_add(char ***v, size_t *n, const char *spec, const char *cwd, gantry_error_t *err)
{
	struct share_spec sp;
	int r = 0;

	if (share_spec_parse(spec, cwd, &sp, err) < 0)
		return -1;
	for (size_t i = 0; i < *n && r == 0; i++) {
		struct share_spec q;

		if (share_spec_parse((*v)[i], NULL, &q, NULL) < 0)
			continue;
		if (strcmp(q.tag, sp.tag) == 0)
			r = spec_error(err, spec, "tag %s is already shared", sp.tag);
		else if (path_within(q.ctr_path, sp.ctr_path) ||
			 path_within(sp.ctr_path, q.ctr_path))
			r = spec_error(err, spec, "its container path overlaps share %s's", q.tag);
		share_spec_free(&q);
	}
	if (r == 0 && *n >= SHARES_MAX)
		r = spec_error(err, spec, "at most %d shares", SHARES_MAX);
	if (r == 0) {
		*v = xrealloc(*v, (*n + 2) * sizeof(**v));
		(*v)[(*n)++] = share_spec_format(&sp);
		(*v)[*n] = NULL;
	}
	share_spec_free(&sp);
	return r;
}

ssize_t shares_find(char *const *v, size_t n, const char *tag)
{
	size_t len = strlen(tag);

	/* A canonical spec begins TAG=, and a tag holds no `=`. */
	for (size_t i = 0; i < n; i++)
		if (strncmp(v[i], tag, len) == 0 && v[i][len] == '=')
			return (ssize_t)i;
	return -1;
}

void shares_remove(char **v, size_t *n, size_t i)
{
	free(v[i]);
	memmove(v + i, v + i + 1, (*n - i) * sizeof(*v)); /* the NULL too */
	(*n)--;
}

/* The real path of path: realpath of its longest existing prefix, the rest
 * as written (GANTRY_HOME need not exist yet). */
static char *real_prefix(const char *path)
{
	cleanup_free char *p = NULL, *abs = NULL, *cwd = NULL;
	char *r, *out;
	size_t cut;

	if (*path != '/') {
		cwd = getcwd(NULL, 0);
		xasprintf(&abs, "%s/%s", cwd ? cwd : "", path);
		path = abs;
	}
	path_normal(path, true, &p);
	cut = strlen(p);
	while ((r = realpath(cut ? p : "/", NULL)) == NULL) {
		char *slash = strrchr(p, '/');

		if (slash == NULL || errno != ENOENT)
			return xstrdup(p);
		*slash = '\0';
		cut = (size_t)(slash - p);
	}
	path_normal(path, true, &out);
	if (out[cut] != '\0') {
		char *joined;

		xasprintf(&joined, "%s%s", strcmp(r, "/") ? r : "", out + cut);
		free(out);
		free(r);
		return joined;
	}
	free(out);
	return r;
}

static char *fd_real_path(int fd, const char *path)
{
	char link[64], buf[PATH_MAX];
	ssize_t len;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	len = readlink(link, buf, sizeof(buf) - 1);
	if (len <= 0 || buf[0] != '/')
		return realpath(path, NULL);
	buf[len] = '\0';
	return xstrdup(buf);
}

int share_host_check(const char *host_path, int *dirfd, gantry_error_t *err)
{
	cleanup_free char *shown = text_sanitized(host_path, strlen(host_path), SHOW_MAX);
	cleanup_free char *real = NULL, *home = NULL, *home_real = NULL;
	cleanup_close int fd = open(host_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct stat st;

	if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
		return gantry_error(err, 0, "host path `%s` %s", shown,
				    errno == ENOENT ? "does not exist" : "is not a directory");
	if (fd < 0)
		return gantry_error_errno(err, "host path `%s`", shown);
	if (fstat(fd, &st) < 0)
		return gantry_error_errno(err, "host path `%s`: fstat", shown);
	if (!S_ISDIR(st.st_mode))
		return gantry_error(err, 0, "host path `%s` is not a directory", shown);
	real = fd_real_path(fd, host_path);
	if (real == NULL)
		return gantry_error_errno(err, "host path `%s`: resolve", shown);
	if (strcmp(real, "/") == 0)
		return gantry_error(err, 0, "host path `%s` is /: share a directory beneath it",
				    shown);
	if (gantry_home(&home, err) < 0)
		return -1;
	home_real = real_prefix(home);
	if (path_within(real, home_real) || path_within(home_real, real))
		return gantry_error(
			err, 0, "host path `%s` %s Gantry's state directory (GANTRY_HOME)", shown,
			strcmp(real, home_real) == 0   ? "is"
			: path_within(home_real, real) ? "holds"
						       : "is inside");
	if (dirfd)
		*dirfd = steal_fd(&fd);
	return 0;
}
