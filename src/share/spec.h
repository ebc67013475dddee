/* Share specs (grammar of the reference, 2.2): what -share will accept,
 *   TAG=HOST_PATH[@CTR_PATH][,ro][,uid=N,gid=N][,encoding=base64url]
 *   [,nogit][,protect=REL][,hide=REL]
 * protect= and hide= (Gantry's, repeatable, REL a relative path beneath
 * HOST_PATH in base64url): what the server keeps read-only, or refuses to
 * open or look into, inside the share (gantry wrap's .git/hooks, .git/config,
 * $HOME in the host's root). nogit (Gantry's): every entry named .git in
 * the share is read-only, and none can be made (a git directory the guest
 * wrote would be obeyed by git on the host).
 * The tag ends at the first `=`. Options are the trailing comma suffixes
 * `ro`, `uid=N`, `gid=N` and `encoding=base64url`; a trailing suffix of
 * the form key=value with any other lowercase key is an error, and every
 * other comma belongs to the path. CTR_PATH starts after the last `@` and
 * is /host/TAG when absent. With encoding=base64url both paths are
 * base64url (unpadded) and may hold any byte but NUL.
 *
 * Canonical form, as stored: TAG=HOST_PATH@CTR_PATH[,ro][,uid=N,gid=N],
 * both paths base64url and `,encoding=base64url` last when either path
 * holds `,` `@` `=` or a byte outside printable ASCII (the form must go
 * into sandbox.json and one-line messages as it is). Parsing the canonical
 * form gives back the same share.
 *
 * Parsing touches no file; share_host_check does, when a sandbox starts. */
#ifndef GANTRY_SHARE_SPEC_H
#define GANTRY_SHARE_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

#define SHARE_TAG_MAX 36 /* [A-Za-z0-9._-]{1,36}, as the hub's directory names */
#define SHARES_MAX    64
#define SHARE_ID_MAX  4294967294u /* (uid_t)-1 means "no change" to the kernel */
#define SHARE_MASKS_MAX 128 /* protect= and hide= together */

struct share_mask {
	char *rel; /* relative, normal, no `..` */
	bool hide; /* else protect: read-only */
};

struct share_spec {
	char tag[SHARE_TAG_MAX + 1];
	char *host_path; /* absolute; `.` and empty components and a trailing / dropped */
	char *ctr_path;	 /* absolute and normal, not /, not under a system tree */
	bool ro;
	bool nogit; /* no .git the guest can make or change */
	bool ids;   /* uid and gid given */
	uint32_t uid, gid;
	struct share_mask masks[SHARE_MASKS_MAX];
	size_t nr_masks;
};

/* Parse s; a relative HOST_PATH is joined to cwd (absolute; NULL: refuse
 * relative paths). A one-line error `-share `s`: ...` naming what is
 * wrong. On success *sp owns its paths (share_spec_free). */
int share_spec_parse(const char *s, const char *cwd, struct share_spec *sp, gantry_error_t *err);
/* s in base64url without padding (RFC 4648 section 5), allocated: the
 * canonical form's encoding, and gantry-init's for container paths. */
char *share_b64url(const char *s);
/* The canonical form, allocated. */
char *share_spec_format(const struct share_spec *sp);
void share_spec_free(struct share_spec *sp);

/* Parse spec (relative host paths against cwd) and append its canonical
 * form to the NULL-terminated list v of n canonical specs. Refused: a tag
 * already in v, a container path already in v, and one container path
 * inside another (the inner share would hide part of the outer one, or be
 * hidden by it, depending on mount order, and could not be removed on its
 * own); more than SHARES_MAX shares. The same host directory may be shared
 * twice, e.g. once read-only. */
int shares_add(char ***v, size_t *n, const char *spec, const char *cwd, gantry_error_t *err);
/* The index of the canonical spec with tag in v, or -1. */
ssize_t shares_find(char *const *v, size_t n, const char *tag);
/* Remove entry i of the NULL-terminated v, keeping the order of the rest. */
void shares_remove(char **v, size_t *n, size_t i);

/* May host_path be shared? It must be an existing directory, not / and not
 * GANTRY_HOME, inside it or above it (compared as real paths). Opens it
 * O_PATH|O_DIRECTORY; *dirfd (optional) gets that fd, else it is closed. */
int share_host_check(const char *host_path, int *dirfd, gantry_error_t *err);

#endif
