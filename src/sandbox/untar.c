/* What `gantry cp` writes on the host from a tar stream a guest made (see
 * copy.h, sandbox_untar): each entry below the destination only, one path
 * component at a time, no symlink followed. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/files.h"
#include "common/text.h"
#include "common/util.h"
#include "image/lazylib.h"
#include "sandbox/copy.h"

#define COPY_COMPONENTS_MAX 256 /* components of one entry's path */
#define COPY_DIRS_MAX 65536 /* directories made by one copy out */

struct dir_fix {
	char *path; /* below the destination's parent */
	mode_t mode;
	uid_t uid;
	gid_t gid;
};

struct extract {
	int parent;	  /* the destination's parent directory */
	const char *top;  /* the destination's name in it */
	const char *base; /* the first component of tar's names ("." for all) */
	bool archive, own;
	mode_t umask; /* the caller's, applied but in archive mode */
	struct sandbox_copy_result *res;
	struct dir_fix *dirs;
	size_t nr_dirs;
};

/* comps[0..n) joined by '/', allocated. */
static char *joined(char *const *comps, size_t n)
{
	size_t len = 1;
	char *s, *at;

	for (size_t i = 0; i < n; i++)
		len += strlen(comps[i]) + 1;
	at = s = xmalloc(len);
	*s = '\0';
	for (size_t i = 0; i < n; i++)
		at += sprintf(at, "%s%s", i ? "/" : "", comps[i]);
	return s;
}

/* name's components below the destination's parent: top, then name's
 * after base; -1 for a name that leaves it or is not base's. */
static int components(const struct extract *x, char *name, char **comps, size_t *n)
{
	char *save = NULL, *c;
	bool first = strcmp(x->base, ".") != 0;

	*n = 0;
	comps[(*n)++] = (char *)x->top;
	for (c = strtok_r(name, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (strcmp(c, ".") == 0)
			continue;
		if (strcmp(c, "..") == 0)
			return -1;
		if (first) {
			if (strcmp(c, x->base) != 0)
				return -1;
			first = false;
			continue;
		}
		if (*n == COPY_COMPONENTS_MAX)
			return -1;
		comps[(*n)++] = c;
	}
	return first ? -1 : 0;
}

/* The directory holding comps[n-1], each one before it opened with no
 * symlink followed and made when missing. */
static int walk(int parent, char **comps, size_t n, bool make)
{
	int fd = fcntl(parent, F_DUPFD_CLOEXEC, 3);

	for (size_t i = 0; fd >= 0 && i + 1 < n; i++) {
		int next = openat(fd, comps[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (next < 0 && errno == ENOENT && make && mkdirat(fd, comps[i], 0755) == 0)
			next = openat(fd, comps[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = next;
	}
	return fd;
}

/* What is at last in dir goes, unless it is a directory. */
static int clear(int dir, const char *last)
{
	struct stat st;

	if (fstatat(dir, last, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	if (S_ISDIR(st.st_mode)) {
		errno = EISDIR;
		return -1;
	}
	return unlinkat(dir, last, 0);
}

static int write_file(struct archive *a, int fd, struct sandbox_copy_result *res)
{
	const void *buf;
	size_t len;
	la_int64_t off;
	int r;

	while ((r = sym_archive_read_data_block(a, &buf, &len, &off)) == ARCHIVE_OK) {
		for (size_t done = 0; done < len;) {
			ssize_t w = pwrite(fd, (const char *)buf + done, len - done,
					   off + (off_t)done);

			if (w < 0)
				return -1;
			done += (size_t)w;
		}
		res->bytes += len;
	}
	if (r != ARCHIVE_EOF) {
		errno = EIO;
		return -1;
	}
	return 0;
}

static int one_entry(struct extract *x, struct archive *a, struct archive_entry *e,
		     gantry_error_t *err)
{
	cleanup_free char *name = xstrdup(sym_archive_entry_pathname(e) ?: "");
	char *comps[COPY_COMPONENTS_MAX + 1];
	mode_t perm = sym_archive_entry_perm(e) & (x->archive ? 07777 : 0777 & ~x->umask);
	struct timespec times[2] = { { .tv_nsec = UTIME_OMIT } };
	cleanup_close int dir = -1;
	const char *last;
	size_t n;
	int fd;

	if (components(x, name, comps, &n) < 0) {
		cleanup_free char *shown = xstrdup(sym_archive_entry_pathname(e) ?: "");

		text_sanitize(shown, 200);
		return gantry_error(err, 0, "entry `%s` is not below what was asked for", shown);
	}
	last = comps[n - 1];
	if (sym_archive_entry_hardlink(e) || (sym_archive_entry_filetype(e) != AE_IFREG &&
					      sym_archive_entry_filetype(e) != AE_IFDIR &&
					      sym_archive_entry_filetype(e) != AE_IFLNK)) {
		x->res->skipped++;
		return 0;
	}
	dir = walk(x->parent, comps, n, true);
	if (dir < 0)
		goto fail;
	switch (sym_archive_entry_filetype(e)) {
	case AE_IFDIR: {
		struct stat st;
		cleanup_free char *path = NULL;

		if (mkdirat(dir, last, 0700) == 0) {
			if (x->nr_dirs == COPY_DIRS_MAX)
				return gantry_error(err, 0, "more than %d directories",
						    COPY_DIRS_MAX);
		} else if (errno != EEXIST || fstatat(dir, last, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
			   !S_ISDIR(st.st_mode)) {
			goto fail;
		} else {
			/* One that was there keeps its own mode and owner. */
			x->res->dirs++;
			return 0;
		}
		path = joined(comps, n);
		x->dirs = xrealloc(x->dirs, (x->nr_dirs + 1) * sizeof(*x->dirs));
		x->dirs[x->nr_dirs++] = (struct dir_fix){ steal_pointer(&path), perm,
							  (uid_t)sym_archive_entry_uid(e),
							  (gid_t)sym_archive_entry_gid(e) };
		x->res->dirs++;
		return 0;
	}
	case AE_IFLNK:
		if (clear(dir, last) < 0 || symlinkat(sym_archive_entry_symlink(e) ?: "", dir, last) < 0)
			goto fail;
		if (x->own)
			fchownat(dir, last, (uid_t)sym_archive_entry_uid(e),
				 (gid_t)sym_archive_entry_gid(e), AT_SYMLINK_NOFOLLOW);
		x->res->links++;
		return 0;
	default:
		break;
	}
	if (clear(dir, last) < 0)
		goto fail;
	fd = openat(dir, last, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		goto fail;
	/* The size too: a sparse file's hole at its end. */
	if (write_file(a, fd, x->res) < 0 ||
	    ftruncate(fd, (off_t)sym_archive_entry_size(e)) < 0 ||
	    (x->own && fchown(fd, (uid_t)sym_archive_entry_uid(e), (gid_t)sym_archive_entry_gid(e)) <
			       0) ||
	    fchmod(fd, perm) < 0) {
		close(fd);
		goto fail;
	}
	times[1] = (struct timespec){ .tv_sec = sym_archive_entry_mtime(e) };
	futimens(fd, times);
	close(fd);
	x->res->files++;
	return 0;
fail:
	{
		cleanup_free char *shown = joined(comps, n);

		text_sanitize(shown, 200);
		return gantry_error_errno(err, "write `%s`", shown);
	}
}

/* The directories' own modes (and owners), once nothing more goes in. */
static void fix_dirs(struct extract *x)
{
	for (size_t i = x->nr_dirs; i-- > 0;) {
		struct dir_fix *d = &x->dirs[i];
		char *comps[COPY_COMPONENTS_MAX + 2], *save = NULL;
		size_t n = 0;
		int dir, fd;

		for (char *c = strtok_r(d->path, "/", &save); c && n <= COPY_COMPONENTS_MAX;
		     c = strtok_r(NULL, "/", &save))
			comps[n++] = c;
		dir = n ? walk(x->parent, comps, n, false) : -1;
		fd = dir >= 0 ? openat(dir, comps[n - 1],
				       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) :
				-1;
		if (fd >= 0) {
			if (x->own)
				fchown(fd, d->uid, d->gid);
			fchmod(fd, d->mode);
			close(fd);
		}
		if (dir >= 0)
			close(dir);
		free(d->path);
	}
	free(x->dirs);
}

/* *refused: the failure is ours (an entry refused or not written, or
 * cancel), not the stream's. */
static int extract(struct extract *x, int fd, const struct gantry_cancel *cancel, bool *refused,
		   gantry_error_t *err)
{
	struct archive *a = sym_archive_read_new();
	struct archive_entry *e;
	int r = 0, rr;

	*refused = false;
	sym_archive_read_support_format_tar(a);
	if (sym_archive_read_open_fd(a, fd, COPY_BLOCK) != ARCHIVE_OK) {
		r = gantry_error(err, 0, "read the sandbox's tar stream: %s",
				 sym_archive_error_string(a));
		goto out;
	}
	while ((rr = sym_archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		if (cancel_check(cancel, err) < 0 || one_entry(x, a, e, err) < 0) {
			*refused = true;
			r = -1;
			goto out;
		}
	}
	if (rr != ARCHIVE_EOF) {
		cleanup_free char *why = xstrdup(sym_archive_error_string(a) ?: "corrupt");

		r = gantry_error(err, 0, "the sandbox's tar stream: %s", text_sanitize(why, 200));
	}
out:
	sym_archive_read_free(a);
	fix_dirs(x);
	return r;
}

int sandbox_untar(int fd, const char *base, const char *host_dest,
		  const struct sandbox_copy_opts *o, const struct gantry_cancel *cancel,
		  struct sandbox_copy_result *res, bool *refused, gantry_error_t *err)
{
	cleanup_free char *hdir = NULL, *hbase = NULL;
	struct extract x = { .archive = o->archive, .own = o->archive && geteuid() == 0,
			     .res = res, .base = base };
	struct stat st;
	int r;

	x.umask = process_umask();

	*refused = true;
	if (lazy_archive(err) < 0)
		return -1;
	/* Into an existing directory, or as the destination itself. */
	if (stat(host_dest, &st) == 0 && S_ISDIR(st.st_mode) && strcmp(base, ".") != 0) {
		hdir = xstrdup(host_dest);
		hbase = xstrdup(base);
	} else {
		cleanup_free char *d = xstrdup(host_dest), *b = xstrdup(host_dest);

		hdir = xstrdup(dirname(d));
		hbase = xstrdup(basename(b));
	}
	if (strcmp(hbase, "/") == 0 || strcmp(hbase, "..") == 0 || strcmp(hbase, ".") == 0)
		return gantry_error_usage(err, "`%s`: name a file or directory to write", host_dest);
	x.top = hbase;
	x.parent = open(hdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (x.parent < 0)
		return gantry_error_errno(err, "`%s`", hdir);
	r = extract(&x, fd, cancel, refused, err);
	close(x.parent);
	return r;
}
