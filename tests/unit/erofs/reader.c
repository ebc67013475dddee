/* Test-side EROFS reader (see reader.h). Offsets are the spec's. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reader.h"

#define BLK 4096u

static int fail(const char *fmt, const char *what, unsigned long long v)
{
	fprintf(stderr, "erofs reader: ");
	fprintf(stderr, fmt, what, v);
	fprintf(stderr, "\n");
	return -1;
}

static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
	return le32(p) | (uint64_t)le32(p + 4) << 32;
}

static int rd_pread(struct rd *r, void *buf, size_t len, uint64_t off)
{
	if (off + len > r->file_size || pread(r->fd, buf, len, (off_t)off) != (ssize_t)len)
		return fail("%s read past the image at %llu", "", off);
	return 0;
}

static uint32_t crc32c_bitwise(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
	}
	return crc;
}

int rd_open(struct rd *r, const char *path)
{
	uint8_t blk[BLK];
	struct stat st;

	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0 || fstat(r->fd, &st) < 0)
		return fail("%s: cannot open%llu", path, 0);
	r->file_size = (uint64_t)st.st_size;
	if (rd_pread(r, blk, BLK, 0) < 0)
		return -1;
	if (le32(blk + 1024) != 0xe0f5e1e2u)
		return fail("%s bad magic %llx", "", le32(blk + 1024));
	if (blk[1024 + 12] != 12)
		return fail("%s block size bits %llu", "", blk[1024 + 12]);
	if (le32(blk + 1024 + 8) & 1) { /* SB_CHKSUM */
		uint32_t want = le32(blk + 1024 + 4);

		memset(blk + 1024 + 4, 0, 4);
		if (crc32c_bitwise(~0u, blk + 1024, BLK - 1024) != want)
			return fail("%s superblock checksum %llx wrong", "", want);
	}
	if (le32(blk + 1024 + 80) != 0)
		return fail("%s incompat features %llx", "", le32(blk + 1024 + 80));
	r->root_nid = le16(blk + 1024 + 14);
	r->inos = le64(blk + 1024 + 16);
	r->blocks = le32(blk + 1024 + 36);
	r->meta_blkaddr = le32(blk + 1024 + 40);
	if ((uint64_t)r->blocks * BLK != r->file_size)
		return fail("%s blocks %llu do not match the file", "", r->blocks);
	return 0;
}

void rd_close(struct rd *r)
{
	close(r->fd);
}

static uint64_t iloc(const struct rd *r, uint64_t nid)
{
	return (uint64_t)r->meta_blkaddr * BLK + nid * 32;
}

int rd_inode(struct rd *r, uint64_t nid, struct rd_inode *ino)
{
	uint8_t b[64];
	uint16_t fmt;

	if (rd_pread(r, b, 32, iloc(r, nid)) < 0)
		return -1;
	fmt = le16(b);
	memset(ino, 0, sizeof(*ino));
	ino->nid = nid;
	ino->layout = (fmt >> 1) & 7;
	ino->xattr_isize = le16(b + 2) ? 12 + 4 * (le16(b + 2) - 1u) : 0;
	ino->mode = le16(b + 4);
	if ((fmt & 1) == 0) {
		ino->size = le32(b + 8);
		ino->u = le32(b + 16);
		ino->uid = le16(b + 24);
		ino->gid = le16(b + 26);
		ino->nlink = le16(b + 6);
		return 0;
	}
	if (rd_pread(r, b, 64, iloc(r, nid)) < 0)
		return -1;
	if (ino->layout != 0 && ino->layout != 2)
		return fail("%s nid %llu: unexpected layout", "", nid);
	ino->size = le64(b + 8);
	ino->u = le32(b + 16);
	ino->uid = le32(b + 24);
	ino->gid = le32(b + 28);
	ino->mtime = (int64_t)le64(b + 32);
	ino->mtime_nsec = le32(b + 40);
	ino->nlink = le32(b + 44);
	return 0;
}

static unsigned int isize(const struct rd_inode *ino)
{
	return 64 + ino->xattr_isize; /* this reader only meets extended inodes */
}

int rd_read(struct rd *r, const struct rd_inode *ino, uint64_t off, void *buf, size_t len)
{
	uint64_t nblocks = (ino->size + BLK - 1) / BLK;
	uint64_t lastblk = nblocks - (ino->layout == 2);
	uint8_t *p = buf;

	if (off + len > ino->size)
		return fail("%s read beyond i_size at %llu", "", off);
	while (len) {
		uint64_t pos, n;

		if (off < lastblk * BLK) {
			pos = (uint64_t)ino->u * BLK + off;
			n = lastblk * BLK - off;
		} else {
			pos = iloc(r, ino->nid) + isize(ino) + off % BLK;
			n = ino->size - off;
			if (pos % BLK + n > BLK)
				return fail("%s nid %llu: inline data crosses a block", "",
					    ino->nid);
		}
		n = n < len ? n : len;
		if (rd_pread(r, p, n, pos) < 0)
			return -1;
		p += n;
		off += n;
		len -= n;
	}
	return 0;
}

struct dent {
	uint64_t nid;
	unsigned int type;
	unsigned int len;
	char name[256];
};

/* Read a whole directory, checking its block format. */
static int read_dir(struct rd *r, const struct rd_inode *dir, struct dent **out, size_t *n)
{
	uint8_t *data = malloc(dir->size ? dir->size : 1);
	size_t cap = 64, cnt = 0;
	struct dent *v = malloc(cap * sizeof(*v));

	if (!S_ISDIR(dir->mode) || rd_read(r, dir, 0, data, dir->size) < 0)
		goto bad;
	for (uint64_t b = 0; b * BLK < dir->size; b++) {
		const uint8_t *blk = data + b * BLK;
		uint64_t maxsize = dir->size - b * BLK < BLK ? dir->size - b * BLK : BLK;
		unsigned int nameoff0 = le16(blk + 8), ndir = nameoff0 / 12;

		if (nameoff0 == 0 || nameoff0 % 12 || nameoff0 >= maxsize)
			goto bad;
		for (unsigned int k = 0; k < ndir; k++) {
			unsigned int off = le16(blk + k * 12 + 8), end;

			if (k + 1 < ndir)
				end = le16(blk + (k + 1) * 12 + 8);
			else
				end = off +
				      (unsigned int)strnlen((const char *)blk + off, maxsize - off);
			if (end <= off || end > maxsize || end - off > 255)
				goto bad;
			if (cnt == cap)
				v = realloc(v, (cap *= 2) * sizeof(*v));
			v[cnt].nid = le64(blk + k * 12);
			v[cnt].type = blk[k * 12 + 10];
			v[cnt].len = end - off;
			memcpy(v[cnt].name, blk + off, end - off);
			v[cnt].name[end - off] = '\0';
			cnt++;
		}
	}
	free(data);
	*out = v;
	*n = cnt;
	return 0;
bad:
	free(data);
	free(v);
	return fail("%s nid %llu: bad directory", "", dir->nid);
}

int rd_lookup(struct rd *r, const char *path, struct rd_inode *ino)
{
	char *copy = strdup(path), *save = NULL;
	int ret = rd_inode(r, r->root_nid, ino);

	for (char *c = strtok_r(copy, "/", &save); c && ret == 0; c = strtok_r(NULL, "/", &save)) {
		struct dent *v;
		size_t n, k;

		ret = read_dir(r, ino, &v, &n);
		if (ret < 0)
			break;
		for (k = 0; k < n && strcmp(v[k].name, c) != 0; k++)
			;
		if (k == n) {
			fprintf(stderr, "erofs reader: `%s` not found in `%s`\n", c, path);
			ret = -1;
		} else {
			ret = rd_inode(r, v[k].nid, ino);
		}
		free(v);
	}
	free(copy);
	return ret;
}

long rd_getxattr(struct rd *r, const struct rd_inode *ino, const char *name, void *buf, size_t cap)
{
	static const struct {
		const char *prefix;
		unsigned int index;
	} pfx[] = { { "user.", 1 }, { "trusted.", 4 }, { "security.", 6 } };
	unsigned int index = 0;
	const char *suffix = name;
	uint8_t *body;
	long ret = -1;

	for (size_t i = 0; i < sizeof(pfx) / sizeof(pfx[0]); i++)
		if (strncmp(name, pfx[i].prefix, strlen(pfx[i].prefix)) == 0) {
			index = pfx[i].index;
			suffix = name + strlen(pfx[i].prefix);
		}
	if (strcmp(name, "system.posix_acl_access") == 0)
		index = 2, suffix = "";
	if (index == 0 || ino->xattr_isize <= 12)
		return -1;
	body = malloc(ino->xattr_isize);
	if (rd_pread(r, body, ino->xattr_isize, iloc(r, ino->nid) + 64) == 0 && body[4] == 0) {
		for (unsigned int off = 12; off + 4 <= ino->xattr_isize;) {
			unsigned int nl = body[off], vl = le16(body + off + 2);

			if (off + 4 + nl + vl > ino->xattr_isize)
				break;
			if (body[off + 1] == index && nl == strlen(suffix) &&
			    memcmp(body + off + 4, suffix, nl) == 0) {
				memcpy(buf, body + off + 4 + nl, vl < cap ? vl : cap);
				ret = vl;
				break;
			}
			off += (4 + nl + vl + 3) & ~3u;
		}
	}
	free(body);
	return ret;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int rd_check_tree(struct rd *r, uint64_t *ninodes, uint64_t *nentries)
{
	uint64_t *queue = malloc(sizeof(*queue)), *parents = malloc(sizeof(*parents));
	uint64_t *seen = malloc(sizeof(*seen));
	size_t qn = 1, seen_n = 1;
	int ret = 0;

	queue[0] = parents[0] = seen[0] = r->root_nid;
	*nentries = 0;
	for (size_t q = 0; q < qn && ret == 0; q++) {
		struct rd_inode dir;
		struct dent *v;
		size_t n;
		uint32_t subdirs = 0;

		if (rd_inode(r, queue[q], &dir) < 0 || read_dir(r, &dir, &v, &n) < 0) {
			ret = -1;
			break;
		}
		for (size_t k = 0; k < n; k++) {
			struct rd_inode c;

			if (k && strcmp(v[k - 1].name, v[k].name) >= 0)
				ret = fail("%s nid %llu: names out of order", "", dir.nid);
			if (strcmp(v[k].name, ".") == 0) {
				if (v[k].nid != dir.nid)
					ret = fail("%s nid %llu: bad \".\"", "", dir.nid);
				continue;
			}
			if (strcmp(v[k].name, "..") == 0) {
				if (v[k].nid != parents[q])
					ret = fail("%s nid %llu: bad \"..\"", "", dir.nid);
				continue;
			}
			(*nentries)++;
			if (rd_inode(r, v[k].nid, &c) < 0) {
				ret = -1;
				continue;
			}
			if (S_ISDIR(c.mode)) {
				subdirs++;
				queue = realloc(queue, (qn + 1) * sizeof(*queue));
				parents = realloc(parents, (qn + 1) * sizeof(*parents));
				queue[qn] = c.nid;
				parents[qn++] = dir.nid;
			}
			seen = realloc(seen, (seen_n + 1) * sizeof(*seen));
			seen[seen_n++] = c.nid;
		}
		if (dir.nlink != 2 + subdirs)
			ret = fail("%s nid %llu: wrong directory nlink", "", dir.nid);
		free(v);
	}
	qsort(seen, seen_n, sizeof(*seen), u64_cmp);
	*ninodes = 0;
	for (size_t i = 0; i < seen_n; i++)
		*ninodes += i == 0 || seen[i] != seen[i - 1];
	free(seen);
	free(queue);
	free(parents);
	return ret;
}
