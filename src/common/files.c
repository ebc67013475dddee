/* Gantry's state directory and atomic files (see files.h). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/files.h"
#include "common/settings.h"
#include "common/text.h"
#include "common/util.h"

int gantry_home(char **out, gantry_error_t *err)
{
	const char *home = gantry_setting("GANTRY_HOME"), *h = gantry_setting("HOME");
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

int write_file_new(const char *path, const void *data, size_t len, mode_t mode, gantry_error_t *err)
{
	cleanup_close int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);

	if (fd < 0)
		return gantry_error_errno(err, "create `%s`", path);
	if (write_full(fd, data, len) < 0) {
		gantry_error_errno(err, "write `%s`", path);
		unlink(path);
		return -1;
	}
	return 0;
}

int proc_start(pid_t pid, unsigned long long *ticks, char *state)
{
	char path[64], buf[1024];
	const char *p;

	if (pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_small(path, buf, sizeof(buf)) <= 0)
		return -1;
	/* comm may hold spaces and parentheses: count from the last ')'. */
	p = strrchr(buf, ')');
	/* state is field 3; starttime field 22, 19 fields after it. */
	if (p == NULL || sscanf(p + 2, "%c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
				       "%*s %*s %*s %*s %*s %llu",
				state, ticks) != 2)
		return -1;
	return 0;
}

ssize_t read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, cap - 1);
	close(fd);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

mode_t process_umask(void)
{
	char buf[4096];
	const char *at;
	unsigned int m;

	if (read_small("/proc/self/status", buf, sizeof(buf)) > 0 &&
	    (at = strstr(buf, "\nUmask:")) != NULL && sscanf(at, "\nUmask: %o", &m) == 1)
		return (mode_t)m & 0777;
	return 022;
}

char *path_find(const char *name)
{
	const char *path = getenv("PATH"), *p, *end;
	struct stat st;

	for (p = path ? path : "/bin:/usr/bin";; p = end + 1) {
		char *file;

		end = strchrnul(p, ':');
		if (end == p)
			xasprintf(&file, "./%s", name);
		else
			xasprintf(&file, "%.*s/%s", (int)(end - p), p, name);
		if (stat(file, &st) == 0)
			return file;
		free(file);
		if (*end == '\0')
			return NULL;
	}
}

int open_regular_at(int dfd, const char *path, int flags, struct stat *st)
{
	/* O_NONBLOCK: a FIFO would block the open until a writer came. */
	int fd = openat(dfd, path, flags | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0600);

	if (fd < 0)
		return -1;
	if (fstat(fd, st) < 0 ||
	    (S_ISREG(st->st_mode) && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0)) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return -2;
	}
	return fd;
}

int read_file_max(const char *path, size_t max, char **out, size_t *len, gantry_error_t *err)
{
	struct stat st;
	cleanup_close int fd = open_regular_at(AT_FDCWD, path, O_RDONLY, &st);

	*out = NULL;
	*len = 0;
	if (fd == -2)
		return gantry_error(err, 0, "`%s` is not a regular file", path);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		return gantry_error_errno(err, "open `%s`", path);
	}
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

/* The last line of buf[0, len) before *end: where it starts, NULL when
 * no newline comes before it (it starts at buf, or before the window). */
static const char *line_before(const char *buf, size_t end)
{
	const char *nl = memrchr(buf, '\n', end);

	return nl ? nl + 1 : NULL;
}

/* One line made safe to show: its line end dropped, and when it is too
 * long, or began before the window, only its end kept after "...". */
static char *tail_line(const char *p, size_t len, bool cut)
{
	cleanup_free char *safe = NULL;
	char *line;

	while (len > 0 && p[len - 1] == '\r')
		len--;
	if (len > FILES_TAIL_LINE_MAX - 3) {
		p += len - (FILES_TAIL_LINE_MAX - 3);
		len = FILES_TAIL_LINE_MAX - 3;
		cut = true;
	}
	safe = text_sanitized(p, len, 0);
	if (!cut)
		return steal_pointer(&safe);
	xasprintf(&line, "...%s", safe);
	return line;
}

size_t read_tail_lines(const char *path, size_t max, char ***out)
{
	cleanup_close int fd = -1;
	cleanup_free char *buf = NULL;
	char **lines;
	struct stat st;
	size_t len, n = 0;
	off_t from;
	ssize_t got;

	*out = NULL;
	if (max == 0)
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return 0;
	from = st.st_size > FILES_TAIL_WINDOW ? st.st_size - FILES_TAIL_WINDOW : 0;
	buf = xmalloc(FILES_TAIL_WINDOW);
	do
		got = pread(fd, buf, FILES_TAIL_WINDOW, from);
	while (got < 0 && errno == EINTR);
	if (got <= 0)
		return 0;
	len = (size_t)got;
	if (buf[len - 1] == '\n')
		len--; /* the last line's end, not an empty line after it */
	if (len == 0)
		return 0;
	lines = xzalloc(MIN(max, len + 1) * sizeof(*lines));
	/* Newest first, from the end of the window back. */
	while (n < max) {
		const char *start = line_before(buf, len);

		if (start == NULL) {
			/* The window's first line began before it: shown only
			 * when it is all there is, as its end. */
			if (from == 0 || n == 0)
				lines[n++] = tail_line(buf, len, from > 0);
			break;
		}
		lines[n++] = tail_line(start, len - (size_t)(start - buf), false);
		len = (size_t)(start - buf) - 1;
	}
	/* Oldest first. */
	for (size_t i = 0; i < n / 2; i++) {
		char *t = lines[i];

		lines[i] = lines[n - 1 - i];
		lines[n - 1 - i] = t;
	}
	*out = lines;
	return n;
}

void error_add_tail(gantry_error_t *err, const char *path, size_t max, const char *header)
{
	char **lines, *msg;
	size_t n;

	if (err == NULL || *err == NULL)
		return;
	n = read_tail_lines(path, max, &lines);
	if (n == 0)
		return;
	xasprintf(&msg, "%s\n%s", gantry_error_str(*err), header);
	for (size_t i = 0; i < n; i++) {
		char *more;

		xasprintf(&more, "%s\n  %s", msg, lines[i]);
		free(msg);
		msg = more;
	}
	free_lines(lines, n);
	gantry_error_free(err);
	gantry_error(err, 0, "%s", msg);
	free(msg);
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
