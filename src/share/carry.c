/* The share server's tables across a snapshot (server.h): what the guest
 * was told, its node ids and open handles, written as paths beneath the
 * exports' roots, and taken up by the restored VM's new server.
 *
 * The table, little-endian, each record packed:
 *   header  u32 magic CARRY_MAGIC, u32 version, u32 exports, u32 nodes,
 *           u32 handles, u64 the hub's lookups, u64 the next node id and
 *           u64 the handle generation the server would have given (ids
 *           and handles the guest holds that the table lacks are never
 *           given again)
 *   export  u64 its root's id, u64 lookups, u8 tag length, the tag
 *   node    u64 id, u64 lookups, u64 dev, u64 ino, u64 and u64 its birth
 *           time (seconds, nanoseconds; 0 0 where the filesystem keeps
 *           none), u32 type (S_IFMT),
 *           u8 export (its record's index), u16 path length, the path
 *           (relative, no NUL)
 *   handle  u64 fh, u64 node id, u32 open flags
 *
 * The new server keeps the nodes and walks to each when the guest first
 * names it (fs_node_get calls fs_carry_take): a restore does not wait on
 * every node the guest's caches hold. Open files are opened at once.
 *
 * A table comes back from a snapshot file, so it is read as hostile: every
 * count and length bounded, ids inside this server's route, each path
 * walked one name at a time beneath its export's root as lookups are (no
 * symlink, no "..", no mount crossed, nothing beneath a hidden inode),
 * and a node kept only where the walk ends on the inode it names: the
 * same device, inode number, type and, where the filesystem keeps one,
 * birth time (an inode number freed and given to a new file is not the
 * file the guest held). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util.h"
#include "share/internal.h"

#define CARRY_MAGIC   0x4e534647u /* "GFSN" */
#define CARRY_VERSION 1
#define OPEN_KEPT     (O_ACCMODE | O_APPEND | O_DIRECT | O_NONBLOCK | O_SYNC | O_DSYNC)

struct out {
	uint8_t *p;
	size_t len, cap;
};

/* Append n bytes, or nothing where they do not fit. */
static bool put(struct out *o, const void *v, size_t n)
{
	if (n > o->cap - o->len)
		return false;
	memcpy(o->p + o->len, v, n);
	o->len += n;
	return true;
}

#define PUT(o, v) put(o, &(v), sizeof(v))

/* A node of the table; as the server keeps it till the guest names it
 * (fs_carry_take), exp the export (NULL once taken up, forgotten, or
 * beyond finding) and path in the server's copy of the table. */
struct rec_node {
	uint64_t id, nlookup, dev, ino, btime, btime_ns;
	uint32_t type;
	uint8_t exp_index;
	uint16_t path_len;
	const char *path; /* path_len bytes, no NUL among them */
	struct fs_export *exp;
};

struct fs_carry {
	uint8_t *table;
	struct rec_node *nodes; /* by id */
	uint32_t *by_inode;	/* indices of nodes, by device and inode */
	size_t nr, left;	/* left: those still with an export */
};


/* fd's path as this process sees it, NUL-terminated, into buf. */
static bool fd_path(int fd, char buf[PATH_MAX])
{
	char p[32];
	ssize_t n;

	fs_proc_path(p, fd);
	n = readlinkat(AT_FDCWD, p, buf, PATH_MAX);
	if (n <= 0 || n >= PATH_MAX || buf[0] != '/')
		return false;
	buf[n] = '\0';
	return true;
}

/* n's path beneath root (root's own path): false where it is not there
 * (gone, or reached some other way). */
static const char *rel_path(const char *root, int fd, char buf[PATH_MAX])
{
	size_t k = strlen(root);

	if (!fd_path(fd, buf))
		return NULL;
	if (strcmp(root, "/") == 0)
		return buf[1] ? buf + 1 : NULL;
	if (strncmp(buf, root, k) != 0 || buf[k] != '/' || !buf[k + 1])
		return NULL;
	return buf + k + 1;
}

/* A node's record: v its id, lookups, device, inode and birth time. */
static bool put_node(struct out *o, const uint64_t v[6], uint32_t type, uint8_t exp,
		     const char *path, uint16_t len)
{
	size_t at = o->len;

	if (put(o, v, 6 * sizeof(v[0])) && PUT(o, type) && PUT(o, exp) && PUT(o, len) &&
	    put(o, path, len))
		return true;
	o->len = at;
	return false;
}

static bool save_node(struct out *o, struct fs_node *n, uint8_t exp, const char *rel)
{
	uint64_t v[6] = { n->id, n->nlookup, (uint64_t)n->dev, (uint64_t)n->ino, n->btime,
			  n->btime_ns };

	return put_node(o, v, n->type, exp, rel, (uint16_t)strlen(rel));
}

/* The exports' records, their roots' paths into roots[]; the index of
 * each export's record into idx[] (-1: none). */
static uint32_t save_exports(struct fs_server *s, struct out *o, char (*roots)[PATH_MAX],
			     int *idx)
{
	uint32_t n = 0;

	for (size_t i = 0; i < FS_MAX_EXPORTS; i++)
		idx[i] = -1;
	for (size_t i = 0; i < FS_MAX_EXPORTS; i++) {
		struct fs_export *e = s->exports[i];
		uint64_t v[2];
		uint8_t len;
		size_t at = o->len;

		if (!e || !fd_path(e->root->fd, roots[i]))
			continue;
		v[0] = e->root->id;
		v[1] = e->root->nlookup;
		len = (uint8_t)strlen(e->tag);
		if (!put(o, v, sizeof(v)) || !PUT(o, len) || !put(o, e->tag, len)) {
			o->len = at;
			break;
		}
		e->root->carried = true;
		idx[i] = (int)n++;
	}
	return n;
}

/* exp's slot in s->exports, or -1 (none: the hub). */
static int slot_of(const struct fs_server *s, const struct fs_export *exp)
{
	for (int e = 0; exp && e < FS_MAX_EXPORTS; e++)
		if (s->exports[e] == exp)
			return e;
	return -1;
}

/* The nodes a restore's table gave that the guest has not named since:
 * as they came. */
static uint32_t save_kept(struct fs_server *s, struct out *o, const int *idx)
{
	uint32_t count = 0;

	for (size_t i = 0; s->carry && i < s->carry->nr; i++) {
		const struct rec_node *r = &s->carry->nodes[i];
		uint64_t v[6] = { r->id, r->nlookup, r->dev, r->ino, r->btime, r->btime_ns };
		int e = slot_of(s, r->exp);

		if (e >= 0 && idx[e] >= 0 &&
		    put_node(o, v, r->type, (uint8_t)idx[e], r->path, r->path_len))
			count++;
	}
	return count;
}

static uint32_t save_nodes(struct fs_server *s, struct out *o, char (*roots)[PATH_MAX],
			   const int *idx)
{
	char buf[PATH_MAX];
	uint32_t count = 0;

	for (size_t b = 0; b < s->buckets; b++) {
		for (struct fs_node *n = s->by_id[b]; n; n = n->next_id) {
			int e = n->pinned ? -1 : slot_of(s, n->exp);
			const char *rel;

			if (e < 0 || idx[e] < 0)
				continue;
			rel = rel_path(roots[e], n->fd, buf);
			if (rel && save_node(o, n, (uint8_t)idx[e], rel)) {
				n->carried = true;
				count++;
			}
		}
	}
	return count + save_kept(s, o, idx);
}

static uint32_t save_handles(struct fs_server *s, struct out *o)
{
	uint32_t count = 0;

	for (uint32_t i = 0; i < FS_MAX_HANDLES; i++) {
		struct fs_handle *h = &s->handles[i];
		uint64_t v[2];
		int fl = 0;

		if (!h->fh || !h->node->carried)
			continue;
		if (h->fd >= 0 && (fl = fcntl(h->fd, F_GETFL)) < 0)
			continue;
		v[0] = h->fh;
		v[1] = h->node->id;
		if (put(o, v, sizeof(v)) && PUT(o, fl))
			count++;
		else
			break;
	}
	return count;
}

static void clear_carried(struct fs_server *s)
{
	s->hub.carried = true;
	for (size_t b = 0; b < s->buckets; b++)
		for (struct fs_node *n = s->by_id[b]; n; n = n->next_id)
			n->carried = false;
}

size_t fs_server_save(struct fs_server *s, uint8_t *buf, size_t cap)
{
	/* One path buffer per export: 256 KiB, not the stack's to hold. */
	char (*roots)[PATH_MAX] = xzalloc(FS_MAX_EXPORTS * sizeof(*roots));
	uint32_t hdr[5] = { CARRY_MAGIC, CARRY_VERSION };
	uint64_t next[2];
	int idx[FS_MAX_EXPORTS];
	struct out o = { buf, 0, cap };
	uint64_t hub;

	pthread_mutex_lock(&s->lock);
	hub = s->hub.nlookup;
	next[0] = s->next_id;
	next[1] = s->gen;
	if (put(&o, hdr, sizeof(hdr)) && PUT(&o, hub) && put(&o, next, sizeof(next))) {
		clear_carried(s);
		hdr[2] = save_exports(s, &o, roots, idx);
		hdr[3] = save_nodes(s, &o, roots, idx);
		hdr[4] = save_handles(s, &o);
		memcpy(buf, hdr, sizeof(hdr));
	}
	pthread_mutex_unlock(&s->lock);
	free(roots);
	return o.len;
}

/* ---- taking a table up ----------------------------------------------------------------------- */

struct in {
	const uint8_t *p;
	size_t len, at;
};

static bool get(struct in *in, void *v, size_t n)
{
	if (n > in->len - in->at)
		return false;
	memcpy(v, in->p + in->at, n);
	in->at += n;
	return true;
}

#define GET(in, v) get(in, &(v), sizeof(v))

struct rec_export {
	uint64_t id, nlookup;
	char tag[FS_TAG_MAX + 1];
};

struct rec_handle {
	uint64_t fh, node;
	int32_t flags;
};

static bool read_export(struct in *in, struct rec_export *r)
{
	uint64_t v[2];
	uint8_t len;

	if (!get(in, v, sizeof(v)) || !GET(in, len) || len == 0 || len > FS_TAG_MAX ||
	    !get(in, r->tag, len))
		return false;
	r->tag[len] = '\0';
	r->id = v[0];
	r->nlookup = v[1];
	return strlen(r->tag) == len;
}

static bool read_node(struct in *in, struct rec_node *r)
{
	uint64_t v[6];

	if (!get(in, v, sizeof(v)) || !GET(in, r->type) || !GET(in, r->exp_index) ||
	    !GET(in, r->path_len) || r->path_len == 0 || r->path_len >= PATH_MAX ||
	    r->path_len > in->len - in->at)
		return false;
	r->path = (const char *)in->p + in->at;
	in->at += r->path_len;
	r->id = v[0];
	r->nlookup = v[1];
	r->dev = v[2];
	r->ino = v[3];
	r->btime = v[4];
	r->btime_ns = v[5];
	return memchr(r->path, '\0', r->path_len) == NULL;
}

static bool read_handle(struct in *in, struct rec_handle *r)
{
	uint64_t v[2];

	if (!get(in, v, sizeof(v)) || !GET(in, r->flags))
		return false;
	r->fh = v[0];
	r->node = v[1];
	return true;
}

/* The whole table's shape, before anything of it is taken. */
static bool table_ok(struct in in, const uint32_t *hdr)
{
	struct rec_export e;
	struct rec_handle h;
	struct rec_node n;
	bool ok = true;

	for (uint32_t i = 0; i < hdr[2] && ok; i++)
		ok = read_export(&in, &e);
	for (uint32_t i = 0; i < hdr[3] && ok; i++)
		ok = read_node(&in, &n) && n.exp_index < hdr[2];
	for (uint32_t i = 0; i < hdr[4] && ok; i++)
		ok = read_handle(&in, &h);
	return ok && in.at == in.len;
}

/* An id this server may give: of its route, past the hub's. */
static bool id_ours(const struct fs_server *s, uint64_t id)
{
	return id >> FS_ROUTE_SHIFT == s->id_base >> FS_ROUTE_SHIFT &&
	       (id & ((1ull << FS_ROUTE_SHIFT) - 1)) > FS_ROOT_ID &&
	       id < s->id_base + (1ull << FS_ROUTE_SHIFT) - 2 * FS_MAX_EXPORTS;
}

/* path beneath exp's root, a name at a time as lookups go: its O_PATH
 * fd, *ro where the walk passed a protected inode; -1 where a name is
 * not one, is not there, or is beneath a hidden inode. */
static int walk(struct fs_export *exp, char *path, bool *ro)
{
	struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC, .resolve = FS_RESOLVE };
	int dir = exp->root->fd;
	char *save = NULL, *name;

	*ro = exp->root->ro;
	for (name = strtok_r(path, "/", &save); name; name = strtok_r(NULL, "/", &save)) {
		const struct fs_mask *m;
		struct stat st;
		int fd;

		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strlen(name) > NAME_MAX)
			fd = -1;
		else
			fd = (int)syscall(SYS_openat2, dir, name, &how, sizeof(how));
		if (dir != exp->root->fd)
			close(dir);
		if (fd < 0 || fstat(fd, &st) < 0) {
			if (fd >= 0)
				close(fd);
			return -1;
		}
		dir = fd;
		m = fs_export_masked(exp, st.st_dev, st.st_ino);
		if (m)
			*ro = true;
		if (m && m->hide && save && *save) {
			close(fd);
			return -1;
		}
	}
	return dir == exp->root->fd ? -1 : dir;
}

/* An id no table gives (the top of the route's), for a root to wait on
 * till it gets its own: slot k's. */
static uint64_t top_id(const struct fs_server *s, size_t k)
{
	return s->id_base + (1ull << FS_ROUTE_SHIFT) - 1 - k;
}

static void take_exports(struct fs_server *s, struct in *in, uint32_t count,
			 struct fs_export **map, uint64_t *max_id)
{
	struct rec_export r;

	for (uint32_t i = 0; i < count && read_export(in, &r); i++) {
		struct fs_export *e = fs_export_find(s, r.tag);
		struct fs_node *other;

		map[i] = NULL;
		if (!id_ours(s, r.id))
			continue;
		*max_id = MAX(*max_id, r.id);
		other = fs_node_get(s, r.id);
		if (!e || e->root->carried || (other && other->carried))
			continue;
		/* Another export's root has it now: that root gets an id of
		 * its own at the end. */
		if (other && other != e->root)
			fs_node_reid(s, other, top_id(s, FS_MAX_EXPORTS + i));
		if (other != e->root)
			fs_node_reid(s, e->root, r.id);
		e->root->nlookup = r.nlookup;
		e->root->carried = true;
		map[i] = e;
	}
}

void fs_birth(const struct statx *x, uint64_t *sec, uint32_t *nsec)
{
	bool born = x->stx_mask & STATX_BTIME;

	*sec = born ? (uint64_t)x->stx_btime.tv_sec : 0;
	*nsec = born ? x->stx_btime.tv_nsec : 0;
}

/* x is r's inode: device, inode number, type and birth. */
static bool rec_is(const struct rec_node *r, const struct statx *x)
{
	uint64_t sec;
	uint32_t nsec;

	fs_birth(x, &sec, &nsec);
	return (uint64_t)makedev(x->stx_dev_major, x->stx_dev_minor) == r->dev &&
	       x->stx_ino == r->ino && (x->stx_mode & S_IFMT) == r->type && sec == r->btime &&
	       nsec == r->btime_ns;
}

static bool same_inode(int fd, const struct rec_node *r)
{
	struct statx x;

	return statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW,
		     STATX_TYPE | STATX_INO | STATX_BTIME, &x) == 0 &&
	       rec_is(r, &x);
}

static int by_id(const void *a, const void *b)
{
	const struct rec_node *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static int by_inode(const void *a, const void *b, void *nodes)
{
	const struct rec_node *x = (const struct rec_node *)nodes + *(const uint32_t *)a;
	const struct rec_node *y = (const struct rec_node *)nodes + *(const uint32_t *)b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* The table's nodes kept in s, by id, to be taken up as the guest names
 * them; *max_id past every id they hold. Their number. */
static long keep_nodes(struct fs_server *s, struct in *in, uint32_t count,
		       struct fs_export **map, uint64_t *max_id)
{
	struct fs_carry *c = xzalloc(sizeof(*c));
	struct rec_node r;

	c->nodes = xzalloc((count ? count : 1) * sizeof(*c->nodes));
	for (uint32_t i = 0; i < count && read_node(in, &r); i++) {
		if (!id_ours(s, r.id))
			continue;
		*max_id = MAX(*max_id, r.id);
		r.exp = r.exp_index < FS_MAX_EXPORTS ? map[r.exp_index] : NULL;
		/* Not an id an export's root answers to already. */
		if (r.exp && !fs_node_get(s, r.id))
			c->nodes[c->nr++] = r;
	}
	qsort(c->nodes, c->nr, sizeof(*c->nodes), by_id);
	/* An id twice: one only. */
	for (size_t i = 1; i < c->nr; i++)
		if (c->nodes[i].id == c->nodes[i - 1].id)
			c->nodes[i].exp = NULL;
	for (size_t i = 0; i < c->nr; i++)
		c->left += c->nodes[i].exp != NULL;
	c->by_inode = xzalloc((c->nr ? c->nr : 1) * sizeof(*c->by_inode));
	for (size_t i = 0; i < c->nr; i++)
		c->by_inode[i] = (uint32_t)i;
	qsort_r(c->by_inode, c->nr, sizeof(*c->by_inode), by_inode, c->nodes);
	s->carry = c;
	return (long)c->left;
}

static struct rec_node *carried(struct fs_server *s, uint64_t id)
{
	struct rec_node key = { .id = id }, *r;

	if (!s->carry)
		return NULL;
	r = bsearch(&key, s->carry->nodes, s->carry->nr, sizeof(key), by_id);
	return r && r->exp ? r : NULL;
}

/* r is done with: taken up, forgotten, or not to be found. */
static void done(struct fs_server *s, struct rec_node *r)
{
	r->exp = NULL;
	if (--s->carry->left == 0)
		fs_carry_free(s);
}

struct fs_node *fs_carry_take(struct fs_server *s, uint64_t id)
{
	struct rec_node *r = carried(s, id);
	struct fs_export *e;
	struct fs_node *n;
	char path[PATH_MAX];
	bool ro;
	int fd;

	if (!r)
		return NULL;
	e = r->exp;
	memcpy(path, r->path, r->path_len);
	path[r->path_len] = '\0';
	fd = walk(e, path, &ro);
	if (fd >= 0 && !same_inode(fd, r)) {
		close(fd);
		fd = -1;
	}
	/* Done with before the node is made: its id is not found twice. */
	r->exp = NULL;
	n = fd >= 0 ? fs_node_adopt(s, e, fd, id, r->nlookup) : NULL;
	r->exp = e;
	/* The table full now: kept for a later try, as a lookup would be. */
	if (!n && fd >= 0 && errno == ENFILE)
		return NULL;
	done(s, r);
	if (!n)
		return NULL;
	n->ro |= ro;
	n->carried = true;
	return n;
}

bool fs_carry_claim(struct fs_server *s, const struct fs_export *exp, const struct statx *x,
		    uint64_t *id, uint64_t *nlookup)
{
	struct fs_carry *c = s->carry;
	uint64_t dev = makedev(x->stx_dev_major, x->stx_dev_minor);
	size_t lo = 0, hi = c ? c->nr : 0;

	/* The first record of (dev, ino), then each of them. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct rec_node *r = &c->nodes[c->by_inode[mid]];

		if (r->dev < dev || (r->dev == dev && r->ino < x->stx_ino))
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; c && lo < c->nr; lo++) {
		struct rec_node *r = &c->nodes[c->by_inode[lo]];

		if (r->dev != dev || r->ino != x->stx_ino)
			break;
		if (r->exp != exp || !rec_is(r, x))
			continue;
		*id = r->id;
		*nlookup = r->nlookup;
		done(s, r);
		return true;
	}
	return false;
}

bool fs_carry_forget(struct fs_server *s, uint64_t id, uint64_t nlookup)
{
	struct rec_node *r = carried(s, id);

	if (!r)
		return false;
	r->nlookup -= MIN(nlookup, r->nlookup);
	if (r->nlookup == 0)
		done(s, r);
	return true;
}

void fs_carry_drop_export(struct fs_server *s, struct fs_export *exp)
{
	for (size_t i = 0; s->carry && i < s->carry->nr; i++)
		if (s->carry->nodes[i].exp == exp)
			done(s, &s->carry->nodes[i]);
}

void fs_carry_free(struct fs_server *s)
{
	if (!s->carry)
		return;
	free(s->carry->table);
	free(s->carry->nodes);
	free(s->carry->by_inode);
	free(s->carry);
	s->carry = NULL;
}

/* A handle's file opened again as it was: the flags that say how, none
 * that would create or truncate; refused as an OPEN would be. */
static int reopen(struct fs_node *n, int flags)
{
	struct stat st;

	if (!n->exp)
		return -1; /* the hub's directory: no fd */
	if (n->hidden)
		return -EACCES;
	if (n->type == S_IFDIR)
		return fs_reopen(n, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if ((flags & O_ACCMODE) == O_ACCMODE || (fs_node_ro(n) && (flags & O_ACCMODE) != O_RDONLY))
		return -EACCES;
	fs_meta_stat(n, &st);
	return fs_reopen(n, (flags & OPEN_KEPT) | O_CLOEXEC);
}

static void take_handles(struct fs_server *s, struct in *in, uint32_t count)
{
	/* All read first: taking their nodes up may free the table. */
	cleanup_free struct rec_handle *h = xzalloc((count ? count : 1) * sizeof(*h));
	uint32_t nr = 0;

	while (nr < count && read_handle(in, &h[nr]))
		nr++;
	for (uint32_t i = 0; i < nr; i++) {
		struct fs_node *n = fs_node_get(s, h[i].node);
		int fd;

		if (!n || !n->carried)
			continue;
		fd = reopen(n, h[i].flags);
		if (fd >= 0 || (fd == -1 && !n->exp))
			fs_handle_place(s, n, fd < 0 ? -1 : fd, h[i].fh);
	}
	fs_handles_relink(s);
}

long fs_server_load(struct fs_server *s, const uint8_t *buf, size_t len)
{
	struct fs_export *map[FS_MAX_EXPORTS] = { 0 };
	struct in in;
	uint64_t hub, next[2], max_id = s->id_base + FS_ROOT_ID;
	uint32_t hdr[5];
	long kept = -1;
	size_t roots = 0;
	cleanup_free uint8_t *copy = NULL;

	if (len > FS_CARRY_MAX)
		return -1;
	/* Read once: buf may be memory its sender can still write (the
	 * request slots), and what is checked must be what is used. The
	 * nodes' paths stay in this copy till they are taken. */
	copy = xmalloc(len ? len : 1);
	memcpy(copy, buf, len);
	in = (struct in){ copy, len, 0 };
	if (!get(&in, hdr, sizeof(hdr)) || !GET(&in, hub) || !get(&in, next, sizeof(next)) ||
	    hdr[0] != CARRY_MAGIC || hdr[1] != CARRY_VERSION || hdr[2] > FS_MAX_EXPORTS ||
	    hdr[3] > FS_NODES_CAP || hdr[4] > FS_MAX_HANDLES || !table_ok(in, hdr))
		return -1;
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < FS_MAX_EXPORTS; i++)
		roots += s->exports[i] != NULL;
	/* Only a server that has told the guest nothing yet: no request
	 * served (a lookup in the hub names an export's root). */
	if (!s->carry && s->stats.requests == 0 && s->nr_handles == 0 && s->nr_nodes == roots &&
	    s->hub.nlookup == 0) {
		clear_carried(s);
		s->hub.nlookup = hub;
		/* Past what the saved server would have given next, where that
		 * is an id of ours; handles past its generation. */
		if (id_ours(s, next[0]))
			max_id = next[0] - 1;
		if (next[1] <= UINT32_MAX && next[1] > s->gen)
			s->gen = (uint32_t)next[1];
		take_exports(s, &in, hdr[2], map, &max_id);
		kept = keep_nodes(s, &in, hdr[3], map, &max_id);
		s->carry->table = copy;
		copy = NULL;
		/* An export the table did not have takes an id past every id
		 * the guest may hold. */
		for (size_t i = 0; i < FS_MAX_EXPORTS; i++)
			if (s->exports[i] && !s->exports[i]->root->carried)
				fs_node_reid(s, s->exports[i]->root, top_id(s, i));
		s->next_id = max_id + 1;
		for (size_t i = 0; i < FS_MAX_EXPORTS; i++)
			if (s->exports[i] && !s->exports[i]->root->carried)
				fs_node_reid(s, s->exports[i]->root, s->next_id);
		/* Open files now: there are few, and each is open in the
		 * guest. Their nodes are taken up with them. */
		take_handles(s, &in, hdr[4]);
		if (s->carry && s->carry->left == 0)
			fs_carry_free(s);
	}
	pthread_mutex_unlock(&s->lock);
	return kept;
}
