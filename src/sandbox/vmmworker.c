/* Starting and serving the VMM worker (see vmmworker.h): the caller's
 * side. */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/child.h"
#include "common/json.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/text.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "machine/devices.h"
#include "proto/agent.h"
#include "sandbox/machine.h"
#include "sandbox/vmmworker.h"
#include "worker/worker.h"
#include "share/spec.h"
#include "virtio/devices.h"
#include "vmm/vm.h"

#define CONSOLE_CHUNK 65536

/* What it reads of the environment; nothing else of ours goes to it. */
static const char *const worker_env[] = { "GANTRY_LOG", CONFINE_SECCOMP_ENV, VIRTIO_FS_THREADS_ENV,
					  NULL };

/* ---- start ----------------------------------------------------------------------------- */

static int open_given(struct worker_handover *h, const char *path, int flags, const char *what,
		      gantry_error_t *err)
{
	int fd = open(path, flags | O_CLOEXEC, 0600);

	if (fd < 0)
		return gantry_error_errno(err, "%s `%s`", what, path);
	worker_give(h, fd, true);
	return 0;
}

/* The console: the caller's fd as it is, or a pipe into the capped log. */
static int give_console(struct vmm_worker *w, struct machine *m, struct worker_handover *h,
			gantry_error_t *err)
{
	int p[2];

	if (m->cfg.console_fd > 0) {
		worker_give(h, m->cfg.console_fd, false);
		return 0;
	}
	if (console_open(&w->con, m->cfg.console, VMM_CONSOLE_MAX, err) < 0)
		return -1;
	w->con_open = true;
	if (pipe2(p, O_CLOEXEC) < 0)
		return gantry_error_errno(err, "pipe");
	w->console = p[0];
	worker_give(h, p[1], true);
	return 0;
}

static json_t *config_json(struct machine *m, struct worker_handover *h, gantry_error_t *err)
{
	json_t *c, *devices;
	bool console_input = m->cfg.console_input;
	const char *profile = gantry_setting(VMM_PROFILE_ENV);
	int kvm;

	/* Opened here, the device the settings name: the worker could not. */
	if (vmm_check_images(&m->cfg, err) < 0 || vm_kvm_usable(err) < 0)
		return NULL;
	kvm = open(vm_kvm_device(), O_RDWR | O_CLOEXEC);
	if (kvm < 0) {
		vm_kvm_open_error(errno, err);
		return NULL;
	}
	worker_give(h, kvm, true);
	if (m->cfg.kernel && open_given(h, m->cfg.kernel, O_RDONLY, "kernel", err) < 0)
		return NULL;
	if (m->cfg.initrd && open_given(h, m->cfg.initrd, O_RDONLY, "initrd", err) < 0)
		return NULL;
	if (give_console(&m->vmm_worker, m, h, err) < 0)
		return NULL;
	/* Keystrokes: the caller's terminal itself, read by the worker. */
	if (console_input)
		worker_give(h, m->cfg.console_in, false);
	worker_give(h, m->cfg.stop_fd, false);
	/* A snapshot's files, the caller's (machine/vmm.h). */
	if (m->cfg.save_state_fd > 0) {
		worker_give(h, m->cfg.save_state_fd, false);
		worker_give(h, m->cfg.save_mem_fd, false);
	}
	if (m->cfg.restore_state_fd > 0) {
		worker_give(h, m->cfg.restore_state_fd, false);
		worker_give(h, m->cfg.restore_mem_fd, false);
	}
	if (profile && *profile == '\0')
		profile = NULL;
	if (profile && open_given(h, profile, O_WRONLY | O_CREAT | O_TRUNC, "guest profile", err) < 0)
		return NULL;
	/* Then each device's own (machine/devices.c). */
	devices = machine_devices_give(&m->cfg, h, err);
	if (devices == NULL)
		return NULL;
	c = json_pack("{s:s,s:b,s:s?,s:s?,s:s,s:I,s:I,s:b,s:b,s:b,s:b,s:b,s:s?,s:o}", "op",
		      "config", "kvm", kvm >= 0, "kernel", m->cfg.kernel, "initrd", m->cfg.initrd,
		      "append", m->append, "cpus", (json_int_t)m->cfg.cpus, "mem",
		      (json_int_t)m->cfg.mem_mib, "small_pages", m->cfg.small_pages, "timing",
		      m->cfg.timing, "console_input", console_input, "save",
		      m->cfg.save_state_fd > 0, "restore", m->cfg.restore_state_fd > 0, "profile",
		      profile, "devices", devices);
	if (c == NULL)
		gantry_error(err, ENOMEM, "VMM worker: its configuration");
	return c;
}

int vmm_worker_start(struct vmm_worker *w, struct machine *m, gantry_error_t *err)
{
	struct worker_handover h = { .n = 0 };
	double t0 = now_ms_frac();
	json_t *c;
	int r;

	/* Its own network namespace too: it needs none. */
	if (worker_spawn(&(struct worker_spawn){ .role = VMM_WORKER_ROLE, .what = "VMM worker",
						 .mode = m->isolation,
						 .extra_ns = CLONE_NEWNET | CONFINE_ROOT_UNPRIVILEGED,
						 .env = worker_env, .log_fd = -1 },
			 &w->pid, &w->chan, err) < 0)
		return -1;
	c = config_json(m, &h, err);
	if (c == NULL) {
		worker_handover_close(&h);
		return -1;
	}
	r = worker_send_json(w->chan, c, h.fds, h.n);
	worker_handover_close(&h);
	if (r < 0)
		return gantry_error_errno(err, "VMM worker: send its configuration");
	if (m->cfg.timing)
		log_always("VMM worker spawned and configured in %.1f ms", now_ms_frac() - t0);
	return worker_wait_ready(&w->pid, w->chan, VMM_WORKER_READY_MS, "VMM worker",
				 &w->isolation, err);
}

/* ---- serve ----------------------------------------------------------------------------- */

/* `gantry run`'s guest dials host port P: <vsock_dir>/P.sock, any P
 * (the user's directory holds the sockets). */
static int dial_dir(const struct machine *m, uint32_t port)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%u.sock", m->cfg.vsock_dir, port);
	return unix_connect(path, SOCK_NONBLOCK);
}

/* The guest dials host port P: a sandbox's reaches the door a server of
 * ours opened for P (machine_dial), `gantry run`'s a socket. */
static void answer_dial(struct vmm_worker *w, struct machine *m, json_t *req)
{
	json_int_t port = json_integer_value(json_object_get(req, "port"));
	json_t *id = json_object_get(req, "id");
	int fd = -1;

	if (port >= 0 && port <= UINT32_MAX)
		fd = m->doors ? machine_dial(m, (uint32_t)port) : dial_dir(m, (uint32_t)port);
	if (worker_send_json(w->chan,
			     json_pack("{s:s,s:O,s:b}", "op", "connected", "id", id, "ok", fd >= 0),
			     &fd, fd >= 0) < 0)
		log_warn("VMM worker: answer a dial: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
}

static bool readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) > 0;
}

static void relay_console(struct vmm_worker *w)
{
	char buf[CONSOLE_CHUNK];
	ssize_t n = read(w->console, buf, sizeof(buf));

	if (n > 0) {
		console_write(&w->con, buf, (size_t)n);
		return;
	}
	if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
		close(w->console);
		w->console = -1;
	}
}

void vmm_worker_serve(struct vmm_worker *w, struct machine *m, int *rc, int *status,
		      gantry_error_t *err)
{
	bool exited = false, eof = false;
	char why[64];
	int ws;

	*rc = -1;
	*status = 0;
	while (!eof && !exited) {
		struct pollfd p[2] = { { w->chan, POLLIN, 0 }, { w->console, POLLIN, 0 } };
		json_t *j;
		const char *op;

		if (poll(p, w->console >= 0 ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (w->console >= 0 && p[1].revents)
			relay_console(w);
		if (!p[0].revents)
			continue;
		j = worker_recv_json(w->chan, 0, &eof);
		op = json_string_value(json_object_get(j, "op"));
		if (op && strcmp(op, "connect") == 0) {
			answer_dial(w, m, j);
		} else if (op && strcmp(op, "saved") == 0) {
			cleanup_free char *line = json_is_string(json_object_get(j, "error")) ?
							  worker_line(j, "error", "not saved") :
							  NULL;

			machine_checkpoint_saved(m, line);
		} else if (op && strcmp(op, "frozen") == 0) {
			machine_frozen(m, json_is_true(json_object_get(j, "frozen")));
		} else if (op && strcmp(op, "exit") == 0 && !exited) {
			exited = true;
			*rc = (int)json_integer_value(json_object_get(j, "rc"));
			*status = (int)json_integer_value(json_object_get(j, "status"));
			if (*rc < 0) {
				cleanup_free char *line = worker_line(j, "error", "the VM failed");

				gantry_error(err, 0, "%s", line);
			} else if (*rc > 0) {
				*rc = -1;
			}
		}
		json_decref(j);
	}
	/* What the guest wrote last: its vCPUs are gone, so what is in the
	 * pipe is all there is (the worker holds its end until it exits). */
	while (w->console >= 0 && readable(w->console))
		relay_console(w);
	if (!exited) {
		worker_reap(&w->pid, &ws);
		child_describe_status(ws, why, sizeof(why));
		*rc = -1;
		gantry_error(err, 0, "the VMM worker ended (%s) before its VM did", why);
	}
}

void vmm_worker_stop(struct vmm_worker *w, bool wait)
{
	int status;

	if (w->chan >= 0)
		close(w->chan);
	if (w->console >= 0)
		close(w->console);
	w->chan = w->console = -1;
	if (w->pid > 0 && !wait && waitpid(w->pid, &status, WNOHANG) == 0)
		w->pid = -1; /* it ends on its own: SIGKILL is its PDEATHSIG too */
	if (w->pid > 0)
		kill(w->pid, SIGKILL);
	worker_reap(&w->pid, &status);
	if (w->con_open)
		console_close(&w->con);
	w->con_open = false;
	json_decref(w->isolation);
	w->isolation = NULL;
}
