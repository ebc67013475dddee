/* The VMM worker's own side (see worker.h): take the configuration and
 * the descriptors, set the VM up, confine ourselves, and run it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/json.h"
#include "common/log.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "confine/confine.h"
#include "confine/vmm_filter.h"
#include "machine/devices.h"
#include "machine/vmm.h"
#include "machine/worker.h"
#include "share/rpc.h"
#include "virtio/devices.h"
#include "worker/worker.h"

#define CHAN_FD		3
#define CONFIG_WAIT_MS	10000
#define CONNECT_WAIT_MS 2000

struct worker {
	struct confine_opts confine;
	struct vmm_config cfg;
	struct machine_take take; /* the handover, and what its devices lend */
	json_t *config;
	int fds[UNIX_FDS_MAX];
	size_t nr_fds;
	pthread_mutex_t chan_lock; /* the I/O thread's dials, then our exit message */
	uint64_t next_id;
	bool ready_sent;
	const struct vmm_filter_opts *filters; /* vmm_run's, for the base filter */
};

/* One message; without descriptors a write(), which every thread's
 * filter allows (the main thread's says how the VM ended). */
static void send_json(int fd, json_t *j)
{
	cleanup_free char *text = json_dumps(j, JSON_COMPACT);

	json_decref(j);
	if (text && write(fd, text, strlen(text)) < 0)
		log_warn("channel: %s", strerror(errno));
}

static json_t *recv_json(int fd, int ms, int *fds, size_t max_fds, size_t *nr_fds)
{
	bool eof;

	return worker_recv_json_fds(fd, ms, fds, max_fds, nr_fds, &eof);
}

static bool chan_hung_up(void)
{
	struct pollfd p = { .fd = CHAN_FD, .events = 0 };

	return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

/* ---- the guest's dials: asked of the caller ---------------------------------------- */

static int dial(void *opaque, uint32_t port)
{
	struct worker *w = opaque;
	int got[UNIX_FDS_MAX], fd = -1;
	size_t n;
	bool eof;
	json_t *a;

	pthread_mutex_lock(&w->chan_lock);
	a = worker_request_fds(CHAN_FD, &w->next_id,
			       json_pack("{s:s,s:I}", "op", "connect", "port", (json_int_t)port),
			       NULL, 0, CONNECT_WAIT_MS, got, ARRAY_SIZE(got), &n, &eof);
	pthread_mutex_unlock(&w->chan_lock);
	if (a && json_is_true(json_object_get(a, "ok")) && n == 1)
		fd = got[0];
	else
		for (size_t i = 0; i < n; i++)
			close(got[i]);
	json_decref(a);
	return fd;
}

/* ---- a live save: told, and the next save's files taken ----------------------------------- */

/* On the main thread, the VM paused: {"op":"saved"[,"error":LINE]}, then
 * the caller's {"op":"go"} lets it run on, with the next save's state
 * and memory files (none: the same files again). The I/O thread is
 * parked, so no dial reads the channel meanwhile; a late answer to an
 * earlier dial is dropped. */
static void checkpointed(void *opaque, const char *error)
{
	struct worker *w = opaque;

	pthread_mutex_lock(&w->chan_lock);
	send_json(CHAN_FD, json_pack("{s:s,s:s?}", "op", "saved", "error", error));
	for (;;) {
		int got[UNIX_FDS_MAX];
		size_t n = 0;
		bool eof = false;
		json_t *j = worker_recv_json_fds(CHAN_FD, -1, got, ARRAY_SIZE(got), &n, &eof);
		const char *op = json_string_value(json_object_get(j, "op"));
		bool go = op && strcmp(op, "go") == 0;

		if (go && n == 2) {
			close(w->cfg.save_state_fd);
			close(w->cfg.save_mem_fd);
			w->cfg.save_state_fd = got[0];
			w->cfg.save_mem_fd = got[1];
			n = 0;
		}
		for (size_t i = 0; i < n; i++)
			close(got[i]);
		json_decref(j);
		/* A caller gone: we go with it (PDEATHSIG). Anything else
		 * (a late dial's answer, a message that does not read) is not
		 * the word to go on. */
		if (go || eof)
			break;
	}
	pthread_mutex_unlock(&w->chan_lock);
}

/* On the main thread, the vCPUs parked or let go (VMM_FREEZE, VMM_THAW):
 * {"op":"frozen","frozen":B}. */
static void frozen(void *opaque, bool is)
{
	struct worker *w = opaque;

	pthread_mutex_lock(&w->chan_lock);
	send_json(CHAN_FD, json_pack("{s:s,s:b}", "op", "frozen", "frozen", is));
	pthread_mutex_unlock(&w->chan_lock);
}

/* ---- set-up ---------------------------------------------------------------------------- */

/* The caller's terminal, read by the serial console as its stdin. */
static int setup_console_input(struct worker *w, gantry_error_t *err)
{
	int fd = machine_take_fd(&w->take, "console input", true, err);

	if (fd < 0)
		return -1;
	w->cfg.console_in = fd;
	w->cfg.console_input = true;
	return 0;
}

static int setup(struct worker *w, gantry_error_t *err)
{
	json_t *c = w->config;
	struct machine_take *t = &w->take;
	bool restore = json_is_true(json_object_get(c, "restore"));
	uint64_t cpus, mem;

	w->cfg = (struct vmm_config){ .stop_fd = -1 };
	*t = (struct machine_take){ .cfg = &w->cfg,
				    .fds = w->fds,
				    .nr_fds = w->nr_fds,
				    .vsock = { .connect = dial, .opaque = w } };
	w->cfg.kernel = json_string_value(json_object_get(c, "kernel"));
	w->cfg.append = json_string_value(json_object_get(c, "append"));
	if ((w->cfg.kernel == NULL && !restore) || w->cfg.append == NULL ||
	    jsonh_u64(c, "cpus", true, &cpus, err) < 0 || jsonh_u64(c, "mem", true, &mem, err) < 0)
		return gantry_error(err, 0, "a bad configuration");
	w->cfg.cpus = (unsigned int)MIN(cpus, (uint64_t)UINT_MAX);
	w->cfg.mem_mib = mem;
	w->cfg.timing = json_is_true(json_object_get(c, "timing"));
	w->cfg.small_pages = json_is_true(json_object_get(c, "small_pages"));
	if (json_is_true(json_object_get(c, "kvm")) &&
	    (w->cfg.kvm_fd = machine_take_fd(t, "KVM device", false, err)) < 0)
		return -1;
	if (w->cfg.kernel && (w->cfg.kernel_fd = machine_take_fd(t, "kernel", false, err)) < 0)
		return -1;
	w->cfg.initrd = json_string_value(json_object_get(c, "initrd"));
	if (w->cfg.initrd && (w->cfg.initrd_fd = machine_take_fd(t, "initrd", false, err)) < 0)
		return -1;
	if ((w->cfg.console_fd = machine_take_fd(t, "console", true, err)) < 0)
		return -1;
	if (json_is_true(json_object_get(c, "console_input")) && setup_console_input(w, err) < 0)
		return -1;
	if ((w->cfg.stop_fd = machine_take_fd(t, "stop event", true, err)) < 0)
		return -1;
	if (json_is_true(json_object_get(c, "save")) &&
	    ((w->cfg.save_state_fd = machine_take_fd(t, "state file", true, err)) < 0 ||
	     (w->cfg.save_mem_fd = machine_take_fd(t, "memory file", true, err)) < 0))
		return -1;
	w->cfg.frozen = frozen;
	w->cfg.frozen_opaque = w;
	if (w->cfg.save_state_fd > 0) {
		w->cfg.checkpointed = checkpointed;
		w->cfg.checkpoint_opaque = w;
	}
	if (restore &&
	    ((w->cfg.restore_state_fd = machine_take_fd(t, "state file", true, err)) < 0 ||
	     (w->cfg.restore_mem_fd = machine_take_fd(t, "memory file", true, err)) < 0))
		return -1;
	w->cfg.profile = json_string_value(json_object_get(c, "profile"));
	if (w->cfg.profile &&
	    (w->cfg.profile_fd = machine_take_fd(t, "guest profile", true, err)) < 0)
		return -1;
	return machine_devices_take(json_object_get(c, "devices"), t, err);
}

static int load_filter(void *opaque, bool log, gantry_error_t *err)
{
	struct worker *w = opaque;
	struct vmm_filter_opts f = *w->filters;

	f.log = log;
	return confine_filter_vmm(VMM_THREAD_BASE, &f, err);
}

/* Called by vmm_run once the VM is set up: confine (the base seccomp
 * filter last), and say so. */
static int setup_done(void *opaque, const struct vmm_filter_opts *filters, gantry_error_t *err)
{
	struct worker *w = opaque;
	json_t *report;

	/* Set up: what only set-up needed goes. */
	for (size_t i = 0; i < w->nr_fds; i++)
		if (w->fds[i] >= 0)
			close(w->fds[i]);
	w->nr_fds = 0;
	/* Guest RAM to the share worker, before any request can come. */
	if (w->cfg.fs.handler) {
		int r = share_rpc_client_send_mem(&w->take.rpc);

		if (r < 0)
			return gantry_error(err, -r, "guest memory to the share worker: %s",
					    strerror(-r));
	}
	w->filters = filters;
	w->confine.load_filter = filters ? load_filter : NULL;
	w->confine.filter_opaque = w;
	report = confine_run(&w->confine, err);
	if (report == NULL && *err)
		return -1;
	pthread_mutex_lock(&w->chan_lock);
	send_json(CHAN_FD, worker_ready_msg(NULL, report));
	json_decref(report);
	w->ready_sent = true;
	pthread_mutex_unlock(&w->chan_lock);
	return 0;
}

static int parse_args(int argc, char **argv, struct worker *w, bool *self_test)
{
	if (confine_args(&w->confine, argc, argv, self_test) < 0)
		return -1;
	w->confine.role = "vmm";
	w->confine.threads = true;
	w->confine.nofile = VMM_WORKER_NOFILE;
	return 0;
}

int vmm_worker_main(int argc, char **argv)
{
	static struct worker w = { .chan_lock = PTHREAD_MUTEX_INITIALIZER };
	double t0 = now_ms_frac();
	gantry_error_t err = NULL;
	bool self;
	int rc, status = 0;

	log_init("vmm-worker", -1);
	/* Started by hand: started again as a sandbox starts it. */
	if ((rc = confine_self_test_again(argc, argv, VMM_WORKER_ROLE,
					   CLONE_NEWNET | CONFINE_ROOT_UNPRIVILEGED)) >= 0)
		return rc;
	if (parse_args(argc, argv, &w, &self) < 0) {
		log_error("%s is for Gantry's own use", VMM_WORKER_ROLE);
		return 2;
	}
	if (self) {
		/* As for a sandbox's VM with shares: served by the share worker. */
		static const struct vmm_filter_opts as_sandbox = { .fs = true, .fs_remote = true };

		w.filters = &as_sandbox;
		w.confine.load_filter = load_filter;
		w.confine.filter_opaque = &w;
		return confine_self_test(&w.confine);
	}
	/* We die with the caller; one that died before this line has hung
	 * up the channel. A caller that hangs up before sending the
	 * configuration gave up (no KVM, say) and says why itself. */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (chan_hung_up())
		return 1;
	/* Our own /proc/self/fd in the root to be, before anything is open. */
	confine_root_prepare(&w.confine);
	w.config = recv_json(CHAN_FD, CONFIG_WAIT_MS, w.fds, ARRAY_SIZE(w.fds), &w.nr_fds);
	if (w.config == NULL) {
		if (!chan_hung_up())
			log_error("no configuration came");
		return 1;
	}
	rc = setup(&w, &err);
	w.confine.timing = w.cfg.timing;
	if (w.cfg.timing)
		log_always("configuration %.1f ms after main", now_ms_frac() - t0);
	if (rc == 0) {
		/* Off: nothing confined, the threads' filters too. */
		w.cfg.confine_threads = w.confine.mode != CONFINE_OFF;
		w.cfg.confine_log = confine_seccomp_log();
		w.cfg.setup_done = setup_done;
		w.cfg.setup_opaque = &w;
		rc = vmm_run(&w.cfg, &status, &err);
	}
	pthread_mutex_lock(&w.chan_lock);
	if (!w.ready_sent)
		send_json(CHAN_FD, worker_ready_msg(gantry_error_str(err), NULL));
	else
		send_json(CHAN_FD,
			  json_pack("{s:s,s:i,s:i,s:s?}", "op", "exit", "rc", rc, "status", status,
				    "error", rc < 0 ? gantry_error_str(err) : NULL));
	pthread_mutex_unlock(&w.chan_lock);
	gantry_error_free(&err);
	/* The threads and the VM go with the process. */
	_exit(0);
}
