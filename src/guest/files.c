/* gantry-init as the file helper (proto/files.h): `PROTO_HELPER_PATH files
 * VERSION OP ARGS...`, run by the host as a session in the container, so
 * that file transfer and listing need nothing of the image (a distroless
 * one has no cat, stat or find) and hold nothing more than the container's
 * own processes do. It writes records on stdout and, when it fails, one
 * line on stderr and a PROTO_FILES_* status. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest/guest.h"
#include "proto/files.h"

#define FILES_IDS_MAX	  1024 /* names read from the container's passwd and group */
#define FILES_COPY_CHUNK  65536
#define FILES_WATCH_MAX	  8192 /* directories watched at once */
#define FILES_WATCH_DEPTH 64   /* levels below the watched one, recursive */
#define FILES_WATCH_MASK                                                                           \
	(IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_ONLYDIR)

struct id_name {
	uint32_t id;
	char name[PROTO_FILES_NAME_MAX + 1];
};

struct id_names {
	bool read;
	size_t n;
	struct id_name v[FILES_IDS_MAX];
};

static struct id_names users, groups;
/* Making a path (write, mkdir, move): a file where a directory should be
 * is that, not a path that is not there. */
static bool creating;

static int fail(int e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, ": %s\n", strerror(e));
	return creating && e == ENOTDIR ? PROTO_FILES_NOTDIR : proto_files_status(e);
}

static bool name_ok(const char *s, size_t n)
{
	if (n == 0 || n > PROTO_FILES_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '_' || s[i] == '-'))
			return false;
	return true;
}

/* NAME:x:ID:... lines of /etc/passwd or /etc/group; names outside the
 * record alphabet are left out (the id is shown as it is). */
static void read_ids(const char *path, struct id_names *t)
{
	char line[1024];
	FILE *f;

	t->read = true;
	if ((f = fopen(path, "re")) == NULL)
		return;
	while (t->n < FILES_IDS_MAX && fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL, *end;
		unsigned long id;

		if (c2 == NULL || !name_ok(line, (size_t)(c1 - line)))
			continue;
		errno = 0;
		id = strtoul(c2 + 1, &end, 10);
		if (errno || end == c2 + 1 || *end != ':' || id > UINT32_MAX)
			continue;
		t->v[t->n].id = (uint32_t)id;
		memcpy(t->v[t->n].name, line, (size_t)(c1 - line));
		t->v[t->n].name[c1 - line] = '\0';
		t->n++;
	}
	fclose(f);
}

static const char *id_name(struct id_names *t, const char *file, uint32_t id)
{
	if (!t->read)
		read_ids(file, t);
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].id == id)
			return t->v[i].name;
	return "-";
}

static void path_record(char kind, const char *path)
{
	printf("%c %zu\n%s\n", kind, strlen(path), path);
}

static void entry(const char *path, const struct stat *st)
{
	char type = S_ISREG(st->st_mode)   ? 'f'
		    : S_ISDIR(st->st_mode) ? 'd'
		    : S_ISLNK(st->st_mode) ? 'l'
					   : 'o';

	printf("e %c %llu %o %lld %u %u %s %s %zu\n%s\n", type,
	       (unsigned long long)(S_ISREG(st->st_mode) || S_ISLNK(st->st_mode) ? st->st_size : 0),
	       (unsigned)(st->st_mode & 07777), (long long)st->st_mtime, (unsigned)st->st_uid,
	       (unsigned)st->st_gid, id_name(&users, "/etc/passwd", st->st_uid),
	       id_name(&groups, "/etc/group", st->st_gid), strlen(path), path);
}

/* PATH's own entry; a status. */
static int entry_of(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return fail(errno, "%s", path);
	entry(path, &st);
	return PROTO_FILES_OK;
}

/* The entries below the open directory dfd, at path, depth levels down.
 * An entry that goes away while it is listed is left out, and so is what
 * is below a directory the container's user may not read. */
static int list(int dfd, const char *path, int depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	int ret = PROTO_FILES_OK;

	if (d == NULL) {
		close(dfd);
		return fail(errno, "%s", path);
	}
	while ((errno = 0, de = readdir(d)) != NULL) {
		char child[PROTO_FILES_PATH_MAX + 1];
		struct stat st;
		int n, sub;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		n = snprintf(child, sizeof(child), "%s%s%s", path,
			     path[strlen(path) - 1] == '/' ? "" : "/", de->d_name);
		if (n < 0 || (size_t)n >= sizeof(child))
			continue; /* longer than a record may name */
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		entry(child, &st);
		if (depth <= 1 || !S_ISDIR(st.st_mode))
			continue;
		sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0 && (ret = list(sub, child, depth - 1)) != PROTO_FILES_OK)
			break;
	}
	if (de == NULL && errno)
		ret = fail(errno, "%s", path);
	closedir(d);
	return ret;
}

static int op_stat(char **a)
{
	const char *depth_s = a[0], *path = a[1];
	char *end;
	long depth = strtol(depth_s, &end, 10);
	struct stat st;
	int dfd;

	if (*depth_s == '\0' || *end != '\0' || depth < 0 || depth > PROTO_FILES_DEPTH_MAX)
		return fail(EINVAL, "depth `%s`", depth_s);
	if (depth == 0) {
		if (lstat(path, &st) < 0) {
			if (errno != ENOENT && errno != ENOTDIR)
				return fail(errno, "%s", path);
			path_record('x', path);
			return PROTO_FILES_OK;
		}
		entry(path, &st);
		return PROTO_FILES_OK;
	}
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		if (errno == ENOTDIR || (errno == ENOENT && lstat(path, &st) == 0))
			path_record('n', path);
		else if (errno == ENOENT)
			path_record('x', path);
		else
			return fail(errno, "%s", path);
		return PROTO_FILES_OK;
	}
	return list(dfd, path, (int)depth);
}

static int copy(int from, int to)
{
	static char buf[FILES_COPY_CHUNK];

	for (;;) {
		ssize_t n = read(from, buf, sizeof(buf)), done = 0;

		if (n == 0)
			return 0;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		while (done < n) {
			ssize_t w = write(to, buf + done, (size_t)(n - done));

			if (w < 0 && errno != EINTR)
				return -1;
			if (w > 0)
				done += w;
		}
	}
}

static int op_read(char **a)
{
	const char *path = a[0];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat st;

	if (fd < 0)
		return fail(errno, "%s", path);
	if (fstat(fd, &st) < 0)
		st.st_mode = 0;
	if (!S_ISREG(st.st_mode)) {
		int e = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;

		close(fd);
		return fail(e, "%s: not a regular file", path);
	}
	fcntl(fd, F_SETFL, 0);
	if (copy(fd, STDOUT_FILENO) < 0) {
		int e = errno;

		close(fd);
		return fail(e, "%s", path);
	}
	close(fd);
	return PROTO_FILES_OK;
}

/* mkdir -p of path's parents (all of path with whole). */
static int make_parents(const char *path, bool whole)
{
	char p[PROTO_FILES_PATH_MAX + 1];
	size_t n = strlen(path);

	memcpy(p, path, n + 1);
	if (!whole) {
		char *slash = strrchr(p, '/');

		if (slash == NULL || slash == p)
			return 0;
		*slash = '\0';
	}
	for (char *c = p + 1;; c++) {
		char save = *c;

		if (save != '/' && save != '\0')
			continue;
		*c = '\0';
		if (mkdir(p, 0777) < 0 && errno != EEXIST)
			return -1;
		*c = save;
		if (save == '\0')
			return 0;
	}
}

static int op_write(char **a)
{
	const char *path = a[0];
	struct stat st = { 0 };
	int fd, e;

	if (make_parents(path, false) < 0)
		return fail(errno, "make the directories of %s", path);
	/* Not blocked by a FIFO; nothing but a regular file is written. */
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0666);
	if (fd < 0 && errno == ENXIO) /* a FIFO no one reads, a socket */
		return fail(EINVAL, "%s: not a regular file", path);
	if (fd < 0)
		return fail(errno, "%s", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return fail(S_ISDIR(st.st_mode) ? EISDIR : EINVAL, "%s: not a regular file", path);
	}
	if (fcntl(fd, F_SETFL, 0) < 0 || ftruncate(fd, 0) < 0) {
		e = errno;
		close(fd);
		return fail(e, "%s", path);
	}
	if (copy(STDIN_FILENO, fd) < 0 || close(fd) < 0) {
		e = errno;
		return fail(e, "write %s", path);
	}
	return entry_of(path);
}

static int op_mkdir(char **a)
{
	const char *path = a[0];
	struct stat st;

	if (lstat(path, &st) == 0)
		return fail(EEXIST, "%s", path);
	if (make_parents(path, true) < 0)
		return fail(errno, "%s", path);
	return entry_of(path);
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DNR) /* not readable, so not emptied */
		return EACCES;
	if ((flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT)
		return errno;
	return 0;
}

static int op_remove(char **a)
{
	const char *path = a[0];
	struct stat st;
	int e;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? PROTO_FILES_OK : fail(errno, "%s", path);
	if (!S_ISDIR(st.st_mode))
		return unlink(path) < 0 && errno != ENOENT ? fail(errno, "%s", path)
							   : PROTO_FILES_OK;
	e = nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	if (e != 0)
		return fail(e > 0 ? e : errno, "remove %s", path);
	return PROTO_FILES_OK;
}

static int op_move(char **a)
{
	const char *from = a[0], *to = a[1];
	if (make_parents(to, false) < 0)
		return fail(errno, "make the directories of %s", to);
	if (rename(from, to) < 0)
		return fail(errno, "move %s to %s", from, to);
	return entry_of(to);
}

/* /proc/PID/stat's fields after the name: the state, the parent, and the
 * resident pages (field 24); its name (between the parentheses) in comm. */
static int proc_stat(const char *pid, char *state, unsigned long *ppid, unsigned long *pages,
		     char comm[64])
{
	char path[64], buf[1024], *open_, *close_;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	open_ = strchr(buf, '(');
	close_ = strrchr(buf, ')');
	if (open_ == NULL || close_ == NULL || close_ < open_)
		return -1;
	snprintf(comm, 64, "%.*s", (int)(close_ - open_ - 1), open_ + 1);
	/* state ppid pgrp session tty tpgid flags minflt cminflt majflt
	 * cmajflt utime stime cutime cstime priority nice threads itreal
	 * starttime vsize rss */
	if (sscanf(close_ + 1,
		   " %c %lu %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d "
		   "%*u %*u %lu",
		   state, ppid, pages) != 3)
		return -1;
	return 0;
}

/* Its command line, arguments joined by spaces, or [comm]. */
static size_t proc_args(const char *pid, const char *comm, char *out, size_t max)
{
	char path[64];
	ssize_t n = -1;
	int fd;

	snprintf(path, sizeof(path), "/proc/%s/cmdline", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, out, max);
		close(fd);
	}
	while (n > 0 && out[n - 1] == '\0')
		n--;
	if (n <= 0)
		return (size_t)snprintf(out, max, "[%s]", *comm ? comm : "?");
	for (ssize_t i = 0; i < n; i++)
		if (out[i] == '\0')
			out[i] = ' ';
	return (size_t)n;
}

static int op_ps(char **a)
{
	static char args[PROTO_FILES_PATH_MAX];
	long page_kib = sysconf(_SC_PAGESIZE) / 1024;
	DIR *d = opendir("/proc");
	struct dirent *de;

	(void)a;
	if (d == NULL)
		return fail(errno, "/proc");
	while ((de = readdir(d)) != NULL) {
		unsigned long ppid, pages;
		char state, comm[64], path[64];
		struct stat st;
		size_t n;

		if (de->d_name[0] < '1' || de->d_name[0] > '9' ||
		    strspn(de->d_name, "0123456789") != strlen(de->d_name) ||
		    strtol(de->d_name, NULL, 10) == (long)getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%s", de->d_name);
		/* Gone meanwhile, or not ours to see: left out. */
		if (stat(path, &st) < 0 || proc_stat(de->d_name, &state, &ppid, &pages, comm) < 0)
			continue;
		if (!((state >= 'A' && state <= 'Z') || (state >= 'a' && state <= 'z')))
			state = '?';
		n = proc_args(de->d_name, comm, args, sizeof(args));
		if (state == '?')
			continue;
		printf("p %s %lu %u %c %llu %zu\n", de->d_name, ppid, (unsigned)st.st_uid, state,
		       (unsigned long long)pages *
			       (unsigned long long)(page_kib > 0 ? page_kib : 4),
		       n);
		fwrite(args, 1, n, stdout);
		putchar('\n');
	}
	closedir(d);
	return PROTO_FILES_OK;
}

/* The directories watched: inotify's descriptor, and each one's path
 * below the watched root ("" for the root). */
static struct watched {
	int wd;
	char *rel;
} watched[FILES_WATCH_MAX];
static size_t nwatched;

static struct watched *watched_of(int wd)
{
	for (size_t i = 0; i < nwatched; i++)
		if (watched[i].wd == wd)
			return &watched[i];
	return NULL;
}

/* Stop watching rel and all below it (moved out of the watched tree). */
static void watch_drop(int ino, const char *rel)
{
	size_t n = strlen(rel);

	for (size_t i = 0; i < nwatched; i++)
		if (strncmp(watched[i].rel, rel, n) == 0 &&
		    (watched[i].rel[n] == '\0' || watched[i].rel[n] == '/'))
			inotify_rm_watch(ino, watched[i].wd); /* IN_IGNORED forgets it */
}

/* root/rel and, with rec, every directory below it, FILES_WATCH_DEPTH
 * levels at most. One that cannot be watched (gone, not ours, past the
 * bounds) is left out. */
static void watch_add(int ino, const char *root, const char *rel, bool rec, int depth)
{
	char path[PROTO_FILES_PATH_MAX + 1];
	struct watched *w;
	struct dirent *de;
	DIR *d;
	int wd, n;

	n = snprintf(path, sizeof(path), "%s%s%s", root, *rel ? "/" : "", rel);
	if (n < 0 || (size_t)n >= sizeof(path))
		return;
	wd = inotify_add_watch(ino, path, FILES_WATCH_MASK | (*rel ? IN_DONT_FOLLOW : 0));
	if (wd < 0)
		return;
	if ((w = watched_of(wd)) == NULL) {
		if (nwatched == FILES_WATCH_MAX) {
			inotify_rm_watch(ino, wd);
			return;
		}
		w = &watched[nwatched++];
		w->wd = wd;
	} else {
		free(w->rel);
	}
	w->rel = strdup(rel);
	if (!rec || depth >= FILES_WATCH_DEPTH || (d = opendir(path)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		char sub[PROTO_FILES_PATH_MAX + 1];

		if (de->d_type != DT_DIR || strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		n = snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", de->d_name);
		if (n > 0 && (size_t)n < sizeof(sub))
			watch_add(ino, root, sub, rec, depth + 1);
	}
	closedir(d);
}

/* How deep rel is below the watched directory: 1 for a name there. */
static int levels(const char *rel)
{
	int n = 1;

	for (; *rel; rel++)
		n += *rel == '/';
	return n;
}

static char change_type(uint32_t mask)
{
	return mask & (IN_CREATE | IN_MOVED_TO) ? 'c'
	       : mask & IN_MODIFY		? 'w'
	       : mask & IN_DELETE		? 'r'
	       : mask & IN_MOVED_FROM		? 'm'
	       : mask & IN_ATTRIB		? 'a'
						: 0;
}

/* One batch of inotify's events as records; false once stdout is gone. */
static bool changes(int ino, const char *root, bool rec)
{
	static char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n = read(ino, buf, sizeof(buf));

	if (n < 0)
		return errno == EINTR;
	for (char *p = buf; p < buf + n;) {
		const struct inotify_event *ev = (const struct inotify_event *)p;
		struct watched *w = watched_of(ev->wd);
		char name[PROTO_FILES_PATH_MAX + 1], type = change_type(ev->mask);
		int k;

		p += sizeof(*ev) + ev->len;
		if (ev->mask & IN_IGNORED) {
			if (w) {
				free(w->rel);
				*w = watched[--nwatched];
			}
			continue;
		}
		if (w == NULL || ev->len == 0 || type == 0)
			continue;
		k = snprintf(name, sizeof(name), "%s%s%s", w->rel, *w->rel ? "/" : "", ev->name);
		if (k <= 0 || (size_t)k >= sizeof(name))
			continue;
		if (rec && type == 'c' && (ev->mask & IN_ISDIR))
			watch_add(ino, root, name, rec, levels(name));
		if (rec && type == 'm' && (ev->mask & IN_ISDIR))
			watch_drop(ino, name);
		printf("w %c %d\n%s\n", type, k, name);
	}
	return fflush(stdout) == 0;
}

static int op_watch(char **a)
{
	const char *rec_s = a[0], *path = a[1];
	bool rec = strcmp(rec_s, "1") == 0;
	struct stat st;
	int ino;

	if (!rec && strcmp(rec_s, "0") != 0)
		return fail(EINVAL, "recursive `%s`", rec_s);
	if (stat(path, &st) < 0)
		return fail(errno, "%s", path);
	if (!S_ISDIR(st.st_mode)) {
		fail(ENOTDIR, "%s", path);
		return PROTO_FILES_NOTDIR;
	}
	if ((ino = inotify_init1(IN_CLOEXEC)) < 0)
		return fail(errno, "inotify");
	errno = 0;
	watch_add(ino, path, "", rec, 0);
	if (nwatched == 0)
		return fail(errno ? errno : EIO, "watch %s", path);
	path_record('y', path);
	if (fflush(stdout) != 0)
		return PROTO_FILES_FAILED;
	/* Until its reader is gone, or the directory itself. */
	while (nwatched > 0 && changes(ino, path, rec))
		;
	if (nwatched == 0) {
		fail(ENOENT, "%s: no longer there", path);
		return PROTO_FILES_NOENT;
	}
	return PROTO_FILES_OK;
}

static bool path_ok(const char *p)
{
	return p[0] == '/' && strlen(p) <= PROTO_FILES_PATH_MAX;
}

int guest_files_main(int argc, char **argv)
{
	/* Each op: its arguments, the first of them that is a path, and
	 * whether it makes one (then a file in the way is no directory). */
	static const struct op {
		const char *name;
		int nargs, first_path;
		bool makes;
		int (*fn)(char **a);
	} ops[] = {
		{ "stat", 2, 1, false, op_stat },     { "read", 1, 0, false, op_read },
		{ "write", 1, 0, true, op_write },    { "mkdir", 1, 0, true, op_mkdir },
		{ "remove", 1, 0, false, op_remove }, { "move", 2, 0, true, op_move },
		{ "ps", 0, 0, false, op_ps },	      { "watch", 2, 1, false, op_watch },
	};
	const struct op *op = NULL;
	int ret;

	if (argc < 2 || strcmp(argv[0], PROTO_FILES_VERSION) != 0) {
		fprintf(stderr, "file helper: version %s only, as `%s %s %s OP ARGS...`\n",
			PROTO_FILES_VERSION, GUEST_HELPER_PATH, PROTO_FILES_ARG,
			PROTO_FILES_VERSION);
		return PROTO_FILES_USAGE;
	}
	for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]) && op == NULL; k++)
		if (strcmp(argv[1], ops[k].name) == 0 && argc - 2 == ops[k].nargs)
			op = &ops[k];
	if (op == NULL) {
		fprintf(stderr, "file helper: no op `%s` with %d arguments\n", argv[1], argc - 2);
		return PROTO_FILES_USAGE;
	}
	for (int i = 2 + op->first_path; i < argc; i++)
		if (!path_ok(argv[i])) {
			fprintf(stderr, "file helper: want an absolute path of at most %d bytes\n",
				PROTO_FILES_PATH_MAX);
			return PROTO_FILES_USAGE;
		}
	creating = op->makes;
	ret = op->fn(argv + 2);
	if (fflush(stdout) != 0 && ret == PROTO_FILES_OK)
		ret = fail(errno, "stdout");
	return ret;
}
