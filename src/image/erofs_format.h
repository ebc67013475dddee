/* EROFS on-disk format: the subset our writer emits (uncompressed, 4 KiB
 * blocks, extended inodes, inline xattrs), as read by Linux fs/erofs
 * (erofs_fs.h, inode.c, dir.c, namei.c, xattr.c). All fields little-endian. */
#ifndef GANTRY_IMAGE_EROFS_FORMAT_H
#define GANTRY_IMAGE_EROFS_FORMAT_H

#include <stdint.h>

#define EROFS_MAGIC	   0xe0f5e1e2u
#define EROFS_SUPER_OFFSET 1024
#define EROFS_BLKSZ_BITS   12
#define EROFS_BLKSZ	   (1u << EROFS_BLKSZ_BITS)
/* nid = byte offset from meta_blkaddr / 32 */
#define EROFS_ISLOT_BITS 5
#define EROFS_ISLOT	 (1u << EROFS_ISLOT_BITS)
#define EROFS_NAME_LEN	 255

#define EROFS_FEATURE_COMPAT_SB_CHKSUM 0x1
#define EROFS_FEATURE_COMPAT_MTIME     0x2

/* i_format: bit 0 version, bits 1-3 data layout */
#define EROFS_INODE_LAYOUT_EXTENDED 1
#define EROFS_INODE_FLAT_PLAIN	    0
#define EROFS_INODE_FLAT_INLINE	    2

/* xattr name indexes: the prefix is implied by the index */
#define EROFS_XATTR_INDEX_USER		    1
#define EROFS_XATTR_INDEX_POSIX_ACL_ACCESS  2
#define EROFS_XATTR_INDEX_POSIX_ACL_DEFAULT 3
#define EROFS_XATTR_INDEX_TRUSTED	    4
#define EROFS_XATTR_INDEX_SECURITY	    6

/* dirent file types (the generic FT_* values) */
enum {
	EROFS_FT_UNKNOWN,
	EROFS_FT_REG_FILE,
	EROFS_FT_DIR,
	EROFS_FT_CHRDEV,
	EROFS_FT_BLKDEV,
	EROFS_FT_FIFO,
	EROFS_FT_SOCK,
	EROFS_FT_SYMLINK,
};

struct erofs_super_block {
	uint32_t magic;
	uint32_t checksum; /* crc32c of the block from offset 1024, this field 0 */
	uint32_t feature_compat;
	uint8_t blkszbits;
	uint8_t sb_extslots;
	uint16_t root_nid;
	uint64_t inos;
	uint64_t build_time;
	uint32_t build_time_nsec;
	uint32_t blocks;
	uint32_t meta_blkaddr;
	uint32_t xattr_blkaddr;
	uint8_t uuid[16];
	uint8_t volume_name[16];
	uint32_t feature_incompat;
	uint16_t available_compr_algs;
	uint16_t extra_devices;
	uint16_t devt_slotoff;
	uint8_t dirblkbits;
	uint8_t reserved[5];
	uint64_t packed_nid;
	uint8_t reserved2[24];
} __attribute__((packed));

/* 64-byte inode; we never emit the 32-byte compact form. */
struct erofs_inode_extended {
	uint16_t i_format;
	uint16_t i_xattr_icount; /* 0, or 1 + (ibody size - 12) / 4 */
	uint16_t i_mode;
	uint16_t i_reserved;
	uint64_t i_size;
	uint32_t i_u; /* raw_blkaddr, or rdev in new_encode_dev() form */
	uint32_t i_ino;
	uint32_t i_uid;
	uint32_t i_gid;
	uint64_t i_mtime;
	uint32_t i_mtime_nsec;
	uint32_t i_nlink;
	uint8_t i_reserved2[16];
} __attribute__((packed));

struct erofs_xattr_ibody_header {
	uint32_t h_reserved;
	uint8_t h_shared_count;
	uint8_t h_reserved2[7];
} __attribute__((packed));

/* followed by the name (without its prefix) and the value, padded to 4 */
struct erofs_xattr_entry {
	uint8_t e_name_len;
	uint8_t e_name_index;
	uint16_t e_value_size;
} __attribute__((packed));

struct erofs_dirent {
	uint64_t nid;
	uint16_t nameoff;
	uint8_t file_type;
	uint8_t reserved;
} __attribute__((packed));

_Static_assert(sizeof(struct erofs_super_block) == 128, "superblock is 128 bytes");
_Static_assert(sizeof(struct erofs_inode_extended) == 64, "extended inode is 64 bytes");
_Static_assert(sizeof(struct erofs_xattr_ibody_header) == 12, "xattr header is 12 bytes");
_Static_assert(sizeof(struct erofs_xattr_entry) == 4, "xattr entry is 4 bytes");
_Static_assert(sizeof(struct erofs_dirent) == 12, "dirent is 12 bytes");

#endif
