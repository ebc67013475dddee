/* Gantry's state directory and atomic files (see files.h). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/files.h"
#include "common/text.h"
#include "common/util.h"

int gantry_home(char **out, gantry_error_t *err)
{
	const char *home = getenv("GANTRY_HOME"), *h = getenv("HOME");
	struct passwd *pw;

	if (home && *home) {
		*out = xstrdup(home);
		return 0;
	}
	if ((h == NULL || *h == '\0') && (pw = getpwuid(getuid())) != NULL)
		h = pw->pw_dir;
	if (h == NULL || *h == '\0')
		return gantry_error(err, 0, "set HOME or GANTRY_HOME");
	xasprintf(out, "%s/.gantry", h);
	return 0;
}

int mkdir_p(const char *dir, gantry_error_t *err)
{
	cleanup_free char *path = xstrdup(dir);
	struct stat st;

	if (stat(path, &st) == 0) {
		if (!S_ISDIR(st.st_mode))
			return gantry_error(err, ENOTDIR, "`%s`", path);
		return 0;
	}
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0700) < 0 && errno != EEXIST)
			return gantry_error_errno(err, "create `%s`", path);
		*p = '/';
	}
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return gantry_error_errno(err, "create `%s`", path);
	return 0;
}

int write_file_atomic(const char *path, const void *data, size_t len, mode_t mode,
		      gantry_error_t *err)
{
	cleanup_free char *tmp = NULL, *copy = xstrdup(path);
	cleanup_close int fd = -1, dfd = -1;

	xasprintf(&tmp, "%s.tmp-XXXXXX", path);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return gantry_error_errno(err, "create `%s`", tmp);
	if (write_full(fd, data, len) < 0 || fchmod(fd, mode) < 0 || fsync(fd) < 0) {
		gantry_error_errno(err, "write `%s`", tmp);
		unlink(tmp);
		return -1;
	}
	if (rename(tmp, path) < 0) {
		gantry_error_errno(err, "rename `%s` to `%s`", tmp, path);
		unlink(tmp);
		return -1;
	}
	dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0)
		return gantry_error_errno(err, "sync directory of `%s`", path);
	return 0;
}

int read_file_max(const char *path, size_t max, char **out, size_t *len, gantry_error_t *err)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;

	*out = NULL;
	*len = 0;
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		return gantry_error_errno(err, "open `%s`", path);
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return gantry_error(err, 0, "`%s` is not a regular file", path);
	if ((uint64_t)st.st_size > max)
		return gantry_error(err, 0, "`%s` is larger than %zu bytes", path, max);
	*out = xmalloc((size_t)st.st_size + 1);
	if (read_full(fd, *out, (size_t)st.st_size) < 0) {
		free(*out);
		*out = NULL;
		return gantry_error_errno(err, "read `%s`", path);
	}
	(*out)[st.st_size] = '\0';
	*len = (size_t)st.st_size;
	return 0;
}

size_t read_tail_lines(const char *path, size_t max, char ***out)
{
	cleanup_fclose FILE *f = fopen(path, "re");
	cleanup_free char *line = NULL;
	char **ring, **lines;
	size_t cap = 0, n = 0, first, i;
	ssize_t got;

	*out = NULL;
	if (f == NULL || max == 0)
		return 0;
	ring = xzalloc(max * sizeof(*ring));
	while ((got = getline(&line, &cap, f)) > 0) {
		while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
			line[--got] = '\0';
		free(ring[n % max]);
		ring[n % max] = text_sanitized(line, (size_t)got, 0);
		n++;
	}
	/* Oldest first. */
	first = n > max ? n % max : 0;
	n = MIN(n, max);
	lines = xzalloc((n ? n : 1) * sizeof(*lines));
	for (i = 0; i < n; i++)
		lines[i] = ring[(first + i) % max];
	free(ring);
	*out = lines;
	return n;
}

void free_lines(char **lines, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(lines[i]);
	free(lines);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void rm_tree(const char *path)
{
	nftw(path, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}
