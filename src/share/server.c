/* The share server's front: exports, and each request framed, checked and
 * dispatched. The header and arguments are copied out of the guest's
 * buffers before anything reads them; every length is checked against
 * what was copied; the reply goes back as fuse_out_header + payload. */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/files.h"
#include "common/util.h"
#include "share/internal.h"

#define FS_INIT_FLAGS                                                                              \
	(FUSE_ASYNC_READ | FUSE_ATOMIC_O_TRUNC | FUSE_BIG_WRITES | FUSE_AUTO_INVAL_DATA |          \
	 FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO | FUSE_PARALLEL_DIROPS | FUSE_MAX_PAGES |     \
	 FUSE_CACHE_SYMLINKS | FUSE_ASYNC_DIO | FUSE_HANDLE_KILLPRIV_V2 | FUSE_INIT_EXT)
#define FS_MAX_BACKGROUND 64
#define FS_CONGESTION	  48

_Static_assert(FS_MAX_PAGES * 4096 == FS_MAX_WRITE, "max_pages must cover max_write");

enum {
	OP_MUTATES = 1, /* refused on ro exports and the hub: EROFS */
	OP_NOREPLY = 2,
	OP_NONODE = 4, /* the header's nodeid means nothing */
};

struct fs_op {
	int (*fn)(struct fs_req *r);
	uint32_t min_args;
	uint32_t flags;
};

static int op_init(struct fs_req *r);
static int op_destroy(struct fs_req *r);

static const struct fs_op ops[] = {
	[FUSE_LOOKUP] = { fs_op_lookup, 0, 0 },
	[FUSE_FORGET] = { fs_op_forget, sizeof(struct fuse_forget_in), OP_NOREPLY },
	[FUSE_GETATTR] = { fs_op_getattr, sizeof(struct fuse_getattr_in), 0 },
	[FUSE_SETATTR] = { fs_op_setattr, sizeof(struct fuse_setattr_in), OP_MUTATES },
	[FUSE_READLINK] = { fs_op_readlink, 0, 0 },
	[FUSE_SYMLINK] = { fs_op_symlink, 0, OP_MUTATES },
	[FUSE_MKNOD] = { fs_op_mknod, sizeof(struct fuse_mknod_in), OP_MUTATES },
	[FUSE_MKDIR] = { fs_op_mkdir, sizeof(struct fuse_mkdir_in), OP_MUTATES },
	[FUSE_UNLINK] = { fs_op_unlink, 0, OP_MUTATES },
	[FUSE_RMDIR] = { fs_op_rmdir, 0, OP_MUTATES },
	[FUSE_RENAME] = { fs_op_rename, sizeof(struct fuse_rename_in), OP_MUTATES },
	[FUSE_LINK] = { fs_op_link, sizeof(struct fuse_link_in), OP_MUTATES },
	[FUSE_OPEN] = { fs_op_open, sizeof(struct fuse_open_in), 0 },
	[FUSE_READ] = { fs_op_read, sizeof(struct fuse_read_in), 0 },
	[FUSE_WRITE] = { fs_op_write, sizeof(struct fuse_write_in), OP_MUTATES },
	[FUSE_STATFS] = { fs_op_statfs, 0, 0 },
	[FUSE_RELEASE] = { fs_op_release, sizeof(struct fuse_release_in), 0 },
	[FUSE_FSYNC] = { fs_op_fsync, sizeof(struct fuse_fsync_in), 0 },
	[FUSE_SETXATTR] = { fs_op_setxattr, FUSE_COMPAT_SETXATTR_IN_SIZE, OP_MUTATES },
	[FUSE_GETXATTR] = { fs_op_getxattr, sizeof(struct fuse_getxattr_in), 0 },
	[FUSE_LISTXATTR] = { fs_op_listxattr, sizeof(struct fuse_getxattr_in), 0 },
	[FUSE_REMOVEXATTR] = { fs_op_removexattr, 0, OP_MUTATES },
	[FUSE_FLUSH] = { fs_op_flush, sizeof(struct fuse_flush_in), 0 },
	[FUSE_INIT] = { op_init, 16, OP_NONODE },
	[FUSE_OPENDIR] = { fs_op_opendir, sizeof(struct fuse_open_in), 0 },
	[FUSE_READDIR] = { fs_op_readdir, sizeof(struct fuse_read_in), 0 },
	[FUSE_RELEASEDIR] = { fs_op_release, sizeof(struct fuse_release_in), 0 },
	[FUSE_FSYNCDIR] = { fs_op_fsync, sizeof(struct fuse_fsync_in), 0 },
	[FUSE_ACCESS] = { fs_op_access, sizeof(struct fuse_access_in), 0 },
	[FUSE_CREATE] = { fs_op_create, sizeof(struct fuse_create_in), OP_MUTATES },
	[FUSE_INTERRUPT] = { NULL, 0, OP_NOREPLY },
	[FUSE_DESTROY] = { op_destroy, 0, OP_NONODE },
	[FUSE_BATCH_FORGET] = { fs_op_batch_forget, sizeof(struct fuse_batch_forget_in),
				OP_NOREPLY | OP_NONODE },
	[FUSE_FALLOCATE] = { fs_op_fallocate, sizeof(struct fuse_fallocate_in), OP_MUTATES },
	[FUSE_READDIRPLUS] = { fs_op_readdirplus, sizeof(struct fuse_read_in), 0 },
	[FUSE_RENAME2] = { fs_op_rename2, sizeof(struct fuse_rename2_in), OP_MUTATES },
	[FUSE_LSEEK] = { fs_op_lseek, sizeof(struct fuse_lseek_in), 0 },
	[FUSE_SYNCFS] = { fs_op_syncfs, sizeof(struct fuse_syncfs_in), 0 },
};

int fs_server_new(struct fs_server **out, size_t max_nodes, unsigned int route,
		  gantry_error_t *err)
{
	struct fs_server *s;

	if (route > FS_ROUTE_MAX)
		return gantry_error(err, EINVAL, "share server: route %u out of range", route);
	s = xzalloc(sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	fs_nodes_init(s, max_nodes, route);
	s->hub.id = FS_ROOT_ID;
	s->hub.fd = -1;
	s->hub.type = S_IFDIR;
	s->hub.ino = FS_ROOT_ID;
	s->hub.pinned = true;
	s->umask = process_umask();
	*out = s;
	return 0;
}

void fs_server_free(struct fs_server *s)
{
	if (!s)
		return;
	fs_nodes_fini(s);
	for (size_t i = 0; i < FS_MAX_EXPORTS; i++)
		free(s->exports[i]);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static bool tag_ok(const char *tag)
{
	size_t n = strlen(tag);

	if (n == 0 || n > FS_TAG_MAX || strcmp(tag, ".") == 0 || strcmp(tag, "..") == 0)
		return false;
	return strspn(tag, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
	       n;
}

static struct fs_export **export_slot(struct fs_server *s, const char *tag)
{
	for (size_t i = 0; i < FS_MAX_EXPORTS; i++)
		if (s->exports[i] && strcmp(s->exports[i]->tag, tag) == 0)
			return &s->exports[i];
	return NULL;
}

static struct fs_remote *remote_find(struct fs_server *s, const char *tag)
{
	for (size_t i = 0; i < FS_MAX_EXPORTS; i++)
		if (s->remotes[i].route && strcmp(s->remotes[i].tag, tag) == 0)
			return &s->remotes[i];
	return NULL;
}

/* A tag the hub may take, and room for it: exports and remote ones
 * together are FS_MAX_EXPORTS at most. */
static int tag_free(struct fs_server *s, const char *tag, gantry_error_t *err)
{
	size_t n = 0;

	if (!tag_ok(tag))
		return gantry_error(err, EINVAL, "share tag `%s`: want [A-Za-z0-9._-]{1,%d}", tag,
				    FS_TAG_MAX);
	if (export_slot(s, tag) || remote_find(s, tag))
		return gantry_error(err, EEXIST, "share tag `%s` is taken", tag);
	for (size_t i = 0; i < FS_MAX_EXPORTS; i++)
		n += (s->exports[i] != NULL) + (s->remotes[i].route != 0);
	if (n >= FS_MAX_EXPORTS)
		return gantry_error(err, ENOSPC, "more than %d shares", FS_MAX_EXPORTS);
	return 0;
}

struct fs_export *fs_export_find(struct fs_server *s, const char *tag)
{
	struct fs_export **e = export_slot(s, tag);

	return e ? *e : NULL;
}

static int add_export(struct fs_server *s, const char *tag, int root_fd,
		      const struct fs_export_opts *o, gantry_error_t *err)
{
	struct fs_export **slot = NULL, *exp;
	struct stat st;
	int fd;

	if (tag_free(s, tag, err) < 0)
		return -1;
	for (size_t i = 0; i < FS_MAX_EXPORTS && !slot; i++)
		if (!s->exports[i])
			slot = &s->exports[i];
	if (fstat(root_fd, &st) < 0)
		return gantry_error_errno(err, "share `%s`: stat its root", tag);
	if (!S_ISDIR(st.st_mode))
		return gantry_error(err, ENOTDIR, "share `%s`: its root is not a directory", tag);
	fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return gantry_error_errno(err, "share `%s`: dup its root", tag);
	exp = xzalloc(sizeof(*exp));
	strcpy(exp->tag, tag);
	exp->o = *o;
	/* The root is a node like any other, kept while the export is. */
	exp->root = fs_node_add(s, exp, fd);
	if (!exp->root) {
		free(exp);
		return gantry_error_errno(err, "share `%s`: pin its root", tag);
	}
	exp->root->pinned = true;
	exp->root->nlookup = 0;
	*slot = exp;
	return 0;
}

static int keep_add(struct fs_export_opts *o, const struct stat *st, const char *name,
		    const char *rel, gantry_error_t *err)
{
	struct fs_keep *k;

	if (fs_opts_kept(o, st->st_dev, st->st_ino, name))
		return 0;
	if (strlen(name) > FS_KEEP_NAME_MAX)
		return gantry_error(err, ENAMETOOLONG, "mask %s: its name is longer than %d bytes",
				    rel, FS_KEEP_NAME_MAX);
	if (o->nr_keeps == FS_KEEPS_MAX)
		return gantry_error(err, E2BIG, "masks on more than %d directories and names",
				    FS_KEEPS_MAX);
	k = &o->keeps[o->nr_keeps++];
	*k = (struct fs_keep){ .dev = st->st_dev, .ino = st->st_ino };
	strcpy(k->name, name);
	return 0;
}

/* A step down from dir, no symlink followed, no mount crossed, into *fd:
 * 1, 0 when it is not there (nothing to mask), or -1 with err set. */
static int mask_step(int dir, const char *name, int flags, int *fd, const char *rel,
		     gantry_error_t *err)
{
	struct open_how how = { .flags = (uint64_t)(O_PATH | O_NOFOLLOW | O_CLOEXEC | flags),
				.resolve = FS_RESOLVE };

	*fd = (int)syscall(SYS_openat2, dir, name, &how, sizeof(how));
	if (*fd >= 0)
		return 1;
	if (errno == ENOENT || errno == EXDEV || errno == ENOTDIR)
		return 0;
	return gantry_error_errno(err, "mask %s", rel);
}

int fs_export_mask(struct fs_export_opts *o, int root_fd, const char *rel, bool hide,
		   gantry_error_t *err)
{
	cleanup_free char *path = xstrdup(rel);
	char *base = strrchr(path, '/'), *dir = path, *save = NULL;
	cleanup_close int cur = -1;
	struct stat st;
	int fd, ret;

	if (o->nr_masks == FS_MASKS_MAX)
		return gantry_error(err, E2BIG, "more than %d masks", FS_MASKS_MAX);
	if (base)
		*base++ = '\0';
	else
		base = path, dir = NULL;
	if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
		return gantry_error(err, EINVAL, "mask %s: not a path to a name", rel);
	cur = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
	if (cur < 0)
		return gantry_error_errno(err, "mask %s", rel);
	/* Each directory on the way to a protected path is kept: renamed, it
	 * would take the path's name away from what it protects (a hidden
	 * inode stays hidden by identity wherever it goes). */
	for (char *c = dir ? strtok_r(dir, "/", &save) : NULL; c; c = strtok_r(NULL, "/", &save)) {
		ret = mask_step(cur, c, O_DIRECTORY, &fd, rel, err);
		if (ret <= 0)
			return ret;
		close(cur);
		cur = fd;
		if (fstat(cur, &st) < 0)
			return gantry_error_errno(err, "mask %s", rel);
		if (!hide && keep_add(o, &st, "", rel, err) < 0)
			return -1;
	}
	ret = mask_step(cur, base, 0, &fd, rel, err);
	if (ret < 0 || (ret == 0 && hide))
		return ret;
	/* Not there: the name is banned in its directory. */
	if (ret == 0) {
		if (fstat(cur, &st) < 0)
			return gantry_error_errno(err, "mask %s", rel);
		return keep_add(o, &st, base, rel, err);
	}
	if (fstat(fd, &st) < 0) {
		close(fd);
		return gantry_error_errno(err, "mask %s", rel);
	}
	close(fd);
	o->masks[o->nr_masks++] = (struct fs_mask){ .dev = st.st_dev, .ino = st.st_ino, .hide = hide };
	return 0;
}

int fs_server_add_export(struct fs_server *s, const char *tag, int root_fd,
			 const struct fs_export_opts *o, gantry_error_t *err)
{
	int ret;

	pthread_mutex_lock(&s->lock);
	ret = add_export(s, tag, root_fd, o, err);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

int fs_server_add_remote(struct fs_server *s, const char *tag, unsigned int route,
			 gantry_error_t *err)
{
	int ret;

	if (route == 0 || route > FS_ROUTE_MAX)
		return gantry_error(err, EINVAL, "share `%s`: route %u out of range", tag, route);
	pthread_mutex_lock(&s->lock);
	ret = tag_free(s, tag, err);
	for (size_t i = 0; i < FS_MAX_EXPORTS && ret == 0; i++) {
		if (s->remotes[i].route == 0) {
			strcpy(s->remotes[i].tag, tag);
			s->remotes[i].route = route;
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

int fs_server_remove_export(struct fs_server *s, const char *tag, bool force, gantry_error_t *err)
{
	struct fs_export **slot;
	struct fs_remote *rem;
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	slot = export_slot(s, tag);
	rem = slot ? NULL : remote_find(s, tag);
	if (rem) {
		*rem = (struct fs_remote){ .route = 0 };
	} else if (!slot) {
		ret = gantry_error(err, ENOENT, "no share `%s`", tag);
	} else if (!force && (*slot)->handles) {
		ret = gantry_error(err, EBUSY, "share `%s`: %zu files open in the guest", tag,
				   (*slot)->handles);
	} else {
		fs_node_drop_export(s, *slot);
		free(*slot);
		*slot = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

size_t fs_server_export_handles(struct fs_server *s, const char *tag)
{
	struct fs_export *e;
	size_t n;

	pthread_mutex_lock(&s->lock);
	e = fs_export_find(s, tag);
	n = e ? e->handles : 0;
	pthread_mutex_unlock(&s->lock);
	return n;
}

void fs_server_reset(struct fs_server *s)
{
	pthread_mutex_lock(&s->lock);
	fs_node_drop_all(s);
	s->inited = false;
	pthread_mutex_unlock(&s->lock);
}

uint32_t fs_server_minor(struct fs_server *s)
{
	uint32_t minor;

	pthread_mutex_lock(&s->lock);
	minor = s->inited ? s->minor : 0;
	pthread_mutex_unlock(&s->lock);
	return minor;
}

void fs_server_assume_init(struct fs_server *s, uint32_t minor)
{
	pthread_mutex_lock(&s->lock);
	if (minor >= FS_MIN_MINOR && !s->inited) {
		s->minor = MIN(minor, (uint32_t)FUSE_KERNEL_MINOR_VERSION);
		s->inited = true;
	}
	pthread_mutex_unlock(&s->lock);
}

size_t fs_server_fds_wanted(struct fs_server *s)
{
	return s->max_nodes + FS_FD_SPARE;
}

void fs_server_stats(struct fs_server *s, struct fs_stats *out)
{
	pthread_mutex_lock(&s->lock);
	*out = s->stats;
	out->nodes = s->nr_nodes;
	out->handles = s->nr_handles;
	pthread_mutex_unlock(&s->lock);
}

/* ---- arguments, names and replies ---- */

const void *fs_arg(struct fs_req *r, size_t off, size_t len)
{
	if (off > r->arg_len || len > r->arg_len - off)
		return NULL;
	return r->arg + off;
}

long fs_name(struct fs_req *r, size_t off, const char **name)
{
	const char *p = (const char *)r->arg + off;
	size_t max = off < r->arg_len ? r->arg_len - off : 0;
	size_t n = strnlen(p, max);

	if (n == max)
		return -EINVAL; /* not terminated inside the request */
	if (n == 0 || memchr(p, '/', n) || strcmp(p, ".") == 0 || strcmp(p, "..") == 0)
		return -EINVAL;
	if (n > NAME_MAX)
		return -ENAMETOOLONG;
	*name = p;
	return (long)(off + n + 1);
}

void *fs_reply(struct fs_req *r, size_t len)
{
	if (len > r->reply_cap)
		return NULL;
	r->reply_len = len;
	memset(r->reply, 0, len);
	return r->reply;
}

void fs_attr_fill(struct fs_node *n, const struct stat *host, struct fuse_attr *a)
{
	struct stat view = *host, *st = &view;

	fs_meta_view(n, st);
	memset(a, 0, sizeof(*a));
	a->ino = st->st_ino;
	a->size = st->st_size;
	a->blocks = st->st_blocks;
	a->atime = st->st_atim.tv_sec;
	a->atimensec = st->st_atim.tv_nsec;
	a->mtime = st->st_mtim.tv_sec;
	a->mtimensec = st->st_mtim.tv_nsec;
	a->ctime = st->st_ctim.tv_sec;
	a->ctimensec = st->st_ctim.tv_nsec;
	a->mode = st->st_mode;
	a->nlink = st->st_nlink;
	a->uid = st->st_uid;
	a->gid = st->st_gid;
	a->rdev = st->st_rdev;
	a->blksize = st->st_blksize;
}

void fs_entry_fill(struct fs_node *n, const struct stat *st, struct fuse_entry_out *e)
{
	memset(e, 0, sizeof(*e));
	e->nodeid = n->id;
	e->entry_valid = FS_TTL_SEC;
	e->attr_valid = FS_TTL_SEC;
	fs_attr_fill(n, st, &e->attr);
}

int fs_proc_path(char buf[32], int fd)
{
	return snprintf(buf, 32, "/proc/self/fd/%d", fd);
}

size_t fs_iov_slice(const struct iovec *v, size_t n, size_t off, size_t len, struct iovec *dst)
{
	size_t k = 0;

	for (size_t i = 0; i < n && len; i++) {
		size_t l = v[i].iov_len;

		if (off >= l) {
			off -= l;
			continue;
		}
		dst[k].iov_base = (uint8_t *)v[i].iov_base + off;
		dst[k].iov_len = MIN(l - off, len);
		len -= dst[k].iov_len;
		off = 0;
		k++;
	}
	return k;
}

static size_t iov_total(const struct iovec *v, size_t n)
{
	size_t t = 0;

	for (size_t i = 0; i < n; i++)
		t += v[i].iov_len;
	return t;
}

static void iov_copy_out(void *dst, const struct iovec *v, size_t n, size_t len)
{
	uint8_t *d = dst;

	for (size_t i = 0; i < n && len; i++) {
		size_t l = MIN(v[i].iov_len, len);

		memcpy(d, v[i].iov_base, l);
		d += l;
		len -= l;
	}
}

static void iov_copy_in(const struct iovec *v, size_t n, size_t off, const void *src, size_t len)
{
	const uint8_t *p = src;

	for (size_t i = 0; i < n && len; i++) {
		size_t l = v[i].iov_len;

		if (off >= l) {
			off -= l;
			continue;
		}
		l = MIN(l - off, len);
		memcpy((uint8_t *)v[i].iov_base + off, p, l);
		p += l;
		len -= l;
		off = 0;
	}
}

/* ---- INIT and DESTROY ---- */

static int op_init(struct fs_req *r)
{
	const struct fuse_init_in *in = fs_arg(r, 0, 16);
	struct fuse_init_out *o;
	uint64_t offered = in->flags;

	if (r->s->inited)
		return -EPROTO;
	if (in->major < FUSE_KERNEL_VERSION)
		return -EPROTO;
	o = fs_reply(r, sizeof(*o));
	if (!o)
		return -EINVAL;
	o->major = FUSE_KERNEL_VERSION;
	/* A newer major: answer ours alone and the kernel asks again. */
	if (in->major > FUSE_KERNEL_VERSION)
		return 0;
	if (in->minor < FS_MIN_MINOR) {
		r->reply_len = 0;
		return -EPROTO;
	}
	if ((offered & FUSE_INIT_EXT) && r->arg_len >= sizeof(struct fuse_init_in))
		offered |= (uint64_t)((const struct fuse_init_in *)r->arg)->flags2 << 32;
	r->s->minor = MIN(in->minor, FUSE_KERNEL_MINOR_VERSION);
	o->minor = r->s->minor;
	o->max_readahead = in->max_readahead;
	o->flags = (uint32_t)(offered & FS_INIT_FLAGS);
	o->flags2 = (uint32_t)((offered & FS_INIT_FLAGS) >> 32);
	o->max_background = FS_MAX_BACKGROUND;
	o->congestion_threshold = FS_CONGESTION;
	o->max_write = FS_MAX_WRITE;
	o->time_gran = 1;
	o->max_pages = FS_MAX_PAGES;
	r->s->inited = true;
	return 0;
}

static int op_destroy(struct fs_req *r)
{
	fs_node_drop_all(r->s);
	r->s->inited = false;
	return 0;
}

/* ---- one request ---- */

static size_t reply_header(const struct iovec *out, size_t nr_out, uint64_t unique, int error,
			   size_t payload)
{
	struct fuse_out_header oh = {
		.len = (uint32_t)(sizeof(oh) + payload),
		.error = error,
		.unique = unique,
	};

	iov_copy_in(out, nr_out, 0, &oh, sizeof(oh));
	return oh.len;
}

/* The arguments, copied: the guest may rewrite its buffers meanwhile. A
 * NUL after them ends any string scan. */
static void copy_args(struct fs_req *r, size_t len, uint8_t **args)
{
	struct iovec sub[FS_MAX_IOV];
	size_t k = fs_iov_slice(r->in, r->nr_in, sizeof(r->h), len, sub);

	*args = xmalloc(len + 1);
	iov_copy_out(*args, sub, k, len);
	(*args)[len] = 0;
	r->arg = *args;
	r->arg_len = len;
}

/* The checks every request passes before its operation sees it. */
static int frame(struct fs_req *r, size_t readable, uint8_t **args)
{
	const struct fs_op *op;
	size_t args_len;

	if (r->h.len < sizeof(r->h) || r->h.len > readable)
		return -EINVAL;
	if (r->h.len > FS_MAX_REQUEST)
		return -E2BIG;
	if (r->h.opcode >= ARRAY_SIZE(ops) || !ops[r->h.opcode].fn)
		return -ENOSYS;
	op = &ops[r->h.opcode];
	if (!r->s->inited && r->h.opcode != FUSE_INIT)
		return -EIO;
	args_len = r->h.len - sizeof(r->h);
	/* WRITE's data stays where it is: preadv/pwritev take it from there. */
	if (r->h.opcode == FUSE_WRITE)
		args_len = MIN(args_len, sizeof(struct fuse_write_in));
	else if (args_len > FS_MAX_ARGS)
		return -E2BIG;
	if (args_len < op->min_args)
		return -EINVAL;
	copy_args(r, args_len, args);
	if (op->flags & OP_NONODE)
		return 0;
	/* A restore's node the guest never named again: no walk to it. */
	if (r->h.opcode == FUSE_FORGET &&
	    fs_carry_forget(r->s, r->h.nodeid, ((const struct fuse_forget_in *)r->arg)->nlookup))
		return -ESTALE;
	r->node = fs_node_get(r->s, r->h.nodeid);
	if (!r->node)
		return -ESTALE;
	if ((op->flags & OP_MUTATES) && fs_node_ro(r->node))
		return -EROFS;
	/* A hidden inode shows its attributes, nothing in it or of it. */
	if (r->node->hidden && r->h.opcode != FUSE_GETATTR && r->h.opcode != FUSE_FORGET &&
	    r->h.opcode != FUSE_STATFS && r->h.opcode != FUSE_ACCESS)
		return -EACCES;
	return 0;
}

static size_t handle_locked(struct fs_server *s, struct fs_req *r, size_t readable)
{
	cleanup_free uint8_t *args = NULL;
	cleanup_free uint8_t *reply = NULL;
	int ret;

	ret = frame(r, readable, &args);
	if (ret == 0) {
		if (ops[r->h.opcode].flags & OP_NOREPLY) {
			ops[r->h.opcode].fn(r);
			return 0;
		}
		r->reply_cap = MIN(r->room, (size_t)FS_MAX_READDIR);
		reply = xmalloc(r->reply_cap + 1);
		r->reply = reply;
		ret = ops[r->h.opcode].fn(r);
		/* An operation's reply never outgrows the room the guest gave. */
		if (ret == 0 && r->reply_len > (r->direct ? r->room : r->reply_cap))
			ret = -EIO;
	} else if (r->h.opcode == FUSE_INTERRUPT || r->h.opcode == FUSE_FORGET ||
		   r->h.opcode == FUSE_BATCH_FORGET) {
		return 0; /* never answered, even when malformed */
	}
	if (ret < 0) {
		s->stats.errors++;
		return reply_header(r->out, r->nr_out, r->h.unique, ret, 0);
	}
	if (!r->direct)
		iov_copy_in(r->out, r->nr_out, sizeof(struct fuse_out_header), r->reply,
			    r->reply_len);
	return reply_header(r->out, r->nr_out, r->h.unique, 0, r->reply_len);
}

unsigned int fs_server_route(struct fs_server *s, const struct iovec *in, size_t nr_in)
{
	struct fuse_in_header h;
	struct iovec sub[FS_MAX_IOV];
	char name[FS_TAG_MAX + 2] = "";
	const struct fs_remote *rem;
	unsigned int route = 0;
	size_t len, k;

	if (nr_in > FS_MAX_IOV || iov_total(in, nr_in) < sizeof(h))
		return 0; /* ours to refuse */
	iov_copy_out(&h, in, nr_in, sizeof(h));
	switch (h.opcode) {
	case FUSE_INIT:
	case FUSE_DESTROY:
	case FUSE_BATCH_FORGET:
	case FUSE_SYNCFS:
		return FS_ROUTE_ALL;
	}
	if (h.nodeid >> FS_ROUTE_SHIFT)
		return (unsigned int)MIN(h.nodeid >> FS_ROUTE_SHIFT, (uint64_t)FS_ROUTE_MAX);
	if (h.opcode != FUSE_LOOKUP || h.nodeid != FS_ROOT_ID || h.len <= sizeof(h))
		return 0;
	/* A lookup in the hub: of a remote export's tag (NUL-terminated). */
	len = MIN((size_t)h.len - sizeof(h), sizeof(name) - 1);
	k = fs_iov_slice(in, nr_in, sizeof(h), len, sub);
	iov_copy_out(name, sub, k, len);
	name[len] = '\0';
	pthread_mutex_lock(&s->lock);
	rem = strlen(name) < len ? remote_find(s, name) : NULL;
	if (rem)
		route = rem->route;
	pthread_mutex_unlock(&s->lock);
	return route;
}

size_t fs_error_reply(const struct iovec *in, size_t nr_in, const struct iovec *out,
		      size_t nr_out, int error)
{
	struct fuse_in_header h;
	struct fuse_out_header o = { .len = sizeof(o), .error = -error };

	if (nr_in > FS_MAX_IOV || nr_out > FS_MAX_IOV || iov_total(in, nr_in) < sizeof(h) ||
	    iov_total(out, nr_out) < sizeof(o))
		return 0;
	iov_copy_out(&h, in, nr_in, sizeof(h));
	if (h.opcode == FUSE_FORGET || h.opcode == FUSE_BATCH_FORGET)
		return 0; /* none is awaited */
	o.unique = h.unique;
	iov_copy_in(out, nr_out, 0, &o, sizeof(o));
	return sizeof(o);
}

size_t fs_server_handle(struct fs_server *s, const struct iovec *in, size_t nr_in,
			const struct iovec *out, size_t nr_out)
{
	struct fs_req r = { .s = s, .in = in, .nr_in = nr_in, .out = out, .nr_out = nr_out };
	size_t readable, writable, ret;

	if (nr_in > FS_MAX_IOV || nr_out > FS_MAX_IOV)
		return 0;
	writable = iov_total(out, nr_out);
	readable = iov_total(in, nr_in);
	if (writable < sizeof(struct fuse_out_header))
		return 0;
	if (readable < sizeof(r.h))
		return 0; /* not even a unique to answer */
	iov_copy_out(&r.h, in, nr_in, sizeof(r.h));
	r.room = writable - sizeof(struct fuse_out_header);
	pthread_mutex_lock(&s->lock);
	s->stats.requests++;
	ret = handle_locked(s, &r, readable);
	pthread_mutex_unlock(&s->lock);
	return ret;
}
