/* Open files: data fds come only from reopening a regular file's or a
 * directory's pinned O_PATH fd through /proc (never a device, FIFO or
 * symlink), or from an exclusive create beneath the parent. READ and
 * WRITE move data straight between the fd and the guest's buffers. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/util.h"
#include "share/internal.h"

/* What the guest may ask of an open (x86-64 values); O_CLOEXEC is ours. */
#define FS_OPEN_ALLOWED                                                                            \
	(O_ACCMODE | O_APPEND | O_TRUNC | O_NONBLOCK | O_SYNC | O_DSYNC | O_LARGEFILE | O_DIRECTORY)
#define FS_FALLOC_ALLOWED (FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)

static int open_flags(const struct fs_req *r, uint32_t guest)
{
	int f = (int)(guest & FS_OPEN_ALLOWED);

	if (fs_node_ro(r->node) && ((f & O_ACCMODE) != O_RDONLY || (f & O_TRUNC)))
		return -EROFS;
	if ((f & O_ACCMODE) == O_ACCMODE)
		return -EINVAL;
	return f | O_CLOEXEC;
}

/* A data fd for node n: a regular file or a directory, nothing else. */
int fs_reopen(const struct fs_node *n, int flags)
{
	char p[32];
	int fd;

	if (n->type == S_IFLNK)
		return -ELOOP;
	if (n->type != S_IFREG && n->type != S_IFDIR)
		return -EPERM;
	if (n->meta_known && n->meta.set && n->meta.dev_type)
		return -EACCES; /* a device the guest made: its bytes are not a device's */
	if (n->type == S_IFDIR && (flags & O_ACCMODE) != O_RDONLY)
		return -EISDIR;
	fs_proc_path(p, n->fd);
	fd = open(p, flags & ~(O_CREAT | O_EXCL | O_NOFOLLOW));
	return fd < 0 ? -errno : fd;
}

/* FOPEN_NOFLUSH: the guest's close sends no FLUSH. Ours would only close a
 * duplicate fd: the server takes no locks, and without the writeback cache
 * every WRITE has already reached the host and reported its error. That is
 * one round trip less per file written or read. */
static int reply_open(struct fs_req *r, struct fs_node *n, int fd, struct fuse_open_out *o)
{
	o->open_flags = FOPEN_NOFLUSH;
	return fs_handle_new(r->s, n, fd, &o->fh);
}

/* An open with O_TRUNC by a caller without CAP_FSETID, as a truncate. */
static int kill_setid_on_trunc(struct fs_node *n, int flags, uint32_t open_flags)
{
	if (!(flags & O_TRUNC) || !(open_flags & FUSE_OPEN_KILL_SUIDGID))
		return 0;
	return fs_meta_kill_setid(n);
}

int fs_op_open(struct fs_req *r)
{
	const struct fuse_open_in *in = fs_arg(r, 0, sizeof(*in));
	struct fuse_open_out *o = fs_reply(r, sizeof(*o));
	int flags, fd, ret;

	if (!o)
		return -EINVAL;
	if (!r->node->exp)
		return -EISDIR;
	flags = open_flags(r, in->flags);
	if (flags < 0)
		return flags;
	if (r->s->nr_handles >= FS_MAX_HANDLES)
		return -EMFILE;
	/* Before the data goes: a failure then loses nothing. */
	ret = kill_setid_on_trunc(r->node, flags, in->open_flags);
	if (ret < 0)
		return ret;
	fd = fs_reopen(r->node, flags);
	if (fd < 0)
		return fd;
	return reply_open(r, r->node, fd, o);
}

/* An existing name without the guest's O_EXCL: open what is there, as
 * LOOKUP then OPEN would; a symlink planted meanwhile gives ELOOP. */
static int create_existing(struct fs_req *r, const char *name, int flags, uint32_t open_flags,
			   struct fuse_entry_out *e, struct fuse_open_out *o)
{
	struct fs_node *n;
	int ret = fs_lookup_name(r, r->node, name, e);
	int fd;

	if (ret < 0)
		return ret;
	n = fs_node_get(r->s, e->nodeid);
	/* What is there is checked as an OPEN of it would be: the parent
	 * was. */
	if (n->hidden || (n->ro && ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC)))) {
		fs_node_forget(r->s, n, 1);
		return n->hidden ? -EACCES : -EROFS;
	}
	ret = kill_setid_on_trunc(n, flags, open_flags);
	fd = ret < 0 ? ret : fs_reopen(n, flags);
	if (fd < 0) {
		fs_node_forget(r->s, n, 1);
		return fd;
	}
	ret = reply_open(r, n, fd, o);
	if (ret < 0)
		fs_node_forget(r->s, n, 1);
	return ret;
}

int fs_op_create(struct fs_req *r)
{
	const struct fuse_create_in *in = fs_arg(r, 0, sizeof(*in));
	struct open_how how = { .resolve = FS_RESOLVE };
	struct fuse_entry_out *e;
	struct fuse_open_out *o;
	struct fs_node *n;
	const char *name;
	long end = fs_name(r, sizeof(*in), &name);
	char p[32];
	int flags, fd, pfd, ret;

	if (end < 0)
		return (int)end;
	if ((size_t)end != r->arg_len)
		return -EINVAL;
	if ((in->mode & S_IFMT) != S_IFREG && (in->mode & S_IFMT) != 0)
		return -EINVAL;
	if (r->node->type != S_IFDIR)
		return -ENOTDIR;
	if (fs_name_banned(r->node, name))
		return -EROFS;
	e = fs_reply(r, sizeof(*e) + sizeof(*o));
	if (!e)
		return -EINVAL;
	o = (struct fuse_open_out *)(e + 1);
	flags = open_flags(r, in->flags & ~O_DIRECTORY);
	if (flags < 0)
		return flags;
	if (r->s->nr_handles >= FS_MAX_HANDLES)
		return -EMFILE;
	if (r->s->nr_nodes >= r->s->max_nodes)
		return -ENFILE;
	how.flags = (uint64_t)(flags | O_CREAT | O_EXCL | O_NOFOLLOW);
	how.mode = fs_host_mode(S_IFREG, in->mode);
	fd = (int)syscall(SYS_openat2, r->node->fd, name, &how, sizeof(how));
	if (fd < 0 && errno == EEXIST && !(in->flags & O_EXCL))
		return create_existing(r, name, flags, in->open_flags, e, o);
	if (fd < 0)
		return -errno;
	/* The node is the inode just made, whatever the name holds by now. */
	fs_proc_path(p, fd);
	pfd = open(p, O_PATH | O_CLOEXEC);
	if (pfd < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	n = fs_node_add(r->s, r->node->exp, pfd);
	if (!n) {
		ret = -errno;
		close(fd);
		return ret;
	}
	{
		struct stat st;

		/* Where the owner cannot be kept, the file is the host's. */
		fs_own_new(r, r->node, n, in->mode, 0, 0);
		if (fstat(fd, &st) < 0) {
			ret = -errno;
			close(fd);
			fs_node_forget(r->s, n, 1);
			return ret;
		}
		fs_entry_fill(n, &st, e);
	}
	ret = reply_open(r, n, fd, o);
	if (ret < 0)
		fs_node_forget(r->s, n, 1);
	return ret;
}

/* A duplicate of the data fd of handle fh on this request's node, for the
 * blocking part of an operation, which runs unlocked (UNLOCKED): a slow
 * fsync stalls no other request, and a RELEASE meanwhile closes only the
 * original. Returns the fd or a negative errno. */
static int io_fd(struct fs_req *r, uint64_t fh)
{
	struct fs_handle *h = fs_handle_get(r->s, fh, r->node);
	int fd;

	if (!h || h->fd < 0)
		return -EBADF;
	fd = fcntl(h->fd, F_DUPFD_CLOEXEC, 0);
	return fd < 0 ? -errno : fd;
}

/* Run stmt without the server's lock; errno survives it. */
#define UNLOCKED(r, stmt)                                                                          \
	do {                                                                                       \
		int e_;                                                                            \
		pthread_mutex_unlock(&(r)->s->lock);                                               \
		stmt;                                                                              \
		e_ = errno;                                                                        \
		pthread_mutex_lock(&(r)->s->lock);                                                 \
		errno = e_;                                                                        \
	} while (0)

int fs_op_read(struct fs_req *r)
{
	const struct fuse_read_in *in = fs_arg(r, 0, sizeof(*in));
	cleanup_close int fd = io_fd(r, in->fh);
	struct iovec sub[FS_MAX_IOV];
	size_t len, k;
	ssize_t n;

	if (fd < 0)
		return fd;
	if (in->offset > INT64_MAX)
		return -EINVAL;
	len = MIN((size_t)in->size, MIN(r->room, (size_t)FS_MAX_WRITE));
	k = fs_iov_slice(r->out, r->nr_out, sizeof(struct fuse_out_header), len, sub);
	UNLOCKED(r, n = k ? preadv(fd, sub, (int)k, (off_t)in->offset) : 0);
	if (n < 0)
		return -errno;
	r->direct = true;
	r->reply_len = (size_t)n;
	return 0;
}

int fs_op_write(struct fs_req *r)
{
	const struct fuse_write_in *in = fs_arg(r, 0, sizeof(*in));
	size_t data_off = sizeof(struct fuse_in_header) + sizeof(*in);
	cleanup_close int fd = io_fd(r, in->fh);
	struct iovec sub[FS_MAX_IOV];
	struct fuse_write_out *o;
	size_t k;
	ssize_t n;

	if (fd < 0)
		return fd;
	if (in->size != r->h.len - data_off || in->size > FS_MAX_WRITE)
		return -EINVAL;
	if (in->offset > INT64_MAX)
		return -EINVAL;
	o = fs_reply(r, sizeof(*o));
	if (!o)
		return -EINVAL;
	/* A writer without CAP_FSETID (FUSE_HANDLE_KILLPRIV_V2). */
	if (in->write_flags & FUSE_WRITE_KILL_SUIDGID) {
		int ret = fs_meta_kill_setid(r->node);

		if (ret < 0)
			return ret;
	}
	k = fs_iov_slice(r->in, r->nr_in, data_off, in->size, sub);
	UNLOCKED(r, n = k ? pwritev(fd, sub, (int)k, (off_t)in->offset) : 0);
	if (n < 0)
		return -errno;
	o->size = (uint32_t)n;
	return 0;
}

int fs_op_release(struct fs_req *r)
{
	const struct fuse_release_in *in = fs_arg(r, 0, sizeof(*in));
	struct fs_handle *h = fs_handle_get(r->s, in->fh, r->node);

	if (!h)
		return -EBADF;
	fs_handle_free(r->s, h);
	return 0;
}

int fs_op_flush(struct fs_req *r)
{
	const struct fuse_flush_in *in = fs_arg(r, 0, sizeof(*in));
	int fd = io_fd(r, in->fh), ret;

	/* close() of a duplicate: what the guest's close means to the host. */
	if (fd < 0)
		return fd;
	UNLOCKED(r, ret = close(fd));
	return ret < 0 ? -errno : 0;
}

/* FSYNC and FSYNCDIR: never ENOSYS, which the guest takes as success. */
int fs_op_fsync(struct fs_req *r)
{
	const struct fuse_fsync_in *in = fs_arg(r, 0, sizeof(*in));
	cleanup_close int fd = io_fd(r, in->fh);
	int ret;

	if (fd < 0)
		return fd;
	UNLOCKED(r, ret = (in->fsync_flags & 1) ? fdatasync(fd) : fsync(fd));
	return ret < 0 ? -errno : 0;
}

int fs_op_fallocate(struct fs_req *r)
{
	const struct fuse_fallocate_in *in = fs_arg(r, 0, sizeof(*in));
	cleanup_close int fd = io_fd(r, in->fh);
	int ret;

	if (fd < 0)
		return fd;
	if (in->mode & ~FS_FALLOC_ALLOWED)
		return -EOPNOTSUPP;
	if (in->offset > INT64_MAX || in->length > INT64_MAX)
		return -EINVAL;
	UNLOCKED(r, ret = fallocate(fd, (int)in->mode, (off_t)in->offset, (off_t)in->length));
	return ret < 0 ? -errno : 0;
}

int fs_op_lseek(struct fs_req *r)
{
	const struct fuse_lseek_in *in = fs_arg(r, 0, sizeof(*in));
	struct fs_handle *h = fs_handle_get(r->s, in->fh, r->node);
	struct fuse_lseek_out *o = fs_reply(r, sizeof(*o));
	off_t off;

	if (!h || h->fd < 0)
		return -EBADF;
	if (!o)
		return -EINVAL;
	if (in->whence != SEEK_DATA && in->whence != SEEK_HOLE)
		return -EINVAL;
	if (in->offset > INT64_MAX)
		return -ENXIO;
	off = lseek(h->fd, (off_t)in->offset, (int)in->whence);
	if (off < 0)
		return -errno;
	o->offset = (uint64_t)off;
	return 0;
}

int fs_op_syncfs(struct fs_req *r)
{
	for (size_t i = 0; i < FS_MAX_EXPORTS; i++) {
		struct fs_export *e = r->s->exports[i];
		cleanup_close int fd = -1;

		if (!e || e->o.ro)
			continue;
		int ret = 0;

		fd = fs_reopen(e->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0)
			UNLOCKED(r, ret = syncfs(fd));
		if (ret < 0)
			return -errno;
	}
	return 0;
}
