/* Extended attributes: the user.* namespace only, on regular files and
 * directories, but for FS_META_XATTR, which the guest never sees. Other
 * namespaces can carry privilege on the host (security.capability,
 * trusted.*, ACLs): writes are EPERM (ACLs EOPNOTSUPP: the share has
 * none) and reads see nothing there. */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "common/util.h"
#include "share/internal.h"

#define FS_XATTR_PREFIX "user."

/* A user.* name, and not the one that keeps owners and modes (meta.c). */
static bool user_name(const char *name)
{
	return strncmp(name, FS_XATTR_PREFIX, strlen(FS_XATTR_PREFIX)) == 0 &&
	       name[strlen(FS_XATTR_PREFIX)] != 0 && !fs_meta_name(name);
}

/* POSIX ACLs: the share has none, as a filesystem mounted without them
 * (EOPNOTSUPP: a tool setting one falls back to the mode). */
static bool acl_name(const char *name)
{
	return strncmp(name, "system.posix_acl_", 17) == 0;
}

static bool has_xattrs(const struct fs_node *n)
{
	return n->exp && (n->type == S_IFREG || n->type == S_IFDIR);
}

/* An xattr name: NUL-terminated in the args, 1..XATTR_NAME_MAX bytes. */
static long xattr_name(struct fs_req *r, size_t off, const char **name)
{
	const char *p = (const char *)r->arg + off;
	size_t max = off < r->arg_len ? r->arg_len - off : 0;
	size_t n = strnlen(p, max);

	if (n == max || n == 0)
		return -EINVAL;
	if (n > XATTR_NAME_MAX)
		return -ERANGE;
	*name = p;
	return (long)(off + n + 1);
}

int fs_op_setxattr(struct fs_req *r)
{
	const struct fuse_setxattr_in *in = fs_arg(r, 0, FUSE_COMPAT_SETXATTR_IN_SIZE);
	const char *name;
	long end = xattr_name(r, FUSE_COMPAT_SETXATTR_IN_SIZE, &name);
	char p[32];

	if (end < 0)
		return (int)end;
	if (in->size > FS_MAX_XATTR)
		return -E2BIG;
	if ((size_t)end + in->size != r->arg_len)
		return -EINVAL;
	if (acl_name(name))
		return -EOPNOTSUPP;
	if (!user_name(name) || !has_xattrs(r->node))
		return -EPERM;
	if (in->flags & ~(XATTR_CREATE | XATTR_REPLACE))
		return -EINVAL;
	/* The magic link is followed to a file or directory, never opened. */
	fs_proc_path(p, r->node->fd);
	if (setxattr(p, name, r->arg + end, in->size, (int)in->flags) < 0)
		return -errno;
	return 0;
}

int fs_op_getxattr(struct fs_req *r)
{
	const struct fuse_getxattr_in *in = fs_arg(r, 0, sizeof(*in));
	const char *name;
	long end = xattr_name(r, sizeof(*in), &name);
	char p[32];
	size_t len;
	ssize_t n;

	if (end < 0)
		return (int)end;
	if ((size_t)end != r->arg_len)
		return -EINVAL;
	if (!user_name(name) || !has_xattrs(r->node))
		return -ENODATA;
	fs_proc_path(p, r->node->fd);
	if (in->size == 0) {
		struct fuse_getxattr_out *o = fs_reply(r, sizeof(*o));

		if (!o)
			return -EINVAL;
		n = getxattr(p, name, NULL, 0);
		if (n < 0)
			return -errno;
		o->size = (uint32_t)n;
		return 0;
	}
	/* Never 0 here: getxattr() would take that as a size query. */
	len = MIN((size_t)in->size, MIN(r->reply_cap, (size_t)FS_MAX_XATTR));
	if (len == 0 || !fs_reply(r, len))
		return -ERANGE;
	n = getxattr(p, name, r->reply, r->reply_len);
	if (n < 0)
		return -errno;
	r->reply_len = (size_t)n;
	return 0;
}

/* Keep the user.* names of a host list, in place; returns the new length. */
static size_t only_user(char *list, size_t len)
{
	size_t out = 0;

	for (size_t i = 0; i < len;) {
		size_t n = strnlen(list + i, len - i);

		if (i + n < len && user_name(list + i)) {
			memmove(list + out, list + i, n + 1);
			out += n + 1;
		}
		i += n + 1;
	}
	return out;
}

int fs_op_listxattr(struct fs_req *r)
{
	const struct fuse_getxattr_in *in = fs_arg(r, 0, sizeof(*in));
	cleanup_free char *buf = NULL;
	char p[32];
	ssize_t n = 0;
	size_t len = 0;

	if (has_xattrs(r->node)) {
		buf = xmalloc(FS_MAX_XATTR);
		fs_proc_path(p, r->node->fd);
		n = listxattr(p, buf, FS_MAX_XATTR);
		if (n < 0)
			return -errno;
		len = only_user(buf, (size_t)n);
	}
	if (in->size == 0) {
		struct fuse_getxattr_out *o = fs_reply(r, sizeof(*o));

		if (!o)
			return -EINVAL;
		o->size = (uint32_t)len;
		return 0;
	}
	if (len > in->size)
		return -ERANGE;
	if (!fs_reply(r, len))
		return -ERANGE;
	if (len)
		memcpy(r->reply, buf, len);
	return 0;
}

int fs_op_removexattr(struct fs_req *r)
{
	const char *name;
	long end = xattr_name(r, 0, &name);
	char p[32];

	if (end < 0)
		return (int)end;
	if ((size_t)end != r->arg_len)
		return -EINVAL;
	if (acl_name(name))
		return -EOPNOTSUPP;
	if (!user_name(name) || !has_xattrs(r->node))
		return -EPERM;
	fs_proc_path(p, r->node->fd);
	return removexattr(p, name) < 0 ? -errno : 0;
}
