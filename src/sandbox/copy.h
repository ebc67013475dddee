/* `gantry cp`: files between the host and a running sandbox's container,
 * through the guest agent as two sessions run as root in the container:
 * `tar` there (the image needs one, as `kubectl cp` does), a tar stream
 * here made and read by Gantry. What comes out of the guest is the
 * guest's: each entry is written below the destination only, one path
 * component at a time with no symlink followed (openat, O_NOFOLLOW);
 * devices, FIFOs, sockets and hard links are skipped and counted; set-id
 * bits are dropped unless archive mode asks for them. */
#ifndef GANTRY_SANDBOX_COPY_H
#define GANTRY_SANDBOX_COPY_H

#include <stdbool.h>
#include <stddef.h>

#include "common/cancel.h"
#include "common/error.h"

#define COPY_BLOCK (64u << 10) /* bytes read or written at a time */

struct sandbox_copy_opts {
	/* Owners and modes kept: in the container as on the host; on the
	 * host as in the container (as root). Otherwise what goes in is
	 * root's and what comes out the caller's, as docker cp does. */
	bool archive;
};

struct sandbox_copy_result {
	size_t files, dirs, links; /* written */
	size_t skipped;		   /* entries of a kind not copied */
	unsigned long long bytes;
};

/* NAME:path (absolute, in the container) to host_dest: into it when it is
 * a directory, else as it (its parent must exist), as cp -r would. */
int sandbox_copy_out(const char *name, const char *path, const char *host_dest,
		     const struct sandbox_copy_opts *o, const struct gantry_cancel *cancel,
		     struct sandbox_copy_result *res, gantry_error_t *err);
/* What sandbox_copy_out does with the tar stream on fd: its entries, all
 * named below base (tar's name for what was asked for; "." for all),
 * written to host_dest as above. *refused: the failure was an entry's
 * (refused or not written), not the stream's. */
int sandbox_untar(int fd, const char *base, const char *host_dest,
		  const struct sandbox_copy_opts *o, const struct gantry_cancel *cancel,
		  struct sandbox_copy_result *res, bool *refused, gantry_error_t *err);
/* host_src to NAME:path: into path when it is a directory in the
 * container (or ends in /), else as path. */
int sandbox_copy_in(const char *name, const char *host_src, const char *path,
		    const struct sandbox_copy_opts *o, const struct gantry_cancel *cancel,
		    struct sandbox_copy_result *res, gantry_error_t *err);

#endif
