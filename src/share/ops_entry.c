/* Operations on names and inodes: lookup and forget, attributes, links,
 * directories' entries. Every name is one checked component resolved
 * beneath its parent's pinned fd; nothing here follows a symlink. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util.h"
#include "share/internal.h"

#define FS_SYMLINK_MAX (PATH_MAX - 1)

/* The host's stat of n. */
static int stat_node(const struct fs_node *n, struct stat *st)
{
	if (fstatat(n->fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

/* The hub: a read-only directory of the exports' roots. */
static void hub_stat(struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = FS_ROOT_ID;
	st->st_mode = S_IFDIR | 0555;
	st->st_nlink = 2;
	st->st_blksize = 4096;
}

int fs_lookup_name(struct fs_req *r, struct fs_node *dir, const char *name,
		   struct fuse_entry_out *e)
{
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = FS_RESOLVE,
	};
	struct fs_node *n;
	struct stat st;
	int fd, ret;

	if (dir->type != S_IFDIR)
		return -ENOTDIR;
	if (!dir->exp) {
		struct fs_export *exp = fs_export_find(r->s, name);

		if (!exp)
			return -ENOENT;
		n = exp->root;
		n->nlookup++;
		st.st_mode = 0;
	} else {
		fd = (int)syscall(SYS_openat2, dir->fd, name, &how, sizeof(how));
		if (fd < 0)
			return -errno;
		n = fs_node_add_stat(r->s, dir->exp, fd, &st);
		if (!n)
			return -errno;
		if (dir->ro || fs_no_git(dir, name))
			n->ro = true;
	}
	ret = st.st_mode ? 0 : stat_node(n, &st);
	if (ret < 0) {
		fs_node_forget(r->s, n, 1);
		return ret;
	}
	fs_entry_fill(n, &st, e);
	/* Shares come and go while the guest runs: it asks again each time
	 * it walks through the hub (its mounts start below it). */
	if (!dir->exp)
		e->entry_valid = e->entry_valid_nsec = 0;
	return 0;
}

/* Reply with the entry of name in dir, found again after a change. */
static int reply_entry(struct fs_req *r, struct fs_node *dir, const char *name)
{
	struct fuse_entry_out *e = fs_reply(r, sizeof(*e));

	if (!e)
		return -EINVAL;
	return fs_lookup_name(r, dir, name, e);
}

/* Refuse before making a name a mask bans (EROFS, as for a protected
 * one), or a new inode the node table would have no room for. */
static int new_name_ok(struct fs_req *r, const char *name)
{
	if (fs_name_banned(r->node, name))
		return -EROFS;
	return r->s->nr_nodes < r->s->max_nodes ? 0 : -ENFILE;
}

/* The one name that is all of this request's arguments after skip bytes. */
static int only_name(struct fs_req *r, size_t skip, const char **name)
{
	long end = fs_name(r, skip, name);

	if (end < 0)
		return (int)end;
	return (size_t)end == r->arg_len ? 0 : -EINVAL;
}

int fs_op_lookup(struct fs_req *r)
{
	struct fuse_entry_out *e;
	const char *name;
	int ret = only_name(r, 0, &name);

	if (ret < 0)
		return ret;
	ret = reply_entry(r, r->node, name);
	if (ret != -ENOENT || !r->node->exp)
		return ret;
	/* A name that is not there: an entry of node 0, which the guest
	 * keeps as a negative dentry for as long as it would a found one
	 * (a file the host makes meanwhile shows within FS_TTL_SEC), and
	 * does not ask again for each missing name a build or an import
	 * probes. */
	e = fs_reply(r, sizeof(*e));
	if (!e)
		return -ENOENT;
	e->entry_valid = FS_TTL_SEC;
	return 0;
}

int fs_op_forget(struct fs_req *r)
{
	const struct fuse_forget_in *in = fs_arg(r, 0, sizeof(*in));

	if (r->node != &r->s->hub)
		fs_node_forget(r->s, r->node, in->nlookup);
	return 0;
}

int fs_op_batch_forget(struct fs_req *r)
{
	const struct fuse_batch_forget_in *in = fs_arg(r, 0, sizeof(*in));
	const struct fuse_forget_one *one;

	if (in->count > (r->arg_len - sizeof(*in)) / sizeof(*one))
		return -EINVAL;
	one = fs_arg(r, sizeof(*in), (size_t)in->count * sizeof(*one));
	for (uint32_t i = 0; i < in->count; i++) {
		struct fs_node *n;

		/* A restore's node the guest never named again: no walk to it. */
		if (fs_carry_forget(r->s, one[i].nodeid, one[i].nlookup))
			continue;
		n = fs_node_get(r->s, one[i].nodeid);

		if (n && n != &r->s->hub)
			fs_node_forget(r->s, n, one[i].nlookup);
	}
	return 0;
}

static int reply_attr(struct fs_req *r, const struct stat *st)
{
	struct fuse_attr_out *o = fs_reply(r, sizeof(*o));

	if (!o)
		return -EINVAL;
	o->attr_valid = FS_TTL_SEC;
	fs_attr_fill(r->node, st, &o->attr);
	return 0;
}

int fs_op_getattr(struct fs_req *r)
{
	const struct fuse_getattr_in *in = fs_arg(r, 0, sizeof(*in));
	struct stat st;
	int ret;

	if (!r->node->exp) {
		hub_stat(&st);
		return reply_attr(r, &st);
	}
	if (in->getattr_flags & FUSE_GETATTR_FH) {
		struct fs_handle *h = fs_handle_get(r->s, in->fh, r->node);

		if (!h)
			return -EBADF;
		if (fstat(h->fd, &st) < 0)
			return -errno;
		return reply_attr(r, &st);
	}
	ret = stat_node(r->node, &st);
	return ret < 0 ? ret : reply_attr(r, &st);
}

static int set_size(struct fs_req *r, const struct fuse_setattr_in *in)
{
	cleanup_close int fd = -1;
	struct fs_handle *h = NULL;
	char p[32];

	if (r->node->type == S_IFDIR)
		return -EISDIR;
	if (r->node->type != S_IFREG || r->node->meta.dev_type)
		return -EPERM;
	if (in->valid & FATTR_FH)
		h = fs_handle_get(r->s, in->fh, r->node);
	if (h && ftruncate(h->fd, (off_t)in->size) == 0)
		return 0;
	fs_proc_path(p, r->node->fd);
	fd = open(p, O_WRONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	return ftruncate(fd, (off_t)in->size) < 0 ? -errno : 0;
}

/* On the node's own O_PATH fd: a symlink's times are its own. */
static int set_times(struct fs_req *r, const struct fuse_setattr_in *in)
{
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT } };

	if (in->valid & FATTR_ATIME_NOW)
		ts[0].tv_nsec = UTIME_NOW;
	else if (in->valid & FATTR_ATIME)
		ts[0] = (struct timespec){ (time_t)in->atime, in->atimensec };
	if (in->valid & FATTR_MTIME_NOW)
		ts[1].tv_nsec = UTIME_NOW;
	else if (in->valid & FATTR_MTIME)
		ts[1] = (struct timespec){ (time_t)in->mtime, in->mtimensec };
	if (utimensat(r->node->fd, "", ts, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

/* A new owner or mode: the host gets its safe permission bits, the rest
 * is kept beside it (meta.c). A symlink's mode cannot change (Linux has
 * no lchmod); a FIFO's or socket's owner stays the host's. */
static int set_owner_mode(struct fs_req *r, const struct fuse_setattr_in *in)
{
	struct fs_node *n = r->node;
	struct stat host, view;
	struct fs_meta m;
	char p[32];
	int ret;

	if ((in->valid & FATTR_MODE) && n->type == S_IFLNK)
		return -EOPNOTSUPP;
	if ((in->valid & FATTR_MODE) && (n->type == S_IFCHR || n->type == S_IFBLK))
		return -EPERM; /* the host's own device node: never through /proc */
	ret = stat_node(n, &host);
	if (ret < 0)
		return ret;
	view = host;
	fs_meta_view(n, &view);
	m = (struct fs_meta){ .uid = view.st_uid,
			      .gid = view.st_gid,
			      .mode = view.st_mode & 07777,
			      .dev_type = n->meta.set ? n->meta.dev_type : 0,
			      .rdev = view.st_rdev };
	if (in->valid & FATTR_UID)
		m.uid = in->uid;
	if (in->valid & FATTR_GID)
		m.gid = in->gid;
	if (in->valid & FATTR_MODE) {
		mode_t want = m.dev_type ? S_IRUSR | S_IWUSR : fs_host_mode(n->type, in->mode);

		m.mode = in->mode & 07777;
		fs_proc_path(p, n->fd);
		if ((host.st_mode & 07777) != want) {
			if (fchmodat(AT_FDCWD, p, want, 0) < 0)
				return -errno;
			ret = stat_node(n, &host);
			if (ret < 0)
				return ret;
		}
	}
	ret = fs_meta_set(n, &host, &m);
	/* A chown that changed nothing still moves the ctime, as on a disk. */
	if (ret == 0 && (in->valid & (FATTR_UID | FATTR_GID)) && !(in->valid & FATTR_MODE))
		fs_touch_ctime(n);
	/* Where nothing can be kept, an owner is taken and has no effect. */
	return ret == -EOPNOTSUPP ? 0 : MIN(ret, 0);
}

int fs_op_setattr(struct fs_req *r)
{
	const struct fuse_setattr_in *in = fs_arg(r, 0, sizeof(*in));
	struct stat st;
	int ret;

	if ((in->valid & FATTR_SIZE) && r->node->type == S_IFLNK)
		return -EPERM;
	/* A chown, or a truncate by a caller without CAP_FSETID
	 * (FUSE_HANDLE_KILLPRIV_V2): first, so that a failure changes
	 * nothing else. */
	if (in->valid & FATTR_KILL_SUIDGID) {
		ret = fs_meta_kill_setid(r->node);
		if (ret < 0)
			return ret;
	}
	if (in->valid & (FATTR_MODE | FATTR_UID | FATTR_GID)) {
		ret = set_owner_mode(r, in);
		if (ret < 0)
			return ret;
	}
	if (in->valid & FATTR_SIZE) {
		ret = set_size(r, in);
		if (ret < 0)
			return ret;
	}
	if (in->valid & (FATTR_ATIME | FATTR_MTIME | FATTR_ATIME_NOW | FATTR_MTIME_NOW)) {
		ret = set_times(r, in);
		if (ret < 0)
			return ret;
	}
	ret = stat_node(r->node, &st);
	return ret < 0 ? ret : reply_attr(r, &st);
}

int fs_op_readlink(struct fs_req *r)
{
	char buf[PATH_MAX];
	ssize_t n;
	void *o;

	if (r->node->type != S_IFLNK)
		return -EINVAL;
	n = readlinkat(r->node->fd, "", buf, sizeof(buf));
	if (n < 0)
		return -errno;
	o = fs_reply(r, (size_t)n);
	if (!o)
		return -ERANGE;
	memcpy(o, buf, (size_t)n);
	return 0;
}

int fs_own_new(struct fs_req *r, struct fs_node *dir, struct fs_node *n, mode_t mode,
	       mode_t dev_type, dev_t rdev)
{
	struct fs_meta m = { .uid = r->h.uid,
			     .gid = r->h.gid,
			     .mode = mode & 07777,
			     .dev_type = dev_type,
			     .rdev = rdev };
	struct stat pv, host;
	int ret;

	/* A symlink's owner is kept only when chowned: kept on the share's
	 * root, one for each symlink a guest makes would not scale. */
	if (n->type == S_IFLNK)
		return -EOPNOTSUPP;
	ret = fs_meta_stat(dir, &pv);
	if (ret < 0)
		return ret;
	if (pv.st_mode & S_ISGID) {
		m.gid = pv.st_gid;
		if (n->type == S_IFDIR)
			m.mode |= S_ISGID;
	}
	ret = stat_node(n, &host);
	if (ret < 0)
		return ret;
	/* The umask of the process took bits the guest asked for. */
	ret = fs_mode_exact(r->s, n->fd, dev_type ? S_IRUSR | S_IWUSR : fs_host_mode(n->type, mode));
	if (ret < 0)
		return ret;
	if (ret == 1)
		stat_node(n, &host);
	return fs_meta_set(n, &host, &m);
}

/* Reply with the entry of name, just made in this request's node, owned
 * as fs_own_new says; where nothing can be kept, as the host shows it. A
 * device (dev_ino: the empty file made for it) whose type cannot be kept
 * is taken back, while the name still holds that file: EPERM, as before
 * there was metadata. */
static int new_entry(struct fs_req *r, const char *name, mode_t mode, mode_t dev_type, dev_t rdev,
		     ino_t dev_ino)
{
	struct fuse_entry_out *e = fs_reply(r, sizeof(*e));
	struct fs_node *n;
	struct stat st;
	int ret;

	if (!e)
		return -EINVAL;
	ret = fs_lookup_name(r, r->node, name, e);
	if (ret < 0)
		return ret;
	n = fs_node_get(r->s, e->nodeid);
	if (dev_type && n->ino != dev_ino) {
		fs_node_forget(r->s, n, 1); /* the name was swapped meanwhile */
		return -ENOENT;
	}
	ret = fs_own_new(r, r->node, n, mode, dev_type, rdev);
	if (ret < 0 && dev_type) {
		fs_node_forget(r->s, n, 1);
		if (fstatat(r->node->fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_ino == dev_ino)
			unlinkat(r->node->fd, name, 0);
		return -EPERM;
	}
	/* e is the view already, unless the xattr or the mode changed. */
	if ((ret == 1 || r->s->umask) && stat_node(n, &st) == 0)
		fs_attr_fill(n, &st, &e->attr);
	return 0;
}

int fs_op_symlink(struct fs_req *r)
{
	const char *name, *target;
	long end = fs_name(r, 0, &name);
	size_t n;
	int ret;

	if (end < 0)
		return (int)end;
	target = (const char *)r->arg + end;
	n = strnlen(target, r->arg_len - (size_t)end);
	if (n == 0 || (size_t)end + n + 1 != r->arg_len)
		return -EINVAL;
	if (n > FS_SYMLINK_MAX)
		return -ENAMETOOLONG;
	ret = new_name_ok(r, name);
	if (ret < 0)
		return ret;
	if (symlinkat(target, r->node->fd, name) < 0)
		return -errno;
	return new_entry(r, name, 0777, 0, 0, 0);
}

/* A device node the guest makes is an empty file of the server's on the
 * host; its type and number live in the metadata. */
static int make_device_file(struct fs_req *r, const char *name, ino_t *ino)
{
	struct stat st;
	struct open_how how = {
		.flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		.mode = S_IRUSR | S_IWUSR,
		.resolve = FS_RESOLVE,
	};
	int fd = (int)syscall(SYS_openat2, r->node->fd, name, &how, sizeof(how));

	if (fd < 0)
		return -errno;
	*ino = fstat(fd, &st) == 0 ? st.st_ino : 0;
	close(fd);
	return 0;
}

int fs_op_mknod(struct fs_req *r)
{
	const struct fuse_mknod_in *in = fs_arg(r, 0, sizeof(*in));
	mode_t t = in->mode & S_IFMT;
	const char *name;
	int ret = only_name(r, sizeof(*in), &name);

	if (ret < 0)
		return ret;
	if (t != S_IFREG && t != S_IFIFO && t != S_IFSOCK && t != S_IFCHR && t != S_IFBLK)
		return -EINVAL;
	ret = new_name_ok(r, name);
	if (ret < 0)
		return ret;
	if (t == S_IFCHR || t == S_IFBLK) {
		ino_t ino = 0;

		ret = make_device_file(r, name, &ino);
		if (ret < 0)
			return ret;
		return new_entry(r, name, in->mode, t, (dev_t)in->rdev, ino);
	}
	if (mknodat(r->node->fd, name, t | fs_host_mode(t, in->mode), 0) < 0)
		return -errno;
	return new_entry(r, name, in->mode, 0, 0, 0);
}

int fs_op_mkdir(struct fs_req *r)
{
	const struct fuse_mkdir_in *in = fs_arg(r, 0, sizeof(*in));
	const char *name;
	int ret = only_name(r, sizeof(*in), &name);

	if (ret < 0)
		return ret;
	ret = new_name_ok(r, name);
	if (ret < 0)
		return ret;
	if (mkdirat(r->node->fd, name, fs_host_mode(S_IFDIR, in->mode)) < 0)
		return -errno;
	return new_entry(r, name, in->mode, 0, 0, 0);
}

static int remove_name(struct fs_req *r, int flags)
{
	const char *name;
	struct stat st;
	bool known;
	int ret = only_name(r, 0, &name);

	if (ret < 0)
		return ret;
	if (fs_name_masked(r->node, name))
		return -EROFS;
	known = !flags && fstatat(r->node->fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (unlinkat(r->node->fd, name, flags) < 0)
		return -errno;
	if (known)
		fs_meta_unlinked(r->node->exp, &st);
	return 0;
}

int fs_op_unlink(struct fs_req *r)
{
	return remove_name(r, 0);
}

int fs_op_rmdir(struct fs_req *r)
{
	return remove_name(r, AT_REMOVEDIR);
}

/* The other node of a two-node operation, in the same export. */
static int peer_node(struct fs_req *r, uint64_t id, struct fs_node **out)
{
	struct fs_node *n = fs_node_get(r->s, id);

	if (!n)
		return -ESTALE;
	if (!n->exp)
		return -EROFS;
	if (n->exp != r->node->exp)
		return -EXDEV;
	if (n->ro)
		return -EROFS;
	*out = n;
	return 0;
}

static int do_rename(struct fs_req *r, size_t skip, uint64_t newdir, uint32_t flags)
{
	struct fs_node *nd;
	struct stat st;
	bool replaced;
	const char *from, *to;
	long end = fs_name(r, skip, &from);
	int ret;

	if (end < 0)
		return (int)end;
	end = fs_name(r, (size_t)end, &to);
	if (end < 0)
		return (int)end;
	if ((size_t)end != r->arg_len)
		return -EINVAL;
	if (flags & RENAME_WHITEOUT)
		return -EPERM;
	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;
	ret = peer_node(r, newdir, &nd);
	if (ret < 0)
		return ret;
	if (r->node->type != S_IFDIR || nd->type != S_IFDIR)
		return -ENOTDIR;
	if (fs_name_masked(r->node, from) || fs_name_masked(nd, to) || fs_name_banned(nd, to))
		return -EROFS;
	/* What a rename replaces is unlinked. */
	replaced = !(flags & (RENAME_EXCHANGE | RENAME_NOREPLACE)) &&
		   fstatat(nd->fd, to, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (renameat2(r->node->fd, from, nd->fd, to, flags) < 0)
		return -errno;
	if (replaced)
		fs_meta_unlinked(nd->exp, &st);
	return 0;
}

int fs_op_rename(struct fs_req *r)
{
	const struct fuse_rename_in *in = fs_arg(r, 0, sizeof(*in));

	return do_rename(r, sizeof(*in), in->newdir, 0);
}

int fs_op_rename2(struct fs_req *r)
{
	const struct fuse_rename2_in *in = fs_arg(r, 0, sizeof(*in));

	return do_rename(r, sizeof(*in), in->newdir, in->flags);
}

int fs_op_link(struct fs_req *r)
{
	const struct fuse_link_in *in = fs_arg(r, 0, sizeof(*in));
	struct fs_node *old;
	const char *name;
	char p[32];
	int ret = only_name(r, sizeof(*in), &name);

	if (ret < 0)
		return ret;
	ret = peer_node(r, in->oldnodeid, &old);
	if (ret < 0)
		return ret;
	if (r->node->type != S_IFDIR)
		return -ENOTDIR;
	if (old->type != S_IFREG && old->type != S_IFLNK && old->type != S_IFIFO &&
	    old->type != S_IFSOCK)
		return -EPERM; /* a directory, or the host's own device node */
	if (fs_name_banned(r->node, name))
		return -EROFS;
	/* Through /proc an O_PATH fd links the inode itself (a symlink, a
	 * FIFO or socket) and its metadata goes with it. */
	fs_proc_path(p, old->fd);
	if (linkat(AT_FDCWD, p, r->node->fd, name, AT_SYMLINK_FOLLOW) < 0)
		return -errno;
	return reply_entry(r, r->node, name);
}

int fs_op_statfs(struct fs_req *r)
{
	struct fuse_statfs_out *o = fs_reply(r, sizeof(*o));
	struct statvfs v;

	if (!o)
		return -EINVAL;
	if (!r->node->exp) {
		o->st.bsize = o->st.frsize = 4096;
		o->st.namelen = NAME_MAX;
		return 0;
	}
	if (fstatvfs(r->node->fd, &v) < 0)
		return -errno;
	o->st.blocks = v.f_blocks;
	o->st.bfree = v.f_bfree;
	o->st.bavail = v.f_bavail;
	o->st.files = v.f_files;
	o->st.ffree = v.f_ffree;
	o->st.bsize = (uint32_t)v.f_bsize;
	o->st.namelen = (uint32_t)v.f_namemax;
	o->st.frsize = (uint32_t)v.f_frsize;
	return 0;
}

int fs_op_access(struct fs_req *r)
{
	const struct fuse_access_in *in = fs_arg(r, 0, sizeof(*in));

	if ((in->mask & W_OK) && fs_node_ro(r->node))
		return -EROFS;
	return 0;
}
