/* The lifecycle, for every front end (the CLI, the dashboard, the HTTP
 * API, gantry-oci, gantry wrap): this header is the whole API, and the one
 * sandbox header a front end includes. Declared here: persistent
 * sandboxes (create and boot, resume, stop, pause, delete, list, inspect, a
 * session in a running one), one-shot runs, snapshots (take, list,
 * inspect, remove, start from, exec from, fork) and a sandbox's secrets
 * (set, remove, list, its audit). Included, each the API in whole:
 * sandbox/state.h (a sandbox's state, names and paths), process.h (the
 * process a session runs), images.h (images and registries), network.h
 * (ports, egress policy, traffic, resources), shares.h (shares), procs.h
 * (its processes), logs.h (its logs), stats.h (what it uses), copy.h
 * (files in and out) and hostcheck.h (what this host offers). None of
 * those includes this header; sandbox/snapshots.h and secrets.h, which
 * build on it, keep only what the lifecycle and the supervisor use among
 * themselves, and are no front end's. Each call validates its input
 * first and leaves other sandboxes, the image cache and users' files
 * alone. Which calls may come from threads, and why: docs/architecture.md. */
#ifndef GANTRY_SANDBOX_LIFECYCLE_H
#define GANTRY_SANDBOX_LIFECYCLE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/session.h"
#include "common/cancel.h"
#include "common/error.h"
#include "image/source.h"
#include "sandbox/copy.h"
#include "sandbox/hostcheck.h"
#include "sandbox/images.h"
#include "sandbox/logs.h"
#include "sandbox/network.h"
#include "sandbox/shares.h"
#include "sandbox/process.h"
#include "sandbox/procs.h"
#include "sandbox/state.h"
#include "sandbox/stats.h"
#include "secret/store.h"

#define SANDBOX_DEFAULT_CPUS 1
#define SANDBOX_MAX_CPUS     251

struct mcp_gateway;

struct sandbox_opts {
	const char *name;
	const char *image; /* NULL: the built-in image */
	/* The caller's terminal, where a pull of image draws its progress
	 * (0: none; not a terminal: nothing drawn). */
	int progress_fd;
	/* A host directory (an OCI bundle's rootfs, gantry-oci) served to the
	 * guest as the container's root in place of an image, read and
	 * written where it is; then image is NULL and writable false. */
	const char *root;
	bool root_readonly; /* root: read-only to the guest (config.json's root.readonly) */
	bool host_root;	    /* root is the host's "/", served read-only (gantry wrap; one-shot) */
	/* a one-shot's VM from a template snapshot of its machine, written
	 * by the first run of it (sandbox/template.h; gantry wrap) */
	bool template;
	const char *hostname; /* the guest's; NULL: the sandbox's name */
	uint64_t cpus, mem_mib, disk_mib;
	bool writable;
	const char *rwlayer; /* NULL: Gantry's own, rwlayers/<name>.ext4 */
	bool net;	     /* a network link (default on) */
	char **ports;	     /* -p: canonical specs, host port 0 until the start picks one */
	size_t nr_ports;
	const char *net_policy; /* -net-policy FILE */
	bool allow_local_net;
	const char *proxy, *no_proxy;
	bool proxy_enforce;
	char **shares; /* -share: canonical specs (share/spec.h) */
	size_t nr_shares;
	char **tmpfs; /* the container's tmpfs mounts (sandbox_tmpfs_parse's specs) */
	size_t nr_tmpfs;
	/* host Unix sockets relayed into the container at their own paths
	 * (gantry wrap -socket; a one-shot's only), absolute */
	char **sockets;
	size_t nr_sockets;
	/* -mcp-remote: the MCP gateway the guest's mcp-proxy reaches, its
	 * remotes opened (a one-shot's only; borrowed, NULL: none) */
	struct mcp_gateway *mcp;
	/* the OAuth bridge (gantry wrap; a one-shot's only): the guest's
	 * open-url shown here, a loopback callback carried in */
	bool oauth_bridge;
	/* OAuth custody (borrowed, NULL: none): the guest's `gantry-guest
	 * oauth login|token` served, by this process for a one-shot; a
	 * persistent sandbox's supervisor opens its own from
	 * oauth_providers (the providers file, absolute; NULL: none; freed
	 * by sandbox_opts_free) */
	struct oauth_custody *oauth_custody;
	char *oauth_providers;
	const char *isolation; /* -process-isolation auto|required|off; NULL: the environment's */
	/* -secret, -secret-file: the secrets of its processes (NULL: none).
	 * Freed by sandbox_opts_free. */
	struct secret_store *secrets;
	/* start's: the sandbox's own environment, working directory, user
	 * and entrypoint over its image's (sandbox_process_apply) */
	struct sandbox_process_opts process;
};

/* The defaults every front end starts from: SANDBOX_DEFAULT_CPUS vCPU,
 * VMM_DEFAULT_MEM MiB, a writable root on a new RWLAYER_DEFAULT_MIB MiB
 * layer, a network, and no name, image (the built-in one), ports or
 * shares; isolation as the environment says. */
void sandbox_opts_init(struct sandbox_opts *o);
/* -p SPEC (a FLAG_FUNC for opaque = struct sandbox_opts *): checked and
 * added to o->ports; the same bind twice is an error. */
int sandbox_opts_publish(void *opaque, const char *spec, gantry_error_t *err);
/* -share SPEC (a FLAG_FUNC, the same): checked and added to o->shares. */
int sandbox_opts_share(void *opaque, const char *spec, gantry_error_t *err);
/* -v HOST_PATH:CTR_PATH[:ro|rw], Docker's spelling of a share (a
 * FLAG_FUNC, the same): added as a share tagged after CTR_PATH's name. */
int sandbox_opts_volume(void *opaque, const char *spec, gantry_error_t *err);
/* A share of host (absolute, or relative to the working directory) at
 * ctr, tagged as -v tags it; paths holding the share spec's delimiters
 * (`,` `@` `=`) go in base64url, so any path is taken as it is. */
int sandbox_opts_bind(struct sandbox_opts *o, const char *host, const char *ctr, bool ro,
		      gantry_error_t *err);
/* -m SIZE, Docker's: bytes, or with a k, m or g suffix (a FLAG_FUNC, the
 * same), into o->mem_mib. */
int sandbox_opts_memory(void *opaque, const char *size, gantry_error_t *err);
void sandbox_opts_free(struct sandbox_opts *o);

/* The image a sandbox of src boots (NULL: the built-in one), converted
 * into the cache when it is not there yet; a pull draws its layers on
 * progress_fd when that is a terminal (0: nowhere), and ends once cancel
 * (may be NULL) fires, with ECANCELED and nothing cached. */
int sandbox_image_resolve(const char *src, int progress_fd, const struct gantry_cancel *cancel,
			  struct image *img, gantry_error_t *err);

/* `gantry start`: create the sandbox and boot it; returns once its guest
 * agent and ctl.sock accept work. Exactly one of racing creates of a name
 * wins. A first boot that fails leaves nothing behind (nor a -rwlayer file
 * it made); its error quotes the tail of the log that says why. A start
 * whose cancel (may be NULL) fires leaves nothing behind either: its VM is
 * ended, and it fails with ECANCELED. */
int sandbox_create(const struct sandbox_opts *o, const struct gantry_cancel *cancel,
		   gantry_error_t *err);
/* The caller's value of an environment variable (getenv, for a CLI), or
 * NULL: where a sandbox's secrets from the environment come from. */
typedef const char *(*sandbox_env_fn)(const char *name);
/* Boot a stopped (or crashed) sandbox from its sandbox.json (or, after
 * `stop -snapshot`, restore its save, which is then dropped), its secrets
 * from the environment taken from env (NULL: none given; then a sandbox
 * with such secrets does not resume); a cancel ends the boot and leaves it
 * stopped. */
int sandbox_resume(const char *name, sandbox_env_fn env, const struct gantry_cancel *cancel,
		   gantry_error_t *err);
/* Drop a stopped sandbox's save (`stop -snapshot`): its next resume
 * boots. */
int sandbox_discard_save(const char *name, gantry_error_t *err);
/* Ask the guest to sync and power off; returns when the supervisor is
 * gone. One that is not running is left as it is (0). */
int sandbox_stop(const char *name, gantry_error_t *err);
/* `stop -snapshot`: save the running sandbox (its supervisor refuses,
 * with why, when it cannot be: one that holds secrets unless
 * with_secrets) and return when the supervisor is gone; its next resume
 * restores it. A sandbox that is not running is an error. */
int sandbox_pause(const char *name, bool with_secrets, gantry_error_t *err);
/* `gantry pause`: park the running sandbox's vCPUs (freeze; nothing is
 * saved, its devices and host side run on, exec is refused meanwhile) or
 * let them run on; returns once that holds. A stop of a paused sandbox
 * lets it run on first. */
int sandbox_freeze(const char *name, bool freeze, gantry_error_t *err);
/* Stop if running, then remove its state and its Gantry-managed writable
 * layer (never a -rwlayer the user gave, nor images). force: a sandbox
 * whose sandbox.json does not read (`broken` in a listing) is removed
 * too, with the layer Gantry would have made for it, unless its
 * supervisor still runs. */
int sandbox_delete(const char *name, bool force, gantry_error_t *err);

/* One sandbox's live state (as sandbox_list gives it) and its directory. */
int sandbox_inspect(const char *name, struct sandbox *sb, char **dir, gantry_error_t *err);
/* The same, for a change: when it is not running, *lock (else -1) holds
 * it stopped and sb is its sandbox.json as read under that lock. */
int sandbox_open_locked(const char *name, struct sandbox *sb, char **dir, int *lock,
			gantry_error_t *err);
/* One request (taken) to the running sandbox's supervisor, its answer
 * waited for up to timeout_ms (-1: for as long as it takes). */
int sandbox_request(const char *name, const char *dir, json_t *req, int timeout_ms,
		    json_t **reply, gantry_error_t *err);
/* What `ls --json` and `inspect --json` print, and the API will serve: name,
 * state, reason, pid, created, image, resources; with dir, the image's
 * config and the sandbox's paths too. */
json_t *sandbox_to_json(const struct sandbox *sb, const char *dir);

/* An error saying so when sb is a one-shot exec's (sb->transient), which
 * has no supervisor to change or ask: 0 otherwise. */
int sandbox_refuse_oneshot(const struct sandbox *sb, gantry_error_t *err);

/* Every sandbox, by name, running one-shot execs among them; each entry's
 * state is the live one. */
int sandbox_list(struct sandbox **out, size_t *n, gantry_error_t *err);
void sandbox_list_free(struct sandbox *v, size_t n);

/* `gantry exec NAME`: run po's process (its command, else the image's
 * Entrypoint and Cmd, else /bin/sh; po NULL: the image's as it is) in the
 * sandbox's container with the caller's stdio, terminal and signals (io).
 * 0 with *res filled, -1 when the sandbox or the link failed, or cancel
 * (may be NULL) fired: then the session is hung up, and its process gets
 * SIGHUP as from a terminal that went away. Many may run at once, from
 * threads of one process too. */
int sandbox_exec(const char *name, const struct sandbox_process_opts *po,
		 const struct sandbox_stdio *io, const struct gantry_cancel *cancel,
		 struct agent_result *res, gantry_error_t *err);

/* A name for a one-shot that was given none: exec-<8 hex digits>. */
char *sandbox_oneshot_name(void);
/* One-shot `gantry exec`: a transient sandbox on o->image (NULL: the
 * built-in image) with o->cpus and o->mem_mib, read-only: boot it, run
 * args as sandbox_exec does (show_console: the guest console on io->err),
 * end the VM, and leave nothing behind. While it runs it is listed among
 * the sandboxes as o->name (NULL: exec-XXXXXXXX; a name given must be
 * free), and sandbox_stop ends it; where $GANTRY_HOME cannot hold that
 * entry and no name was given, it runs unlisted. 0 with
 * *res filled; -1 when the image, the VM or the guest link failed, the
 * error quoting the console's last lines, or when cancel (may be NULL)
 * fired (ECANCELED; the VM is ended at once, whatever it was doing). */
int sandbox_run_once(const struct sandbox_opts *o, bool show_console,
		     const struct sandbox_process_opts *po, const struct sandbox_stdio *io,
		     const struct gantry_cancel *cancel, struct agent_result *res,
		     gantry_error_t *err);

/* Snapshots (docs/snapshots.md): a running sandbox saved under
 * $GANTRY_HOME/snapshots/SNAP/, new sandboxes started from one, and fork
 * (a snapshot and its clones at once). What a snapshot directory holds:
 * sandbox/snapshots.h. A clone takes copies and links of its own:
 * removing a snapshot never touches a sandbox made from it. */
#define FORK_MAX 100

/* Save the running sandbox name as snapshot as (NULL: NAME-TIME) while
 * it runs on: its supervisor saves its VM live (paused meanwhile, nothing
 * of it stopped) and copies its writable layer (ctl "snapshot"). *made
 * (optional) gets the snapshot's name. A sandbox that holds secrets is
 * saved only with_secrets: their values are in its memory. */
int sandbox_snapshot_take(const char *name, const char *as, bool with_secrets, char **made,
			  gantry_error_t *err);
/* The snapshots, each as `snapshot inspect` shows one, by name. */
int sandbox_snapshot_list(json_t **out, gantry_error_t *err);
json_t *sandbox_snapshot_inspect(const char *snap, gantry_error_t *err);
int sandbox_snapshot_remove(const char *snap, gantry_error_t *err);
/* A new sandbox name from snapshot snap: its configuration, a copy of
 * its writable layer and its VM restored (the guest renews its identity
 * as name). ports: its own published ports (the source's host ports are
 * the source's); env: where its secrets from the environment come from,
 * as for sandbox_resume. Returns once it runs. */
int sandbox_start_from(const char *name, const char *snap, char *const *ports, size_t nr_ports,
		       sandbox_env_fn env, const struct gantry_cancel *cancel, gantry_error_t *err);
/* `gantry exec -from SNAP`: a sandbox name (NULL: exec-XXXXXXXX) started
 * from snapshot snap as sandbox_start_from does, po's process run in it
 * as sandbox_exec does, and the sandbox deleted, whatever became of
 * either. A process killed with SIGKILL leaves it running and listed,
 * for `gantry delete`. */
int sandbox_exec_from(const char *snap, const char *name, char *const *ports, size_t nr_ports,
		      sandbox_env_fn env, const struct sandbox_process_opts *po,
		      const struct sandbox_stdio *io,
		      const struct gantry_cancel *cancel, struct agent_result *res,
		      gantry_error_t *err);
/* Snapshot name as prefix (NULL: NAME-fork) and start n (at most
 * FORK_MAX) clones of it at once, PREFIX-1 to PREFIX-n; the snapshot stays
 * for more. The clones that started, in *started. */
int sandbox_fork(const char *name, unsigned int n, const char *prefix, bool with_secrets,
		 sandbox_env_fn env, unsigned int *started,
		 gantry_error_t *err);

/* A sandbox's secrets (values held by its supervisor, secret/store.h;
 * sandbox.json keeps their specs without values). */
/* `gantry secret set NAME SPEC`: live on a running sandbox (its sessions
 * from then on see it), kept in sandbox.json either way; a secret from the
 * environment takes its value from env now. */
int sandbox_secret_set(const char *name, const char *spec, sandbox_env_fn env, gantry_error_t *err);
/* `gantry secret rm NAME SECRET`. */
int sandbox_secret_rm(const char *name, const char *secret, gantry_error_t *err);
/* {name, running, secrets: [{name, source, path|command, hosts, ttlMs}]}:
 * sources, never values. */
int sandbox_secrets_list(const char *name, json_t **out, gantry_error_t *err);
/* {name, events: [...]}: the running supervisor's audit ring, or the
 * audit.json it left. */
int sandbox_audit(const char *name, json_t **out, gantry_error_t *err);

#endif
