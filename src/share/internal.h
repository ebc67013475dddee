/* What the share server's files share: the server's state (exports, the
 * node and handle tables, one lock), one request as the dispatcher hands
 * it to an operation, and the helpers the operations use to read names
 * and write replies. Nothing here is seen outside src/share. */
#ifndef GANTRY_SHARE_INTERNAL_H
#define GANTRY_SHARE_INTERNAL_H

#include <linux/fuse.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "share/server.h"

#define FS_NODES_CAP   (1024 * 1024) /* nodes: at most this, and NOFILE hard - FS_FD_SPARE */
#define FS_FD_SPARE    4096	     /* fds left to the rest of the VMM */
#define FS_NODES_FLOOR 256
#define FS_MAX_ARGS    (64 * 1024 + 1024) /* args of anything but WRITE: xattr value + name */
#define FS_MAX_XATTR   (64 * 1024)
#define FS_MAX_READDIR (128 * 1024)
#define FS_MAX_IOV     260 /* descriptors per side of a request */
#define FS_MIN_MINOR   31  /* the oldest arg layouts we decode (Linux 5.2) */
#define FS_TTL_SEC     1   /* entry and attribute timeouts (cache=auto) */
#define FS_ROOT_ID     FUSE_ROOT_ID
#define FS_RESOLVE     (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

struct fs_export {
	char tag[FS_TAG_MAX + 1];
	struct fs_export_opts o;
	struct fs_node *root;
	size_t handles; /* open beneath it */
};

struct fs_remote {
	char tag[FS_TAG_MAX + 1];
	unsigned int route; /* 0: a free slot */
};

/* What the guest set that the host does not hold (meta.c). */
struct fs_meta {
	bool set;
	uid_t uid;
	gid_t gid;
	mode_t mode;	 /* 07777 */
	mode_t dev_type; /* S_IFCHR or S_IFBLK: a device kept as a regular file; 0 */
	dev_t rdev;
};

#define FS_META_XATTR "user.gantry.stat"
#define FS_META_BUF   64

struct fs_node {
	uint64_t id;
	int fd;		       /* O_PATH|O_NOFOLLOW; -1 for the hub */
	struct fs_export *exp; /* NULL for the hub */
	dev_t dev;
	ino_t ino;
	uint64_t mnt_id;
	mode_t type; /* S_IFMT bits: an inode's type never changes */
	uint64_t btime; /* birth, where the filesystem keeps it (0: not) */
	uint32_t btime_ns;
	uint64_t nlookup;
	uint32_t handles;
	bool pinned;	 /* an export root or the hub: freed with its export */
	bool ro;	 /* protected (fs_mask), or beneath a protected directory */
	bool hidden;	 /* hidden (fs_mask): only its attributes are served */
	bool meta_known; /* meta is what the xattr held at meta_ctime */
	bool carried;	 /* in the table a snapshot saves or a restore took (carry.c) */
	struct timespec meta_ctime;
	struct fs_meta meta;
	struct fs_node *next_id, *next_key;
};

struct fs_handle {
	uint64_t fh; /* 0: free */
	int fd;	     /* -1 for the hub's directory handle */
	struct fs_node *node;
	uint32_t next_free;
};

struct fs_carry;

struct fs_server {
	pthread_mutex_t lock;
	bool inited;
	uint32_t minor;
	struct fs_export *exports[FS_MAX_EXPORTS];
	struct fs_remote remotes[FS_MAX_EXPORTS]; /* served behind us */
	struct fs_node hub;
	/* nodes: two chained hash tables over the same nodes */
	struct fs_node **by_id, **by_key;
	size_t buckets, nr_nodes, max_nodes;
	uint64_t next_id, id_base; /* id_base: the route's ids begin past it */
	/* handles: slots with a free list; fh = generation << 32 | slot + 1 */
	struct fs_handle *handles;
	uint32_t free_head, nr_handles, gen;
	mode_t umask; /* the process's, taken back from what it makes */
	struct fs_carry *carry; /* a restore's nodes not yet taken up (carry.c) */
	struct fs_stats stats;
};

struct fs_req {
	struct fs_server *s;
	struct fuse_in_header h;
	const uint8_t *arg; /* copied arguments (WRITE: its fuse_write_in only) */
	size_t arg_len;
	const struct iovec *in, *out;
	size_t nr_in, nr_out;
	size_t room;	      /* writable bytes after the fuse_out_header */
	struct fs_node *node; /* h.nodeid, resolved */
	uint8_t *reply;	      /* reply payload, reply_cap bytes */
	size_t reply_cap, reply_len;
	bool direct; /* payload already written into out after the header */
};

/* nodes.c */
int fs_nodes_init(struct fs_server *s, size_t max_nodes, unsigned int route);
void fs_nodes_fini(struct fs_server *s);
struct fs_node *fs_node_get(struct fs_server *s, uint64_t id);
/* Take fd (O_PATH) as a node of exp, or count one more lookup of the node it
 * already is. Returns the node or NULL with errno (fd closed either way). */
struct fs_node *fs_node_add(struct fs_server *s, struct fs_export *exp, int fd);
/* May the guest change n? Not in the hub, a ro export or a protected
 * place. */
static inline bool fs_node_ro(const struct fs_node *n)
{
	return !n->exp || n->exp->o.ro || n->ro;
}
/* The mask of the inode (dev, ino) in exp, or NULL. */
const struct fs_mask *fs_export_masked(const struct fs_export *exp, dev_t dev, ino_t ino);
/* Is name in dir an inode a mask protects or hides, or a directory on
 * the way down to one (not to be removed, renamed or replaced)? */
bool fs_name_masked(const struct fs_node *dir, const char *name);
/* Does o keep the directory (dev, ino) (name ""), or ban name in it? */
bool fs_opts_kept(const struct fs_export_opts *o, dev_t dev, ino_t ino, const char *name);
/* Is name a .git in an export with no_git (read-only, not to be made,
 * removed, renamed or replaced)? */
bool fs_no_git(const struct fs_node *dir, const char *name);
/* Is name one that may not be made in dir (a protected path that was not
 * there, or a .git of a no_git export)? */
bool fs_name_banned(const struct fs_node *dir, const char *name);
/* The same, and *st the inode's attributes from the one statx (st_mode 0
 * where the filesystem did not give them all: stat the node then). */
struct fs_node *fs_node_add_stat(struct fs_server *s, struct fs_export *exp, int fd,
				 struct stat *st);
/* fd (O_PATH) as a new node of exp under id, looked up nlookup times
 * (a carried table, carry.c); NULL with errno EEXIST where id or the
 * inode is a node already (fd closed either way). */
struct fs_node *fs_node_adopt(struct fs_server *s, struct fs_export *exp, int fd, uint64_t id,
			      uint64_t nlookup);
/* n known by id from now on (no node has it). */
void fs_node_reid(struct fs_server *s, struct fs_node *n, uint64_t id);
void fs_node_forget(struct fs_server *s, struct fs_node *n, uint64_t nlookup);
void fs_node_drop_export(struct fs_server *s, struct fs_export *exp);
void fs_node_drop_all(struct fs_server *s);
int fs_handle_new(struct fs_server *s, struct fs_node *n, int fd, uint64_t *fh);
/* fd as n's handle fh, as a carried table had it (-EEXIST: the slot is
 * taken or fh no handle's; fd closed). fs_handles_relink() after the
 * last, before any fs_handle_new(). */
int fs_handle_place(struct fs_server *s, struct fs_node *n, int fd, uint64_t fh);
void fs_handles_relink(struct fs_server *s);
/* The handle fh of node n (n NULL: any node), or NULL. */
struct fs_handle *fs_handle_get(struct fs_server *s, uint64_t fh, struct fs_node *n);
void fs_handle_free(struct fs_server *s, struct fs_handle *h);

/* carry.c: a restored VM's nodes, kept by fs_server_load and taken up
 * as the guest names them. */
/* The node id, walked to now (fs_node_get, which calls it, found no
 * node of id); NULL where the table has none, or it is not there. */
struct fs_node *fs_carry_take(struct fs_server *s, uint64_t id);
struct statx;
/* When x's inode was made, where its filesystem keeps it (else 0 0). */
void fs_birth(const struct statx *x, uint64_t *sec, uint32_t *nsec);
/* A new node for the inode x in exp: where a kept node not yet taken up
 * is that inode (the guest looked its name up again before it named the
 * id), its id and lookups, and the node is taken up so (true). */
bool fs_carry_claim(struct fs_server *s, const struct fs_export *exp, const struct statx *x,
		    uint64_t *id, uint64_t *nlookup);
/* A FORGET of a kept node not taken up: counted there (true); false
 * where id is no such node. */
bool fs_carry_forget(struct fs_server *s, uint64_t id, uint64_t nlookup);
/* exp is going: its kept nodes with it. */
void fs_carry_drop_export(struct fs_server *s, struct fs_export *exp);
void fs_carry_free(struct fs_server *s);

/* server.c */
struct fs_export *fs_export_find(struct fs_server *s, const char *tag);
/* server.c: arguments, names and replies */
const void *fs_arg(struct fs_req *r, size_t off, size_t len);
/* One name at off: NUL-terminated inside the args, 1..255 bytes, no '/',
 * not "." or "..". Returns a negative errno or the offset past its NUL. */
long fs_name(struct fs_req *r, size_t off, const char **name);
void *fs_reply(struct fs_req *r, size_t len);
/* The reply's attributes from the host's stat of n, as the guest sees them. */
void fs_attr_fill(struct fs_node *n, const struct stat *st, struct fuse_attr *a);
void fs_entry_fill(struct fs_node *n, const struct stat *st, struct fuse_entry_out *e);
int fs_proc_path(char buf[32], int fd);
/* Copy part of an iovec array: len bytes from off. Returns descriptors used. */
size_t fs_iov_slice(const struct iovec *v, size_t n, size_t off, size_t len, struct iovec *dst);

/* meta.c: the guest's owners and modes beside the host file */
/* The host's permission bits for a guest mode of type: no set-id or
 * sticky bit, and the owner (the server) may always read and write (and
 * search a directory); a FIFO's or socket's as they are, but set-id. */
mode_t fs_host_mode(mode_t type, mode_t mode);
int fs_meta_parse(const char *v, size_t len, struct fs_meta *m);
size_t fs_meta_format(const struct fs_meta *m, char buf[FS_META_BUF]);
/* The type a directory entry shows the guest: a regular file that keeps
 * a device the guest made is that device (DT_CHR, DT_BLK); anything else
 * as the host lists it. */
unsigned char fs_meta_dtype(int dirfd, const char *name, unsigned char host_type);
/* The node's metadata, read again when host's ctime moved since. */
const struct fs_meta *fs_meta_get(struct fs_node *n, const struct stat *host);
/* Turn the host's stat of n into what the guest sees. */
void fs_meta_view(struct fs_node *n, struct stat *st);
/* Stat n as the guest sees it. */
int fs_meta_stat(struct fs_node *n, struct stat *st);
/* Keep want for n (host: its stat now), or drop what is kept where the
 * host shows it by itself: 1 when the xattr changed, 0 when nothing was
 * to do; -EOPNOTSUPP: n's type cannot carry it, or the host's
 * filesystem has no user xattrs. */
int fs_meta_set(struct fs_node *n, const struct stat *host, const struct fs_meta *want);
/* The guest may not see or touch this xattr (nor one of its per-inode
 * names on a share's root). */
bool fs_meta_name(const char *name);
/* Move n's ctime to now and change nothing else. */
void fs_touch_ctime(const struct fs_node *n);
/* A write, truncate or chown the guest's kernel left to the server
 * (FUSE_HANDLE_KILLPRIV_V2): the kept set-user-ID bit goes, and the
 * set-group-ID bit of a group-executable file, as on a disk. */
int fs_meta_kill_setid(struct fs_node *n);
/* st (its stat before) was unlinked from exp: its last link gone, what
 * was kept for it on the root goes too. */
void fs_meta_unlinked(struct fs_export *exp, const struct stat *st);
/* Make the mode of what was just made at fd exactly mode, where the
 * process's umask took bits of it: 1 when it did, 0 when nothing was
 * taken, or -errno. */
int fs_mode_exact(struct fs_server *s, int fd, mode_t mode);

/* ops_entry.c */
int fs_lookup_name(struct fs_req *r, struct fs_node *dir, const char *name,
		   struct fuse_entry_out *e);
int fs_op_lookup(struct fs_req *r);
int fs_op_forget(struct fs_req *r);
int fs_op_batch_forget(struct fs_req *r);
int fs_op_getattr(struct fs_req *r);
int fs_op_setattr(struct fs_req *r);
int fs_op_readlink(struct fs_req *r);
int fs_op_symlink(struct fs_req *r);
int fs_op_mknod(struct fs_req *r);
int fs_op_mkdir(struct fs_req *r);
int fs_op_unlink(struct fs_req *r);
int fs_op_rmdir(struct fs_req *r);
int fs_op_rename(struct fs_req *r);
int fs_op_rename2(struct fs_req *r);
int fs_op_link(struct fs_req *r);
int fs_op_statfs(struct fs_req *r);
int fs_op_access(struct fs_req *r);
/* The guest's owner and mode for n, just made in dir: the caller's, and
 * the directory's group where that is set-group-ID (a directory inherits
 * the bit); the host's bits made exact where the umask took some. 1:
 * kept beside the host file; 0: the host shows it as it is; -EOPNOTSUPP:
 * n cannot carry it (a symlink, FIFO or socket, or no user xattrs on the
 * host). */
int fs_own_new(struct fs_req *r, struct fs_node *dir, struct fs_node *n, mode_t mode,
	       mode_t dev_type, dev_t rdev);

/* ops_file.c */
int fs_reopen(const struct fs_node *n, int flags);
int fs_op_open(struct fs_req *r);
int fs_op_create(struct fs_req *r);
int fs_op_read(struct fs_req *r);
int fs_op_write(struct fs_req *r);
int fs_op_release(struct fs_req *r);
int fs_op_flush(struct fs_req *r);
int fs_op_fsync(struct fs_req *r);
int fs_op_fallocate(struct fs_req *r);
int fs_op_lseek(struct fs_req *r);
int fs_op_syncfs(struct fs_req *r);

/* ops_dir.c */
int fs_op_opendir(struct fs_req *r);
int fs_op_readdir(struct fs_req *r);
int fs_op_readdirplus(struct fs_req *r);

/* ops_xattr.c */
int fs_op_setxattr(struct fs_req *r);
int fs_op_getxattr(struct fs_req *r);
int fs_op_listxattr(struct fs_req *r);
int fs_op_removexattr(struct fs_req *r);

#endif
