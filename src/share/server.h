/* The share server: Gantry's own FUSE server behind the virtio-fs device,
 * serving host directories ("exports") to the guest, confined to them.
 *
 * Its root (node 1) is a synthetic, read-only hub directory whose
 * children are the exports by tag; beneath each export every name is one
 * component resolved under a pinned O_PATH fd of its parent with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
 * or a non-following *at call. The server never follows a symlink on the
 * host, never resolves "..", never opens a device node, and a guest can
 * name only node ids and handles it was given (docs/shares.md, the
 * research note's section 3).
 *
 * Requests come whole from the device: the chain's readable part (the
 * fuse_in_header, its arguments and any WRITE data) and its writable part
 * (room for the fuse_out_header and the reply). The server copies the
 * header and arguments out before it looks at them (the guest may change
 * them meanwhile), checks every length, and writes the reply into out.
 * Many threads may call fs_server_handle at once. */
#ifndef GANTRY_SHARE_SERVER_H
#define GANTRY_SHARE_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "common/error.h"
#include "proto/virtiofs.h"

#define FS_TAG_MAX	   36	      /* an export's tag: [A-Za-z0-9._-]{1,36} */
#define FS_MAX_EXPORTS	   64
#define FS_MAX_HANDLES	   4096	      /* open files and directories, all exports */
/* A READ or WRITE: FS_MAX_PAGES (proto/virtiofs.h). */
#define FS_MAX_WRITE	   (FS_MAX_PAGES * 4096)
#define FS_MAX_REQUEST	   (FS_MAX_WRITE + 4096)

#define FS_MASKS_MAX	  128
#define FS_KEEPS_MAX	  256 /* the masks' directories and banned names */
#define FS_KEEP_NAME_MAX 63

/* An inode of the export that the guest may not change (protect) or may
 * not open or look into (hide): by identity, so that no other name of it,
 * nor a rename, gets around it. What is beneath a protected directory is
 * read-only too. */
struct fs_mask {
	dev_t dev;
	ino_t ino;
	bool hide;
};

/* A directory on the way down to a mask (keep: it may not be renamed or
 * exchanged, which would take the masked path's name away from what it
 * protects), or a protected name that was not there (ban: it may not be
 * made in that directory, by any call that makes a name). */
struct fs_keep {
	dev_t dev;
	ino_t ino;
	char name[FS_KEEP_NAME_MAX + 1]; /* a ban's name; "" for a kept directory */
};

struct fs_export_opts {
	bool ro;	    /* refused before any change: EROFS */
	bool no_git;	    /* every .git read-only, none made: EROFS */
	bool map_owner;	    /* show every node as owned by uid:gid */
	uid_t uid;
	gid_t gid;
	struct fs_mask masks[FS_MASKS_MAX];
	size_t nr_masks;
	struct fs_keep keeps[FS_KEEPS_MAX];
	size_t nr_keeps;
};

/* Add the mask of rel, a relative path beneath root_fd (no symlink
 * followed, no mount crossed), to o. For a protected one, the directories
 * on its way are kept, and where its last name is not there but its
 * directory is, that name is banned there. A path whose directory is not
 * there (or a hidden one that is not there) masks nothing (0). */
int fs_export_mask(struct fs_export_opts *o, int root_fd, const char *rel, bool hide,
		   gantry_error_t *err);

struct fs_server;

/* A share added while the guest runs is served by a share worker of its
 * own, confined to that one directory, behind the first: the first
 * server lists it in its hub as a "remote" export, and fs_server_route
 * says which server a request is for. Every server's node ids carry its
 * route in their top 16 bits (the first server's: 0), so a node id names
 * its server, and one never reaches another's nodes. */
#define FS_ROUTE_SHIFT 48
#define FS_ROUTE_MAX   0xffffu
#define FS_ROUTE_ALL   (FS_ROUTE_MAX + 1) /* every server, this one last */

/* max_nodes: 0 for the default (bounded by RLIMIT_NOFILE). route: the
 * top bits of its node ids (0 for the first server). */
int fs_server_new(struct fs_server **out, size_t max_nodes, unsigned int route,
		  gantry_error_t *err);
void fs_server_free(struct fs_server *s);

/* Add an export under tag; root_fd (O_PATH|O_DIRECTORY, the caller's) is
 * duplicated. Errors: a bad or taken tag, not a directory, too many. */
int fs_server_add_export(struct fs_server *s, const char *tag, int root_fd,
			 const struct fs_export_opts *o, gantry_error_t *err);
/* List tag in the hub as a remote export, served by the server of route
 * (1..FS_ROUTE_MAX). Errors as fs_server_add_export's. */
int fs_server_add_remote(struct fs_server *s, const char *tag, unsigned int route,
			 gantry_error_t *err);
/* Where the request in goes: 0 this server; a route, for a request on a
 * node of that route's server or a lookup of its tag in the hub;
 * FS_ROUTE_ALL for INIT, DESTROY, BATCH_FORGET and SYNCFS, which every
 * server must see. A route no server has is the caller's to answer
 * (ESTALE). */
unsigned int fs_server_route(struct fs_server *s, const struct iovec *in, size_t nr_in);
/* The FUSE minor the guest settled on at INIT, 0 before it; a server
 * started behind another takes it as if it had seen that INIT. */
uint32_t fs_server_minor(struct fs_server *s);
void fs_server_assume_init(struct fs_server *s, uint32_t minor);
/* Take an export, or a remote one, out of the hub. Without force, refused (EBUSY) while the
 * guest holds handles open beneath it; with force, its nodes and handles
 * go at once and the guest's ids for them answer ESTALE/EBADF. */
int fs_server_remove_export(struct fs_server *s, const char *tag, bool force,
			    gantry_error_t *err);
/* Handles open beneath the export (for `share rm` without --force; a
 * remote export's are its own server's). */
size_t fs_server_export_handles(struct fs_server *s, const char *tag);

/* One request. in: the readable descriptors, out: the writable ones.
 * Returns the bytes written into out (the reply, fuse_out_header first),
 * or 0 when no reply is due (FORGET, BATCH_FORGET, INTERRUPT) or out has
 * no room even for a header. */
size_t fs_server_handle(struct fs_server *s, const struct iovec *in, size_t nr_in,
			const struct iovec *out, size_t nr_out);
/* The reply `error` (a positive errno) to the request in, written into out
 * with no server at hand (the share worker gone): its bytes, 0 where no
 * reply is awaited (a FORGET) or there is no room. */
size_t fs_error_reply(const struct iovec *in, size_t nr_in, const struct iovec *out,
		      size_t nr_out, int error);

/* The guest reset its device: every node and handle it was given goes,
 * and it must INIT again (as after DESTROY). No request may be under way. */
void fs_server_reset(struct fs_server *s);

/* Snapshots (carry.c): what the guest was told, its node ids and open
 * handles, kept across a restore, so that a process's working directory
 * and open files on a share go on naming the same files through the
 * restored VM's new server of the same exports.
 *
 * fs_server_save writes the exports' roots, each node as its path beneath
 * its export's root (read from the node's fd now) and each handle with its
 * open flags into buf, at most cap bytes (what does not fit is left out),
 * and returns the bytes written. No request may be under way.
 *
 * fs_server_load takes such a table, as hostile input, into a server that
 * has its exports and has answered nothing yet. Each node is kept, and
 * walked to when the guest first names it (a name at a time as a lookup
 * goes), taken up only where the walk ends on the inode it names; each
 * handle is opened again now, as an OPEN would be. What is not found
 * answers ESTALE, as on a new server, and no id the table names is given
 * to anything else. Returns the nodes kept, or -1 for a table that is not
 * one, or a server that has answered (nothing taken). */
#define FS_CARRY_MAX (16u << 20) /* a table at most: a state file holds 64 MiB */
size_t fs_server_save(struct fs_server *s, uint8_t *buf, size_t cap);
long fs_server_load(struct fs_server *s, const uint8_t *buf, size_t len);

/* Counters for tests and the traffic report. */
struct fs_stats {
	uint64_t requests, errors, nodes, handles;
};
void fs_server_stats(struct fs_server *s, struct fs_stats *out);
/* The descriptors the server may hold at once (its nodes' O_PATH fds,
 * its handles) and what it leaves to the rest of the process: what
 * RLIMIT_NOFILE must allow it. */
size_t fs_server_fds_wanted(struct fs_server *s);

#endif
