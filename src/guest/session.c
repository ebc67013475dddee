/* One EXEC: a crun container on the shared root (crun.c starts it), its
 * stdio relayed over its own vsock stream (relay.c), its STARTED, ERROR and
 * EXIT reported on the control connection. This file keeps the table of
 * sessions and takes each through its life: EXEC, crun's exit, the
 * process's, signals and resizes, and the end. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest/session.h"

static struct session *session_find(struct guest *g, uint32_t id)
{
	for (size_t i = 0; i < GUEST_MAX_SESSIONS; i++)
		if (g->sessions[i] && g->sessions[i]->id == id)
			return g->sessions[i];
	return NULL;
}

static void rm_bundle(struct session *s)
{
	static const char *const files[] = { "config.json", "process.json", "pid", "crun.log",
					     "console.sock" };
	char path[GUEST_PATH_MAX + 32];

	if (s->bundle[0] == '\0')
		return;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		guest_pathf(path, sizeof(path), "%s/%s", s->bundle, files[i]);
		unlink(path);
	}
	rmdir(s->bundle);
}

static void session_free(struct guest *g, struct session *s)
{
	for (size_t i = 0; i < GUEST_MAX_SESSIONS; i++)
		if (g->sessions[i] == s)
			g->sessions[i] = NULL;
	if (s->master >= 0) {
		/* in_w and out_r alias the master in tty mode. */
		if (s->in_w == s->master)
			s->in_w = -1;
		if (s->out_r == s->master)
			s->out_r = -1;
	}
	close_fd(&s->master);
	close_fd(&s->in_w);
	close_fd(&s->out_r);
	close_fd(&s->err_r);
	close_fd(&s->console);
	close_fd(&s->stream);
	rm_bundle(s);
	free(s->dec);
	free(s);
}

void session_exec(struct guest *g, struct proto_exec *e)
{
	struct session *s = NULL;
	struct proto_msg hello = { .type = PROTO_STREAM };
	char *why = NULL, root[32];
	size_t slot;
	int code;

	guest_debug(g, "session %u: exec %s", e->id, e->argv[0]);
	if (session_find(g, e->id)) {
		link_send_error(g, e->id, PROTO_ERR_RUNTIME, "session %u already exists", e->id);
		return;
	}
	for (slot = 0; slot < GUEST_MAX_SESSIONS && g->sessions[slot]; slot++)
		;
	if (slot == GUEST_MAX_SESSIONS) {
		link_send_error(g, e->id, PROTO_ERR_RUNTIME, "too many sessions (at most %d)",
				GUEST_MAX_SESSIONS);
		return;
	}
	if (g->rootfs_error) {
		link_send_error(g, e->id, PROTO_ERR_RUNTIME, "container root: %s", g->rootfs_error);
		return;
	}
	if (g->cfg.persist && g->container <= 0) {
		/* It started (else rootfs_error says why) and has died since. */
		link_send_error(g, e->id, PROTO_ERR_RUNTIME,
				"the sandbox's container is gone; stop and resume it");
		return;
	}
	/* Look the command up as the container sees its files: in a sandbox
	 * that is its long-lived container's root and mounts (a file it made
	 * on a tmpfs of its own included), through /proc/PID/root. */
	if (g->cfg.persist)
		snprintf(root, sizeof(root), "/proc/%d/root", (int)g->container);
	code = rootfs_find_command(g->cfg.persist ? root : g->cfg.rootfs, e->argv[0], e->env,
				   e->cwd, &why);
	if (code) {
		link_send_error(g, e->id, (uint32_t)code, "%s", why ? why : "cannot run");
		free(why);
		return;
	}

	s = calloc(1, sizeof(*s));
	if (s == NULL || (s->dec = malloc(sizeof(*s->dec))) == NULL) {
		free(s);
		link_send_error(g, e->id, PROTO_ERR_RUNTIME, "out of memory");
		return;
	}
	proto_decoder_init(s->dec);
	s->id = e->id;
	s->tty = e->flags & PROTO_EXEC_TTY;
	s->init = e->flags & PROTO_EXEC_INIT;
	s->rows = e->rows;
	s->cols = e->cols;
	s->stream = s->console = s->master = s->in_w = s->out_r = s->err_r = -1;
	snprintf(s->name, sizeof(s->name), "gantry-%u", e->id);
	g->sessions[slot] = s;

	if (guest_pathf(s->bundle, sizeof(s->bundle), "%s/bundles/%u", g->cfg.state_dir, e->id) <
		    0 ||
	    mkdir(s->bundle, 0700) < 0) {
		if (asprintf(&why, "mkdir %s: %s", s->bundle, strerror(errno)) < 0)
			why = NULL;
		s->bundle[0] = '\0';
		goto fail;
	}
	if (g->cfg.persist) {
		char process[GUEST_PATH_MAX + 16];

		guest_pathf(process, sizeof(process), "%s/process.json", s->bundle);
		if (spec_write_process(&g->cfg, process, e, &why) < 0)
			goto fail;
	} else if (spec_write(&g->cfg, s->bundle, e, false, &why) < 0) {
		goto fail;
	}
	/* The stream first, so no output can be lost to a missing peer. */
	s->stream = link_dial(&g->cfg, PROTO_STDIO_PORT);
	if (s->stream < 0) {
		if (asprintf(&why, "connect to the host's stdio port %d: %s", PROTO_STDIO_PORT,
			     strerror(errno)) < 0)
			why = NULL;
		goto fail;
	}
	hello.u.stream.id = s->id;
	if (proto_write_msg(s->stream, &hello) < 0) {
		if (asprintf(&why, "stdio stream: %s", strerror(errno)) < 0)
			why = NULL;
		goto fail;
	}
	set_nonblock(s->stream);
	if (crun_start(g, s, &why) < 0)
		goto fail;
	guest_debug(g, "session %u: crun pid %d", s->id, (int)s->crun);
	return;
fail:
	link_send_error(g, e->id, PROTO_ERR_RUNTIME, "%s", why ? why : "cannot start");
	free(why);
	session_free(g, s);
}

/* The status an orphan already reaped with this pid left, if any. */
/* Its process is gone (status holds how). The container's own process
 * (PROTO_EXEC_INIT) takes the rest along: its long-lived container's init
 * is ended, and with it every process in its PID namespace, whose
 * outputs then close; later EXECs are refused (see session_exec). */
static void session_ended(struct guest *g, struct session *s)
{
	s->exited = true;
	if (s->init && g->container > 0) {
		guest_debug(g, "session %u: the container's process ended: ending the container",
			    s->id);
		kill(g->container, SIGKILL);
	}
}

static bool take_orphan(struct guest *g, pid_t pid, int *status)
{
	for (size_t i = 0; i < GUEST_ORPHANS; i++) {
		if (g->orphans[i].pid == pid) {
			*status = g->orphans[i].status;
			g->orphans[i].pid = 0;
			return true;
		}
	}
	return false;
}

static void apply_winsize(struct session *s)
{
	struct winsize ws = { .ws_row = (unsigned short)s->rows,
			      .ws_col = (unsigned short)s->cols };

	if (s->master >= 0 && s->rows && s->cols)
		ioctl(s->master, TIOCSWINSZ, &ws);
}

static void session_crun_exited(struct guest *g, struct session *s, int status)
{
	struct proto_msg m = { .type = PROTO_STARTED };
	char *why;
	long v;

	s->crun = 0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		why = crun_reason(s);
		link_send_error(g, s->id, PROTO_ERR_RUNTIME, "crun: %s",
				why && *why ? why : "failed to start the container");
		free(why);
		goto fail;
	}
	v = crun_pid(s->bundle);
	if (v <= 0) {
		link_send_error(g, s->id, PROTO_ERR_RUNTIME, "crun wrote no pid file");
		goto fail;
	}
	s->pid = (pid_t)v;
	if (s->tty) {
		s->master = crun_receive_master(s);
		close_fd(&s->console);
		if (s->master < 0) {
			link_send_error(g, s->id, PROTO_ERR_RUNTIME,
					"no terminal from crun's console socket: %s",
					strerror(errno));
			kill(s->pid, SIGKILL);
			goto fail;
		}
		set_nonblock(s->master);
		s->in_w = s->out_r = s->master;
		apply_winsize(s);
	}
	if (take_orphan(g, s->pid, &s->status))
		session_ended(g, s);
	if (s->pending_signal && !s->exited)
		kill(s->pid, (int)s->pending_signal);
	m.u.started.id = s->id;
	m.u.started.pid = (uint32_t)s->pid;
	link_send(g, &m);
	if (s->tty) {
		relay_pump_stdin(s);
		relay_take_frames(s);
	}
	guest_debug(g, "session %u: pid %d", s->id, (int)s->pid);
	return;
fail:
	/* No EXIT follows an ERROR: the session is over for the host. */
	if (s->pid > 0 && !s->exited)
		kill(s->pid, SIGKILL);
	close_fd(&s->out_r);
	close_fd(&s->err_r);
	relay_stream_gone(s);
	s->pid = -1;
	s->exited = true;
	s->status = -1;
}

void session_reaped(struct guest *g, pid_t pid, int status)
{
	for (size_t i = 0; i < GUEST_MAX_SESSIONS; i++) {
		struct session *s = g->sessions[i];

		if (s == NULL)
			continue;
		if (s->crun == pid) {
			session_crun_exited(g, s, status);
			return;
		}
		if (s->pid == pid) {
			s->status = status;
			session_ended(g, s);
			return;
		}
	}
	/* Maybe a container whose crun we have not heard from yet. */
	g->orphans[g->next_orphan].pid = pid;
	g->orphans[g->next_orphan].status = status;
	g->next_orphan = (g->next_orphan + 1) % GUEST_ORPHANS;
}

void session_signal(struct guest *g, uint32_t id, uint32_t signo)
{
	struct session *s = session_find(g, id);

	if (s == NULL || s->exited)
		return;
	if (s->pid > 0)
		kill(s->pid, (int)signo);
	else
		s->pending_signal = signo;
}

void session_resize(struct guest *g, uint32_t id, uint32_t rows, uint32_t cols)
{
	struct session *s = session_find(g, id);

	if (s == NULL || rows > 0xffff || cols > 0xffff)
		return;
	s->rows = rows;
	s->cols = cols;
	apply_winsize(s);
}

static void report_exit(struct guest *g, struct session *s)
{
	struct proto_msg m = { .type = PROTO_EXIT };

	if (s->status < 0)
		return; /* it never ran, and ERROR said so */
	m.u.exit.id = s->id;
	if (WIFSIGNALED(s->status)) {
		m.u.exit.signaled = true;
		m.u.exit.code = (uint32_t)WTERMSIG(s->status);
	} else {
		m.u.exit.code = (uint32_t)WEXITSTATUS(s->status);
	}
	link_send(g, &m);
	guest_debug(g, "session %u: exit %s %u", s->id, m.u.exit.signaled ? "signal" : "code",
		    m.u.exit.code);
}

bool session_reap_finished(struct guest *g)
{
	bool live = false;

	for (size_t i = 0; i < GUEST_MAX_SESSIONS; i++) {
		struct session *s = g->sessions[i];

		if (s == NULL)
			continue;
		/* Done: the process is gone, both outputs hit EOF (the pid
		 * namespace died with its init, so every writer is gone) and
		 * the last frames left. */
		if (!s->exited || s->crun > 0 || s->out_r >= 0 || s->err_r >= 0 ||
		    (s->stream >= 0 && s->out_len)) {
			live = true;
			continue;
		}
		report_exit(g, s);
		if (s->pid > 0 && !g->cfg.persist)
			crun_delete(g, s);
		session_free(g, s);
	}
	return live;
}

void session_kill_sessions(struct guest *g)
{
	for (size_t i = 0; i < GUEST_MAX_SESSIONS; i++) {
		struct session *s = g->sessions[i];

		if (s && s->pid > 0 && !s->exited)
			kill(s->pid, SIGKILL);
	}
}

void session_kill_all(struct guest *g)
{
	session_kill_sessions(g);
	/* Its init's death takes every process in its namespace along. */
	if (g->container > 0)
		kill(g->container, SIGKILL);
}
