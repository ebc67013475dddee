/* Directory handles and listings. A listing's offsets are the host's
 * d_off cookies (the hub's: positions), so a READDIR resumes where the
 * guest's last one stopped. READDIRPLUS looks each entry up as LOOKUP
 * would and counts it only when it fits the reply. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "share/internal.h"

struct fs_dirent64 {
	uint64_t ino;
	int64_t off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

int fs_op_opendir(struct fs_req *r)
{
	const struct fuse_open_in *in = fs_arg(r, 0, sizeof(*in));
	struct fuse_open_out *o = fs_reply(r, sizeof(*o));
	int fd = -1;

	(void)in;
	if (!o)
		return -EINVAL;
	if (r->node->type != S_IFDIR)
		return -ENOTDIR;
	if (r->s->nr_handles >= FS_MAX_HANDLES)
		return -EMFILE;
	if (r->node->exp) {
		fd = fs_reopen(r->node, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			return fd;
	}
	return fs_handle_new(r->s, r->node, fd, &o->fh);
}

/* Append one entry; false when it does not fit. plus: with its entry_out
 * (e NULL: a zero one, which the guest takes as "no attributes"). */
static bool put(struct fs_req *r, bool plus, uint64_t ino, uint64_t off, unsigned type,
		const char *name, const struct fuse_entry_out *e)
{
	size_t namelen = strlen(name);
	size_t head = plus ? FUSE_NAME_OFFSET_DIRENTPLUS : FUSE_NAME_OFFSET;
	size_t len = FUSE_DIRENT_ALIGN(head + namelen);
	uint8_t *p = r->reply + r->reply_len;
	struct fuse_dirent *d;

	if (len > r->reply_cap - r->reply_len)
		return false;
	memset(p, 0, len);
	if (plus) {
		if (e)
			memcpy(p, e, sizeof(*e));
		d = &((struct fuse_direntplus *)p)->dirent;
	} else {
		d = (struct fuse_dirent *)p;
	}
	d->ino = ino;
	d->off = off;
	d->namelen = (uint32_t)namelen;
	d->type = type;
	memcpy(d->name, name, namelen);
	r->reply_len += len;
	return true;
}

static size_t plus_len(size_t namelen)
{
	return FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET_DIRENTPLUS + namelen);
}

static int hub_list(struct fs_req *r, uint64_t from, bool plus)
{
	uint64_t pos = 0;

	if (from == 0 && !put(r, plus, FS_ROOT_ID, 1, DT_DIR, ".", NULL))
		return 0;
	if (from <= 1 && !put(r, plus, FS_ROOT_ID, 2, DT_DIR, "..", NULL))
		return 0;
	for (size_t i = 0; i < FS_MAX_EXPORTS; i++) {
		struct fs_export *exp = r->s->exports[i];
		struct fuse_entry_out e;

		pos = 3 + i;
		if (!exp || pos <= from)
			continue;
		if (plus_len(strlen(exp->tag)) > r->reply_cap - r->reply_len && plus)
			return 0;
		if (plus && fs_lookup_name(r, r->node, exp->tag, &e) < 0)
			continue;
		if (!put(r, plus, exp->root->ino, pos, DT_DIR, exp->tag, plus ? &e : NULL))
			return 0;
	}
	/* Served behind us: listed without attributes (the guest looks
	 * each up, and that lookup goes to its server). */
	for (size_t i = 0; i < FS_MAX_EXPORTS; i++) {
		const struct fs_remote *rem = &r->s->remotes[i];

		pos = 3 + FS_MAX_EXPORTS + i;
		if (!rem->route || pos <= from)
			continue;
		if (!put(r, plus, (uint64_t)rem->route << FS_ROUTE_SHIFT | FS_ROOT_ID, pos, DT_DIR,
			 rem->tag, NULL))
			return 0;
	}
	return 0;
}

static bool dot(const char *n)
{
	return strcmp(n, ".") == 0 || strcmp(n, "..") == 0;
}

/* One host entry; false when the reply is full. */
static bool host_entry(struct fs_req *r, bool plus, int dirfd, const struct fs_dirent64 *d)
{
	struct fuse_entry_out e;

	if (!plus || dot(d->name))
		return put(r, plus, d->ino, (uint64_t)d->off,
			   dot(d->name) ? d->type : fs_meta_dtype(dirfd, d->name, d->type), d->name,
			   NULL);
	if (plus_len(strlen(d->name)) > r->reply_cap - r->reply_len)
		return false;
	/* Gone, or a mount point, or over the node limit: listed without attributes. */
	if (fs_lookup_name(r, r->node, d->name, &e) < 0)
		return put(r, plus, d->ino, (uint64_t)d->off, d->type, d->name, NULL);
	/* The type the guest sees: a device it made is a regular file here. */
	return put(r, plus, d->ino, (uint64_t)d->off, e.attr.mode >> 12, d->name, &e);
}

static int list(struct fs_req *r, bool plus)
{
	const struct fuse_read_in *in = fs_arg(r, 0, sizeof(*in));
	struct fs_handle *h = fs_handle_get(r->s, in->fh, r->node);
	cleanup_free uint8_t *buf = NULL;
	size_t size;

	if (!h)
		return -EBADF;
	size = MIN((size_t)in->size, (size_t)FS_MAX_READDIR);
	r->reply_cap = MIN(r->reply_cap, size);
	r->reply_len = 0;
	if (!r->node->exp)
		return hub_list(r, in->offset, plus);
	if (in->offset > INT64_MAX || lseek(h->fd, (off_t)in->offset, SEEK_SET) < 0)
		return -EINVAL;
	buf = xmalloc(size + 1);
	for (;;) {
		long n = getdents64(h->fd, buf, size);

		if (n < 0)
			return r->reply_len ? 0 : -errno;
		if (n == 0)
			return 0;
		for (long p = 0; p < n;) {
			const struct fs_dirent64 *d = (const void *)(buf + p);

			if (!host_entry(r, plus, h->fd, d))
				return 0;
			p += d->reclen;
		}
	}
}

int fs_op_readdir(struct fs_req *r)
{
	return list(r, false);
}

int fs_op_readdirplus(struct fs_req *r)
{
	return list(r, true);
}
