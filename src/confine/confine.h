/* Confining a worker process: the layers a process that handles guest
 * data puts between itself and the rest of the host once it has opened
 * what it needs, each one checked from inside right after it is applied.
 *
 * The spawner (confine_fork) starts the worker in new user, mount, PID
 * and IPC namespaces where the host allows (root needs no user namespace
 * and keeps its identity; an ordinary user is mapped to itself). The
 * worker does its set-up, then confine_apply:
 *   1. PR_SET_PDEATHSIG(SIGKILL): it dies with its parent;
 *   2. in its mount namespace, an empty read-only tmpfs as its root
 *      (pivot_root), so no path of the host names anything;
 *   3. RLIMIT_CORE 0, RLIMIT_NOFILE and RLIMIT_NPROC bounded;
 *   4. securebits locked (no root magic, no set-uid fixups, no ambient
 *      raise), the bounding and ambient sets emptied, no_new_privs, not
 *      dumpable;
 *   5. Landlock: a ruleset that handles every filesystem right the
 *      kernel's ABI knows and allows none;
 *   6. every capability dropped (root without a user namespace may keep
 *      CAP_NET_BIND_SERVICE: a published port below 1024);
 *   7. a seccomp filter for its role (seccomp.c): an allowlist, EPERM
 *      for the rest, the process killed for what no worker may ever do.
 * Each step's result and its probe go into a report, which says per
 * property whether it holds and by which layer; isolation.json is that
 * report. */
#ifndef GANTRY_CONFINE_CONFINE_H
#define GANTRY_CONFINE_CONFINE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "common/error.h"

#define CONFINE_MODE_ENV    "GANTRY_PROCESS_ISOLATION" /* auto (default), required, off */
#define CONFINE_SECCOMP_ENV "GANTRY_SECCOMP"	       /* log: what would be refused is logged */
#define CONFINE_PROPS_MAX   24
#define CONFINE_FILE	    "isolation.json"

enum confine_mode { CONFINE_OFF, CONFINE_AUTO, CONFINE_REQUIRED };

/* "auto", "required" or "off"; anything else is a one-line error. */
int confine_mode_parse(const char *s, enum confine_mode *m, gantry_error_t *err);
const char *confine_mode_name(enum confine_mode m);
/* CONFINE_MODE_ENV, or auto; a bad value is an error. */
int confine_mode_from_env(enum confine_mode *m, gantry_error_t *err);
/* CONFINE_SECCOMP_ENV is "log": the filters log what they would refuse. */
bool confine_seccomp_log(void);

/* The namespaces a worker was started in (CLONE_NEW* bits). */
struct confine_spawn {
	unsigned long ns;
	int userns_errno; /* why there is no user namespace (0: there is, or root) */
};

/* For extra_ns, not a namespace of its own: a root caller's worker runs
 * in a user namespace too, its root there the unprivileged
 * CONFINE_UNPRIVILEGED_UID outside (the VMM worker: everything it uses
 * is handed to it open, so it needs no identity on the host). */
#define CONFINE_ROOT_UNPRIVILEGED (1UL << 40)
#define CONFINE_UNPRIVILEGED_UID  65534 /* nobody */

/* fork(), for a worker that will exec: with mode off a plain fork; else
 * the child starts in new mount, PID and IPC namespaces, and a user
 * namespace (mapped to the caller's own uid and gid) unless the caller is
 * root (see CONFINE_ROOT_UNPRIVILEGED). When the host refuses them the
 * child starts without (sp says so). extra_ns: more of them (the VMM's
 * CLONE_NEWNET), wanted with the others. The child runs only
 * async-signal-safe calls until it execs. Returns as fork() does. */
pid_t confine_fork(enum confine_mode mode, unsigned long extra_ns, struct confine_spawn *sp);
/* sp as two arguments for the worker's command line (read back by
 * confine_arg), async-signal-safe (the child calls it too). */
void confine_spawn_format(const struct confine_spawn *sp, char ns[24], char userns[24]);

enum confine_state { CONFINE_NA, CONFINE_ENFORCED, CONFINE_UNENFORCED };

struct confine_prop {
	const char *name;
	enum confine_state state;
	char by[48];	  /* the layers that hold it */
	char detail[112]; /* what the probe saw */
	bool required;	  /* `required` fails without it */
};

struct confine_report {
	struct confine_prop props[CONFINE_PROPS_MAX];
	size_t n;
	int landlock_abi; /* 0: none */
	bool seccomp_log;
	int userns_errno; /* why the spawn had no user namespace (0: it had, or root) */
};

/* A directory Landlock lets the worker use: the tree beneath fd (an
 * O_PATH one will do), read-only or for every file operation but device
 * nodes and execution. */
struct confine_dir {
	int fd;
	bool ro;
};

#define CONFINE_DIRS_MAX 64

/* What the worker declares. */
struct confine_opts {
	const char *role; /* "net", "vmm", "share" */
	enum confine_mode mode;
	struct confine_spawn spawn;
	rlim_t nofile;
	bool keep_bind_cap; /* root without a user namespace: CAP_NET_BIND_SERVICE stays */
	bool host_net;	    /* it reaches the world: the host's network namespace */
	/* It starts threads after (the VMM's vCPUs): RLIMIT_NPROC stays as
	 * it was, and the filter alone refuses a new process. */
	bool threads;
	/* Its own /proc/self/fd as /proc/self/fd in its empty root (and
	 * nothing else of /proc): the share server reopens its O_PATH handles
	 * through those magic links. */
	bool proc_fds;
	/* Landlock allows these trees and nothing else. */
	struct confine_dir dirs[CONFINE_DIRS_MAX];
	size_t nr_dirs;
	bool seccomp_log;   /* CONFINE_SECCOMP_ENV=log */
	/* The seccomp filter to load last (seccomp.c), with its opaque;
	 * and whether that filter lets it open files (a share server), which
	 * Landlock alone then refuses. */
	int (*load_filter)(void *opaque, bool log, gantry_error_t *err);
	void *filter_opaque;
	bool opens_files;
	bool timing;	/* GANTRY_BOOT_TIMING: log what each layer took */
	bool self_test; /* --self-test: report what holds, then exit */
};

/* A worker's own arguments for its confinement: `--isolation MODE`,
 * `--ns HEX` and `--userns-errno N` (confine_spawn_format's), and
 * `--self-test`, into o. The count of argv words taken (2, 1 for
 * --self-test), 0 when opt is not one of them, -1 when its value is bad
 * or missing. */
int confine_arg(struct confine_opts *o, const char *opt, const char *val);
/* A worker's command line: confine_arg's words into o, and each other
 * word handed to own with the nr words after it (rest), which returns how
 * many it took counting opt, or 0 or -1 for a word it does not know or a
 * bad value. 0, or -1 on any word nobody took. */
typedef int (*confine_own_arg)(void *opaque, const char *opt, char **rest, int nr);
int confine_args_with(struct confine_opts *o, int argc, char **argv, confine_own_arg own,
		      void *opaque);
/* A worker whose whole command line is confine_arg's and `--self-test`
 * (*self_test set): 0, or -1 on any other word or a bad value. */
int confine_args(struct confine_opts *o, int argc, char **argv, bool *self_test);

/* What glibc and jansson open on their first use (the time zone, the
 * heap's shrink check, the JSON hash seed), done now: called before a
 * seccomp filter or an empty root, so that no later call opens a file.
 * Sets TZ to UTC0 where it is unset (our logs are in UTC). */
void confine_prime_libc(void);

/* `gantry ROLE --self-test [--isolation MODE]` as typed by hand (argv
 * from --self-test on): start ROLE again as its spawner would, in
 * namespaces (extra_ns too), with --self-test and the spawn's arguments,
 * and return its exit status. -1: not that form (the worker's own
 * arguments); 2: a bad mode, said on stderr. */
int confine_self_test_again(int argc, char **argv, const char *role, unsigned long extra_ns);

/* The tmpfs that becomes the worker's root, mounted on CONFINE_ROOT in
 * its mount namespace before its set-up, so what it makes there (a Unix
 * socket) is still there, as /NAME, once it is the root. False: the
 * worker will have no root of its own (no mount namespace, mode off). */
#define CONFINE_ROOT "/tmp"
bool confine_root_prepare(const struct confine_opts *o);

/* Apply every layer and probe each; never fails outright: what could
 * not be applied is in r as unenforced. */
void confine_apply(const struct confine_opts *o, struct confine_report *r);
/* The first property `required` needs that does not hold, or NULL. */
const struct confine_prop *confine_missing(const struct confine_report *r);
/* confine_apply and the verdict: the report as JSON (role o->role), or
 * NULL: with mode off (why empty), or when the mode is required and a
 * property does not hold (why: one line naming it, what the probe saw and
 * what to change). CONFINE_SECCOMP_ENV decides o->seccomp_log. */
json_t *confine_run(struct confine_opts *o, gantry_error_t *err);
/* --self-test: confine_run from the root prepared, then its report, or
 * {"mode":"off"}, or {"ok":false,"error":WHY} on stdout; 1 for the last. */
int confine_self_test(struct confine_opts *o);
/* {"version","role","mode","landlock_abi","seccomp","properties":[...],"degraded":[...]} */
json_t *confine_report_json(const struct confine_report *r, const char *role,
			    enum confine_mode mode);

/* probe.c: `gantry __seccomp-probe net CALL`. */
#define CONFINE_PROBE_ROLE "__seccomp-probe"
int confine_probe_main(int argc, char **argv);

/* seccomp.c: the network worker's filter (after its set-up). 0, or -1
 * with why filled. */
int confine_filter_net(bool log, gantry_error_t *err);
/* The egress worker's (egress/egress.h). */
int confine_filter_egress(bool log, gantry_error_t *err);
/* The MCP gateway's (mcp/gateway.h). */
int confine_filter_mcp(bool log, gantry_error_t *err);

#endif
