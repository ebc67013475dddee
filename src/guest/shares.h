/* Host directory shares as the kernel command line names them: one
 * gantry.share=TAG:MODE:CTR token each, TAG the share's directory under the
 * virtio-fs hub the host exports, MODE ro or rw, CTR the container path in
 * base64url without padding (RFC 4648 section 5). Pure: no system calls,
 * so the host's unit tests run it as is; init.c mounts the hub and spec.c
 * binds each share into the container. */
#ifndef GANTRY_GUEST_SHARES_H
#define GANTRY_GUEST_SHARES_H

#include <stdbool.h>
#include <stddef.h>

#define SHARES_MAX	 64
#define SHARE_TAG_MAX	 36
#define SHARE_PATH_MAX	 4095 /* a decoded CTR's bytes */
#define SHARE_WHY_MAX	 128
#define SHARES_PARAM	 "gantry.share="
#define ROOT_PARAM	 "gantry.root="
#define SHARES_FS_TAG	 "gantry-shares" /* the virtio-fs device's tag */
#define SHARES_MOUNT_DIR "/run/mnt/gantry-shares"

struct share {
	char tag[SHARE_TAG_MAX + 1];
	bool ro;
	char *path; /* the container path, owned */
};

struct shares {
	size_t n;
	struct share v[SHARES_MAX];
};

/* Decode base64url without padding into out (size bytes, NUL added): the
 * decoded length, or -1 for a bad character, an impossible length, stray
 * low bits in the last character, or a result that does not fit. */
long shares_b64url_decode(const char *in, size_t len, char *out, size_t size);

/* Parse VALUE of gantry.share=TAG:MODE:CTR strictly. 0, or -1 with why
 * filled; ENOMEM leaves why saying so. On success s->path is malloc'd. */
int shares_parse(const char *value, struct share *s, char why[SHARE_WHY_MAX]);

/* Parse one token into the list: false, with why filled, when it is not
 * added (bad, or the list is full). */
bool shares_add(struct shares *l, const char *value, char why[SHARE_WHY_MAX]);

void shares_clear(struct shares *l);

/* A tmpfs mount of the container (an OCI config.json's): one
 * gantry.tmpfs=FLAGS:SIZE_KIB:MODE:CTR token each, FLAGS "-" or any of r
 * (read-only) and x (noexec), SIZE_KIB 0 for the kernel's default, MODE
 * octal, CTR as a share's. */
#define TMPFS_MAX   16
#define TMPFS_PARAM "gantry.tmpfs="

struct tmpfs_mount {
	bool ro, noexec;
	unsigned long long size_kib;
	unsigned int mode;
	char *path; /* owned */
};

struct tmpfs_mounts {
	size_t n;
	struct tmpfs_mount v[TMPFS_MAX];
};

/* Parse one token into the list: false, with why filled, when it is not
 * added (bad, or the list is full). */
bool tmpfs_add(struct tmpfs_mounts *l, const char *value, char why[SHARE_WHY_MAX]);

/* Host Unix sockets relayed into the container (sockets.c): one
 * gantry.sock=CTR token each, CTR as a share's. */
#define SOCKETS_MAX   16
#define SOCKETS_PARAM "gantry.sock="
#define SOCKETS_DIR   "/run/gantry/sockets"

struct guest_sockets {
	size_t n;
	char *v[SOCKETS_MAX]; /* container paths, owned */
};

/* The MCP gateway's fs server (mcpfs.c): gantry.mcpfs=ROOT,UID,GID, ROOT
 * a container path in base64url, UID not root's. */
#define MCPFS_PARAM "gantry.mcpfs="
#define MCPFS_LISTEN SOCKETS_DIR "/mcpfs"

struct guest_mcpfs {
	bool on;
	char root[SHARE_PATH_MAX + 1];
	uid_t uid;
	gid_t gid;
};

/* Parse one token into the list: false, with why filled, when it is not
 * added (bad, or the list is full). */
bool sockets_add(struct guest_sockets *l, const char *value, char why[SHARE_WHY_MAX]);

/* [A-Za-z0-9._-]{1,SHARE_TAG_MAX}, not . or .. (the hub's directory names). */
bool shares_tag_valid(const char *tag, size_t len);
/* NULL when p (len bytes) may be a share's container path: absolute, no
 * NUL or newline, no ".." component, and something other than the root
 * itself (a share cannot replace the container's root); else what is wrong. */
const char *shares_path_problem(const char *p, size_t len);

#endif
