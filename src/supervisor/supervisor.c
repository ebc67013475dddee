/* The supervisor (see supervisor.h): start-up, one poll loop on the main
 * thread over the guest's control connection, its stdio dials, ctl.sock
 * and its clients (sessions.c), the VM on threads of its own, and the end.
 * The loop never blocks on a peer (supervisor_priv.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "common/files.h"
#include "common/log.h"
#include "common/util.h"
#include "sandbox/ctl.h"
#include "sandbox/rwlayer.h"
#include "sandbox/spawn.h"
#include "share/server.h"
#include "supervisor/supervisor.h"
#include "supervisor/supervisor_priv.h"

#define SUP_AGENT_TIMEOUT_MS 180000
#define SUP_LOCK_WAIT_MS     3000
#define SUP_SHUTDOWN_MS	     30000
#define SUP_CONSOLE_SCAN     (64 * 1024)

/* What a running supervisor has in its directory: its start and its end
 * remove them. */
static const char *const sockets[] = { SANDBOX_CTL, "vsock.sock", SANDBOX_FROZEN };

static void remove_sockets(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(sockets); i++)
		unlink(sockets[i]);
}

/* --- the guest's control connection ---------------------------------------------------------- */

/* End the VM without the guest powering off; why goes in sandbox.json. */
static void sup_kill(struct sup *s, const char *why)
{
	if (s->killed == NULL)
		s->killed = why;
	machine_kill(&s->m);
}

/* Close the guest's control connection: it closed it, broke it, or stopped
 * reading it (hostile: then a stop in progress ends the VM at once, since
 * nothing can ask the guest to power off any more). */
static void guest_cut(struct sup *s, const char *why, bool hostile)
{
	s->cut_why = NULL;
	if (s->control < 0)
		return;
	log_warn("%s", why);
	close(s->control);
	s->control = -1;
	outq_free(&s->control_q);
	s->guest_gone = why;
	clients_guest_gone(s, why);
	sup_shares_guest_gone(s, why);
	if (hostile && s->stopping)
		sup_kill(s, why);
}

bool sup_guest_busy(const struct sup *s)
{
	return s->control_q.bytes > SUP_GUEST_HIGH;
}

bool sup_send_guest(struct sup *s, const struct proto_msg *m, bool own)
{
	uint8_t frame[PROTO_MAX_FRAME];
	ssize_t len;

	int r;

	if (s->control < 0) {
		errno = ENOTCONN;
		return false;
	}
	len = proto_encode(m, frame, sizeof(frame));
	if (len < 0) {
		explicit_bzero(frame, sizeof(frame)); /* what of an EXEC's did fit */
		errno = EMSGSIZE;
		return false;
	}
	if (!own && s->control_q.bytes + (size_t)len > SUP_GUEST_QUEUE) {
		explicit_bzero(frame, (size_t)len);
		errno = ENOBUFS;
		return false; /* whoever asked for it is hung up on, not the guest */
	}
	r = outq_send(&s->control_q, s->control, frame, (size_t)len, -1);
	/* An EXEC's environment may hold secrets. */
	explicit_bzero(frame, (size_t)len);
	if (r == 0)
		return true;
	if (errno == ENOBUFS)
		return false; /* whoever asked for it is hung up on, not the guest */
	/* Cut once this round's events are done: a caller may be iterating
	 * the clients that the cut tells. */
	s->cut_why = "the guest's control connection broke";
	return true;
}

void sup_begin_stop(struct sup *s, const char *why)
{
	struct proto_msg m = { .type = PROTO_SHUTDOWN };

	if (s->stopping)
		return;
	sup_thaw_for_end(s);
	log_info("stopping (%s)", why);
	s->stopping = true;
	s->stop_deadline = now_ms() + SUP_SHUTDOWN_MS;
	/* The guest kills every process, syncs, unmounts and powers off. */
	if (!sup_send_guest(s, &m, true))
		sup_kill(s, s->guest_gone ? s->guest_gone : "the guest did not take SHUTDOWN");
}

/* A secret whose value reaches the guest (from its environment, or a
 * host-bound one git asks for; a running session's own): in its memory,
 * so in a save of it. One injected at egress never is: a restore gets an
 * egress worker of its own, whose CA the guest trusts once renewed
 * (RENEW). */
static bool secrets_in_guest(struct sup *s)
{
	bool any = false;

	pthread_mutex_lock(&s->secrets.lock);
	for (size_t i = 0; i < s->secrets.n && !any; i++)
		any = !s->secrets.v[i].spec.inject;
	pthread_mutex_unlock(&s->secrets.lock);
	for (size_t i = 0; i < SUP_MAX_CLIENTS && !any; i++)
		any = s->clients[i] && s->clients[i]->session && s->clients[i]->secrets &&
		      !s->clients[i]->done;
	return any;
}

/* The refusal of a save whose secrets were not asked for: the option that
 * would have them saved too, as this process's front end names it. */
static const char *secrets_refusal(void)
{
	static char why[192];
	gantry_error_t err = NULL;

	gantry_error(&err, 0,
		     "it holds secrets, whose values would be written to disk with its memory");
	gantry_error_prefix_opt(&err, "with_secrets", " is off");
	snprintf(why, sizeof(why), "%s", gantry_error_str(err));
	gantry_error_free(&err);
	return why;
}

const char *sup_pause_refused(struct sup *s, bool live, bool with_secrets)
{
	static char why[160];
	size_t sessions = 0;

	if (s->stopping)
		return "it is stopping";
	if (s->control < 0)
		return s->guest_gone ? s->guest_gone : "its guest is gone";
	if (!with_secrets && secrets_in_guest(s))
		return secrets_refusal();
	if (live)
		return NULL;
	for (size_t i = 0; i < SUP_MAX_CLIENTS; i++)
		if (s->clients[i] && s->clients[i]->session && !s->clients[i]->done)
			sessions++;
	if (sessions == 0)
		return NULL;
	snprintf(why, sizeof(why),
		 "%zu exec session%s still running: a restore would cut %s (let %s end first)",
		 sessions, sessions == 1 ? " is" : "s are", sessions == 1 ? "it" : "them",
		 sessions == 1 ? "it" : "them");
	return why;
}

void sup_begin_pause(struct sup *s)
{
	sup_thaw_for_end(s);
	log_info("saving (asked to)");
	s->stopping = s->pausing = true;
	s->stop_deadline = now_ms() + SUP_SAVE_MS;
	machine_save_stop(&s->m);
}

static void guest_frames(struct sup *s)
{
	ssize_t n = proto_decoder_fill(s->dec, s->control);
	struct proto_msg m;
	const char *why;
	int k = 0;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		guest_cut(s, "the guest closed its control connection", false);
		return;
	}
	while (s->control >= 0 && (k = proto_decoder_next(s->dec, &m, &why)) > 0) {
		struct client *c = NULL;

		if (m.type == PROTO_STARTED)
			c = client_by_guest_id(s, m.u.started.id);
		else if (m.type == PROTO_EXIT)
			c = client_by_guest_id(s, m.u.exit.id);
		else if (m.type == PROTO_ERROR && m.u.error.id)
			c = client_by_guest_id(s, m.u.error.id);
		else if (m.type == PROTO_ERROR && sup_log_due(&s->error_logged))
			log_warn("guest: %s", m.u.error.message);
		else if (m.type == PROTO_DONE)
			sup_shares_done(s, &m);
		if (c && !c->done) {
			if (m.type == PROTO_STARTED)
				m.u.started.id = c->client_id;
			else if (m.type == PROTO_EXIT)
				m.u.exit.id = c->client_id;
			else
				m.u.error.id = c->client_id;
			c->done = m.type != PROTO_STARTED;
			client_send(s, c, &m, -1);
		}
		proto_msg_free(&m);
	}
	if (s->control >= 0 && k < 0) {
		log_warn("guest control connection: %s", why);
		guest_cut(s, "the guest broke the protocol on its control connection", true);
	}
}

static void guest_event(struct sup *s, short revents)
{
	if ((revents & POLLOUT) && outq_flush(&s->control_q, s->control) < 0)
		guest_cut(s, "the guest's control connection broke", true);
	if (s->control >= 0 && (revents & (POLLIN | POLLHUP | POLLERR)))
		guest_frames(s);
}

/* --- the end --------------------------------------------------------------------------------- */

static bool console_says(const char *what)
{
	char buf[SUP_CONSOLE_SCAN + 1];
	cleanup_close int fd = open(SANDBOX_CONSOLE, O_RDONLY | O_CLOEXEC);
	off_t size;
	ssize_t n;

	if (fd < 0)
		return false;
	size = lseek(fd, 0, SEEK_END);
	if (size < 0)
		return false;
	n = pread(fd, buf, SUP_CONSOLE_SCAN, size > SUP_CONSOLE_SCAN ? size - SUP_CONSOLE_SCAN : 0);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	return strstr(buf, what) != NULL;
}

/* forced: why the VM was ended without the guest powering off; NULL: it
 * ended itself. */
static __attribute__((noreturn)) void finish(struct sup *s, const char *forced)
{
	gantry_error_t err = NULL;
	int saved = snap_finish(&s->pause, s->pausing && !forced && s->m.rc == 0, &err);
	bool ok = !s->pausing || saved > 0;

	/* Whose save it is: a clone made from it renews its identity. */
	if (saved > 0 && write_file_atomic(SANDBOX_PAUSE "/" SNAP_ORIGIN, s->name, strlen(s->name),
					   0600, &err) < 0)
		saved = -1;

	free(s->sb.reason);
	s->sb.reason = NULL;
	if (saved < 0) {
		s->sb.state = SANDBOX_CRASHED;
		xasprintf(&s->sb.reason, "its save could not be put in place: %s",
			  gantry_error_str(err));
		gantry_error_free(&err);
	} else if (s->pausing && saved == 0 && !forced && s->m.rc == 0) {
		s->sb.state = SANDBOX_CRASHED;
		xasprintf(&s->sb.reason, "its VM ended before it was saved (status %d)",
			  s->m.status);
	} else if (forced) {
		s->sb.state = SANDBOX_STOPPED;
		xasprintf(&s->sb.reason, "%s; its VM was ended", forced);
	} else if (s->stopping && s->m.rc == 0) {
		s->sb.state = SANDBOX_STOPPED;
	} else {
		s->sb.state = SANDBOX_CRASHED;
		if (s->m.rc < 0)
			xasprintf(&s->sb.reason, "VMM failed: %s", gantry_error_str(s->m.err));
		else if (s->guest_gone)
			xasprintf(&s->sb.reason, "%s, and the guest powered off (status %d)",
				  s->guest_gone, s->m.status);
		else if (console_says("Kernel panic"))
			xasprintf(&s->sb.reason, "guest kernel panic (see %s/%s)", s->dir,
				  SANDBOX_CONSOLE);
		else
			xasprintf(&s->sb.reason, "the guest ended on its own (status %d)",
				  s->m.status);
	}
	s->sb.pid = 0;
	sup_net_final(s);
	sup_audit_save(s);
	if (sandbox_save(".", &s->sb, &err) < 0)
		gantry_error_print(&err);
	log_info("%s%s%s%s", sandbox_state_name(s->sb.state), saved > 0 ? ", saved" : "",
		 s->sb.reason ? ": " : "", s->sb.reason ? s->sb.reason : "");
	remove_sockets();
	for (size_t i = 0; i < SUP_MAX_CLIENTS; i++) {
		struct client *c = s->clients[i];

		if (c && c->stop_waiter && client_reply(c, ok, ok ? NULL : s->sb.reason) == 0)
			outq_flush(&c->q, c->fd);
	}
	/* Gone before our lock is: a resume right after binds its ports. A VMM
	 * thread still running keeps its frame socket to the end. */
	if (s->m.net_started && !s->m.started)
		net_worker_stop(&s->m.net_worker);
	else if (s->m.net_started && s->m.net_worker.pid > 0)
		kill(s->m.net_worker.pid, SIGKILL);
	oauth_service_stop(&s->custody_svc);
	/* Our lock goes with us; a VMM thread still running goes too. */
	_exit(s->sb.state == SANDBOX_CRASHED);
}

/* --- start-up -------------------------------------------------------------------------------- */

static void ready(struct sup *s, const char *error)
{
	if (s->ready_fd < 0)
		return;
	if (error)
		dprintf(s->ready_fd, "error: %s\n", error);
	else
		dprintf(s->ready_fd, "ok\n");
	close(s->ready_fd);
	s->ready_fd = -1;
}

static int lock_wait(struct sup *s, int *fd, gantry_error_t *err)
{
	uint64_t deadline = now_ms() + SUP_LOCK_WAIT_MS;
	struct timespec pause = { .tv_nsec = 20 * 1000000L };

	for (;;) {
		int r = sandbox_lock(".", true, fd, err);

		if (r != 0)
			return r < 0 ? -1 : 0;
		/* A command may hold it a moment to look; a supervisor longer. */
		if (now_ms() >= deadline)
			return gantry_error(err, 0, "sandbox `%s` is already running", s->name);
		nanosleep(&pause, NULL);
	}
}

static int secrets_setup(struct sup *s, bool handed, gantry_error_t *err);

/* OAuth custody, where the sandbox has it: its providers read now (a file
 * gone bad since the start fails the boot, in one line), its requests
 * served on threads of their own; a login's URL goes to the guest that
 * asked, whose tool shows it (nobody watches this process's stderr). */
static int custody_setup(struct sup *s, gantry_error_t *err)
{
	if (!s->sb.oauth_custody)
		return 0;
	if (oauth_custody_open(&s->custody, s->sb.oauth_providers, err) < 0)
		return gantry_error_prefix(err, "OAuth custody");
	if (oauth_service_open(&s->custody_svc, &s->doors, &s->custody, true, err) < 0 ||
	    oauth_service_run(&s->custody_svc, err) < 0)
		return -1;
	return 0;
}

/* The VM goes on from the last `stop -snapshot` when there is one, and
 * may be saved again: the save's new files, handed to the VMM. */
static int pause_setup(struct sup *s, gantry_error_t *err)
{
	struct vmm_config *cfg = &s->m.cfg;

	if (snap_exists(SANDBOX_PAUSE)) {
		char origin[SANDBOX_NAME_MAX + 1] = "";
		cleanup_close int fd = open(SANDBOX_PAUSE "/" SNAP_ORIGIN,
					    O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, origin, sizeof(origin) - 1) : -1;

		if (snap_open_restore(SANDBOX_PAUSE, &cfg->restore_state_fd, &cfg->restore_mem_fd,
				      err) < 0)
			return gantry_error_prefix(err, "its save");
		s->restored = true;
		/* Another machine's save: this one is its clone. */
		origin[n > 0 ? n : 0] = '\0';
		if (strcmp(origin, s->name) != 0)
			s->m.renew_hostname = s->name;
	}
	if (snap_open_save(&s->pause, SANDBOX_PAUSE, err) < 0)
		return -1;
	cfg->save_state_fd = s->pause.state_fd;
	cfg->save_mem_fd = s->pause.mem_fd;
	return 0;
}

static int setup(struct sup *s, bool handed, gantry_error_t *err)
{
	sigset_t set;
	int lock;

	if (sandbox_dir(s->name, &s->dir, err) < 0)
		return -1;
	if (chdir(s->dir) < 0)
		return gantry_error_errno(err, "sandbox `%s`", s->name);
	if (lock_wait(s, &lock, err) < 0)
		return -1;
	(void)lock; /* held until we exit */
	if (sandbox_load(".", &s->sb, err) < 0 || secrets_setup(s, handed, err) < 0)
		return -1;
	if (s->sb.writable &&
	    (rwlayer_pair(s->sb.rwlayer, sandbox_image_id(&s->sb), false, err) < 0))
		return -1;

	remove_sockets();
	rename(SANDBOX_CONSOLE, SANDBOX_CONSOLE ".previous");
	if (machine_config(&s->m, &s->sb, ".", -1, &s->doors, err) < 0 || pause_setup(s, err) < 0)
		return -1;
	sup_shares_init(s);

	/* Before any thread exists, so the VMM's threads inherit the mask. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	s->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (s->sigfd < 0)
		return gantry_error_errno(err, "signalfd");
	if (s->m.cfg.timing)
		log_always("booting");
	sup_broker_init(s);
	if (custody_setup(s, err) < 0)
		return -1;
	s->ctl_listen = ctl_listen(SANDBOX_CTL, err);
	if (s->ctl_listen < 0 || machine_start(&s->m, err) < 0)
		return -1;
	sup_net_init(s, s->m.net_started ? s->m.net_worker.ctl_fd : -1, s->sb.ports,
		     s->sb.nr_ports);
	sup_egress_allowed(s);
	sup_egress_bindings(s);
	/* A SIGTERM while the guest boots (the start was cancelled, or a
	 * stop came first) ends the boot: setup fails and the VM goes with us. */
	agent_watch_cancel(s->m.agent, s->sigfd);
	if (machine_wait_ready(&s->m, SUP_AGENT_TIMEOUT_MS, err) < 0) {
		if (s->m.rc < 0)
			return -1;
		return gantry_error_prefix(err, "the guest did not come up (see %s/%s)", s->dir,
					   SANDBOX_CONSOLE);
	}
	agent_watch_cancel(s->m.agent, -1);
	if (s->restored) {
		/* Taken: a later boot starts afresh unless saved again. */
		snap_remove(SANDBOX_PAUSE);
		close(s->m.cfg.restore_state_fd);
		close(s->m.cfg.restore_mem_fd);
		s->m.cfg.restore_state_fd = s->m.cfg.restore_mem_fd = -1;
		log_info("restored from its save");
	}
	if (agent_take_link(s->m.agent, &s->control, &s->stdio_listen, err) < 0)
		return -1;
	if (fcntl(s->control, F_SETFL, fcntl(s->control, F_GETFL) | O_NONBLOCK) < 0 ||
	    fcntl(s->stdio_listen, F_SETFL, fcntl(s->stdio_listen, F_GETFL) | O_NONBLOCK) < 0)
		return gantry_error_errno(err, "the guest's sockets");
	s->sb.state = SANDBOX_RUNNING;
	s->sb.pid = (long)getpid();
	free(s->sb.reason);
	s->sb.reason = NULL;
	return sandbox_save(".", &s->sb, err);
}

/* --- the loop -------------------------------------------------------------------------------- */

enum {
	F_DONE,
	F_SIG,
	F_CONTROL,
	F_STDIO,
	F_CTL,
	F_NET,
	F_SHARE,
	F_BROKER,
	F_LOOKUP,
	F_EGRESS,
	F_FIXED
};
#define SUP_MAX_FDS                                                                                \
	(F_FIXED + SUP_MAX_CLIENTS + SUP_MAX_STREAMS + FS_MAX_EXPORTS + SUP_BROKER_CONNS)

static void on_signals(struct sup *s)
{
	struct signalfd_siginfo si;

	while (read(s->sigfd, &si, sizeof(si)) > 0)
		if (si.ssi_signo != SIGHUP)
			sup_begin_stop(s, "signal");
}

void sup_serve_once(struct sup *s, int max_ms)
{
	struct pollfd fds[SUP_MAX_FDS];
	struct client *owner[SUP_MAX_FDS];
	struct stream_wait *waiting[SUP_MAX_FDS];
	struct broker_conn *broker[SUP_MAX_FDS];
	size_t nb;
	uint64_t now = now_ms(), wake = UINT64_MAX;
	/* While the guest owes us reading, sessions' frames wait. */
	bool guest_busy = sup_guest_busy(s), timeout_now = false;
	int timeout = -1;
	size_t n = F_FIXED;

	if (s->control >= 0 && outq_stalled(&s->control_q, now, SUP_GUEST_STALL_MS))
		guest_cut(s, "the guest stopped reading its control connection", true);
	clients_expire(s, now, &wake);
	sup_net_tick(s, now, &wake);
	sup_shares_tick(s, now, &wake);
	sup_audit_tick(s, now, &wake);
	sup_egress_tick(s, now, &wake);
	fds[F_DONE] = (struct pollfd){ .fd = s->m.done_fd, .events = POLLIN };
	fds[F_SIG] = (struct pollfd){ .fd = s->sigfd, .events = POLLIN };
	fds[F_CONTROL] = (struct pollfd){
		.fd = s->control,
		.events = POLLIN | (outq_pending(&s->control_q) ? POLLOUT : 0),
	};
	fds[F_STDIO] = (struct pollfd){ .fd = s->stdio_listen, .events = POLLIN };
	fds[F_CTL] = (struct pollfd){ .fd = s->ctl_listen, .events = POLLIN };
	fds[F_NET] = (struct pollfd){ .fd = s->net.ctl, .events = POLLIN };
	/* Its answers are read where it is asked: only its hang-up here. */
	fds[F_SHARE] = (struct pollfd){ .fd = sup_share_worker_fd(s), .events = 0 };
	fds[F_BROKER] = (struct pollfd){ .fd = s->broker.listen, .events = POLLIN };
	fds[F_LOOKUP] = (struct pollfd){ .fd = s->broker.wake, .events = POLLIN };
	fds[F_EGRESS] = (struct pollfd){ .fd = sup_egress_fd(s), .events = POLLIN };
	if (s->control >= 0 && outq_pending(&s->control_q))
		wake = MIN(wake, s->control_q.progress_at + SUP_GUEST_STALL_MS);
	for (size_t i = 0; i < SUP_MAX_CLIENTS; i++) {
		struct client *c = s->clients[i];
		short ev = 0;

		if (c == NULL)
			continue;
		if (c->backlog && !guest_busy)
			timeout_now = true; /* its held-back frames can go */
		if (!(c->session && (guest_busy || c->backlog)) && !c->waiting)
			ev |= POLLIN;
		if (outq_pending(&c->q))
			ev |= POLLOUT;
		owner[n] = c;
		waiting[n] = NULL;
		fds[n++] = (struct pollfd){ .fd = c->fd, .events = ev };
	}
	for (size_t i = 0; i < SUP_MAX_STREAMS; i++) {
		if (s->streams[i].fd < 0)
			continue;
		owner[n] = NULL;
		waiting[n] = &s->streams[i];
		fds[n++] = (struct pollfd){ .fd = s->streams[i].fd, .events = POLLIN };
	}
	for (size_t i = 0; i < n; i++)
		broker[i] = NULL;
	/* A credential helper's. */
	nb = sup_broker_fds(s, fds + n, broker + n, now, &wake);
	for (size_t k = 0; k < nb; k++, n++)
		owner[n] = NULL, waiting[n] = NULL;
	/* Neither a client's nor a stream's: a live share worker's channel. */
	for (size_t k = sup_live_share_fds(s, fds + n); k; k--, n++)
		owner[n] = NULL, waiting[n] = NULL, broker[n] = NULL;
	if (s->stopping) {
		if (now >= s->stop_deadline)
			finish(s, "the guest did not power off in time");
		wake = MIN(wake, s->stop_deadline);
	}
	if (wake != UINT64_MAX)
		timeout = wake > now ? (int)MIN(wake - now, 60000) : 0;
	if (timeout_now)
		timeout = 0;
	if (max_ms >= 0 && (timeout < 0 || timeout > max_ms))
		timeout = max_ms;
	if (poll(fds, n, timeout) < 0) {
		if (errno != EINTR)
			log_error("poll: %s", strerror(errno));
		return;
	}
	if (fds[F_DONE].revents) {
		machine_join(&s->m);
		finish(s, s->killed);
	}
	if (fds[F_SIG].revents)
		on_signals(s);
	if (fds[F_CONTROL].revents && s->control >= 0)
		guest_event(s, fds[F_CONTROL].revents);
	if (fds[F_NET].revents && s->net.ctl >= 0)
		sup_net_event(s);
	if ((fds[F_SHARE].revents & (POLLHUP | POLLERR)) && sup_share_worker_fd(s) >= 0)
		sup_share_worker_gone(s);
	if (fds[F_BROKER].revents && s->broker.listen >= 0)
		sup_broker_accept(s);
	if (fds[F_LOOKUP].revents && s->broker.wake >= 0)
		sup_broker_woken(s);
	if (fds[F_EGRESS].revents && sup_egress_fd(s) >= 0)
		sup_egress_event(s);
	for (size_t i = F_FIXED; i < n; i++) {
		if (!fds[i].revents)
			continue;
		if (waiting[i]) {
			if (waiting[i]->fd == fds[i].fd)
				stream_event(s, waiting[i]);
			continue;
		}
		if (broker[i]) {
			sup_broker_event(s, broker[i], fds[i].fd, fds[i].revents);
			continue;
		}
		if (owner[i] == NULL) {
			sup_live_share_gone(s, fds[i].fd);
			continue;
		}
		/* A client dropped by an earlier event is gone. */
		for (size_t j = 0; j < SUP_MAX_CLIENTS; j++) {
			if (s->clients[j] == owner[i] && owner[i]->fd == fds[i].fd) {
				client_event(s, owner[i], fds[i].revents);
				break;
			}
		}
	}
	for (size_t i = 0; i < SUP_MAX_CLIENTS; i++)
		if (s->clients[i])
			client_backlog(s, s->clients[i]);
	if (s->cut_why)
		guest_cut(s, s->cut_why, true);
	if (fds[F_STDIO].revents)
		streams_accept(s);
	if (fds[F_CTL].revents)
		clients_accept(s);
}

static __attribute__((noreturn)) void serve(struct sup *s)
{
	for (;;)
		sup_serve_once(s, -1);
}

void sup_init(struct sup *s, const char *name)
{
	*s = (struct sup){ .name = name,
			   .ready_fd = -1,
			   .control = -1,
			   .stdio_listen = -1,
			   .ctl_listen = -1,
			   .sigfd = -1,
			   .m = MACHINE_NONE,
			   .doors = DOORS_INIT,
			   .pause = { .dir = -1, .state_fd = -1, .mem_fd = -1 },
			   .net = { .ctl = -1 },
			   .broker = { .listen = -1, .wake = -1 },
			   .custody_svc = OAUTH_SERVICE_NONE };
	for (size_t i = 0; i < SUP_MAX_STREAMS; i++)
		s->streams[i].fd = -1;
	for (size_t i = 0; i < SUP_BROKER_CONNS; i++)
		s->broker.c[i].fd = -1;
	outq_init(&s->control_q, SUP_GUEST_QUEUE + SUP_GUEST_OWN);
	s->dec = xmalloc(sizeof(*s->dec));
	proto_decoder_init(s->dec);
}

/* Its secrets: the values handed over (those from the environment), then
 * the file and command sources of its sandbox.json, each read once now so
 * that one that fails fails the boot. The values it inherited in its own
 * environment are wiped there: /proc/PID/environ shows none. */
static int secrets_setup(struct sup *s, bool handed, gantry_error_t *err)
{
	struct secret_env e;

	if (handed) {
		int r = secret_store_recv(&s->secrets, SUPERVISOR_SECRETS_FD, SUP_SECRETS_WAIT_MS,
					  err);

		close(SUPERVISOR_SECRETS_FD);
		if (r < 0)
			return -1;
	}
	for (size_t i = 0; i < s->sb.nr_secrets; i++) {
		struct secret_spec sp;
		char *inherited;
		int r;

		if (secret_spec_parse(s->sb.secrets[i], &sp, err) < 0)
			return -1;
		inherited = getenv(sp.name);
		if (inherited)
			explicit_bzero(inherited, strlen(inherited));
		secret_spec_free(&sp);
		/* A value handed over takes its spec (its hosts); the others
		 * are read from their sources. */
		r = secret_store_adopt(&s->secrets, s->sb.secrets[i], err);
		if (r == 0)
			r = secret_store_add(&s->secrets, s->sb.secrets[i], NULL, err);
		if (r < 0)
			return gantry_error_prefix(err, "its secrets");
	}
	if (secret_store_env(&s->secrets, &e, err) < 0)
		return -1;
	secret_env_free(&e);
	return 0;
}

/* What the sandbox runs without, as isolation.json says it. */
static void audit_isolation(struct sup *s)
{
	json_t *j = machine_isolation(&s->m), *v;
	size_t i;

	if (s->sb.isolation == CONFINE_OFF)
		sup_audit(s, "isolation", "off", NULL, NULL,
			  "process isolation is off: the VM runs in the supervisor");
	json_array_foreach(json_object_get(j, "degraded"), i, v)
		sup_audit(s, "isolation", "degraded", NULL, NULL, "%s", json_string_value(v));
	json_decref(j);
}

int supervisor_main(int argc, char **argv)
{
	static struct sup s;
	gantry_error_t err = NULL;
	bool handed = argc == 2 && strcmp(argv[1], "--secrets") == 0;

	if ((argc != 1 && !handed) || !sandbox_name_valid(argv[0])) {
		log_error("%s is for Gantry's own use", SUPERVISOR_ROLE);
		return 2;
	}
	/* Nothing of it in a core dump: it may hold secrets. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	log_init("supervisor", -1);
	sup_init(&s, argv[0]);
	secret_store_init(&s.secrets);
	if (fcntl(SUPERVISOR_READY_FD, F_SETFD, FD_CLOEXEC) == 0) {
		s.ready_fd = SUPERVISOR_READY_FD;
		dprintf(s.ready_fd, "pid %d\n", (int)getpid());
	}
	log_info("starting sandbox `%s`", s.name);
	if (setup(&s, handed, &err) < 0) {
		log_error("%s", gantry_error_str(err));
		ready(&s, gantry_error_str(err));
		/* A VM that is up goes with us. */
		_exit(1);
	}
	audit_isolation(&s);
	log_info("ready (guest agent and %s)", SANDBOX_CTL);
	ready(&s, NULL);
	serve(&s);
}
