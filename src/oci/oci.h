/* gantry-oci: the runc command line (podman/conmon, containerd's runc
 * shim), each container a microVM made through the sandbox lifecycle.
 * This header is the front end's own: an OCI bundle's config.json read
 * into what the lifecycle takes (spec.c), and a container's record under
 * the runtime's --root (state.c). The verbs are in main.c. */
#ifndef GANTRY_OCI_OCI_H
#define GANTRY_OCI_OCI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "proto/agent.h"

#define OCI_CONFIG_MAX	  (4u << 20) /* config.json's bytes */
#define OCI_ARGS_MAX	  4096
#define OCI_ENV_MAX	  4096
#define OCI_MOUNTS_MAX	  256
#define OCI_SPEC_VERSION  "1.0.2"
#define OCI_ANNOT_CPUS	  "io.gantry.cpus"
#define OCI_ANNOT_MEM	  "io.gantry.mem_mib"
#define OCI_ANNOT_PUBLISH "io.gantry.publish"

/* A bind mount of config.json's that becomes a share: a host directory
 * at a container path. */
struct oci_bind {
	char *source, *destination;
	bool ro;
};

/* The part of a bundle's config.json a VM carries out. */
struct oci_spec {
	char **args; /* process.args, NULL-terminated; NULL without a process */
	size_t nargs;
	char **env;
	size_t nr_env;
	char *cwd;
	uint32_t uid, gid;
	uint32_t *gids; /* process.user.additionalGids */
	size_t ngids;
	bool has_gids;
	struct proto_rlimit rlimits[PROTO_MAX_RLIMITS]; /* process.rlimits */
	size_t nrlimits;
	bool has_rlimits;
	uint64_t caps[PROTO_CAPS_SETS]; /* process.capabilities, by PROTO_CAPS_* */
	bool has_caps;
	bool terminal;
	char *root;	/* root.path made absolute against the bundle */
	bool readonly;	/* root.readonly */
	char *hostname; /* NULL: none */
	struct oci_bind *binds;
	size_t nr_binds;
	char **tmpfs; /* mounts of type tmpfs, as the lifecycle stores them */
	size_t nr_tmpfs;
	size_t skipped; /* mounts the guest makes its own (proc, tmpfs...) or cannot (files) */
	uint64_t cpus, mem_mib; /* 0: the default */
	/* linux.namespaces' network entry: none (the caller's network),
	 * without a path (a new, empty one: podman's --network none), or with
	 * the path of one to join (a pod's, set up by podman or a CNI plugin) */
	bool netns;
	char *netns_path;
	json_t *annotations;	/* an object, never NULL */
};

/* Parse config.json (text, len bytes) of the bundle at bundle (absolute):
 * 0, or -1 with a one-line error naming the field that is wrong. */
int oci_spec_parse(const char *text, size_t len, const char *bundle, struct oci_spec *s,
		   gantry_error_t *err);
struct sandbox_opts;
/* What the lifecycle takes for s's container named id (o is initialised
 * here; sandbox_opts_free it): its root, hostname, size, network, the
 * ports io.gantry.publish names and the binds as shares; err names what
 * is wrong. */
void oci_sandbox_opts(const struct oci_spec *s, const char *id, struct sandbox_opts *o,
		      gantry_error_t *err);
/* config.json (or exec's --process file) parsed, its RLIM_INFINITY
 * (18446744073709551615, past what the JSON reader takes) read as -1. */
json_t *oci_json_load(const char *text, size_t len, const char *what, gantry_error_t *err);
/* A process object (config.json's, or exec --process's file) into s's
 * args, env, cwd, user and terminal. */
int oci_process_parse(json_t *p, struct oci_spec *s, gantry_error_t *err);
/* The same from <bundle>/config.json. */
int oci_spec_load(const char *bundle, struct oci_spec *s, gantry_error_t *err);
void oci_spec_free(struct oci_spec *s);
/* A container ID that is also a sandbox name: [A-Za-z0-9_.-], at most
 * SANDBOX_NAME_MAX bytes, not starting with '-', not . or .. (runc takes
 * '+' too; podman's and containerd's IDs have none). */
bool oci_id_valid(const char *id);
#define OCI_ID_RULE "want letters, digits, '.', '_' and '-', at most 64, not starting with '.' or '-'"
/* A signal as kill takes it: a number, or a name with or without SIG
 * (KILL, SIGTERM); 0 when it is none. */
int oci_signal_parse(const char *s);

/* A container's record, ROOT/ID/state.json. */
struct oci_state {
	char *id, *bundle, *root, *created;
	pid_t pid;	    /* the holder: lives as long as the container's process */
	uint64_t pid_start; /* its start time (/proc/PID/stat field 22): pid reuse */
	bool started;	    /* `start` ran */
	json_t *annotations;
};

enum oci_status { OCI_CREATING, OCI_CREATED, OCI_RUNNING, OCI_STOPPED, OCI_PAUSED };
/* Its VM is up: created, running or paused. */
#define OCI_ALIVE(s) ((s) == OCI_CREATED || (s) == OCI_RUNNING || (s) == OCI_PAUSED)

/* ROOT/ID, made with mode 0700 when make. */
int oci_state_dir(const char *root, const char *id, bool make, char **out, gantry_error_t *err);
int oci_state_load(const char *dir, struct oci_state *st, gantry_error_t *err);
int oci_state_save(const char *dir, const struct oci_state *st, gantry_error_t *err);
void oci_state_free(struct oci_state *st);
/* What the record says now: its holder alive (the same process that
 * wrote it) is created or running, or paused while its sandbox is (the
 * lifecycle's SANDBOX_FROZEN), else stopped. */
enum oci_status oci_status_of(const struct oci_state *st);
const char *oci_status_name(enum oci_status s);
/* The runtime-spec state document `state` prints. */
json_t *oci_state_json(const struct oci_state *st);
/* pid's start time, or 0 when it is gone. */
uint64_t oci_pid_start(pid_t pid);

/* --- the front end's own (main.c, holder.c) ---------------------------- */

#define OCI_HOLDER_SOCK "holder.sock" /* in ROOT/ID: `start` dials it */

struct oci_container {
	const char *id, *dir; /* dir: ROOT/ID */
	struct oci_spec spec;
};

int oci_main(int argc, char **argv);

/* Run the bundle's config.json hooks of kind (prestart, createRuntime,
 * poststart, poststop) with st's state document on their stdin, in
 * order; the first that fails stops them, and err says which and why. */
int oci_hooks_run(const char *bundle, const char *kind, const struct oci_state *st,
		  gantry_error_t *err);

/* The pod's sandbox (pause) container, handed to crun (delegate.c). */
struct oci_delegation {
	const char *crun; /* crun's name or path */
	const char *root, *log, *log_format;
};
/* Whether config.json's annotations make it Kubernetes' pod sandbox. */
bool oci_is_pod_sandbox(json_t *annotations);
/* Whether ROOT/ID was handed to crun. */
bool oci_delegated(const char *root, const char *id);
/* Run crun's verb with argv (this verb's arguments, as given) and its
 * state under ROOT/.crun; create makes and marks ROOT/ID first (an ID
 * that has one exists: refused), a delete that succeeds removes it.
 * crun's exit status. */
int oci_delegate(const struct oci_delegation *d, const char *verb, const char *id, int argc,
		 char **argv);
/* One line on stderr ("gantry-oci: ..."), and in --log: 1. */
int oci_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A terminal for the process: a new pty whose master is sent over the
 * unix socket at socket_path (SCM_RIGHTS, runc's "detached new
 * terminal"), its slave in *slave. */
int oci_console_make(const char *socket_path, int *slave, gantry_error_t *err);
/* Fork the holder of c (o: its sandbox; slave: its terminal, or -1 for
 * this process's stdio) and wait until its sandbox is up: *pid, or -1
 * with why (the holder has exited then). */
int oci_holder_spawn(const struct oci_container *c, const struct sandbox_opts *o, int slave,
		     pid_t *pid, gantry_error_t *err);
/* Tell the holder in dir to run its process: 0 once it runs in the
 * guest, or (*none) when config.json set none, and the container ends;
 * -1 with *why (or errno) when it could not run. */
int oci_holder_start(const char *dir, bool *none, char **why);
/* Run s's process in sandbox id with this process's stdio and signals:
 * its status (128+n for a signal n; 255 when it could not run). start_fd
 * (-1: none) gets "ok" once it runs, or "error: WHY"; closed either way.
 * init: the container's own process, whose end ends every other process
 * in the container (an exec's is not). */
int oci_run_process(const char *id, const struct oci_spec *s, int start_fd, bool init);
/* The same in a child (on the terminal slave when it is >= 0), which
 * exits with that status: its pid. */
pid_t oci_exec_spawn(const char *id, const struct oci_spec *s, int slave);

#endif
