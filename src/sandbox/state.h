/* A sandbox's state on disk: $GANTRY_HOME/sandboxes/<name>/ (mode 0700)
 * holding sandbox.json (written atomically), the lifetime lock its
 * supervisor holds while it runs, ctl.sock, daemon.log and console.log;
 * its Gantry-managed writable layer is $GANTRY_HOME/rwlayers/<name>.ext4.
 *
 * "running" is never trusted from the file alone: a sandbox runs exactly
 * while its lock is held, so a supervisor that died (SIGKILL, crash) shows
 * as crashed, and the next command cleans up after it. */
#ifndef GANTRY_SANDBOX_STATE_H
#define GANTRY_SANDBOX_STATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "confine/confine.h"
#include "image/config.h"

#define SANDBOX_NAME_MAX 64
#define SANDBOX_JSON	 "sandbox.json"
#define SANDBOX_LOCK	 "lock"
#define SANDBOX_CTL	 "ctl.sock"
#define SANDBOX_LOG	 "daemon.log"
#define SANDBOX_CONSOLE	 "console.log"
#define SANDBOX_AUDIT	 "audit.json"
/* `gantry stop -snapshot`'s save: PAUSE/state and PAUSE/memory, which the
 * next resume goes on from (snapshot/files.h). */
#define SANDBOX_PAUSE	 "pause"
/* There while its supervisor holds the VM paused (`gantry pause`): its
 * vCPUs parked, nothing saved. */
#define SANDBOX_FROZEN	 "paused"
#define SANDBOXES_SUBDIR "sandboxes"
#define RWLAYERS_SUBDIR	 "rwlayers"

enum sandbox_state {
	SANDBOX_CREATING, /* being made by `gantry start` */
	SANDBOX_RUNNING,
	SANDBOX_STOPPED,
	SANDBOX_CRASHED, /* ended without being stopped; reason says how */
	SANDBOX_BROKEN,	 /* its sandbox.json does not read; reason says why */
};

struct sandbox {
	char *name;
	char *image;		     /* the source as the user gave it */
	char *image_digest;	     /* "sha256:..." (NULL for a prebuilt .erofs) */
	char *image_path;	     /* the EROFS image attached as /dev/vdb; NULL with root */
	char *root;		     /* a host directory served as the container's
				      * root (an OCI bundle's rootfs); NULL: the image */
	bool root_readonly;	     /* root: the container sees it read-only (made
				      * so after its mounts, as runc does) */
	bool host_root;		     /* root is the host's "/" (gantry wrap, one-shot
				      * only): served read-only, never stored */
	char **sockets;		     /* host sockets relayed in (one-shot only) */
	size_t nr_sockets;
	bool oauth_bridge; /* the OAuth bridge's replays (one-shot only) */
	char *mcp_fs;	   /* the MCP fs server's gantry.mcpfs= value (one-shot only) */
	char *hostname;		     /* the guest's; NULL: name */
	struct image_config *config; /* NULL for a prebuilt .erofs */
	uint64_t cpus, mem_mib, disk_mib;
	bool writable;
	char *rwlayer;	      /* NULL with writable = false */
	bool rwlayer_managed; /* made by Gantry, deleted with the sandbox */
	char *created;	      /* RFC 3339, UTC */
	enum sandbox_state state;
	char *reason;	/* crashed: why */
	long pid;	/* the supervisor's, while running */
	bool paused;	/* running, its VM held paused (`gantry pause`): read
			   live (SANDBOX_FROZEN), never saved */
	bool transient; /* one-shot `gantry exec`: no container kept; listed
			   ("oneshot") only while its process runs */
	bool net;	/* a network link (net.h); a sandbox.json without "net" has one */
	char **ports;	/* published ports, canonical specs (portspec.h), NULL-terminated */
	size_t nr_ports;
	json_t *net_policy;   /* the egress policy, canonical (net/policy.h); NULL: the default */
	bool allow_local_net; /* the policy's wall down (-allow-local-net) */
	char *proxy;	      /* -proxy URL (net/proxy.h), NULL: none */
	char *no_proxy;	      /* -no-proxy LIST, NULL: the default */
	bool proxy_enforce;
	enum confine_mode isolation; /* how its workers are confined (confine/confine.h) */
	char **shares; /* host directories shared in, canonical specs (share/spec.h) */
	size_t nr_shares;
	char **tmpfs; /* tmpfs mounts of the container, sandbox_tmpfs_parse's specs */
	size_t nr_tmpfs;
	char **secrets; /* secret specs without values (secret/spec.h) */
	size_t nr_secrets;
	/* OAuth custody (`gantry start -oauth-custody`): its supervisor serves
	 * the guest's `gantry-guest oauth`, the providers from oauth_providers
	 * (an absolute path; NULL or a missing file: Gantry's table alone). */
	bool oauth_custody;
	char *oauth_providers;
};

bool sandbox_name_valid(const char *name);
/* One line naming what is wrong with name. */
int sandbox_name_check(const char *name, gantry_error_t *err);
const char *sandbox_state_name(enum sandbox_state s);
/* A tmpfs mount of the container (an OCI config.json's), stored as
 * FLAGS:SIZE_KIB:MODE:PATH: FLAGS "-" or any of r (read-only) and x
 * (noexec), SIZE_KIB 0 for the kernel's default, MODE octal, PATH the
 * absolute container path (no .. component). */
#define SANDBOX_TMPFS_MAX 16
struct sandbox_tmpfs {
	bool ro, noexec;
	unsigned long long size_kib;
	unsigned int mode;
	const char *path; /* into the spec parsed */
};
int sandbox_tmpfs_parse(const char *spec, struct sandbox_tmpfs *t, gantry_error_t *err);

/* What a listing shows: the state's name, or "paused". */
const char *sandbox_shown_state(const struct sandbox *sb);

/* $GANTRY_HOME/sandboxes/<name> (name may be NULL: the parent), and the
 * writable layer Gantry manages for name. Not created. */
int sandbox_dir(const char *name, char **out, gantry_error_t *err);
int sandbox_rwlayer_default(const char *name, char **out, gantry_error_t *err);
/* The sandboxes' directories: *dirs gets each one's path and *names its
 * name (either may be NULL), sorted by name, skipping entries that are no
 * sandbox's (being created or deleted). None when there is no
 * $GANTRY_HOME/sandboxes. Free both with strv_free. */
int sandbox_dirs_list(char ***dirs, char ***names, size_t *n, gantry_error_t *err);
/* The entries of parent with a valid name (sandbox_name_valid: not ".",
 * "..", nor one being made or removed), sorted, NULL-terminated
 * (strv_free); none when parent does not exist. */
int sandbox_names_in(const char *parent, char ***names, size_t *n, gantry_error_t *err);
/* Whether the sandbox in dir has a `stop -snapshot` save for its next
 * resume to restore. */
bool sandbox_saved(const char *dir);
/* Create $GANTRY_HOME/sandboxes and rwlayers (0700) when missing. */
int sandbox_dirs_make(gantry_error_t *err);
/* Remove name's directory dir: renamed out of the way at once, so a new
 * claim of the name finds nothing of it, then removed. */
int sandbox_dir_remove(const char *name, const char *dir, gantry_error_t *err);
/* Now, RFC 3339 in UTC (malloc()ed). */
void sandbox_time_now(char **out);

/* Read <dir>/sandbox.json; ENOENT in the error when there is none. */
int sandbox_load(const char *dir, struct sandbox *sb, gantry_error_t *err);
int sandbox_save(const char *dir, const struct sandbox *sb, gantry_error_t *err);
/* Claim sb's name: a directory made aside with its sandbox.json, then
 * renamed into place as dir, so exactly one of racing claims gets it and
 * nobody sees half a sandbox: 0, or 1 when the name is taken (-1 other
 * errors; err set for both). lock (may be NULL) gets the lifetime lock,
 * taken before the rename. */
int sandbox_claim(const struct sandbox *sb, const char *dir, int *lock, gantry_error_t *err);
void sandbox_free(struct sandbox *sb);
/* Free only the fields a transient sandbox owns (its network settings and
 * shares); the others are borrowed. */
void sandbox_transient_free(struct sandbox *sb);
/* The identity a writable layer is paired with. */
const char *sandbox_image_id(const struct sandbox *sb);

/* flock <dir>/lock: 1 with *fd held, 0 when another holds it, -1 error. */
int sandbox_lock(const char *dir, bool exclusive, int *fd, gantry_error_t *err);
/* Whether a supervisor holds the lock now. */
bool sandbox_is_running(const char *dir);
/* Make sb the sandbox's live state: running while a supervisor holds the
 * lock; otherwise sandbox.json as reloaded under the lock, with a supervisor
 * that died recorded as a crash and its sockets removed. */
void sandbox_cleanup_stale(const char *dir, struct sandbox *sb);

#endif
