/* `gantry cp` (see copy.h): the sessions that run tar in the container, a
 * tar stream made here for one of them, and the other's stream handed to
 * sandbox_untar (untar.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/session.h"
#include "common/text.h"
#include "common/util.h"
#include "image/lazylib.h"
#include "sandbox/copy.h"
#include "sandbox/drain.h"
#include "sandbox/lifecycle.h"
#include "sandbox/process.h"

#define COPY_DEPTH_MAX 128	  /* directories deep, copying in */
#define COPY_WHY_MAX   300	  /* bytes of tar's complaint quoted */
#define COPY_DRAIN_MAX (1u << 20) /* bytes after the archive's end, at most */

/* ---- a session running tar in the container, as root ------------------------------ */

struct tar_run {
	const char *name;
	char *const *args;
	size_t nargs;
	int in, out;
	const struct gantry_cancel *cancel;
	struct agent_result res;
	char why[COPY_WHY_MAX + 1]; /* its stderr's first line, sanitised */
	int rc;
	gantry_error_t err;
};

static void tar_run(struct tar_run *t)
{
	struct sandbox_process_opts po = {
		.args = t->args, .nargs = t->nargs, .user = "0:0", .entrypoint = "", .workdir = "/"
	};
	struct sandbox_stdio io = { .in = t->in, .out = t->out, .signal_fd = -1 };
	struct drain w;
	int e[2];

	t->why[0] = '\0';
	if (pipe2(e, O_CLOEXEC) < 0) {
		t->rc = gantry_error_errno(&t->err, "pipe");
		return;
	}
	if (drain_start(&w, e[0], t->why, COPY_WHY_MAX) < 0) {
		close(e[0]);
		close(e[1]);
		t->rc = gantry_error(&t->err, 0, "cp: cannot start a thread");
		return;
	}
	io.err = e[1];
	t->rc = sandbox_exec(t->name, &po, &io, t->cancel, &t->res, &t->err);
	close(e[1]); /* the reader sees its end */
	drain_join_line(&w);
	close(e[0]);
}

/* A thread's writes to a pipe whose reader stopped early: EPIPE, not the
 * whole process's death. */
static void block_sigpipe(void)
{
	sigset_t pipe;

	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, NULL);
}

static void *tar_thread(void *opaque)
{
	struct tar_run *t = opaque;

	block_sigpipe();
	tar_run(t);
	close(t->out);
	t->out = -1;
	return NULL;
}

/* The session's failure, or tar's, as one error; 0 when tar exited 0. */
static int tar_status(struct tar_run *t, const char *what, gantry_error_t *err)
{
	if (t->rc < 0) {
		*err = steal_pointer(&t->err);
		return -1;
	}
	if (t->res.error || (!t->res.signaled && t->res.code == 127))
		return gantry_error(
			err, 0, "%s: the sandbox's image has no tar (gantry cp needs one)", what);
	if (t->res.signaled)
		return gantry_error(err, 0, "%s: tar in the sandbox was killed by signal %d", what,
				    t->res.code);
	if (t->res.code != 0)
		return gantry_error(err, 0, "%s: %s", what,
				    t->why[0] ? t->why : "tar in the sandbox failed");
	return 0;
}

int sandbox_copy_out(const char *name, const char *path, const char *host_dest,
		     const struct sandbox_copy_opts *o, const struct gantry_cancel *cancel,
		     struct sandbox_copy_result *res, gantry_error_t *err)
{
	cleanup_free char *gdir = xstrdup(path), *gbase = xstrdup(path), *what = NULL;
	char *args[] = { "tar", "-cf", "-", "-C", NULL, NULL, NULL };
	struct tar_run t = { .name = name, .args = args, .nargs = 6, .in = -1, .out = -1 };
	struct gantry_cancel stop = { -1 };
	pthread_t thread;
	int p[2] = { -1, -1 }, devnull = -1, r = -1;
	bool refused = false;
	char buf[4096];

	*res = (struct sandbox_copy_result){ 0 };
	if (path[0] != '/')
		return gantry_error_usage(err, "`%s`: want an absolute path in the sandbox", path);
	args[4] = dirname(gdir);
	args[5] = basename(gbase);
	if (strcmp(args[5], "/") == 0)
		args[5] = ".";
	xasprintf(&what, "%s:%s", name, path);
	if (cancel_init(&stop, err) < 0)
		return -1;
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (devnull < 0 || pipe2(p, O_CLOEXEC) < 0) {
		gantry_error_errno(err, "cp");
		goto done;
	}
	t.in = devnull;
	t.out = p[1];
	t.cancel = &stop;
	if (pthread_create(&thread, NULL, tar_thread, &t) != 0) {
		gantry_error(err, 0, "cp: cannot start a thread");
		close(p[1]);
		goto done;
	}
	p[1] = -1; /* the thread's now */
	r = sandbox_untar(p[0], args[5], host_dest, o, cancel, res, &refused, err);
	if (refused || cancel_fired(cancel))
		cancel_fire(&stop);
	/* What tar has left (its last record's padding), until its session
	 * ends; a guest that goes on sending past that is ended. */
	for (size_t drained = 0;;) {
		ssize_t n = read(p[0], buf, sizeof(buf));

		if (n <= 0 && !(n < 0 && errno == EINTR))
			break;
		drained += n > 0 ? (size_t)n : 0;
		if ((drained > COPY_DRAIN_MAX || cancel_fired(cancel)) && !cancel_fired(&stop)) {
			cancel_fire(&stop);
			if (r == 0)
				r = cancel_fired(cancel)
					    ? cancel_check(cancel, err)
					    : gantry_error(err, 0,
							   "%s: the sandbox sent more than "
							   "the archive",
							   what);
			refused = true;
		}
	}
	pthread_join(thread, NULL);
	/* The session's or tar's failure explains a stream that broke off;
	 * one we ended ourselves is ours to explain. */
	if (!refused) {
		gantry_error_t why = NULL;

		if (tar_status(&t, what, &why) < 0) {
			gantry_error_free(err);
			*err = why;
			r = -1;
		}
	}
	gantry_error_free(&t.err);
	if (r == 0 && res->files + res->dirs + res->links == 0)
		r = gantry_error(err, 0, "%s: nothing came", what);
done:
	free(t.res.message);
	cancel_destroy(&stop);
	if (p[0] >= 0)
		close(p[0]);
	if (devnull >= 0)
		close(devnull);
	return r;
}

/* ---- in: a tar stream of the host's files -------------------------------------------- */

struct pack {
	struct archive *a;
	struct archive_entry *e;
	char *buf; /* COPY_BLOCK bytes: one for every level of the walk */
	bool archive;
	struct sandbox_copy_result *res;
	gantry_error_t err;
};

static int pack_error(struct pack *k, const char *arcname)
{
	return gantry_error(&k->err, 0, "pack `%s`: %s", arcname, sym_archive_error_string(k->a));
}

static int pack_tree(struct pack *k, int dir, const char *name, const char *arcname, int depth)
{
	struct stat st;
	char target[PATH_MAX];
	ssize_t n;

	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return gantry_error_errno(&k->err, "`%s`", arcname);
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode)) {
		k->res->skipped++;
		return 0;
	}
	sym_archive_entry_clear(k->e);
	sym_archive_entry_copy_pathname(k->e, arcname);
	sym_archive_entry_set_filetype(k->e, st.st_mode & S_IFMT);
	sym_archive_entry_set_perm(k->e, st.st_mode & (k->archive ? 07777 : 0777));
	sym_archive_entry_set_uid(k->e, k->archive ? st.st_uid : 0);
	sym_archive_entry_set_gid(k->e, k->archive ? st.st_gid : 0);
	sym_archive_entry_set_mtime(k->e, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	if (S_ISLNK(st.st_mode)) {
		n = readlinkat(dir, name, target, sizeof(target) - 1);
		if (n < 0)
			return gantry_error_errno(&k->err, "`%s`", arcname);
		target[n] = '\0';
		sym_archive_entry_copy_symlink(k->e, target);
		if (sym_archive_write_header(k->a, k->e) != ARCHIVE_OK)
			return pack_error(k, arcname);
		k->res->links++;
		return 0;
	}
	if (S_ISREG(st.st_mode)) {
		char *buf = k->buf;
		off_t left = st.st_size;
		/* Non-blocking: a FIFO swapped in since fstatat must not hang
		 * the open; what was opened must still be a regular file. */
		int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		struct stat now;

		if (fd < 0)
			return gantry_error_errno(&k->err, "`%s`", arcname);
		if (fstat(fd, &now) < 0 || !S_ISREG(now.st_mode)) {
			close(fd);
			k->res->skipped++;
			return 0;
		}
		sym_archive_entry_set_size(k->e, st.st_size);
		if (sym_archive_write_header(k->a, k->e) != ARCHIVE_OK) {
			close(fd);
			return pack_error(k, arcname);
		}
		/* Exactly the size announced: a file that shrinks meanwhile
		 * is padded with zeros, one that grows cut. */
		while (left > 0) {
			size_t want = left < (off_t)COPY_BLOCK ? (size_t)left : COPY_BLOCK;
			ssize_t got = read(fd, buf, want);

			if (got < 0) {
				close(fd);
				return gantry_error_errno(&k->err, "read `%s`", arcname);
			}
			if (got == 0) {
				memset(buf, 0, want);
				got = (ssize_t)want;
			}
			if (sym_archive_write_data(k->a, buf, (size_t)got) != got) {
				close(fd);
				return pack_error(k, arcname);
			}
			left -= got;
			k->res->bytes += (unsigned long long)got;
		}
		close(fd);
		k->res->files++;
		return 0;
	}
	/* A directory, then what is in it. */
	if (depth >= COPY_DEPTH_MAX)
		return gantry_error(&k->err, 0, "`%s`: more than %d directories deep", arcname,
				    COPY_DEPTH_MAX);
	if (sym_archive_write_header(k->a, k->e) != ARCHIVE_OK)
		return pack_error(k, arcname);
	k->res->dirs++;
	{
		int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
		struct dirent *de;
		int r = 0;

		if (d == NULL) {
			if (fd >= 0)
				close(fd);
			return gantry_error_errno(&k->err, "`%s`", arcname);
		}
		while (r == 0 && (de = readdir(d)) != NULL) {
			cleanup_free char *sub = NULL;

			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			xasprintf(&sub, "%s/%s", arcname, de->d_name);
			r = pack_tree(k, dirfd(d), de->d_name, sub, depth + 1);
		}
		closedir(d);
		return r;
	}
}

struct packer {
	struct pack k;
	int dir;
	const char *name, *arcname;
	int fd;
	int rc;
};

static void *pack_thread(void *opaque)
{
	struct packer *p = opaque;

	block_sigpipe();
	p->k.a = sym_archive_write_new();
	p->k.e = sym_archive_entry_new();
	p->k.buf = xmalloc(COPY_BLOCK);
	sym_archive_write_set_format_pax_restricted(p->k.a);
	if (sym_archive_write_open_fd(p->k.a, p->fd) != ARCHIVE_OK)
		p->rc = gantry_error(&p->k.err, 0, "cp: %s", sym_archive_error_string(p->k.a));
	else
		p->rc = pack_tree(&p->k, p->dir, p->name, p->arcname, 0);
	if (sym_archive_write_close(p->k.a) != ARCHIVE_OK && p->rc == 0)
		p->rc = pack_error(&p->k, p->arcname);
	sym_archive_entry_free(p->k.e);
	sym_archive_write_free(p->k.a);
	free(p->k.buf);
	close(p->fd);
	return NULL;
}

/* Whether path is a directory in the container (test -d there). */
static int guest_is_dir(const char *name, const char *path, bool *is_dir, gantry_error_t *err)
{
	char *args[] = { "test", "-d", (char *)path, NULL };
	struct tar_run t = { .name = name, .args = args, .nargs = 3, .in = -1, .out = -1 };
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (devnull < 0)
		return gantry_error_errno(err, "/dev/null");
	t.in = t.out = devnull;
	tar_run(&t);
	close(devnull);
	free(t.res.message);
	if (t.rc < 0) {
		*err = steal_pointer(&t.err);
		return -1;
	}
	*is_dir = !t.res.error && !t.res.signaled && t.res.code == 0;
	return 0;
}

int sandbox_copy_in(const char *name, const char *host_src, const char *path,
		    const struct sandbox_copy_opts *o, const struct gantry_cancel *cancel,
		    struct sandbox_copy_result *res, gantry_error_t *err)
{
	cleanup_free char *hdir = xstrdup(host_src), *hbase = xstrdup(host_src), *gdir = NULL,
			  *gbase = NULL, *what = NULL;
	char *args[] = { "tar", "-xf", "-", "-C", NULL, NULL };
	struct tar_run t = { .name = name, .args = args, .nargs = 5, .out = -1 };
	struct packer k = { .k = { .archive = o->archive, .res = res }, .fd = -1 };
	size_t len = strlen(path);
	bool into = len > 1 && path[len - 1] == '/';
	struct stat st;
	pthread_t thread;
	int p[2] = { -1, -1 }, devnull = -1, r = -1;

	*res = (struct sandbox_copy_result){ 0 };
	if (path[0] != '/')
		return gantry_error_usage(err, "`%s`: want an absolute path in the sandbox", path);
	if (lstat(host_src, &st) < 0)
		return gantry_error_usage(err, "`%s`: %s", host_src, strerror(errno));
	if (lazy_archive(err) < 0)
		return -1;
	k.name = basename(hbase);
	if (strcmp(k.name, "/") == 0)
		k.name = ".";
	if (!into && guest_is_dir(name, path, &into, err) < 0)
		return -1;
	if (into || strcmp(path, "/") == 0) {
		gdir = xstrdup(path);
		gbase = xstrdup(k.name);
	} else {
		cleanup_free char *d = xstrdup(path), *b = xstrdup(path);

		gdir = xstrdup(dirname(d));
		gbase = xstrdup(basename(b));
	}
	args[4] = gdir;
	k.arcname = gbase;
	xasprintf(&what, "%s:%s", name, path);
	k.dir = open(dirname(hdir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (k.dir < 0)
		return gantry_error_errno(err, "`%s`", host_src);
	devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (devnull < 0 || pipe2(p, O_CLOEXEC) < 0) {
		gantry_error_errno(err, "cp");
		goto done;
	}
	k.fd = p[1];
	if (pthread_create(&thread, NULL, pack_thread, &k) != 0) {
		gantry_error(err, 0, "cp: cannot start a thread");
		close(p[1]);
		goto done;
	}
	p[1] = -1;
	t.in = p[0];
	t.out = devnull;
	t.cancel = cancel;
	tar_run(&t);
	/* tar is done with the stream: a packer still writing gets EPIPE. */
	close(p[0]);
	p[0] = -1;
	pthread_join(thread, NULL);
	r = tar_status(&t, what, err);
	if (r == 0 && k.rc < 0) {
		*err = steal_pointer(&k.k.err);
		r = -1;
	}
	gantry_error_free(&k.k.err);
done:
	free(t.res.message);
	if (p[0] >= 0)
		close(p[0]);
	if (devnull >= 0)
		close(devnull);
	close(k.dir);
	return r;
}
