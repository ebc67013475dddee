/* A sandbox's guest VM, transient (one-shot `gantry exec`) or persistent (a
 * supervisor's): the one recipe that turns a sandbox's settings into a VMM
 * configuration, and the VM run on a thread of its own, the guest's dials
 * to host ports handed to the servers that opened a door for them
 * (common/door.h), the agent's first. A device or a kernel
 * parameter every guest gets is added in machine_config(), once. */
#ifndef GANTRY_SANDBOX_MACHINE_H
#define GANTRY_SANDBOX_MACHINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "agent/session.h"
#include "common/error.h"
#include "net/spawn.h"
#include "sandbox/state.h"
#include "sandbox/egressworker.h"
#include "sandbox/shareworker.h"
#include "sandbox/vmmworker.h"
#include "share/spec.h"
#include "virtio/devices.h"
#include "machine/vmm.h"

/* The kernel's own bound on its command line (x86: COMMAND_LINE_SIZE). */
#define MACHINE_APPEND_MAX 2048

struct fs_server;

/* The virtio-fs tag gantry-init mounts. */
#define MACHINE_SHARES_TAG "gantry-shares"
/* The export an OCI bundle's rootfs is served as (gantry.root=) */
#define MACHINE_ROOT_TAG ".oci-root"

/* A share at boot: its spec and its host directory, opened once. */
struct machine_share {
	struct share_spec sp;
	int fd;
};

/* A share added while the guest runs, where the shares are in a worker:
 * served by a share worker of its own, confined to that one directory,
 * behind the first (share/routes.h). */
struct machine_live_share {
	char *tag; /* NULL: a free slot */
	struct share_worker w;
};

struct machine {
	char *kernel, *sysroot;
	char append[MACHINE_APPEND_MAX];
	struct vmm_config cfg;
	struct agent *agent; /* the guest agent's two doors, then its link */
	/* The doors of the guest's host ports, its caller's (NULL: `gantry
	 * run`'s, whose guest dials <vsock_dir>/P.sock). */
	struct doors *doors;
	pthread_t thread;
	bool started;
	atomic_bool ended; /* vmm_run returned */
	int done_fd;	   /* eventfd, readable once it has */
	int rc, status;	   /* vmm_run's */
	gantry_error_t err;
	bool net;     /* a network worker for virtio-net */
	char **ports; /* its published ports at boot */
	size_t nr_ports;
	json_t *net_policy; /* and its egress policy (NULL: the default) */
	bool allow_local_net;
	char *proxy; /* the workload's proxy URL, resolved when the worker starts */
	bool proxy_enforce;
	char *net_log;	  /* its log: <dir>/worker-net.log */
	bool net_started; /* net_worker is ours to stop */
	struct net_worker net_worker;
	struct net_worker_opts net_opts; /* what it was started with */
	/* The hosts injected secrets are bound to, and the egress worker
	 * that takes their HTTPS (egressworker.h); none: no worker. */
	char **inject_hosts;
	size_t nr_inject;
	char **inject_files; /* the files such secrets are read from */
	size_t nr_inject_files;
	char *egress_log;
	struct egress_worker egress;
	enum confine_mode isolation; /* the workers' (confine/confine.h) */
	char *isolation_path;	     /* <dir>/isolation.json: what holds */
	json_t *workers_gone;	     /* role -> how it ended, once a worker has */
	struct fs_server *shares; /* the share server, in this process; NULL: none here */
	struct virtio_fs_handler fs_handler;
	bool fs_device;	   /* the VM has the virtio-fs device */
	bool shares_live;  /* shares may come and go while it runs */
	struct machine_share *boot_shares;
	size_t nr_boot_shares;
	/* isolation not off: the VM runs in a confined worker (vmmworker.h)
	 * and, with the virtio-fs device, the share server in another
	 * (shareworker.h); else both on threads of this process. */
	bool worker;
	struct vmm_worker vmm_worker;
	struct share_worker share_worker;
	bool share_started; /* share_worker is ours to stop */
	struct machine_live_share *live_shares; /* FS_MAX_EXPORTS slots, once one is added */
	unsigned int last_route;		/* the last one's route: never one again */
	bool transient; /* a one-shot exec's: nothing of it outlives its exit */
	/* Restoring (cfg.restore_state_fd) a clone: the hostname its guest
	 * takes instead of the saved one's (NULL: the same machine). */
	const char *renew_hostname;
	/* `gantry run`'s: the user's kernel and devices, no guest agent, no
	 * sandbox state; its network worker logs to our stderr. */
	bool bare;
	/* A template's boot (sandbox/template.h), where template is set: the
	 * kernel gets its own parameters and gantry.template=1,
	 * template_config the gantry.* rest, sent with RENEW once HELLO is
	 * in. A template still being written (its tmp set) is saved first
	 * (its files are cfg's save files), else the VM goes on from it (its
	 * restore files). */
	bool template_renewed; /* its guest took RENEW: what fails after is no template's */
	struct sandbox_template *template; /* borrowed */
	char *template_config;
	/* A live save (machine_checkpoint): the VM's word that its save is
	 * written (ckpt_error "" or why not), and for a VM on a thread here
	 * the word to run on. Eventfds, made by machine_start for a VM that
	 * saves. */
	int ckpt_fd, ckpt_go_fd;
	atomic_int ckpt_state; /* machine.c's CKPT_* */
	char ckpt_error[256];  /* written before ckpt_state turns saved */
	/* A pause without a save (machine_freeze): the VM's word that its
	 * vCPUs are parked or run, as frozen says. An eventfd from
	 * machine_start. */
	int freeze_fd;
	atomic_bool frozen;
};

/* A machine with nothing in it yet: machine_free may be called on it. */
#define MACHINE_NONE                                                                               \
	((struct machine){ .done_fd = -1,                                                          \
			   .cfg.stop_fd = -1,                                                      \
			   .ckpt_fd = -1,                                                          \
			   .ckpt_go_fd = -1,                                                       \
			   .freeze_fd = -1,                                                        \
			   .vmm_worker = VMM_WORKER_NONE,                                          \
			   .egress = EGRESS_WORKER_NONE,                                           \
			   .share_worker = SHARE_WORKER_NONE })

/* What `gantry run` asks for: in cfg the kernel, initrd, command line,
 * disks, vCPUs, memory, console and vsock directory (the strings stay the
 * caller's and must outlive the machine); a network with its ports
 * (canonical specs, host ports chosen); shares (canonical specs, each at
 * its default guest path); the workers' isolation. */
struct machine_run {
	struct vmm_config cfg;
	bool net;
	char *const *ports;
	size_t nr_ports;
	bool allow_local_net;
	char *const *shares;
	size_t nr_shares;
	enum confine_mode isolation;
};

/* The recipe: system root, image, writable layer, resources and kernel
 * command line of sb's VM, with vsock.sock and (console_fd < 0)
 * console.log in dir. Its guest dials the host ports whose servers open
 * a door in doors (which must outlive the machine): the agent's, which
 * machine_start opens, and the caller's. A transient sandbox's guest has
 * no persistent container: its one process is the session. */
int machine_config(struct machine *m, const struct sandbox *sb, const char *dir, int console_fd,
		   struct doors *doors, gantry_error_t *err);
/* A guest's dial to host port (the vsock device's connect, in this
 * process or asked by the VMM worker): a connection to the server that
 * opened a door for it in m->doors, or -1. */
int machine_dial(void *machine, uint32_t port);
/* The hosts the injected secrets among specs (secret/spec.h) are bound
 * to, for the egress worker the machine starts (machine_config takes the
 * sandbox's; a one-shot's secrets are its process's). */
int machine_inject(struct machine *m, char *const *specs, size_t n, gantry_error_t *err);
/* The files of m->inject_files hidden in each share that holds them (the
 * host's root of gantry wrap, a worktree): the guest would read the
 * values there. */
int machine_hide_inject_files(struct machine *m, gantry_error_t *err);
/* The recipe of `gantry run`'s VM: r as it is, through the same workers
 * and devices as a sandbox's. */
int machine_config_run(struct machine *m, const struct machine_run *r, gantry_error_t *err);
/* The share server for shares (canonical specs), in this process, and
 * the virtio-fs device and command line that bring them to the guest
 * (machine_shares.c); called by machine_config. live: the device and
 * server even without shares, for shares added while it runs. root (may
 * be NULL): a host directory served as the container's root (an OCI
 * bundle's rootfs, MACHINE_ROOT_TAG), read and written in place; with
 * host_root, the host's own "/" (gantry wrap), served read-only. */
int machine_shares(struct machine *m, char *const *shares, size_t n, bool live,
		   const char *root, bool host_root, gantry_error_t *err);
/* The container's tmpfs mounts (sandbox_tmpfs_parse's specs) on the
 * guest's command line, gantry.tmpfs=FLAGS:SIZE_KIB:MODE:PATH with PATH
 * in base64url (guest/shares.h reads them). */
int machine_tmpfs(struct machine *m, char *const *tmpfs, size_t n, gantry_error_t *err);
/* Host sockets relayed into the container (oneshot_sockets.h), each
 * gantry.sock=PATH on the guest's command line, PATH in base64url; with
 * oauth, gantry.oauth=1 (the OAuth bridge's replays, oneshot_oauth.h);
 * with mcpfs, gantry.mcpfs=MCPFS (the MCP gateway's fs server). */
int machine_sockets(struct machine *m, char *const *paths, size_t n, bool oauth,
		    const char *mcpfs, gantry_error_t *err);
/* Check sp's host directory (share_host_check), open it and add it to
 * srv as an export. */
struct share_spec;
int machine_share_export(struct fs_server *srv, const struct share_spec *sp, gantry_error_t *err);
/* The one virtio-fs device (tag gantry-shares) in cfg, its requests to
 * srv through h (which must live as long as the VM). */
void machine_share_device(struct fs_server *srv, struct virtio_fs_handler *h,
			  struct vmm_config *cfg);
void machine_shares_free(struct machine *m);
/* Its shares as gantry-init reads gantry.share= values (TAG:ro|rw:B64PATH),
 * NULL-terminated (strv_free), *n of them: what a restored guest binds. */
char **machine_share_tokens(const struct machine *m, size_t *n);
/* A running VM's share server, in this process or the share worker: whether it has one, an
 * export added (sp's host directory checked and opened here), one taken
 * out at once, and the handles the guest holds open beneath one. */
bool machine_shares_running(const struct machine *m);
int machine_share_add(struct machine *m, const struct share_spec *sp, gantry_error_t *err);
void machine_share_drop(struct machine *m, const char *tag);
size_t machine_share_handles(struct machine *m, const char *tag);

/* Check the configuration against this host, open the guest agent's
 * doors (a sandbox's), start the network worker (a networked VM) and the
 * confined VMM and share workers (isolation not off), and boot on a
 * thread of its own. */
int machine_start(struct machine *m, gantry_error_t *err);
/* Wait for the agent's READY, then shut the control port's door (the
 * guest has its one connection); a VMM that failed meanwhile wins the
 * error. */
int machine_wait_ready(struct machine *m, int timeout_ms, gantry_error_t *err);
/* End the VM now, without asking the guest (see vmm_config.stop_fd). */
/* End the VM with a save first (vmm_config.save_state_fd's files). */
void machine_save_stop(struct machine *m);
/* Save the running VM into its save files (vmm_config.save_state_fd's)
 * and leave it paused, its vCPUs and devices still, until
 * machine_checkpoint_go: 0 then. -1 (why in err) when the save failed,
 * took longer than timeout_ms or the VM ended: the VM runs on then, or
 * is gone. */
int machine_checkpoint(struct machine *m, int timeout_ms, gantry_error_t *err);
/* The paused VM runs on; state_fd and mem_fd (>= 0) are the files its
 * next save writes, the ones just written having been taken away (-1:
 * the same files again). They stay the caller's: a VMM worker gets
 * copies, a VM on a thread here uses them (the caller closes the old
 * ones, which were its too). */
void machine_checkpoint_go(struct machine *m, int state_fd, int mem_fd);
/* Park the running VM's vCPUs (freeze) or let them run on: 0 once it
 * holds, or -1 (why in err) when the VM ended or did not answer within
 * timeout_ms. Its devices run on meanwhile, and a stop still ends it. */
int machine_freeze(struct machine *m, bool freeze, int timeout_ms, gantry_error_t *err);
/* The VM thread's side: its vCPUs are parked, or run. */
void machine_frozen(struct machine *m, bool frozen);
/* The VM thread's side: the live save is written (error NULL) or not. */
void machine_checkpoint_saved(struct machine *m, const char *error);
void machine_kill(struct machine *m);
/* isolation.json: what holds for each worker that touches guest data
 * (the live shares' as "share:TAG"); nothing for `gantry run`'s. */
void machine_isolation_save(struct machine *m);
/* What isolation.json holds: {version, mode, roles, degraded}. */
json_t *machine_isolation(struct machine *m);
/* A worker of role ("net", "share") ended while the VM runs: say how in
 * isolation.json (what `inspect` shows), and what it means for the guest. */
void machine_worker_gone(struct machine *m, const char *role, const char *how,
			 const char *meaning);
/* Wait for the VM thread; then m->rc, m->status and m->err say how it ended. */
void machine_join(struct machine *m);
/* Join (killing the VM first) if it runs, stop the network worker, close
 * and free everything. */
void machine_free(struct machine *m);

#endif
