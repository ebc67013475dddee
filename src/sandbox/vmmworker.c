/* Starting and serving the VMM worker (see vmmworker.h): the caller's
 * side. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/child.h"
#include "common/json.h"
#include "common/log.h"
#include "common/text.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "proto/agent.h"
#include "sandbox/machine.h"
#include "sandbox/vmmworker.h"
#include "share/spec.h"
#include "virtio/devices.h"
#include "vmm/vm.h"

#define WORKER_CHAN   3
#define WORKER_CTL    4
#define WORKER_LOWEST 16
#define WORKER_ERR    512
#define CTL_WAIT_MS   10000
#define REAP_MS	      5000
#define CONSOLE_CHUNK 65536
#define VSOCK_BACKLOG 16

struct spawn_args {
	char ns[24], userns[24];
};

/* What it reads of the environment; nothing else of ours goes to it. */
static const char *const worker_env[] = { "GANTRY_LOG", CONFINE_SECCOMP_ENV, VIRTIO_FS_THREADS_ENV,
					  NULL };

/* Only async-signal-safe calls between fork and exec. */
static __attribute__((noreturn)) void worker_child(char *const argv[], char *const envp[], int null,
						   int chan, int ctl)
{
	/* A Ctrl-C meant for the guest's process is not the VM's. */
	setsid();
	if (dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(chan, WORKER_CHAN) < 0 ||
	    dup2(ctl, WORKER_CTL) < 0)
		child_fail("VMM worker", "dup2 failed");
	close_range(WORKER_CTL + 1, ~0U, 0);
	child_exec_self_env(argv, envp, "VMM worker");
}

static void reap(struct vmm_worker *w, int *status)
{
	*status = 0;
	if (w->pid <= 0)
		return;
	if (!child_reap_within(w->pid, REAP_MS, status)) {
		kill(w->pid, SIGKILL);
		child_reap_within(w->pid, REAP_MS, status);
	}
	w->pid = -1;
}

/* One message within ms (-1: no limit): its JSON object, or NULL (EOF,
 * silence, a bad one; *eof says which). */
static json_t *recv_json(int fd, int ms, int *fds, size_t max_fds, size_t *nr_fds, bool *eof)
{
	cleanup_free char *buf = xmalloc(VMM_WORKER_MSG_MAX + 1);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	json_t *j;
	ssize_t n;
	int r;

	*nr_fds = 0;
	*eof = false;
	while ((r = poll(&p, 1, ms)) < 0 && errno == EINTR)
		;
	if (r <= 0)
		return NULL;
	n = unix_recv_fds(fd, buf, VMM_WORKER_MSG_MAX, fds, max_fds, nr_fds, MSG_DONTWAIT);
	if (n <= 0) {
		*eof = n == 0 || (errno != EAGAIN && errno != EINTR && errno != EMSGSIZE);
		return NULL;
	}
	j = json_loadb(buf, (size_t)n, 0, NULL);
	for (size_t i = 0; i < *nr_fds; i++)
		close(fds[i]); /* the worker sends us none */
	*nr_fds = 0;
	if (!json_is_object(j)) {
		json_decref(j);
		return NULL;
	}
	return j;
}

static int send_json(int fd, json_t *j, const int *fds, size_t nr_fds)
{
	cleanup_free char *text = json_dumps(j, JSON_COMPACT);

	json_decref(j);
	if (text == NULL) {
		errno = ENOMEM;
		return -1;
	}
	return unix_send_fds(fd, text, strlen(text), fds, nr_fds, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

/* A line from the worker, fit for our messages. */
static char *worker_line(json_t *j, const char *key, const char *dflt)
{
	const char *e = json_string_value(json_object_get(j, key));

	if (e == NULL)
		e = dflt;
	return text_sanitized(e, strlen(e), WORKER_ERR);
}

/* ---- start ----------------------------------------------------------------------------- */

/* What the worker is given, in the order the configuration lists it. */
struct handover {
	int fds[UNIX_FDS_MAX];
	bool ours[UNIX_FDS_MAX]; /* opened here for it: closed once sent */
	size_t n;
};

static void give(struct handover *h, int fd, bool ours)
{
	h->ours[h->n] = ours;
	h->fds[h->n++] = fd;
}

static void handover_close(struct handover *h)
{
	for (size_t i = 0; i < h->n; i++)
		if (h->ours[i] && h->fds[i] >= 0)
			close(h->fds[i]);
	h->n = 0;
}

static int open_given(struct handover *h, const char *path, int flags, const char *what,
		      gantry_error_t *err)
{
	int fd = open(path, flags | O_CLOEXEC);

	if (fd < 0)
		return gantry_error_errno(err, "%s `%s`", what, path);
	give(h, fd, true);
	return 0;
}

/* The console: the caller's fd as it is, or a pipe into the capped log. */
static int give_console(struct vmm_worker *w, struct machine *m, struct handover *h,
			gantry_error_t *err)
{
	int p[2];

	if (m->cfg.console_fd > 0) {
		give(h, m->cfg.console_fd, false);
		return 0;
	}
	if (console_open(&w->con, m->cfg.console, VMM_CONSOLE_MAX, err) < 0)
		return -1;
	w->con_open = true;
	if (pipe2(p, O_CLOEXEC) < 0)
		return gantry_error_errno(err, "pipe");
	w->console = p[0];
	give(h, p[1], true);
	return 0;
}

static int give_vsock(struct machine *m, struct handover *h, gantry_error_t *err)
{
	cleanup_free char *path = NULL;
	int fd;

	xasprintf(&path, "%s/vsock.sock", m->cfg.vsock_dir);
	fd = unix_listen(path, VSOCK_BACKLOG, err);
	if (fd < 0)
		return -1;
	give(h, fd, true);
	return 0;
}

static json_t *config_json(struct machine *m, struct handover *h, gantry_error_t *err)
{
	json_t *c, *disks = json_array(), *fs = json_null();
	int kvm;

	/* Without it the worker says why, as the VMM does. */
	kvm = open(vm_kvm_device(), O_RDWR | O_CLOEXEC);
	if (kvm >= 0)
		give(h, kvm, true);
	if (open_given(h, m->cfg.kernel, O_RDONLY, "kernel", err) < 0)
		goto fail;
	if (give_console(&m->vmm_worker, m, h, err) < 0)
		goto fail;
	give(h, m->cfg.stop_fd, false);
	if (m->cfg.net_fd > 0)
		give(h, m->cfg.net_fd, false);
	for (unsigned int i = 0; i < m->cfg.nr_disks; i++) {
		const struct vmm_disk *d = &m->cfg.disks[i];

		if (open_given(h, d->path, d->ro ? O_RDONLY : O_RDWR, "disk", err) < 0)
			goto fail;
		json_array_append_new(disks, json_pack("{s:s,s:b}", "path", d->path, "ro", d->ro));
	}
	if (give_vsock(m, h, err) < 0)
		goto fail;
	if (m->fs_device) {
		json_t *exports = json_array();

		for (size_t i = 0; i < m->nr_boot_shares; i++) {
			const struct share_spec *sp = &m->boot_shares[i].sp;

			json_array_append_new(exports, json_pack("{s:s,s:b,s:b,s:I,s:I}", "tag",
								 sp->tag, "ro", sp->ro, "map",
								 sp->ids, "uid", (json_int_t)sp->uid,
								 "gid", (json_int_t)sp->gid));
			give(h, m->boot_shares[i].fd, false);
		}
		json_decref(fs);
		fs = json_pack("{s:s,s:b,s:o}", "tag", MACHINE_SHARES_TAG, "live", m->shares_live,
			       "exports", exports);
	}
	c = json_pack("{s:s,s:b,s:s,s:s,s:I,s:I,s:b,s:b,s:o,s:o}", "op", "config", "kvm", kvm >= 0,
		      "kernel", m->cfg.kernel, "append", m->append, "cpus", (json_int_t)m->cfg.cpus,
		      "mem", (json_int_t)m->cfg.mem_mib, "timing", m->cfg.timing, "net",
		      m->cfg.net_fd > 0, "disks", disks, "fs", fs);
	if (c == NULL)
		gantry_error(err, ENOMEM, "VMM worker: its configuration");
	return c;
fail:
	json_decref(disks);
	json_decref(fs);
	return NULL;
}

static int spawn(struct vmm_worker *w, enum confine_mode mode, gantry_error_t *err)
{
	struct spawn_args sa = { 0 };
	char *argv[] = { "gantry",	   VMM_WORKER_ROLE, "--isolation", (char *)confine_mode_name(mode),
			 "--ns",	   sa.ns,	    "--userns-errno", sa.userns,
			 NULL };
	cleanup_close int null = -1, chan_w = -1, ctl_w = -1;
	char **envp = child_env_only(worker_env);
	struct confine_spawn sp;
	int chan[2], ctl[2];
	pid_t pid;

	null = child_fd_above(open("/dev/null", O_RDWR | O_CLOEXEC), WORKER_LOWEST);
	if (null < 0) {
		strv_free(envp);
		return gantry_error_errno(err, "VMM worker: /dev/null");
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, chan) < 0)
		return gantry_error_errno(err, "VMM worker: socketpair");
	w->chan = child_fd_above(chan[0], WORKER_LOWEST);
	chan_w = child_fd_above(chan[1], WORKER_LOWEST);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0)
		return gantry_error_errno(err, "VMM worker: socketpair");
	w->ctl = child_fd_above(ctl[0], WORKER_LOWEST);
	ctl_w = child_fd_above(ctl[1], WORKER_LOWEST);
	if (w->chan < 0 || chan_w < 0 || w->ctl < 0 || ctl_w < 0)
		return gantry_error_errno(err, "VMM worker: fcntl");
	/* Its own network namespace too: it needs none. */
	pid = confine_fork(mode, CLONE_NEWNET, &sp);
	if (pid < 0) {
		strv_free(envp);
		return gantry_error_errno(err, "VMM worker: fork");
	}
	confine_spawn_format(&sp, sa.ns, sa.userns);
	if (pid == 0)
		worker_child(argv, envp, null, chan_w, ctl_w);
	strv_free(envp);
	w->pid = pid;
	return 0;
}

/* Its first message: ready, or why not. */
static int wait_ready(struct vmm_worker *w, gantry_error_t *err)
{
	int fds[UNIX_FDS_MAX], status;
	char why[64];
	size_t n;
	bool eof;
	json_t *j = recv_json(w->chan, VMM_WORKER_READY_MS, fds, ARRAY_SIZE(fds), &n, &eof);
	const char *op = json_string_value(json_object_get(j, "op"));

	if (op && strcmp(op, "ready") == 0) {
		w->isolation = json_incref(json_object_get(j, "isolation"));
		json_decref(j);
		return 0;
	}
	if (op && strcmp(op, "error") == 0) {
		cleanup_free char *line = worker_line(j, "error", "it could not set the VM up");

		json_decref(j);
		return gantry_error(err, 0, "%s", line);
	}
	json_decref(j);
	if (!eof)
		return gantry_error(err, ETIMEDOUT, "the VMM worker was not ready in %d s",
				    VMM_WORKER_READY_MS / 1000);
	reap(w, &status);
	child_describe_status(status, why, sizeof(why));
	return gantry_error(err, 0, "the VMM worker exited (%s) before the VM started", why);
}

int vmm_worker_start(struct vmm_worker *w, struct machine *m, gantry_error_t *err)
{
	struct handover h = { .n = 0 };
	json_t *c;
	int r;

	if (spawn(w, m->isolation, err) < 0)
		return -1;
	c = config_json(m, &h, err);
	if (c == NULL) {
		handover_close(&h);
		return -1;
	}
	r = send_json(w->chan, c, h.fds, h.n);
	handover_close(&h);
	if (r < 0)
		return gantry_error_errno(err, "VMM worker: send its configuration");
	return wait_ready(w, err);
}

/* ---- serve ----------------------------------------------------------------------------- */

/* The guest dials host port P: only the agent's ports, in the run
 * directory, connected here. */
static void answer_dial(struct vmm_worker *w, struct machine *m, json_t *req)
{
	json_int_t port = json_integer_value(json_object_get(req, "port"));
	json_t *id = json_object_get(req, "id");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = -1;

	if (port == PROTO_CONTROL_PORT || port == PROTO_STDIO_PORT) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%d.sock", m->cfg.vsock_dir, (int)port);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			close(fd);
			fd = -1;
		}
	}
	if (send_json(w->chan, json_pack("{s:s,s:O,s:b}", "op", "connected", "id", id, "ok", fd >= 0),
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
		int fds[UNIX_FDS_MAX];
		size_t n;
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
		j = recv_json(w->chan, 0, fds, ARRAY_SIZE(fds), &n, &eof);
		op = json_string_value(json_object_get(j, "op"));
		if (op && strcmp(op, "connect") == 0) {
			answer_dial(w, m, j);
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
		reap(w, &ws);
		child_describe_status(ws, why, sizeof(why));
		*rc = -1;
		gantry_error(err, 0, "the VMM worker ended (%s) before its VM did", why);
	}
}

/* ---- the share server -------------------------------------------------------------------- */

static int share_request(struct vmm_worker *w, json_t *req, int fd, json_t **answer,
			 gantry_error_t *err)
{
	int fds[UNIX_FDS_MAX];
	size_t n;
	bool eof;
	json_t *a;
	int r;

	*answer = NULL;
	pthread_mutex_lock(&w->ctl_lock);
	r = send_json(w->ctl, req, &fd, fd >= 0);
	a = r == 0 ? recv_json(w->ctl, CTL_WAIT_MS, fds, ARRAY_SIZE(fds), &n, &eof) : NULL;
	pthread_mutex_unlock(&w->ctl_lock);
	if (a == NULL)
		return gantry_error(err, 0, "the VMM worker did not answer");
	if (!json_is_true(json_object_get(a, "ok"))) {
		cleanup_free char *line = worker_line(a, "error", "refused");

		json_decref(a);
		return gantry_error(err, 0, "%s", line);
	}
	*answer = a;
	return 0;
}

int vmm_worker_share_add(struct vmm_worker *w, const struct share_spec *sp, int root_fd,
			 gantry_error_t *err)
{
	json_t *a;
	int r = share_request(w,
			      json_pack("{s:s,s:s,s:b,s:b,s:I,s:I}", "op", "add", "tag", sp->tag,
					"ro", sp->ro, "map", sp->ids, "uid", (json_int_t)sp->uid,
					"gid", (json_int_t)sp->gid),
			      root_fd, &a, err);

	json_decref(a);
	return r;
}

int vmm_worker_share_rm(struct vmm_worker *w, const char *tag, bool force, gantry_error_t *err)
{
	json_t *a;
	int r = share_request(w, json_pack("{s:s,s:s,s:b}", "op", "rm", "tag", tag, "force", force),
			      -1, &a, err);

	json_decref(a);
	return r;
}

size_t vmm_worker_share_handles(struct vmm_worker *w, const char *tag)
{
	gantry_error_t err = NULL;
	json_t *a;
	size_t n = 0;

	if (share_request(w, json_pack("{s:s,s:s}", "op", "handles", "tag", tag), -1, &a, &err) == 0)
		n = (size_t)json_integer_value(json_object_get(a, "handles"));
	gantry_error_free(&err);
	json_decref(a);
	return n;
}

void vmm_worker_stop(struct vmm_worker *w, bool wait)
{
	int status;

	if (w->chan >= 0)
		close(w->chan);
	if (w->ctl >= 0)
		close(w->ctl);
	if (w->console >= 0)
		close(w->console);
	w->chan = w->ctl = w->console = -1;
	if (w->pid > 0 && !wait && waitpid(w->pid, &status, WNOHANG) == 0)
		w->pid = -1; /* it ends on its own: SIGKILL is its PDEATHSIG too */
	if (w->pid > 0)
		kill(w->pid, SIGKILL);
	reap(w, &status);
	if (w->con_open)
		console_close(&w->con);
	w->con_open = false;
	json_decref(w->isolation);
	w->isolation = NULL;
}

