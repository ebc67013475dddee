/* The share server's tables: nodes (one pinned O_PATH fd per inode the
 * guest was told about, keyed by export and identity, ids never reused)
 * and handles (open files and directories, bounded). Callers hold the
 * server's lock. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "share/internal.h"

#define FS_BUCKETS_MIN	 1024
#define xcalloc(n, size) xzalloc((size_t)(n) * (size))

static size_t hash_id(uint64_t id, size_t buckets)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ULL) >> 17) & (buckets - 1);
}

static size_t hash_key(const struct fs_export *exp, dev_t dev, ino_t ino, uint64_t mnt_id,
		       size_t buckets)
{
	uint64_t h = (uintptr_t)exp;

	h = (h ^ dev) * 0x100000001b3ULL;
	h = (h ^ ino) * 0x100000001b3ULL;
	h = (h ^ mnt_id) * 0x9e3779b97f4a7c15ULL;
	return (size_t)(h >> 20) & (buckets - 1);
}

static size_t default_max_nodes(void)
{
	struct rlimit rl;
	size_t max = FS_NODES_CAP;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY) {
		/* Room for a tree's worth of nodes: a hard limit below it is
		 * raised where this process may (CAP_SYS_RESOURCE), up to the
		 * kernel's nr_open; elsewhere the limit stands. */
		if (rl.rlim_max < FS_NODES_CAP + FS_FD_SPARE) {
			struct rlimit more = { .rlim_cur = FS_NODES_CAP + FS_FD_SPARE,
					       .rlim_max = FS_NODES_CAP + FS_FD_SPARE };

			while (setrlimit(RLIMIT_NOFILE, &more) < 0 && more.rlim_max / 2 > rl.rlim_max)
				more.rlim_cur = more.rlim_max /= 2;
			getrlimit(RLIMIT_NOFILE, &rl);
		}
		/* A guest exhausting our fds must get errors, not take the VMM's. */
		if (rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
		max = rl.rlim_max > FS_FD_SPARE + FS_NODES_FLOOR ? rl.rlim_max - FS_FD_SPARE
								 : FS_NODES_FLOOR;
	}
	return MIN(max, (size_t)FS_NODES_CAP);
}

int fs_nodes_init(struct fs_server *s, size_t max_nodes, unsigned int route)
{
	s->max_nodes = max_nodes ? max_nodes : default_max_nodes();
	s->buckets = FS_BUCKETS_MIN;
	s->by_id = xcalloc(s->buckets, sizeof(*s->by_id));
	s->by_key = xcalloc(s->buckets, sizeof(*s->by_key));
	s->id_base = (uint64_t)route << FS_ROUTE_SHIFT;
	s->next_id = s->id_base + FS_ROOT_ID + 1;
	s->handles = xcalloc(FS_MAX_HANDLES, sizeof(*s->handles));
	for (uint32_t i = 0; i < FS_MAX_HANDLES; i++) {
		s->handles[i].fd = -1;
		s->handles[i].next_free = i + 1;
	}
	s->free_head = 0;
	s->gen = 1;
	return 0;
}

void fs_nodes_fini(struct fs_server *s)
{
	fs_node_drop_all(s);
	for (size_t i = 0; i < FS_MAX_EXPORTS; i++)
		if (s->exports[i])
			fs_node_drop_export(s, s->exports[i]);
	free(s->by_id);
	free(s->by_key);
	free(s->handles);
}

struct fs_node *fs_node_get(struct fs_server *s, uint64_t id)
{
	if (id == FS_ROOT_ID)
		return &s->hub;
	for (struct fs_node *n = s->by_id[hash_id(id, s->buckets)]; n; n = n->next_id)
		if (n->id == id)
			return n;
	/* A node a restored VM's guest held, named for the first time. */
	return s->carry ? fs_carry_take(s, id) : NULL;
}

static void insert(struct fs_server *s, struct fs_node *n)
{
	size_t i = hash_id(n->id, s->buckets);
	size_t k = hash_key(n->exp, n->dev, n->ino, n->mnt_id, s->buckets);

	n->next_id = s->by_id[i];
	s->by_id[i] = n;
	n->next_key = s->by_key[k];
	s->by_key[k] = n;
}

/* Twice the buckets once there are more nodes than buckets. */
static void grow(struct fs_server *s)
{
	struct fs_node **old = s->by_id;
	size_t nb = s->buckets;

	s->buckets *= 2;
	s->by_id = xcalloc(s->buckets, sizeof(*s->by_id));
	free(s->by_key);
	s->by_key = xcalloc(s->buckets, sizeof(*s->by_key));
	for (size_t i = 0; i < nb; i++) {
		struct fs_node *n = old[i], *next;

		for (; n; n = next) {
			next = n->next_id;
			insert(s, n);
		}
	}
	free(old);
}

static void unlink_node(struct fs_server *s, struct fs_node *n)
{
	struct fs_node **p = &s->by_id[hash_id(n->id, s->buckets)];

	while (*p != n)
		p = &(*p)->next_id;
	*p = n->next_id;
	p = &s->by_key[hash_key(n->exp, n->dev, n->ino, n->mnt_id, s->buckets)];
	while (*p != n)
		p = &(*p)->next_key;
	*p = n->next_key;
}

static void free_node(struct fs_server *s, struct fs_node *n)
{
	unlink_node(s, n);
	close(n->fd);
	s->nr_nodes--;
	free(n);
}

/* The statx of an inode as the struct stat a reply is filled from. */
static void stat_from_statx(const struct statx *x, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_dev = makedev(x->stx_dev_major, x->stx_dev_minor);
	st->st_ino = x->stx_ino;
	st->st_mode = x->stx_mode;
	st->st_nlink = x->stx_nlink;
	st->st_uid = x->stx_uid;
	st->st_gid = x->stx_gid;
	st->st_rdev = makedev(x->stx_rdev_major, x->stx_rdev_minor);
	st->st_size = (off_t)x->stx_size;
	st->st_blksize = x->stx_blksize;
	st->st_blocks = (blkcnt_t)x->stx_blocks;
	st->st_atim = (struct timespec){ x->stx_atime.tv_sec, x->stx_atime.tv_nsec };
	st->st_mtim = (struct timespec){ x->stx_mtime.tv_sec, x->stx_mtime.tv_nsec };
	st->st_ctim = (struct timespec){ x->stx_ctime.tv_sec, x->stx_ctime.tv_nsec };
}

struct fs_node *fs_node_add_stat(struct fs_server *s, struct fs_export *exp, int fd,
				 struct stat *st)
{
	struct statx stx;
	struct fs_node *n;
	dev_t dev;

	/* One statx gives the node's identity (its birth too, which a
	 * snapshot's save would otherwise ask each node for while the guest
	 * waits) and, for a lookup, its attributes: no second stat of the
	 * same inode. */
	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW,
		  (st ? STATX_BASIC_STATS : STATX_TYPE | STATX_INO) | STATX_MNT_ID | STATX_BTIME,
		  &stx) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return NULL;
	}
	if (st && (stx.stx_mask & STATX_BASIC_STATS) == STATX_BASIC_STATS)
		stat_from_statx(&stx, st);
	else if (st)
		st->st_mode = 0; /* the caller stats the node itself */
	dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
	for (n = s->by_key[hash_key(exp, dev, stx.stx_ino, stx.stx_mnt_id, s->buckets)]; n;
	     n = n->next_key) {
		if (n->exp == exp && n->dev == dev && n->ino == stx.stx_ino &&
		    n->mnt_id == stx.stx_mnt_id) {
			close(fd);
			n->nlookup++;
			return n;
		}
	}
	if (s->nr_nodes >= s->max_nodes) {
		close(fd);
		errno = ENFILE;
		return NULL;
	}
	n = xcalloc(1, sizeof(*n));
	/* An inode a restored guest holds by an id it has not named yet
	 * keeps that id: the guest must not see it under a second one. */
	if (s->carry && fs_carry_claim(s, exp, &stx, &n->id, &n->nlookup)) {
		n->nlookup++;
		n->carried = true;
	} else {
		n->id = s->next_id++;
		n->nlookup = 1;
	}
	n->fd = fd;
	n->exp = exp;
	n->dev = dev;
	n->ino = stx.stx_ino;
	n->mnt_id = stx.stx_mnt_id;
	n->type = stx.stx_mode & S_IFMT;
	fs_birth(&stx, &n->btime, &n->btime_ns);
	{
		const struct fs_mask *m = fs_export_masked(exp, dev, n->ino);

		n->ro = m != NULL;
		n->hidden = m && m->hide;
	}
	if (++s->nr_nodes > s->buckets)
		grow(s);
	insert(s, n);
	return n;
}

struct fs_node *fs_node_adopt(struct fs_server *s, struct fs_export *exp, int fd, uint64_t id,
			      uint64_t nlookup)
{
	uint64_t next = s->next_id;
	struct fs_node *n;

	if (fs_node_get(s, id)) {
		close(fd);
		errno = EEXIST;
		return NULL;
	}
	s->next_id = id;
	n = fs_node_add(s, exp, fd);
	s->next_id = MAX(next, id + 1);
	if (n && n->id != id) {
		/* The inode is a node already, under another id. */
		fs_node_forget(s, n, 1);
		errno = EEXIST;
		return NULL;
	}
	if (n)
		n->nlookup = nlookup;
	return n;
}

void fs_node_reid(struct fs_server *s, struct fs_node *n, uint64_t id)
{
	unlink_node(s, n);
	n->id = id;
	insert(s, n);
	s->next_id = MAX(s->next_id, id + 1);
}

struct fs_node *fs_node_add(struct fs_server *s, struct fs_export *exp, int fd)
{
	return fs_node_add_stat(s, exp, fd, NULL);
}

void fs_node_forget(struct fs_server *s, struct fs_node *n, uint64_t nlookup)
{
	n->nlookup -= MIN(nlookup, n->nlookup);
	if (n->nlookup == 0 && n->handles == 0 && !n->pinned)
		free_node(s, n);
}

/* Close every handle of exp (NULL: every handle). */
static void drop_handles(struct fs_server *s, struct fs_export *exp)
{
	for (uint32_t i = 0; i < FS_MAX_HANDLES; i++) {
		struct fs_handle *h = &s->handles[i];

		if (h->fh && (!exp || h->node->exp == exp))
			fs_handle_free(s, h);
	}
}

static void drop_nodes(struct fs_server *s, struct fs_export *exp, bool pinned_too)
{
	for (size_t i = 0; i < s->buckets; i++) {
		struct fs_node *n = s->by_id[i], *next;

		for (; n; n = next) {
			next = n->next_id;
			if (exp && n->exp != exp)
				continue;
			if (n->pinned && !pinned_too) {
				n->nlookup = 0;
				continue;
			}
			free_node(s, n);
		}
	}
}

void fs_node_drop_export(struct fs_server *s, struct fs_export *exp)
{
	fs_carry_drop_export(s, exp);
	drop_handles(s, exp);
	drop_nodes(s, exp, true);
}

/* DESTROY: the guest forgets everything; the exports' roots stay. */
void fs_node_drop_all(struct fs_server *s)
{
	fs_carry_free(s);
	drop_handles(s, NULL);
	drop_nodes(s, NULL, false);
	s->hub.nlookup = 0;
}

/* h, a free slot, as fd's handle fh of n. */
static void handle_take(struct fs_server *s, struct fs_handle *h, struct fs_node *n, int fd,
			uint64_t fh)
{
	h->fh = fh;
	h->fd = fd;
	h->node = n;
	n->handles++;
	if (n->exp)
		n->exp->handles++;
	s->nr_handles++;
}

int fs_handle_new(struct fs_server *s, struct fs_node *n, int fd, uint64_t *fh)
{
	uint32_t slot = s->free_head;

	if (slot >= FS_MAX_HANDLES) {
		if (fd >= 0)
			close(fd);
		return -EMFILE;
	}
	s->free_head = s->handles[slot].next_free;
	if (++s->gen == 0)
		s->gen = 1;
	*fh = (uint64_t)s->gen << 32 | (slot + 1);
	handle_take(s, &s->handles[slot], n, fd, *fh);
	return 0;
}

int fs_handle_place(struct fs_server *s, struct fs_node *n, int fd, uint64_t fh)
{
	uint32_t slot = (uint32_t)fh, gen = (uint32_t)(fh >> 32);

	if (slot == 0 || slot > FS_MAX_HANDLES || gen == 0 || s->handles[slot - 1].fh) {
		if (fd >= 0)
			close(fd);
		return -EEXIST;
	}
	handle_take(s, &s->handles[slot - 1], n, fd, fh);
	if (gen > s->gen)
		s->gen = gen; /* later handles take generations past it */
	return 0;
}

void fs_handles_relink(struct fs_server *s)
{
	s->free_head = FS_MAX_HANDLES;
	for (uint32_t i = FS_MAX_HANDLES; i-- > 0;) {
		if (s->handles[i].fh)
			continue;
		s->handles[i].next_free = s->free_head;
		s->free_head = i;
	}
}

struct fs_handle *fs_handle_get(struct fs_server *s, uint64_t fh, struct fs_node *n)
{
	uint32_t slot = (uint32_t)fh;
	struct fs_handle *h;

	if (slot == 0 || slot > FS_MAX_HANDLES)
		return NULL;
	h = &s->handles[slot - 1];
	if (h->fh != fh || (n && h->node != n))
		return NULL;
	return h;
}

void fs_handle_free(struct fs_server *s, struct fs_handle *h)
{
	struct fs_node *n = h->node;
	uint32_t slot = (uint32_t)h->fh - 1;

	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
	h->fh = 0;
	h->node = NULL;
	h->next_free = s->free_head;
	s->free_head = slot;
	s->nr_handles--;
	if (n->exp)
		n->exp->handles--;
	n->handles--;
	if (n != &s->hub)
		fs_node_forget(s, n, 0);
}

const struct fs_mask *fs_export_masked(const struct fs_export *exp, dev_t dev, ino_t ino)
{
	for (size_t i = 0; exp && i < exp->o.nr_masks; i++)
		if (exp->o.masks[i].dev == dev && exp->o.masks[i].ino == ino)
			return &exp->o.masks[i];
	return NULL;
}

bool fs_opts_kept(const struct fs_export_opts *o, dev_t dev, ino_t ino, const char *name)
{
	for (size_t i = 0; i < o->nr_keeps; i++)
		if (o->keeps[i].dev == dev && o->keeps[i].ino == ino &&
		    strcmp(o->keeps[i].name, name) == 0)
			return true;
	return false;
}

bool fs_no_git(const struct fs_node *dir, const char *name)
{
	return dir->exp && dir->exp->o.no_git && strcmp(name, ".git") == 0;
}

bool fs_name_masked(const struct fs_node *dir, const char *name)
{
	struct stat st;

	if (fs_no_git(dir, name))
		return true;
	if (!dir->exp || (dir->exp->o.nr_masks == 0 && dir->exp->o.nr_keeps == 0) ||
	    fstatat(dir->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	return fs_export_masked(dir->exp, st.st_dev, st.st_ino) != NULL ||
	       fs_opts_kept(&dir->exp->o, st.st_dev, st.st_ino, "");
}

bool fs_name_banned(const struct fs_node *dir, const char *name)
{
	return fs_no_git(dir, name) ||
	       (dir->exp && fs_opts_kept(&dir->exp->o, dir->dev, dir->ino, name));
}
