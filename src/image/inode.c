/* What an inode of the image tree holds (see erofs.h): its xattrs, mapped
 * to EROFS's indexed prefixes and bounded as the on-disk format bounds them,
 * and a regular file's data, streamed into blocks reserved in the image's
 * data area with a tail that may stay in memory to be inlined next to the
 * inode; and a file read back, for the image's own metadata. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "image/tree.h"

uint32_t erofs_xattr_ibody_size(const struct erofs_inode *ino)
{
	uint32_t size = sizeof(struct erofs_xattr_ibody_header);

	if (ino->nxattrs == 0)
		return 0;
	for (uint16_t i = 0; i < ino->nxattrs; i++)
		size += ALIGN_UP((uint32_t)sizeof(struct erofs_xattr_entry) +
					 ino->xattrs[i].name_len + ino->xattrs[i].value_len,
				 4u);
	return size;
}

/* Map a full xattr name to its EROFS index and the suffix stored on disk. */
static uint8_t xattr_index(const char *name, const char **suffix)
{
	static const struct {
		const char *prefix;
		uint8_t index;
	} map[] = {
		{ "user.", EROFS_XATTR_INDEX_USER },
		{ "trusted.", EROFS_XATTR_INDEX_TRUSTED },
		{ "security.", EROFS_XATTR_INDEX_SECURITY },
	};

	if (strcmp(name, "system.posix_acl_access") == 0) {
		*suffix = "";
		return EROFS_XATTR_INDEX_POSIX_ACL_ACCESS;
	}
	if (strcmp(name, "system.posix_acl_default") == 0) {
		*suffix = "";
		return EROFS_XATTR_INDEX_POSIX_ACL_DEFAULT;
	}
	for (size_t i = 0; i < ARRAY_SIZE(map); i++) {
		size_t n = strlen(map[i].prefix);

		if (strncmp(name, map[i].prefix, n) == 0 && name[n] != '\0') {
			*suffix = name + n;
			return map[i].index;
		}
	}
	return 0;
}

int erofs_inode_set_xattr(struct erofs_tree *t, struct erofs_inode *ino, const char *name,
			  const void *value, size_t size, gantry_error_t *err)
{
	struct erofs_xattr *x = NULL;
	const char *suffix;
	uint8_t index = xattr_index(name, &suffix);
	size_t slen;

	if (index == 0) {
		t->dropped_xattrs++;
		return 0;
	}
	slen = strlen(suffix);
	if (slen > EROFS_NAME_LEN)
		return gantry_error(err, 0, "xattr name `%s` too long", name);
	if (size > UINT16_MAX)
		return gantry_error(err, 0, "xattr `%s` larger than %u bytes", name, UINT16_MAX);
	if (ino->reserved)
		return gantry_error(err, 0, "xattr `%s` set after the file's data", name);
	for (uint16_t i = 0; i < ino->nxattrs; i++)
		if (ino->xattrs[i].index == index && ino->xattrs[i].name_len == slen &&
		    memcmp(ino->xattrs[i].data, suffix, slen) == 0)
			x = &ino->xattrs[i];
	if (x == NULL) {
		if (ino->nxattrs == UINT16_MAX)
			return gantry_error(err, 0, "too many xattrs");
		ino->xattrs = xrealloc(ino->xattrs, (ino->nxattrs + 1u) * sizeof(*x));
		x = &ino->xattrs[ino->nxattrs++];
		x->data = NULL;
	}
	free(x->data);
	x->index = index;
	x->name_len = (uint8_t)slen;
	x->value_len = (uint16_t)size;
	x->data = xmalloc(slen + size);
	memcpy(x->data, suffix, slen);
	if (size)
		memcpy(x->data + slen, value, size);
	if (erofs_xattr_ibody_size(ino) > EROFS_XATTR_IBODY_MAX) {
		free(x->data);
		*x = ino->xattrs[--ino->nxattrs];
		return gantry_error(err, 0, "xattrs larger than %u bytes in all",
				    EROFS_XATTR_IBODY_MAX);
	}
	return 0;
}

int erofs_inode_reserve(struct erofs_tree *t, struct erofs_inode *ino, uint64_t size,
			gantry_error_t *err)
{
	uint64_t full = size / EROFS_BLKSZ, tail = size % EROFS_BLKSZ, nblocks;
	bool inline_tail;

	if (!S_ISREG(ino->mode) || ino->reserved)
		return gantry_error(err, 0, "data for a non-file or given twice");
	inline_tail = tail && t->tail_bytes + tail <= EROFS_TAIL_BUDGET &&
		      sizeof(struct erofs_inode_extended) + erofs_xattr_ibody_size(ino) + tail <=
			      EROFS_BLKSZ;
	nblocks = full + (tail && !inline_tail);
	if (t->next_blk + nblocks > EROFS_MAX_BLOCKS)
		return gantry_error(err, 0, "image larger than %llu blocks",
				    (unsigned long long)EROFS_MAX_BLOCKS);
	ino->blkaddr = nblocks ? (uint32_t)t->next_blk : 0;
	ino->nblocks = nblocks;
	t->next_blk += nblocks;
	if (inline_tail) {
		ino->tail = xzalloc(tail);
		t->tail_bytes += tail;
	}
	ino->size = size;
	ino->reserved = true;
	return 0;
}

int erofs_inode_pwrite(struct erofs_tree *t, struct erofs_inode *ino, const void *buf, size_t len,
		       uint64_t off, gantry_error_t *err)
{
	uint64_t ondisk = ino->tail ? ino->size - ino->size % EROFS_BLKSZ : ino->size;
	const uint8_t *p = buf;

	if (!ino->reserved || off > ino->size || len > ino->size - off)
		return gantry_error(err, 0, "data beyond the file's size of %llu bytes",
				    (unsigned long long)ino->size);
	if (off < ondisk) {
		size_t n = (size_t)MIN((uint64_t)len, ondisk - off);

		if (pwrite_full(t->fd, p, n, (off_t)ino->blkaddr * EROFS_BLKSZ + (off_t)off) < 0)
			return gantry_error_errno(err, "write image data");
		p += n;
		off += n;
		len -= n;
	}
	if (len)
		memcpy(ino->tail + (off - ondisk), p, len);
	return 0;
}

int erofs_tree_read_file(struct erofs_tree *t, const char *path, size_t max, char **data,
			 size_t *len, gantry_error_t *err)
{
	struct erofs_inode *ino;
	uint64_t ondisk;
	char *buf;

	*data = NULL;
	*len = 0;
	if (erofs_tree_lookup(t, path, &ino, err) < 0)
		return -1;
	if (ino == NULL || !S_ISREG(ino->mode))
		return 0;
	if (ino->size > max)
		return gantry_error(err, 0, "`%s` is larger than %zu bytes", path, max);
	buf = xzalloc((size_t)ino->size + 1);
	ondisk = ino->tail ? ino->size - ino->size % EROFS_BLKSZ : ino->size;
	for (uint64_t off = 0; off < ondisk;) {
		ssize_t r = pread(t->fd, buf + off, (size_t)(ondisk - off),
				  (off_t)ino->blkaddr * EROFS_BLKSZ + (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(buf);
			return gantry_error_errno(err, "read `%s` back", path);
		}
		if (r == 0)
			break; /* never written: a hole, zeros */
		off += (uint64_t)r;
	}
	if (ino->tail)
		memcpy(buf + ondisk, ino->tail, (size_t)(ino->size - ondisk));
	*data = buf;
	*len = (size_t)ino->size;
	return 0;
}
