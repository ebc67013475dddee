/* What the guest sets that the host must not get: owners, set-id and
 * sticky bits, modes the server could not work under, device nodes. They
 * are kept as metadata beside the host file, in its FS_META_XATTR
 * ("UID:GID:MODE", MODE octal 07777, then ":char-MAJ-MIN" or
 * ":block-MAJ-MIN" for a device node kept as an empty regular file), and
 * shown to the guest in every stat, where its kernel checks permissions
 * (virtio-fs mounts with default_permissions). The host file stays the
 * server's user's, with its permission bits and the owner's read and
 * write (and search) added, never a set-id bit.
 *
 * Only regular files and directories can carry a user.* xattr: a
 * symlink's, FIFO's or socket's is kept on its share's root, as
 * FS_META_XATTR.INODE, and taken off when its last link is removed or
 * renamed over through the server (one the host removes leaves its own
 * behind, which an inode of that number made later would show). A file the host user
 * made has none and shows as it is (or as the share's
 * uid=/gid= say). The value is parsed strictly; anything else in it is
 * as if it were not there. The guest never sees, sets or removes it
 * (ops_xattr.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/files.h"
#include "common/util.h"
#include "share/internal.h"

#define META_MAX 64
#define DEV_PART ((1u << 20) - 1) /* a major or minor: 20 bits is Linux's most */

static bool carries_meta(mode_t host_type)
{
	return host_type == S_IFREG || host_type == S_IFDIR;
}

/* A symlink, FIFO or socket keeps its metadata in its share root's
 * xattr named by its inode number; one on another filesystem than the
 * root (a btrfs subvolume, a mount inside the share) by its device and
 * inode number, so two of the same number never share an entry. */
static bool kept_at_root(mode_t host_type)
{
	return host_type == S_IFLNK || host_type == S_IFIFO || host_type == S_IFSOCK;
}

#define META_NAME_MAX 64

/* The name on exp's root of what is kept for the inode (dev, ino). */
static void root_name(const struct fs_export *exp, dev_t dev, ino_t ino, char name[META_NAME_MAX])
{
	if (dev == exp->root->dev)
		snprintf(name, META_NAME_MAX, "%s.%llu", FS_META_XATTR, (unsigned long long)ino);
	else
		snprintf(name, META_NAME_MAX, "%s.%u-%u.%llu", FS_META_XATTR, major(dev), minor(dev),
			 (unsigned long long)ino);
}

/* Where n's metadata lives: the path and name to pass to *xattr(). */
static bool meta_place(const struct fs_node *n, char path[32], char name[META_NAME_MAX])
{
	if (!n->exp)
		return false;
	if (carries_meta(n->type)) {
		fs_proc_path(path, n->fd);
		snprintf(name, META_NAME_MAX, "%s", FS_META_XATTR);
		return true;
	}
	if (!kept_at_root(n->type) || !n->exp->root)
		return false;
	fs_proc_path(path, n->exp->root->fd);
	root_name(n->exp, n->dev, n->ino, name);
	return true;
}

mode_t fs_host_mode(mode_t type, mode_t mode)
{
	if (type == S_IFDIR)
		return (mode & 0777) | S_IRWXU;
	if (type == S_IFREG || type == S_IFCHR || type == S_IFBLK)
		return (mode & 0777) | S_IRUSR | S_IWUSR;
	/* a FIFO or socket keeps its own, which has nowhere else to go */
	return mode & 01777;
}

/* A decimal or octal number of at most max, up to the next ':' or '-'. */
static bool number(const char **p, int base, unsigned long max, unsigned long *out)
{
	char *end;

	if (**p < '0' || **p > '9')
		return false;
	errno = 0;
	*out = strtoul(*p, &end, base);
	if (errno || *out > max || end == *p)
		return false;
	*p = end;
	return true;
}

int fs_meta_parse(const char *v, size_t len, struct fs_meta *m)
{
	char buf[META_MAX + 1];
	const char *p = buf;
	unsigned long uid, gid, mode, maj = 0, min = 0;
	mode_t type = 0;

	if (len == 0 || len > META_MAX || memchr(v, 0, len))
		return -1;
	memcpy(buf, v, len);
	buf[len] = 0;
	if (!number(&p, 10, UINT32_MAX - 1, &uid) || *p++ != ':' ||
	    !number(&p, 10, UINT32_MAX - 1, &gid) || *p++ != ':' || !number(&p, 8, 07777, &mode))
		return -1;
	if (*p == ':') {
		p++;
		if (strncmp(p, "char-", 5) == 0)
			type = S_IFCHR;
		else if (strncmp(p, "block-", 6) == 0)
			type = S_IFBLK;
		else
			return -1;
		p = strchr(p, '-') + 1;
		if (!number(&p, 10, DEV_PART, &maj) || *p++ != '-' ||
		    !number(&p, 10, DEV_PART, &min))
			return -1;
	}
	if (*p)
		return -1;
	*m = (struct fs_meta){ .set = true,
			       .uid = (uid_t)uid,
			       .gid = (gid_t)gid,
			       .mode = (mode_t)mode,
			       .dev_type = type,
			       .rdev = makedev((unsigned int)maj, (unsigned int)min) };
	return 0;
}

size_t fs_meta_format(const struct fs_meta *m, char buf[FS_META_BUF])
{
	int n = snprintf(buf, FS_META_BUF, "%u:%u:%04o", m->uid, m->gid, m->mode & 07777);

	if (m->dev_type)
		n += snprintf(buf + n, FS_META_BUF - (size_t)n, ":%s-%u-%u",
			      m->dev_type == S_IFCHR ? "char" : "block", major(m->rdev),
			      minor(m->rdev));
	return (size_t)n;
}

/* The node's metadata as its xattr holds it now (none: m->set false). */
static void read_meta(const struct fs_node *n, struct fs_meta *m)
{
	char p[32], name[META_NAME_MAX], v[META_MAX + 1];
	ssize_t len;

	*m = (struct fs_meta){ .set = false };
	if (!meta_place(n, p, name))
		return;
	len = getxattr(p, name, v, sizeof(v));
	if (len > 0 && fs_meta_parse(v, (size_t)len, m) < 0)
		*m = (struct fs_meta){ .set = false };
	/* A device kept in a file: only in a regular one. */
	if (m->set && m->dev_type && n->type != S_IFREG)
		*m = (struct fs_meta){ .set = false };
}

unsigned char fs_meta_dtype(int dirfd, const char *name, unsigned char host_type)
{
	char p[32 + NAME_MAX + 2], v[META_MAX + 1];
	struct fs_meta m;
	ssize_t len;

	if (host_type != DT_REG || fs_proc_path(p, dirfd) < 0 ||
	    strlen(p) + 1 + strlen(name) >= sizeof(p))
		return host_type;
	strcat(p, "/");
	strcat(p, name);
	len = lgetxattr(p, FS_META_XATTR, v, sizeof(v));
	if (len <= 0 || fs_meta_parse(v, (size_t)len, &m) < 0 || !m.dev_type)
		return host_type;
	return m.dev_type == S_IFCHR ? DT_CHR : DT_BLK;
}

const struct fs_meta *fs_meta_get(struct fs_node *n, const struct stat *host)
{
	/* Our own change moves the ctime, and so does one on the host to
	 * the file's own xattr (one to what its share's root keeps for a
	 * symlink, FIFO or socket is seen once the node's ctime moves). */
	if (!n->meta_known || n->meta_ctime.tv_sec != host->st_ctim.tv_sec ||
	    n->meta_ctime.tv_nsec != host->st_ctim.tv_nsec) {
		read_meta(n, &n->meta);
		n->meta_ctime = host->st_ctim;
		n->meta_known = true;
	}
	return &n->meta;
}

void fs_meta_view(struct fs_node *n, struct stat *st)
{
	const struct fs_meta *m;

	if (!n->exp)
		return;
	if (n->exp->o.map_owner) {
		st->st_uid = n->exp->o.uid;
		st->st_gid = n->exp->o.gid;
	}
	m = fs_meta_get(n, st);
	if (!m->set)
		return;
	st->st_uid = m->uid;
	st->st_gid = m->gid;
	st->st_mode = (st->st_mode & S_IFMT) | m->mode;
	if (m->dev_type) {
		st->st_mode = m->dev_type | m->mode;
		st->st_rdev = m->rdev;
		st->st_size = 0;
	}
}

int fs_meta_stat(struct fs_node *n, struct stat *st)
{
	if (fstatat(n->fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	fs_meta_view(n, st);
	return 0;
}

int fs_meta_set(struct fs_node *n, const struct stat *host, const struct fs_meta *want)
{
	struct fs_meta m = *want;
	uid_t uid = n->exp->o.map_owner ? n->exp->o.uid : host->st_uid;
	gid_t gid = n->exp->o.map_owner ? n->exp->o.gid : host->st_gid;
	char p[32], name[META_NAME_MAX], v[FS_META_BUF];
	size_t len;

	if (!meta_place(n, p, name) || (m.dev_type && n->type != S_IFREG))
		return -EOPNOTSUPP;
	/* Nothing kept on the root for an inode with no name left. */
	if (!carries_meta(n->type) && host->st_nlink == 0)
		return -EOPNOTSUPP;
	m.mode &= 07777;
	if (n->type == S_IFLNK)
		m.mode = host->st_mode & 07777; /* Linux has no symlink modes */
	/* What the host shows by itself needs nothing kept. */
	if (!m.dev_type && m.uid == uid && m.gid == gid && m.mode == (host->st_mode & 07777) &&
	    fs_host_mode(n->type, m.mode) == m.mode) {
		if (!fs_meta_get(n, host)->set)
			return 0;
		n->meta_known = false;
		if (removexattr(p, name) < 0 && errno != ENODATA)
			return -errno;
		if (!carries_meta(n->type))
			fs_touch_ctime(n);
		return 1;
	}
	n->meta_known = false;
	len = fs_meta_format(&m, v);
	if (setxattr(p, name, v, len, 0) < 0)
		return errno == ENOSPC || errno == E2BIG ? -EOPNOTSUPP : -errno;
	/* Kept on the root: the node's own ctime moves as a chown's would. */
	if (!carries_meta(n->type))
		fs_touch_ctime(n);
	return 1;
}

bool fs_meta_name(const char *name)
{
	return strncmp(name, FS_META_XATTR, strlen(FS_META_XATTR)) == 0 &&
	       (name[strlen(FS_META_XATTR)] == 0 || name[strlen(FS_META_XATTR)] == '.');
}

void fs_touch_ctime(const struct fs_node *n)
{
	/* chown to -1:-1 changes nothing but the ctime, for any caller. */
	fchownat(n->fd, "", (uid_t)-1, (gid_t)-1, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
}

int fs_meta_kill_setid(struct fs_node *n)
{
	struct stat host;
	struct fs_meta m;
	mode_t kill;
	int ret;

	if (!n->exp || n->type == S_IFDIR)
		return 0;
	if (fstatat(n->fd, "", &host, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	m = *fs_meta_get(n, &host);
	kill = S_ISUID | ((m.mode & S_IXGRP) ? S_ISGID : 0);
	if (!m.set || !(m.mode & kill))
		return 0;
	m.mode &= ~kill;
	ret = fs_meta_set(n, &host, &m);
	return ret == -EOPNOTSUPP ? 0 : MIN(ret, 0);
}

void fs_meta_unlinked(struct fs_export *exp, const struct stat *st)
{
	char p[32], name[META_NAME_MAX];

	if (!exp->root || !kept_at_root(st->st_mode & S_IFMT) || st->st_nlink != 1)
		return;
	fs_proc_path(p, exp->root->fd);
	root_name(exp, st->st_dev, st->st_ino, name);
	removexattr(p, name);
}

int fs_mode_exact(struct fs_server *s, int fd, mode_t mode)
{
	char p[32];

	if (!(s->umask & mode & 0777))
		return 0;
	fs_proc_path(p, fd);
	return fchmodat(AT_FDCWD, p, mode, 0) < 0 ? -errno : 1;
}
