/* The lifecycle, for every front end (the CLI now; the dashboard and the
 * HTTP API later): this header is the whole API. Persistent sandboxes
 * (create and boot, resume, stop, delete, list, a session in a running
 * one), one-shot runs, and (included: sandbox/images.h, network.h,
 * shares.h, procs.h) images and registries, a sandbox's ports, egress
 * policy and shares, live or for its next boot, and its processes. Each call validates its input
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
#include "sandbox/images.h"
#include "sandbox/network.h"
#include "sandbox/shares.h"
#include "sandbox/process.h"
#include "sandbox/procs.h"
#include "sandbox/state.h"
#include "secret/store.h"

#define SANDBOX_DEFAULT_CPUS 1
#define SANDBOX_MAX_CPUS     251

struct mcp_gateway;

struct sandbox_opts {
	const char *name;
	const char *image; /* NULL: the built-in image */
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
/* -m SIZE, Docker's: bytes, or with a k, m or g suffix (a FLAG_FUNC, the
 * same), into o->mem_mib. */
int sandbox_opts_memory(void *opaque, const char *size, gantry_error_t *err);
void sandbox_opts_free(struct sandbox_opts *o);

/* The image a sandbox of src boots (NULL: the built-in one), converted
 * into the cache when it is not there yet; a pull draws its layers on
 * stderr when that is a terminal, and ends once cancel (may be NULL)
 * fires, with ECANCELED and nothing cached. */
int sandbox_image_resolve(const char *src, const struct gantry_cancel *cancel, struct image *img,
			  gantry_error_t *err);

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
 * args as sandbox_exec does (show_console: the guest console on stderr),
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

#endif
