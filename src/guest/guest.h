/* gantry-init's shared state: PID 1 in the guest (init.c) serves the agent
 * protocol (proto/agent.h) over its link to the host (link.c) and runs each
 * EXEC as a crun container (session.c, crun.c, relay.c) on the root that
 * rootfs.c assembles, from the OCI spec that spec.c writes. guest.c and
 * link.c are leaves: they call nothing else of gantry-init, and nothing
 * calls back into init.c. Single-threaded: one poll loop owns everything
 * here. */
#ifndef GANTRY_GUEST_GUEST_H
#define GANTRY_GUEST_GUEST_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "guest/netconf.h"
#include "guest/shares.h"
#include "proto/agent.h"

#define GUEST_MAX_SESSIONS 64
#define GUEST_ORPHANS	   64 /* exit statuses reaped before their session knew the pid */
#define GUEST_PATH_MAX	   4096
#define GUEST_STATE_MAX	   1024			/* --state: what is built beneath it stays short */
#define GUEST_CONTAINER	   "gantry"		/* the long-lived container's crun name */
#define GUEST_PAUSE_PATH   "/dev/.gantry-pause" /* where its init is bound */
#define GUEST_PAUSE_ARG	   "--pause"
/* Bound into every container too: git's credential helper (credential.c). */
#define GUEST_HELPER_PATH PROTO_HELPER_PATH
#define GUEST_HELPER_ARG  PROTO_HELPER_ARG

/* Where things live. Defaults are the guest's; gantry-init's test mode
 * (--host-dir, --state, --rootfs) points them at a host directory. */
struct guest_config {
	const char *host_dir;  /* test mode: dial <dir>/<port>.sock, not vsock */
	const char *state_dir; /* bundles/ and the overlay's parts */
	const char *rootfs;    /* the container root, assembled or given */
	const char *crun;
	const char *crun_root; /* crun --root; NULL: crun's default */
	const char *hostname;
	const char *net;      /* gantry.net=, or NULL: no network */
	const char *etc_dir;  /* the generated resolv.conf, hosts, hostname; NULL: none */
	unsigned long nofile; /* the container's RLIMIT_NOFILE */
	bool readonly;	      /* the container sees its root read-only */
	bool pid1;	      /* really PID 1: mount, reap for everyone, power off */
	bool persist;	      /* one long-lived container; each EXEC is a crun exec */
	bool template;	      /* gantry.template=1: the rest of the parameters come
				 with the host's first RENEW (a template's boot) */
	const char *self;     /* gantry-init's own path, the pause process */
	bool debug;
	/* gantry.share=, bound into the container; NULL: none */
	const struct shares *shares;
	const struct tmpfs_mounts *tmpfs; /* gantry.tmpfs= (NULL: none) */
	const struct guest_sockets *sockets; /* gantry.sock= (NULL: none) */
	bool oauth_bridge;		     /* gantry.oauth=1: replays on vsock (sockets.c) */
	const struct guest_mcpfs *mcpfs;     /* gantry.mcpfs= (NULL: none) */
	/* gantry.root=TAG: the container's root is that directory of the
	 * shares' hub (an OCI bundle's rootfs, served by the host), not the
	 * image under an overlay; NULL: the image's */
	const char *root_share;
	/* gantry.hostroot=1: root_share is the host's "/", whose mount
	 * points the server does not cross: the root is a tmpfs with each of
	 * its entries bound (rootfs.c), made read-only by crun */
	bool host_root;
	/* gantry.ca=: the egress CA's base64 (trust.c); NULL: none */
	const char *ca;
	bool image_bundle; /* the image has /etc/ssl/certs/ca-certificates.crt */
};

struct session;

struct orphan {
	pid_t pid;
	int status;
};

struct guest {
	struct guest_config cfg;
	int control; /* -1 once it closed */
	struct proto_decoder *dec;
	int sigfd;
	struct session *sessions[GUEST_MAX_SESSIONS];
	struct orphan orphans[GUEST_ORPHANS];
	unsigned int next_orphan;
	char *rootfs_error; /* why the container root is unusable, or NULL */
	pid_t container;    /* persist: the long-lived container's init; 0 once it died */
	const struct netconf *net; /* eth0's settings, for the container's etc files */
};

/* guest.c */

/* "gantry-init: <msg>" on the console, one write per line. */
void guest_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* With gantry.debug=1 (or --debug): what happened when, in uptime ms. */
void guest_debug(const struct guest *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* snprintf for paths: -1 (ENAMETOOLONG) rather than a truncated path. */
int guest_pathf(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
uint64_t guest_now_ms(clockid_t clock);

/* link.c */

/* Connect to host port `port` (vsock CID 2, or a Unix socket in test mode). */
/* sockets.c: listen for each gantry.sock= and relay its connections to
 * the host, in a process of its own. */
void sockets_start(const struct guest_config *cfg);
/* reaper.c: PROTO_INIT_ARG's small init (argv after it). */
int guest_reaper_main(int argc, char **argv);
/* mcp.c: PROTO_MCP_ARG, the MCP gateway's proxy (argv after it). */
int guest_mcp_proxy_main(int argc, char **argv);
/* mcpfs.c: parse gantry.mcpfs='s value (false, why filled, when bad),
 * and serve one connection to it (in a child of its own; never returns). */
bool mcpfs_parse(struct guest_mcpfs *fs, const char *value, char why[SHARE_WHY_MAX]);
void __attribute__((noreturn)) mcpfs_serve(const struct guest_mcpfs *fs, int conn);
/* oauth.c: PROTO_OPEN_URL_ARG, the guest's BROWSER, and PROTO_OAUTH_ARG,
 * OAuth custody's client (argv after it). */
int guest_open_url_main(int argc, char **argv);
int guest_oauth_main(int argc, char **argv);
int link_dial(const struct guest_config *cfg, unsigned int port);
/* The control connection, retried for up to timeout_ms: the vsock
 * transport or the host's listener may be a moment behind us. */
#define LINK_DIAL_MS   5000 /* at boot: the host listens first; slow starts */
#define LINK_REDIAL_MS 1000 /* after a reset: a restoring host listens first */
int link_dial_control(const struct guest_config *cfg, unsigned int timeout_ms);
/* Send one frame on the control connection; a failure closes it. */
void link_send(struct guest *g, const struct proto_msg *m);
void link_send_error(struct guest *g, uint32_t id, uint32_t code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* credential.c: git's credential helper (argv: the operation). */
int guest_credential_main(int argc, char **argv);
/* files.c: `GUEST_HELPER_PATH files ...`, the file helper (proto/files.h). */
int guest_files_main(int argc, char **argv);

/* mounts.c */
/* Mount the share hub on SHARES_MOUNT_DIR once: 0 or -errno. */
int mounts_hub(void);
/* At the end: detach it, if it was mounted. */
void mounts_hub_release(void);
/* MOUNT or UNMOUNT from the host: done at once, answered with DONE. */
void mounts_request(struct guest *g, const struct proto_msg *m);
#define MOUNTS_WHY_MAX 256
/* The hub's TAG at path in the running container, or what is mounted at
 * path there detached: 0, or the errno with why (MOUNTS_WHY_MAX) filled. */
int mounts_bind(struct guest *g, const char *tag, bool ro, const char *path, char *why);
int mounts_unbind(struct guest *g, const char *path, char *why);
/* 0 where path in the container is a share's bind whose server answers
 * for its root (a restored VM's server took the save's nodes); else the
 * errno, why filled. */
int mounts_check(struct guest *g, const char *path, char *why);

/* renew.c: RENEW, on a restored VM's new control connection: fresh
 * entropy, the wall clock, shares bound again; answered with RENEWED,
 * whose flags have also's too (what the caller did with it). */
void renew_request(struct guest *g, const struct proto_msg *m, uint32_t also);

/* session.c */
void session_exec(struct guest *g, struct proto_exec *e);
void session_signal(struct guest *g, uint32_t id, uint32_t signo);
void session_resize(struct guest *g, uint32_t id, uint32_t rows, uint32_t cols);
/* A child exited: a session's crun or process, or else an orphan whose
 * status is kept until a session learns its pid. */
void session_reaped(struct guest *g, pid_t pid, int status);
/* Finished sessions report EXIT and go away; true if any are still live. */
bool session_reap_finished(struct guest *g);
/* Every session's process; _all: the sandbox's container too. */
void session_kill_sessions(struct guest *g);
void session_kill_all(struct guest *g);

/* relay.c: poll() plumbing; add this session's fds, then act on what they
 * report. */
size_t relay_pollfds(struct session *s, struct pollfd *fds, size_t room);
void relay_events(struct session *s, const struct pollfd *fds, size_t n);

/* crun.c: persist; start the long-lived container every EXEC joins; on
 * failure g->rootfs_error says why. */
void crun_container_start(struct guest *g);

/* rootfs.c */
int rootfs_assemble(const struct guest_config *cfg, bool rw, char **why);
/* Resolve argv0 in the container root the way execvp would (PATH from env,
 * relative to cwd); 0, or the ERROR code with a message like docker's. */
int rootfs_find_command(const char *rootfs, const char *argv0, char *const *env, const char *cwd,
			char **why);

/* net.c */

/* Bring lo up and, given gantry.net=VALUE, configure eth0; n says whether
 * the guest is networked (a bad VALUE or a failed ioctl is logged and
 * leaves it off). */
void net_setup(const struct guest *g, const char *value, struct netconf *n);
/* Write resolv.conf, hosts and hostname in <state>/etc; set cfg->etc_dir. */
int net_write_etc(struct guest_config *cfg, const struct netconf *n);
/* Make sure /etc and the three files exist in the container root. */
void net_prepare_root(const char *rootfs);
/* The i-th generated file's name under etc_dir (and /etc), or NULL. */
const char *net_etc_file(size_t i);

/* trust.c: where the container finds the egress CA, alone and with the
 * image's bundle. */
#define TRUST_CA     "/etc/gantry/ca.pem"
#define TRUST_BUNDLE "/etc/gantry/ca-bundle.crt"
bool trust_b64_valid(const char *s);
/* All n bytes of p to fd, over EINTR and short writes: 0, or -1 (here for
 * credential.c too, which every build of trust.c has beside it). */
int guest_write_all(int fd, const void *p, size_t n);
/* Write gantry-ca.pem and gantry-ca-bundle.crt in etc_dir (the root
 * assembled); on failure cfg->ca is NULL again (logged). */
void trust_write(struct guest_config *cfg);
/* A restored VM's egress CA (base64, as gantry.ca= has it) in place of
 * the one the guest booted with: gantry-ca.pem rewritten, the old CA
 * (last in the bundle) replaced there. 0, or -1 with errno. */
int trust_renew(struct guest_config *cfg, const char *b64);
/* The variables that point the container's TLS clients at them. */
size_t trust_env_count(void);
const char *trust_env_name(size_t i);
const char *trust_env_value(size_t i);

/* spec.c: write <bundle>/config.json for one EXEC (pause: for the
 * long-lived container, whose init is gantry-init --pause). */
int spec_write(const struct guest_config *cfg, const char *bundle, const struct proto_exec *e,
	       bool pause, char **why);
/* The process object alone, for crun exec --process. */
int spec_write_process(const struct guest_config *cfg, const char *path, const struct proto_exec *e,
		       char **why);

#endif
