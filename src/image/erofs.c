/* Finishing an EROFS image from a struct erofs_tree, and publishing it.
 *
 * Layout (4 KiB blocks):
 *   block 0          superblock at byte 1024
 *   blocks 1..D-1    regular-file data, streamed in while layers were applied;
 *                    files replaced later leave dead blocks (punched holes)
 *   blocks D..M-1    metadata, meta_blkaddr = D: every inode (extended form)
 *                    with its inline xattrs and inline tail (file tail, last
 *                    dirent block or symlink target), placed first-fit so an
 *                    inline tail never crosses a block; the root comes first,
 *                    at nid 1, because a nid is also the inode number and
 *                    readdir users take inode 0 for "no entry"
 *   blocks M..end    directory blocks and symlink targets not inline
 * An inode never straddles a block unless its xattrs alone exceed one. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "image/tree.h"

#define ISIZE	    sizeof(struct erofs_inode_extended)
#define DIRENT_SIZE sizeof(struct erofs_dirent)
#define OBUF_SIZE   (1u << 20)

/* One directory entry as laid out: children plus "." and "..". */
struct ent {
	const char *name;
	uint8_t len;
	struct erofs_inode *ino;
};

struct dirents {
	struct ent *v;
	size_t n;
};

/* Buffered sequential writer for everything after the data area. */
struct obuf {
	int fd;
	uint64_t off; /* file offset of buf[0] */
	uint8_t *buf;
	size_t len;
};

static int ob_flush(struct obuf *ob, gantry_error_t *err)
{
	size_t done = 0;

	while (done < ob->len) {
		ssize_t r = pwrite(ob->fd, ob->buf + done, ob->len - done, (off_t)(ob->off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return gantry_error_errno(err, "write image metadata");
		done += (size_t)r;
	}
	ob->off += ob->len;
	ob->len = 0;
	return 0;
}

static int ob_put(struct obuf *ob, const void *p, size_t n, gantry_error_t *err)
{
	const uint8_t *src = p;

	while (n > 0) {
		size_t k = MIN(n, OBUF_SIZE - ob->len);

		if (src) {
			memcpy(ob->buf + ob->len, src, k);
			src += k;
		} else {
			memset(ob->buf + ob->len, 0, k);
		}
		ob->len += k;
		n -= k;
		if (ob->len == OBUF_SIZE && ob_flush(ob, err) < 0)
			return -1;
	}
	return 0;
}

/* Zero-fill up to file offset off. */
static int ob_seek(struct obuf *ob, uint64_t off, gantry_error_t *err)
{
	if (off < ob->off + ob->len)
		return gantry_error(err, 0, "internal: metadata written out of order");
	return ob_put(ob, NULL, (size_t)(off - (ob->off + ob->len)), err);
}

static int ent_cmp(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;
	int c = memcmp(x->name, y->name, MIN(x->len, y->len));

	return c ? c : (int)x->len - (int)y->len;
}

/* Sorted entries of a directory, "." and ".." included: EROFS looks names
 * up by binary search over the whole directory. */
static void dirents_build(struct erofs_inode *dir, struct dirents *out)
{
	struct ent *v = xmalloc((dir->dir->count + 2u) * sizeof(*v));
	size_t n = 0;

	v[n++] = (struct ent){ ".", 1, dir };
	v[n++] = (struct ent){ "..", 2, dir->dir->parent };
	for (uint32_t b = 0; b < dir->dir->nbuckets; b++)
		for (struct erofs_dentry *d = dir->dir->buckets[b]; d; d = d->next)
			v[n++] = (struct ent){ d->name, d->name_len, d->inode };
	qsort(v, n, sizeof(*v), ent_cmp);
	out->v = v;
	out->n = n;
}

/* Fill one dirent block from entry *i on (blk may be NULL to only measure).
 * Names never cross blocks. Returns the bytes used. */
static uint32_t dirent_block(const struct dirents *de, size_t *i, uint8_t *blk)
{
	size_t first = *i, end = *i;
	uint32_t used = 0, nameoff;

	while (end < de->n && used + DIRENT_SIZE + de->v[end].len <= EROFS_BLKSZ)
		used += DIRENT_SIZE + de->v[end++].len;
	*i = end;
	if (blk == NULL)
		return used;
	memset(blk, 0, EROFS_BLKSZ);
	nameoff = (uint32_t)((end - first) * DIRENT_SIZE);
	for (size_t k = first; k < end; k++) {
		struct erofs_dirent d = {
			.nid = htole64(de->v[k].ino->nid),
			.nameoff = htole16((uint16_t)nameoff),
			.file_type = erofs_ftype(de->v[k].ino->mode),
		};

		memcpy(blk + (k - first) * DIRENT_SIZE, &d, sizeof(d));
		memcpy(blk + nameoff, de->v[k].name, de->v[k].len);
		nameoff += de->v[k].len;
	}
	return used;
}

/* Directory size: full blocks, then the used part of the last one. */
static uint64_t dirents_size(const struct dirents *de)
{
	uint64_t size = 0;
	size_t i = 0;

	while (i < de->n) {
		uint32_t used = dirent_block(de, &i, NULL);

		size += i < de->n ? EROFS_BLKSZ : used;
	}
	return size;
}

static int xattr_cmp(const void *a, const void *b)
{
	const struct erofs_xattr *x = a, *y = b;
	int c;

	if (x->index != y->index)
		return (int)x->index - (int)y->index;
	c = memcmp(x->data, y->data, MIN(x->name_len, y->name_len));
	return c ? c : (int)x->name_len - (int)y->name_len;
}

struct layout {
	struct erofs_inode **ino; /* breadth-first, root first */
	struct dirents *de;	  /* per inode, directories only */
	size_t *by_nid;		  /* indexes into ino[] in metadata order */
	size_t n;
	uint64_t meta_blkaddr;
	uint64_t blocks;
};

static void layout_free(struct layout *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->de[i].v);
	free(l->de);
	free(l->ino);
	free(l->by_nid);
}

/* Number the inodes breadth-first in name order (hardlinks once) and build
 * the dirent lists: the same tree always gives the same image, whatever the
 * seed of the name hashes. */
static void layout_collect(struct erofs_tree *t, struct layout *l)
{
	size_t cap = 1024;

	l->ino = xmalloc(cap * sizeof(*l->ino));
	l->de = xzalloc(cap * sizeof(*l->de));
	l->ino[0] = t->root;
	l->n = 1;
	t->root->seq = 1;
	for (size_t i = 0; i < l->n; i++) {
		struct erofs_inode *ino = l->ino[i];
		struct dirents *de = &l->de[i];

		ino->nlink = ino->refs;
		if (ino->dir == NULL)
			continue;
		dirents_build(ino, de);
		/* 2 + subdirectories: count "." and ".." among the directories */
		ino->nlink = 0;
		for (size_t k = 0; k < de->n; k++) {
			struct erofs_inode *c = de->v[k].ino;

			ino->nlink += S_ISDIR(c->mode);
			if (c->seq)
				continue; /* ".", "..", or a hardlink seen before */
			if (l->n == cap) {
				l->ino = xrealloc(l->ino, cap * 2 * sizeof(*l->ino));
				l->de = xrealloc(l->de, cap * 2 * sizeof(*l->de));
				memset(l->de + cap, 0, cap * sizeof(*l->de));
				cap *= 2;
				de = &l->de[i];
			}
			l->ino[l->n++] = c;
			c->seq = (uint32_t)l->n;
		}
	}
}

/* Blocks an inode needs after the metadata area. */
static uint64_t extra_blocks(const struct erofs_inode *ino)
{
	if (ino->dir)
		return (ino->data_size - ino->inline_size + EROFS_BLKSZ - 1) / EROFS_BLKSZ;
	return S_ISLNK(ino->mode) && !ino->inline_size;
}

/* First-fit placement of inodes (with their inline parts) in the metadata
 * area: inline data must not cross a block, so a few partly used blocks stay
 * open instead of padding to the next block each time one does not fit. */
#define META_OPEN_BLOCKS 64

struct meta_alloc {
	uint64_t end; /* bytes of metadata area handed out, block-aligned */
	uint64_t blk[META_OPEN_BLOCKS];
	uint32_t used[META_OPEN_BLOCKS];
	size_t n;
};

static void meta_open(struct meta_alloc *m, uint64_t blk, uint32_t used)
{
	size_t k = m->n;

	if (EROFS_BLKSZ - ALIGN_UP(used, EROFS_ISLOT) < ISIZE)
		return;		      /* not even a bare inode fits */
	if (m->n == META_OPEN_BLOCKS) /* drop the fullest */
		for (size_t i = k = 0; i < m->n; i++)
			k = m->used[i] > m->used[k] ? i : k;
	else
		m->n++;
	m->blk[k] = blk;
	m->used[k] = used;
}

/* Byte offset in the metadata area for an inode of isize bytes. */
static uint64_t meta_place(struct meta_alloc *m, uint64_t isize)
{
	uint64_t pos, nblk;

	for (size_t k = 0; isize <= EROFS_BLKSZ && k < m->n; k++) {
		uint32_t off = ALIGN_UP(m->used[k], EROFS_ISLOT);

		if (off + isize > EROFS_BLKSZ)
			continue;
		pos = m->blk[k] * EROFS_BLKSZ + off;
		m->used[k] = off + (uint32_t)isize;
		if (EROFS_BLKSZ - ALIGN_UP(m->used[k], EROFS_ISLOT) < ISIZE) { /* full */
			m->n--;
			m->blk[k] = m->blk[m->n];
			m->used[k] = m->used[m->n];
		}
		return pos;
	}
	/* a fresh block; only inodes with huge xattrs span several */
	pos = m->end;
	nblk = (isize + EROFS_BLKSZ - 1) / EROFS_BLKSZ;
	m->end += nblk * EROFS_BLKSZ;
	meta_open(m, pos / EROFS_BLKSZ + nblk - 1, (uint32_t)(isize - (nblk - 1) * EROFS_BLKSZ));
	return pos;
}

/* Choose each inode's data layout and inline part, then place inodes in the
 * metadata area and the non-inline blocks after it. */
static int layout_place(struct erofs_tree *t, struct layout *l, gantry_error_t *err)
{
	struct meta_alloc m = { .end = EROFS_BLKSZ };
	uint64_t blk;

	meta_open(&m, 0, EROFS_ISLOT); /* skip nid 0: the root becomes nid 1 */
	l->meta_blkaddr = t->next_blk;
	for (size_t i = 0; i < l->n; i++) {
		struct erofs_inode *ino = l->ino[i];
		uint64_t size = ino->size, tail, isize;

		if (ino->nxattrs)
			qsort(ino->xattrs, ino->nxattrs, sizeof(*ino->xattrs), xattr_cmp);
		ino->xattr_size = erofs_xattr_ibody_size(ino);
		ino->layout = EROFS_INODE_FLAT_PLAIN;
		ino->inline_size = 0;
		if (ino->dir)
			size = ino->data_size = dirents_size(&l->de[i]);
		tail = S_ISLNK(ino->mode) ? size : size % EROFS_BLKSZ;
		if (ino->tail || ((ino->dir || S_ISLNK(ino->mode)) && tail &&
				  ISIZE + ino->xattr_size + tail <= EROFS_BLKSZ)) {
			ino->layout = EROFS_INODE_FLAT_INLINE;
			ino->inline_size = (uint32_t)tail;
		}
		isize = ISIZE + ino->xattr_size + ino->inline_size;
		if (isize > EROFS_BLKSZ && ino->inline_size)
			return gantry_error(err, 0, "internal: inline data does not fit");
		ino->nid = meta_place(&m, isize) / EROFS_ISLOT;
	}
	if (t->root->nid > UINT16_MAX)
		return gantry_error(err, 0, "internal: root nid does not fit 16 bits");

	blk = l->meta_blkaddr + m.end / EROFS_BLKSZ;
	for (size_t i = 0; i < l->n; i++) {
		struct erofs_inode *ino = l->ino[i];
		uint64_t n = extra_blocks(ino);

		ino->extra_blkaddr = 0;
		if (n) {
			ino->extra_blkaddr = (uint32_t)blk;
			blk += n;
		}
		if (blk > EROFS_MAX_BLOCKS)
			return gantry_error(err, 0, "image larger than %llu blocks",
					    (unsigned long long)EROFS_MAX_BLOCKS);
	}
	l->blocks = blk;
	return 0;
}

static int put_inode(struct obuf *ob, const struct layout *l, size_t i, uint8_t *blk,
		     gantry_error_t *err)
{
	struct erofs_inode *ino = l->ino[i];
	struct erofs_inode_extended di = {
		.i_format = htole16(EROFS_INODE_LAYOUT_EXTENDED | (ino->layout << 1)),
		.i_mode = htole16((uint16_t)ino->mode),
		.i_ino = htole32(ino->seq),
		.i_uid = htole32(ino->uid),
		.i_gid = htole32(ino->gid),
		.i_mtime = htole64((uint64_t)ino->mtime),
		.i_mtime_nsec = htole32(ino->mtime_nsec),
		.i_nlink = htole32(ino->nlink),
	};

	if (ino->xattr_size)
		di.i_xattr_icount = htole16((uint16_t)((ino->xattr_size - 12) / 4 + 1));
	switch (ino->mode & S_IFMT) {
	case S_IFREG:
		di.i_size = htole64(ino->size);
		di.i_u = htole32(ino->blkaddr);
		break;
	case S_IFDIR:
		di.i_size = htole64(ino->data_size);
		di.i_u = htole32(ino->extra_blkaddr);
		break;
	case S_IFLNK:
		di.i_size = htole64(ino->size);
		di.i_u = htole32(ino->extra_blkaddr);
		break;
	case S_IFCHR:
	case S_IFBLK:
		di.i_u = htole32(ino->rdev);
		break;
	}
	if (ob_seek(ob, l->meta_blkaddr * EROFS_BLKSZ + ino->nid * EROFS_ISLOT, err) < 0 ||
	    ob_put(ob, &di, sizeof(di), err) < 0)
		return -1;
	if (ino->xattr_size) {
		struct erofs_xattr_ibody_header h = { 0 };

		if (ob_put(ob, &h, sizeof(h), err) < 0)
			return -1;
		for (uint16_t k = 0; k < ino->nxattrs; k++) {
			const struct erofs_xattr *x = &ino->xattrs[k];
			struct erofs_xattr_entry e = {
				.e_name_len = x->name_len,
				.e_name_index = x->index,
				.e_value_size = htole16(x->value_len),
			};
			size_t n = sizeof(e) + x->name_len + x->value_len;

			if (ob_put(ob, &e, sizeof(e), err) < 0 ||
			    ob_put(ob, x->data, n - sizeof(e), err) < 0 ||
			    ob_put(ob, NULL, ALIGN_UP(n, 4u) - n, err) < 0)
				return -1;
		}
	}
	if (ino->inline_size == 0)
		return 0;
	if (ino->dir) {
		size_t e = 0;

		/* the inline tail is the last dirent block */
		for (uint64_t b = ino->data_size / EROFS_BLKSZ; b > 0; b--)
			dirent_block(&l->de[i], &e, NULL);
		dirent_block(&l->de[i], &e, blk);
		return ob_put(ob, blk, ino->inline_size, err);
	}
	return ob_put(ob, S_ISLNK(ino->mode) ? (const void *)ino->symlink : ino->tail,
		      ino->inline_size, err);
}

static int put_extra(struct obuf *ob, const struct layout *l, size_t i, uint8_t *blk,
		     gantry_error_t *err)
{
	struct erofs_inode *ino = l->ino[i];

	if (ino->extra_blkaddr == 0)
		return 0;
	if (ob_seek(ob, (uint64_t)ino->extra_blkaddr * EROFS_BLKSZ, err) < 0)
		return -1;
	if (S_ISLNK(ino->mode)) {
		memset(blk, 0, EROFS_BLKSZ);
		memcpy(blk, ino->symlink, ino->size);
		return ob_put(ob, blk, EROFS_BLKSZ, err);
	}
	for (size_t b = 0, e = 0; b < extra_blocks(ino); b++) {
		dirent_block(&l->de[i], &e, blk);
		if (ob_put(ob, blk, EROFS_BLKSZ, err) < 0)
			return -1;
	}
	return 0;
}

/* CRC32C (Castagnoli), no final inversion, as the kernel's crc32c(). */
static uint32_t crc32c(uint32_t crc, const uint8_t *p, size_t len)
{
	uint32_t table[256];

	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		table[i] = c;
	}
	while (len--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

static int put_super(struct erofs_tree *t, const struct layout *l, uint8_t *blk,
		     gantry_error_t *err)
{
	struct erofs_super_block sb = {
		.magic = htole32(EROFS_MAGIC),
		.feature_compat =
			htole32(EROFS_FEATURE_COMPAT_SB_CHKSUM | EROFS_FEATURE_COMPAT_MTIME),
		.blkszbits = EROFS_BLKSZ_BITS,
		.root_nid = htole16((uint16_t)t->root->nid),
		.inos = htole64(l->n),
		/* only compact inodes use it; ours are extended */
		.build_time = htole64((uint64_t)t->root->mtime),
		.build_time_nsec = htole32(t->root->mtime_nsec),
		.blocks = htole32((uint32_t)l->blocks),
		.meta_blkaddr = htole32((uint32_t)l->meta_blkaddr),
	};

	memset(blk, 0, EROFS_BLKSZ);
	memcpy(blk + EROFS_SUPER_OFFSET, &sb, sizeof(sb));
	sb.checksum =
		htole32(crc32c(~0u, blk + EROFS_SUPER_OFFSET, EROFS_BLKSZ - EROFS_SUPER_OFFSET));
	memcpy(blk + EROFS_SUPER_OFFSET, &sb, sizeof(sb));
	if (pwrite(t->fd, blk, EROFS_BLKSZ, 0) != (ssize_t)EROFS_BLKSZ)
		return gantry_error_errno(err, "write superblock");
	if (ftruncate(t->fd, (off_t)(l->blocks * EROFS_BLKSZ)) < 0)
		return gantry_error_errno(err, "size image");
	return 0;
}

static int nid_cmp(const void *a, const void *b, void *layout)
{
	const struct layout *l = layout;
	uint64_t x = l->ino[*(const size_t *)a]->nid, y = l->ino[*(const size_t *)b]->nid;

	return x < y ? -1 : x > y;
}

int erofs_write(struct erofs_tree *t, gantry_error_t *err)
{
	struct obuf ob = { .fd = t->fd };
	struct layout l = { 0 };
	cleanup_free uint8_t *blk = xmalloc(EROFS_BLKSZ);
	int ret = -1;

	if (t->root->seq)
		return gantry_error(err, 0, "image already written");
	layout_collect(t, &l);
	if (layout_place(t, &l, err) < 0)
		goto out;
	ob.buf = xmalloc(OBUF_SIZE);
	ob.off = l.meta_blkaddr * EROFS_BLKSZ;
	l.by_nid = xmalloc(l.n * sizeof(*l.by_nid));
	for (size_t i = 0; i < l.n; i++)
		l.by_nid[i] = i;
	qsort_r(l.by_nid, l.n, sizeof(*l.by_nid), nid_cmp, &l);
	for (size_t i = 0; i < l.n; i++)
		if (put_inode(&ob, &l, l.by_nid[i], blk, err) < 0)
			goto out;
	for (size_t i = 0; i < l.n; i++)
		if (put_extra(&ob, &l, i, blk, err) < 0)
			goto out;
	if (ob_flush(&ob, err) < 0 || put_super(t, &l, blk, err) < 0)
		goto out;
	ret = 0;
out:
	free(ob.buf);
	layout_free(&l);
	return ret;
}

int erofs_open_temp(const char *path, char **tmp_path, gantry_error_t *err)
{
	char *tmp;
	int fd;

	xasprintf(&tmp, "%s.tmp-XXXXXX", path);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		gantry_error_errno(err, "create `%s`", tmp);
		free(tmp);
		return -1;
	}
	*tmp_path = tmp;
	return fd;
}

int erofs_publish(int fd, const char *tmp_path, const char *path, gantry_error_t *err)
{
	cleanup_free char *copy = xstrdup(path);
	cleanup_close int dfd = -1;

	if (fchmod(fd, 0644) < 0 || fsync(fd) < 0)
		return gantry_error_errno(err, "sync `%s`", tmp_path);
	if (rename(tmp_path, path) < 0)
		return gantry_error_errno(err, "rename `%s` to `%s`", tmp_path, path);
	dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0)
		return gantry_error_errno(err, "sync directory of `%s`", path);
	return 0;
}
