/* The in-memory image tree (see erofs.h for the rules it applies): its
 * directories and inodes, path resolution confined to the tree, OCI
 * replace/whiteout/opaque semantics and hardlinks. What an inode holds (its
 * xattrs and its data) is inode.c's; laying the tree out is erofs.c's. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/util.h"
#include "image/tree.h"

/* Symlinks followed while resolving one path, as Linux's MAXSYMLINKS. */
#define EROFS_MAX_SYMLINKS 40
/* Longest symlink target the kernel will read back: one page less a NUL. */
#define EROFS_SYMLINK_MAX (EROFS_BLKSZ - 1)
#define DIR_MIN_BUCKETS	  8

/* A growable array of pointers, used as a stack. */
struct ptrvec {
	void **v;
	size_t n, cap;
};

static void ptrvec_push(struct ptrvec *pv, void *p)
{
	if (pv->n == pv->cap) {
		pv->cap = pv->cap ? pv->cap * 2 : 16;
		pv->v = xrealloc(pv->v, pv->cap * sizeof(*pv->v));
	}
	pv->v[pv->n++] = p;
}

uint8_t erofs_ftype(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return EROFS_FT_REG_FILE;
	case S_IFDIR:
		return EROFS_FT_DIR;
	case S_IFCHR:
		return EROFS_FT_CHRDEV;
	case S_IFBLK:
		return EROFS_FT_BLKDEV;
	case S_IFIFO:
		return EROFS_FT_FIFO;
	case S_IFSOCK:
		return EROFS_FT_SOCK;
	case S_IFLNK:
		return EROFS_FT_SYMLINK;
	}
	return EROFS_FT_UNKNOWN;
}

static uint32_t name_hash(const struct erofs_tree *t, const char *name, size_t len)
{
	uint32_t h = 2166136261u ^ t->hash_seed; /* FNV-1a, seeded per tree */

	for (size_t i = 0; i < len; i++) {
		h ^= (uint8_t)name[i];
		h *= 16777619u;
	}
	return h;
}

static struct erofs_dentry *dir_lookup(const struct erofs_tree *t, const struct erofs_dir *dir,
				       const char *name, size_t len)
{
	uint32_t h = name_hash(t, name, len);

	for (struct erofs_dentry *d = dir->buckets[h & (dir->nbuckets - 1)]; d; d = d->next)
		if (d->hash == h && d->name_len == len && memcmp(d->name, name, len) == 0)
			return d;
	return NULL;
}

static void dir_grow(struct erofs_dir *dir)
{
	uint32_t nb = dir->nbuckets * 2;
	struct erofs_dentry **b = xzalloc(nb * sizeof(*b));

	for (uint32_t i = 0; i < dir->nbuckets; i++) {
		struct erofs_dentry *d = dir->buckets[i], *next;

		for (; d; d = next) {
			next = d->next;
			d->next = b[d->hash & (nb - 1)];
			b[d->hash & (nb - 1)] = d;
		}
	}
	free(dir->buckets);
	dir->buckets = b;
	dir->nbuckets = nb;
}

static struct erofs_dentry *dir_insert(struct erofs_tree *t, struct erofs_dir *dir,
				       const char *name, size_t len, struct erofs_inode *ino)
{
	struct erofs_dentry *d = xzalloc(sizeof(*d) + len + 1);
	uint32_t b;

	if (dir->count >= dir->nbuckets)
		dir_grow(dir);
	memcpy(d->name, name, len);
	d->name_len = (uint8_t)len;
	d->hash = name_hash(t, name, len);
	d->inode = ino;
	d->layer = t->layer;
	b = d->hash & (dir->nbuckets - 1);
	d->next = dir->buckets[b];
	dir->buckets[b] = d;
	dir->count++;
	return d;
}

static void dir_unlink(struct erofs_dir *dir, struct erofs_dentry *d)
{
	struct erofs_dentry **pp = &dir->buckets[d->hash & (dir->nbuckets - 1)];

	while (*pp != d)
		pp = &(*pp)->next;
	*pp = d->next;
	dir->count--;
}

static void xattrs_clear(struct erofs_inode *ino)
{
	for (uint16_t i = 0; i < ino->nxattrs; i++)
		free(ino->xattrs[i].data);
	free(ino->xattrs);
	ino->xattrs = NULL;
	ino->nxattrs = 0;
}

static void attr_apply(struct erofs_inode *ino, const struct erofs_attr *a)
{
	ino->mode = (a->mode & S_IFMT) | (a->mode & 07777);
	ino->uid = a->uid;
	ino->gid = a->gid;
	ino->mtime = a->mtime;
	ino->mtime_nsec = a->mtime_nsec;
	/* new_encode_dev(): the kernel's 32-bit device number format */
	ino->rdev = (a->rdev_minor & 0xff) | ((a->rdev_major & 0xfff) << 8) |
		    ((a->rdev_minor & ~0xffu) << 12);
}

static struct erofs_inode *inode_new(struct erofs_tree *t, const struct erofs_attr *a)
{
	struct erofs_inode *ino = xzalloc(sizeof(*ino));

	t->nr_inodes++;
	attr_apply(ino, a);
	ino->refs = 1;
	if (S_ISDIR(ino->mode)) {
		ino->dir = xzalloc(sizeof(*ino->dir));
		ino->dir->nbuckets = DIR_MIN_BUCKETS;
		ino->dir->buckets = xzalloc(DIR_MIN_BUCKETS * sizeof(*ino->dir->buckets));
	}
	return ino;
}

static void inode_destroy(struct erofs_tree *t, struct erofs_inode *ino, bool punch)
{
	/* Blocks of a replaced file stay in the image as dead blocks; punching
	 * them keeps them from using host disk. */
	if (punch && ino->nblocks)
		(void)fallocate(t->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				(off_t)ino->blkaddr * EROFS_BLKSZ,
				(off_t)ino->nblocks * EROFS_BLKSZ);
	if (ino->tail)
		t->tail_bytes -= ino->size % EROFS_BLKSZ;
	xattrs_clear(ino);
	free(ino->tail);
	free(ino->symlink);
	free(ino);
	t->nr_inodes--;
}

/* Drop one reference; free what reaches zero, subtrees without recursion. */
static void inode_put(struct erofs_tree *t, struct erofs_inode *ino, bool punch)
{
	struct ptrvec stack = { 0 };

	ptrvec_push(&stack, ino);
	while (stack.n) {
		struct erofs_inode *i = stack.v[--stack.n];

		if (--i->refs > 0)
			continue;
		if (i->dir) {
			for (uint32_t b = 0; b < i->dir->nbuckets; b++) {
				struct erofs_dentry *d = i->dir->buckets[b], *next;

				for (; d; d = next) {
					next = d->next;
					ptrvec_push(&stack, d->inode);
					free(d);
				}
			}
			free(i->dir->buckets);
			free(i->dir);
		}
		inode_destroy(t, i, punch);
	}
	free(stack.v);
}

int erofs_tree_new(int fd, struct erofs_tree **out, gantry_error_t *err)
{
	struct erofs_attr root = { .mode = S_IFDIR | 0755 };
	struct erofs_tree *t;

	if (ftruncate(fd, 0) < 0)
		return gantry_error_errno(err, "truncate image");
	t = xzalloc(sizeof(*t));
	t->fd = fd;
	/* Block 0 holds the superblock; data starts at block 1. */
	t->next_blk = 1;
	if (getrandom(&t->hash_seed, sizeof(t->hash_seed), GRND_NONBLOCK) < 0)
		t->hash_seed = (uint32_t)(uintptr_t)t;
	t->root = inode_new(t, &root);
	t->root->dir->parent = t->root;
	*out = t;
	return 0;
}

void erofs_tree_free(struct erofs_tree *t)
{
	if (t == NULL)
		return;
	inode_put(t, t->root, false);
	free(t);
}

void erofs_tree_begin_layer(struct erofs_tree *t)
{
	t->layer++;
}

unsigned long erofs_tree_dropped_xattrs(const struct erofs_tree *t)
{
	return t->dropped_xattrs;
}

/* A path split into lexically cleaned components: no "", "." or "..". */
struct path {
	char *buf;
	const char **comp;
	size_t n;
};

static void path_free(struct path *p)
{
	free(p->buf);
	free(p->comp);
}

static int path_split(const char *s, struct path *p, gantry_error_t *err)
{
	char *save = NULL, *c;

	if (strlen(s) > EROFS_PATH_MAX)
		return gantry_error(err, 0, "path longer than %d bytes", EROFS_PATH_MAX);
	p->buf = xstrdup(s);
	p->comp = xmalloc((strlen(s) / 2 + 1) * sizeof(*p->comp));
	p->n = 0;
	for (c = strtok_r(p->buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (strcmp(c, ".") == 0)
			continue;
		if (strcmp(c, "..") == 0) {
			if (p->n > 0) /* '..' above the root stays at the root */
				p->n--;
			continue;
		}
		if (strlen(c) > EROFS_NAME_LEN) {
			gantry_error(err, 0, "name longer than %d bytes", EROFS_NAME_LEN);
			path_free(p);
			return -1;
		}
		p->comp[p->n++] = c;
	}
	return 0;
}

/* Walk directories from the root through comp[0..n), following symlinks
 * inside the tree. *dir is NULL when something is missing and !create. */
static int walk_dirs(struct erofs_tree *t, const char *const *comp, size_t n, bool create,
		     struct erofs_inode **dir, gantry_error_t *err)
{
	static const struct erofs_attr implicit = { .mode = S_IFDIR | 0755 };
	struct ptrvec todo = { 0 }, bufs = { 0 };
	struct erofs_inode *cur = t->root;
	unsigned int links = 0;
	int ret = 0;

	*dir = NULL;
	for (size_t i = n; i > 0; i--)
		ptrvec_push(&todo, (void *)comp[i - 1]);
	while (todo.n) {
		const char *c = todo.v[--todo.n];
		size_t len = strlen(c);
		struct erofs_dentry *d;

		if (len == 0 || strcmp(c, ".") == 0)
			continue;
		if (strcmp(c, "..") == 0) {
			cur = cur->dir->parent;
			continue;
		}
		d = dir_lookup(t, cur->dir, c, len);
		if (d == NULL) {
			struct erofs_inode *ino;

			if (!create)
				goto out;
			if (len > EROFS_NAME_LEN) {
				ret = gantry_error(err, 0, "name longer than %d bytes",
						   EROFS_NAME_LEN);
				goto out;
			}
			if (t->nr_inodes >= EROFS_TREE_INODES_MAX) {
				ret = gantry_error(err, 0, "more than %u files and directories",
						   EROFS_TREE_INODES_MAX);
				goto out;
			}
			ino = inode_new(t, &implicit);
			dir_insert(t, cur->dir, c, len, ino);
			ino->dir->parent = cur;
			cur = ino;
		} else if (S_ISDIR(d->inode->mode)) {
			cur = d->inode;
		} else if (S_ISLNK(d->inode->mode)) {
			char *target, *save = NULL, *tok;
			size_t mark = todo.n;

			if (++links > EROFS_MAX_SYMLINKS) {
				ret = gantry_error(err, 0, "too many levels of symbolic links");
				goto out;
			}
			target = xstrdup(d->inode->symlink);
			ptrvec_push(&bufs, target);
			if (target[0] == '/')
				cur = t->root;
			for (tok = strtok_r(target, "/", &save); tok;
			     tok = strtok_r(NULL, "/", &save))
				ptrvec_push(&todo, tok);
			/* reverse the pushed tokens so the first is on top */
			for (size_t a = mark, b = todo.n; a + 1 < b; a++, b--) {
				void *tmp = todo.v[a];

				todo.v[a] = todo.v[b - 1];
				todo.v[b - 1] = tmp;
			}
		} else {
			ret = gantry_error(err, 0, "`%s` is not a directory", c);
			goto out;
		}
	}
	*dir = cur;
out:
	for (size_t i = 0; i < bufs.n; i++)
		free(bufs.v[i]);
	free(bufs.v);
	free(todo.v);
	return ret;
}

static int check_attr(const struct erofs_attr *a, const char *symlink, gantry_error_t *err)
{
	switch (a->mode & S_IFMT) {
	case S_IFREG:
	case S_IFDIR:
	case S_IFCHR:
	case S_IFBLK:
	case S_IFIFO:
	case S_IFSOCK:
		return 0;
	case S_IFLNK:
		if (symlink == NULL || symlink[0] == '\0')
			return gantry_error(err, 0, "empty symlink target");
		if (strlen(symlink) > EROFS_SYMLINK_MAX)
			return gantry_error(err, 0, "symlink target longer than %d bytes",
					    EROFS_SYMLINK_MAX);
		return 0;
	}
	return gantry_error(err, 0, "unsupported file type 0%o", a->mode & S_IFMT);
}

/* Point dentry d (or a new one in parent) at ino, releasing what it named. */
static void dentry_set(struct erofs_tree *t, struct erofs_inode *parent, struct erofs_dentry *d,
		       const char *name, struct erofs_inode *ino)
{
	if (d) {
		struct erofs_inode *old = d->inode;

		d->inode = ino;
		d->layer = t->layer;
		inode_put(t, old, true);
	} else {
		dir_insert(t, parent->dir, name, strlen(name), ino);
	}
	if (ino->dir)
		ino->dir->parent = parent;
}

int erofs_tree_add(struct erofs_tree *t, const char *path, const struct erofs_attr *attr,
		   const char *symlink, struct erofs_inode **out, gantry_error_t *err)
{
	struct erofs_inode *parent, *ino;
	struct erofs_dentry *d;
	struct path p;
	const char *name;

	if (check_attr(attr, symlink, err) < 0 || path_split(path, &p, err) < 0)
		return -1;
	if (p.n == 0) {
		path_free(&p);
		if (!S_ISDIR(attr->mode))
			return gantry_error(err, 0, "cannot replace the image root");
		attr_apply(t->root, attr);
		xattrs_clear(t->root);
		if (out)
			*out = t->root;
		return 0;
	}
	if (walk_dirs(t, p.comp, p.n - 1, true, &parent, err) < 0) {
		path_free(&p);
		return -1;
	}
	name = p.comp[p.n - 1];
	d = dir_lookup(t, parent->dir, name, strlen(name));
	if (d && S_ISDIR(d->inode->mode) && S_ISDIR(attr->mode)) {
		ino = d->inode;
		attr_apply(ino, attr);
		xattrs_clear(ino);
		d->layer = t->layer;
	} else {
		if (t->nr_inodes >= EROFS_TREE_INODES_MAX) {
			path_free(&p);
			return gantry_error(err, 0, "more than %u files and directories",
					    EROFS_TREE_INODES_MAX);
		}
		ino = inode_new(t, attr);
		if (S_ISLNK(attr->mode)) {
			ino->symlink = xstrdup(symlink);
			ino->size = strlen(symlink);
		}
		dentry_set(t, parent, d, name, ino);
	}
	path_free(&p);
	if (out)
		*out = ino;
	return 0;
}

int erofs_tree_link(struct erofs_tree *t, const char *path, const char *target, gantry_error_t *err)
{
	struct erofs_inode *tdir, *parent, *ino;
	struct erofs_dentry *td, *d;
	struct path tp, p;
	const char *name;
	int ret = -1;

	if (path_split(target, &tp, err) < 0)
		return -1;
	if (path_split(path, &p, err) < 0) {
		path_free(&tp);
		return -1;
	}
	if (tp.n == 0 || p.n == 0) {
		gantry_error(err, 0, "hardlink to or from the image root");
		goto out;
	}
	if (walk_dirs(t, tp.comp, tp.n - 1, false, &tdir, err) < 0)
		goto out;
	td = tdir ? dir_lookup(t, tdir->dir, tp.comp[tp.n - 1], strlen(tp.comp[tp.n - 1])) : NULL;
	if (td == NULL) {
		gantry_error(err, 0, "hardlink target `%s` is not in the image", target);
		goto out;
	}
	ino = td->inode;
	if (S_ISDIR(ino->mode)) {
		gantry_error(err, 0, "hardlink target `%s` is a directory", target);
		goto out;
	}
	/* Hold the target: replacing path may free the directory it is in. */
	ino->refs++;
	if (walk_dirs(t, p.comp, p.n - 1, true, &parent, err) < 0) {
		inode_put(t, ino, true);
		goto out;
	}
	name = p.comp[p.n - 1];
	d = dir_lookup(t, parent->dir, name, strlen(name));
	if (d && d->inode == ino) {
		d->layer = t->layer;
		ino->refs--;
	} else {
		dentry_set(t, parent, d, name, ino);
	}
	ret = 0;
out:
	path_free(&tp);
	path_free(&p);
	return ret;
}

/* Remove what earlier layers wrote in the listed entries and below them: an
 * entry goes if an earlier layer wrote it and (for a directory) nothing this
 * layer wrote is left under it. pairs holds (parent, dentry), parents first. */
static void prune(struct erofs_tree *t, struct ptrvec *pairs)
{
	for (size_t i = 0; i < pairs->n; i += 2) {
		struct erofs_dentry *d = pairs->v[i + 1];

		if (!S_ISDIR(d->inode->mode))
			continue;
		for (uint32_t b = 0; b < d->inode->dir->nbuckets; b++)
			for (struct erofs_dentry *c = d->inode->dir->buckets[b]; c; c = c->next) {
				ptrvec_push(pairs, d->inode);
				ptrvec_push(pairs, c);
			}
	}
	for (size_t i = pairs->n; i > 0; i -= 2) {
		struct erofs_inode *parent = pairs->v[i - 2];
		struct erofs_dentry *d = pairs->v[i - 1];

		if (d->layer >= t->layer || (d->inode->dir && d->inode->dir->count > 0))
			continue;
		dir_unlink(parent->dir, d);
		inode_put(t, d->inode, true);
		free(d);
	}
}

static int resolve_dir(struct erofs_tree *t, const char *dir, struct erofs_inode **out,
		       gantry_error_t *err)
{
	struct path p;
	int ret;

	if (path_split(dir, &p, err) < 0)
		return -1;
	ret = walk_dirs(t, p.comp, p.n, false, out, err);
	path_free(&p);
	return ret;
}

int erofs_tree_remove(struct erofs_tree *t, const char *dir, const char *name, gantry_error_t *err)
{
	struct ptrvec pairs = { 0 };
	struct erofs_inode *parent;
	struct erofs_dentry *d;
	size_t len = strlen(name);

	if (len == 0 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strchr(name, '/'))
		return gantry_error(err, 0, "invalid whiteout name `%s`", name);
	if (len > EROFS_NAME_LEN)
		return gantry_error(err, 0, "name longer than %d bytes", EROFS_NAME_LEN);
	if (resolve_dir(t, dir, &parent, err) < 0)
		return -1;
	if (parent == NULL || (d = dir_lookup(t, parent->dir, name, len)) == NULL)
		return 0; /* nothing below to hide */
	ptrvec_push(&pairs, parent);
	ptrvec_push(&pairs, d);
	prune(t, &pairs);
	free(pairs.v);
	return 0;
}

int erofs_tree_opaque(struct erofs_tree *t, const char *dir, gantry_error_t *err)
{
	struct ptrvec pairs = { 0 };
	struct erofs_inode *ino;

	if (resolve_dir(t, dir, &ino, err) < 0)
		return -1;
	if (ino == NULL)
		return 0;
	for (uint32_t b = 0; b < ino->dir->nbuckets; b++)
		for (struct erofs_dentry *c = ino->dir->buckets[b]; c; c = c->next) {
			ptrvec_push(&pairs, ino);
			ptrvec_push(&pairs, c);
		}
	prune(t, &pairs);
	free(pairs.v);
	return 0;
}

int erofs_tree_lookup(struct erofs_tree *t, const char *path, struct erofs_inode **out,
		      gantry_error_t *err)
{
	cleanup_free char *cur = xstrdup(path);
	unsigned int links = 0;

	for (;;) {
		gantry_error_t werr = NULL;
		struct erofs_inode *parent;
		struct erofs_dentry *d;
		struct path p;
		const char *name, *target;
		char *next, *s;

		*out = NULL;
		if (path_split(cur, &p, err) < 0)
			return -1;
		if (p.n == 0) {
			*out = t->root;
			path_free(&p);
			return 0;
		}
		/* A parent that is a file or a symlink loop: nothing there. */
		if (walk_dirs(t, p.comp, p.n - 1, false, &parent, &werr) < 0 || parent == NULL) {
			gantry_error_free(&werr);
			path_free(&p);
			return 0;
		}
		name = p.comp[p.n - 1];
		d = dir_lookup(t, parent->dir, name, strlen(name));
		if (d == NULL || !S_ISLNK(d->inode->mode)) {
			*out = d ? d->inode : NULL;
			path_free(&p);
			return 0;
		}
		if (++links > EROFS_MAX_SYMLINKS) {
			path_free(&p);
			return 0;
		}
		/* Relative targets go under the parent's components. */
		target = d->inode->symlink;
		next = xstrdup("");
		for (size_t i = 0; target[0] != '/' && i + 1 < p.n; i++) {
			xasprintf(&s, "%s/%s", next, p.comp[i]);
			free(next);
			next = s;
		}
		xasprintf(&s, "%s/%s", next, target);
		free(next);
		next = s;
		path_free(&p);
		free(cur);
		cur = next;
	}
}
