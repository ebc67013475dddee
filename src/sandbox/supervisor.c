/* The supervisor (see supervisor.h): one poll loop on the main thread over
 * the guest's control connection, its stdio dials, ctl.sock and its
 * clients; the VMM on threads of its own.
 *
 * Sessions: a client's EXEC gets a supervisor-wide id before it goes to the
 * guest, and the guest's answers go back under the client's own id. When
 * the guest dials its stdio stream for a session, the supervisor reads the
 * stream's STREAM frame and passes the connection itself to the session's
 * client: stdio bytes never pass through here. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/session.h"
#include "common/assets.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "sandbox/ctl.h"
#include "sandbox/rwlayer.h"
#include "sandbox/state.h"
#include "sandbox/supervisor.h"
#include "vmm/vmm.h"

#define SUP_MAX_CLIENTS	     256
#define SUP_AGENT_TIMEOUT_MS 180000
#define SUP_READY_TIMEOUT_MS 300000 /* nested test hosts boot slowly */
#define SUP_STREAM_READ_MS   5000
#define SUP_LOCK_WAIT_MS     3000
#define SUP_SHUTDOWN_MS	     30000
#define SUP_CONSOLE_SCAN     (64 * 1024)
#define SUP_LOG_ROTATE	     (1u << 20)
#define SUP_APPEND_MAX	     512
#define SUP_REQUEST_MS	     10000 /* for a ctl client's request line */

struct client {
	int fd;
	bool session;	  /* past an "exec" request: agent frames now */
	bool stop_waiter; /* answer once the VM has ended */
	char *line;	  /* the request line so far */
	size_t len;
	struct proto_decoder *dec;
	uint32_t client_id, guest_id;
	bool done;	   /* EXIT or ERROR went to it */
	uint64_t deadline; /* its request line is due by then; 0: none due */
};

struct sup {
	const char *name;
	char *dir;
	struct sandbox sb;
	int ready_fd;
	char *kernel, *sysroot;
	char append[SUP_APPEND_MAX];
	struct vmm_config cfg;
	pthread_t thread;
	bool thread_on;
	int vm_rc, vm_status;
	gantry_error_t vm_err;
	int vm_done[2];
	struct agent *agent;
	int control, stdio_listen, ctl_listen, sigfd;
	struct proto_decoder *dec;
	struct client *clients[SUP_MAX_CLIENTS];
	uint32_t next_id;
	bool stopping;
	uint64_t stop_deadline;
};

static const char *const sockets[] = { SANDBOX_CTL, "1025.sock", "1026.sock", "vsock.sock" };

static void sup_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sup_log(const char *fmt, ...)
{
	char stamp[32], msg[1024];
	struct timespec ts;
	struct tm tm;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	clock_gettime(CLOCK_REALTIME, &ts);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", gmtime_r(&ts.tv_sec, &tm));
	fprintf(stderr, "%s.%03ldZ supervisor[%d]: %s\n", stamp, ts.tv_nsec / 1000000,
		(int)getpid(), msg);
}

static void *vm_thread(void *arg)
{
	struct sup *s = arg;
	char c = 1;

	s->vm_rc = vmm_run(&s->cfg, &s->vm_status, &s->vm_err);
	agent_cancel(s->agent);
	(void)!write(s->vm_done[1], &c, 1);
	return NULL;
}

static void remove_sockets(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(sockets); i++)
		unlink(sockets[i]);
}

/* --- clients ---------------------------------------------------------------------------- */

static void client_drop(struct sup *s, struct client *c)
{
	for (size_t i = 0; i < SUP_MAX_CLIENTS; i++)
		if (s->clients[i] == c)
			s->clients[i] = NULL;
	close(c->fd);
	free(c->line);
	free(c->dec);
	free(c);
}

/* A client that does not read its answers is not waited for: its socket
 * is non-blocking, and a reply that does not fit fails (then drop it). */
static int reply(struct client *c, bool ok, const char *error)
{
	json_t *j =
		ok ? json_pack("{s:b}", "ok", 1) : json_pack("{s:b,s:s}", "ok", 0, "error", error);
	int r = ctl_send_json(c->fd, j, NULL);

	json_decref(j);
	return r;
}

/* Drop c, hanging up on its session like a terminal on its process. */
static void client_hangup(struct sup *s, struct client *c);

static void send_guest(struct sup *s, const struct proto_msg *m)
{
	if (s->control >= 0 && proto_write_msg(s->control, m) < 0)
		sup_log("send %s to the guest: %s", proto_type_name(m->type), strerror(errno));
}

static void begin_stop(struct sup *s, const char *why)
{
	struct proto_msg m = { .type = PROTO_SHUTDOWN };

	if (s->stopping)
		return;
	sup_log("stopping (%s)", why);
	s->stopping = true;
	s->stop_deadline = now_ms() + SUP_SHUTDOWN_MS;
	/* The guest kills every process, syncs, unmounts and powers off. */
	send_guest(s, &m);
}

static void client_request(struct sup *s, struct client *c, size_t end)
{
	json_error_t jerr;
	json_t *j = json_loadb(c->line, end, 0, &jerr);
	const char *op = json_string_value(json_object_get(j, "op"));
	size_t rest = c->len - end - 1;

	if (op == NULL) {
		reply(c, false, "bad request");
		client_drop(s, c);
	} else if (strcmp(op, CTL_OP_STATUS) == 0) {
		json_t *r = json_pack("{s:b,s:s,s:i,s:s}", "ok", 1, "name", s->name, "pid",
				      (int)getpid(), "state", s->stopping ? "stopping" : "running");

		if (ctl_send_json(c->fd, r, NULL) < 0) {
			client_drop(s, c);
		} else {
			c->len = 0;
			c->deadline = now_ms() + SUP_REQUEST_MS;
		}
		json_decref(r);
	} else if (strcmp(op, CTL_OP_STOP) == 0) {
		c->stop_waiter = true;
		c->deadline = 0;
		begin_stop(s, "asked to");
	} else if (strcmp(op, CTL_OP_EXEC) == 0) {
		if (s->stopping) {
			reply(c, false, "the sandbox is stopping");
			client_drop(s, c);
		} else {
			c->session = true;
			c->deadline = 0;
			c->dec = xmalloc(sizeof(*c->dec));
			proto_decoder_init(c->dec);
			if (rest)
				proto_decoder_push(c->dec, c->line + end + 1, rest);
			if (reply(c, true, NULL) < 0)
				client_drop(s, c);
		}
	} else {
		reply(c, false, "unknown op");
		client_drop(s, c);
	}
	json_decref(j);
}

static void client_frame(struct sup *s, struct client *c, struct proto_msg *m, bool *drop)
{
	switch (m->type) {
	case PROTO_EXEC:
		if (c->guest_id) {
			*drop = true;
			return;
		}
		c->client_id = m->u.exec.id;
		c->guest_id = ++s->next_id ? s->next_id : ++s->next_id;
		m->u.exec.id = c->guest_id;
		send_guest(s, m);
		break;
	case PROTO_SIGNAL:
		if (c->guest_id && !c->done) {
			m->u.signal.id = c->guest_id;
			send_guest(s, m);
		}
		break;
	case PROTO_RESIZE:
		if (c->guest_id && !c->done) {
			m->u.resize.id = c->guest_id;
			send_guest(s, m);
		}
		break;
	default:
		*drop = true;
	}
}

static void client_event(struct sup *s, struct client *c)
{
	bool drop = false;
	ssize_t n;

	if (!c->session) {
		char *nl;

		n = recv(c->fd, c->line + c->len, CTL_LINE_MAX - c->len, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			client_drop(s, c);
			return;
		}
		c->len += (size_t)n;
		nl = memchr(c->line, '\n', c->len);
		if (nl)
			client_request(s, c, (size_t)(nl - c->line));
		else if (c->len == CTL_LINE_MAX)
			client_drop(s, c);
		return;
	}
	n = proto_decoder_fill(c->dec, c->fd);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0) {
		struct proto_msg m;
		const char *why;
		int k;

		while (!drop && (k = proto_decoder_next(c->dec, &m, &why)) > 0) {
			client_frame(s, c, &m, &drop);
			proto_msg_free(&m);
		}
		if (k < 0)
			drop = true;
	}
	if (n <= 0 || drop)
		client_hangup(s, c);
}

static void client_hangup(struct sup *s, struct client *c)
{
	if (c->guest_id && !c->done) {
		struct proto_msg m = { .type = PROTO_SIGNAL };

		m.u.signal.id = c->guest_id;
		m.u.signal.signo = SIGHUP;
		send_guest(s, &m);
	}
	client_drop(s, c);
}

static void accept_client(struct sup *s)
{
	struct client *c;
	size_t slot;
	int fd = accept4(s->ctl_listen, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	if (!ctl_peer_ok(fd)) {
		static const char no[] = "{\"ok\":false,\"error\":\"permission denied\"}\n";

		sup_log("refused a ctl.sock connection from another user");
		(void)!send(fd, no, sizeof(no) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		close(fd);
		return;
	}
	for (slot = 0; slot < SUP_MAX_CLIENTS && s->clients[slot]; slot++)
		;
	if (slot == SUP_MAX_CLIENTS) {
		close(fd);
		return;
	}
	c = xzalloc(sizeof(*c));
	c->fd = fd;
	c->line = xmalloc(CTL_LINE_MAX);
	c->deadline = now_ms() + SUP_REQUEST_MS;
	s->clients[slot] = c;
}

static struct client *client_by_guest_id(struct sup *s, uint32_t id)
{
	for (size_t i = 0; i < SUP_MAX_CLIENTS; i++)
		if (s->clients[i] && s->clients[i]->guest_id == id)
			return s->clients[i];
	return NULL;
}

/* --- the guest ----------------------------------------------------------------------------- */

static void guest_frames(struct sup *s)
{
	ssize_t n = proto_decoder_fill(s->dec, s->control);
	struct proto_msg m;
	const char *why;
	int k;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		sup_log("the guest closed its control connection");
		close(s->control);
		s->control = -1;
		return;
	}
	while ((k = proto_decoder_next(s->dec, &m, &why)) > 0) {
		struct client *c = NULL;

		if (m.type == PROTO_STARTED)
			c = client_by_guest_id(s, m.u.started.id);
		else if (m.type == PROTO_EXIT)
			c = client_by_guest_id(s, m.u.exit.id);
		else if (m.type == PROTO_ERROR && m.u.error.id)
			c = client_by_guest_id(s, m.u.error.id);
		else if (m.type == PROTO_ERROR)
			sup_log("guest: %s", m.u.error.message);
		if (c) {
			if (m.type == PROTO_STARTED)
				m.u.started.id = c->client_id;
			else if (m.type == PROTO_EXIT)
				m.u.exit.id = c->client_id;
			else
				m.u.error.id = c->client_id;
			c->done = m.type != PROTO_STARTED;
			if (proto_write_msg(c->fd, &m) < 0)
				client_hangup(s, c);
		}
		proto_msg_free(&m);
	}
	if (k < 0) {
		sup_log("guest control connection: %s", why);
		close(s->control);
		s->control = -1;
	}
}

/* Hand a guest stdio stream to its session's client, with our STREAM. */
static int pass_stream(struct client *c, int fd)
{
	struct proto_msg m = { .type = PROTO_STREAM };
	uint8_t frame[PROTO_HDR_SIZE + 8];
	ssize_t len;

	m.u.stream.id = c->client_id;
	len = proto_encode(&m, frame, sizeof(frame));
	if (len < 0)
		return -1;
	return unix_send_fd(c->fd, frame, (size_t)len, fd, MSG_NOSIGNAL | MSG_DONTWAIT) == len ? 0
												 : -1;
}

static void accept_stream(struct sup *s)
{
	struct timeval tv = { .tv_sec = SUP_STREAM_READ_MS / 1000 };
	uint8_t frame[PROTO_HDR_SIZE + 4];
	struct proto_msg m;
	struct client *c;
	const char *why;
	int fd = accept4(s->stdio_listen, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return;
	/* The guest writes STREAM as it connects; read exactly that frame. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (recv(fd, frame, sizeof(frame), MSG_WAITALL) != (ssize_t)sizeof(frame) ||
	    proto_decode(frame, sizeof(frame), &m, &why) < 0 || m.type != PROTO_STREAM) {
		sup_log("a guest stdio stream without its STREAM frame");
		close(fd);
		return;
	}
	c = client_by_guest_id(s, m.u.stream.id);
	if (c && pass_stream(c, fd) < 0) {
		sup_log("a session's client did not take its stdio stream: dropped");
		client_hangup(s, c);
	}
	close(fd);
}

/* --- the end ------------------------------------------------------------------------------- */

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

static __attribute__((noreturn)) void finish(struct sup *s, bool forced)
{
	free(s->sb.reason);
	s->sb.reason = NULL;
	if (forced) {
		s->sb.state = SANDBOX_STOPPED;
		s->sb.reason = xstrdup("the guest did not power off in time; its VM was ended");
	} else if (s->stopping && s->vm_rc == 0) {
		s->sb.state = SANDBOX_STOPPED;
	} else {
		s->sb.state = SANDBOX_CRASHED;
		if (s->vm_rc < 0)
			xasprintf(&s->sb.reason, "VMM failed: %s", gantry_error_str(s->vm_err));
		else if (console_says("Kernel panic"))
			xasprintf(&s->sb.reason, "guest kernel panic (see %s/%s)", s->dir,
				  SANDBOX_CONSOLE);
		else
			xasprintf(&s->sb.reason, "the guest ended on its own (status %d)",
				  s->vm_status);
	}
	s->sb.pid = 0;
	if (sandbox_save(".", &s->sb, &s->vm_err) < 0)
		sup_log("%s", gantry_error_str(s->vm_err));
	sup_log("%s%s%s", sandbox_state_name(s->sb.state), s->sb.reason ? ": " : "",
		s->sb.reason ? s->sb.reason : "");
	remove_sockets();
	for (size_t i = 0; i < SUP_MAX_CLIENTS; i++)
		if (s->clients[i] && s->clients[i]->stop_waiter)
			reply(s->clients[i], true, NULL);
	fflush(stderr);
	/* Our lock goes with us; a VMM thread still running goes too. */
	_exit(s->sb.state == SANDBOX_CRASHED);
}

/* --- start-up ------------------------------------------------------------------------------ */

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

static int setup(struct sup *s, gantry_error_t *err)
{
	int lock, n;
	sigset_t set;
	bool timing = vmm_timing_requested();

	if (sandbox_dir(s->name, &s->dir, err) < 0 ||
	    assets_path(ASSET_KERNEL, &s->kernel, err) < 0 ||
	    assets_path(ASSET_SYSROOT, &s->sysroot, err) < 0)
		return -1;
	if (chdir(s->dir) < 0)
		return gantry_error_errno(err, "sandbox `%s`", s->name);
	if (lock_wait(s, &lock, err) < 0)
		return -1;
	(void)lock; /* held until we exit */
	if (sandbox_load(".", &s->sb, err) < 0)
		return -1;
	if (s->sb.writable &&
	    (rwlayer_pair(s->sb.rwlayer, sandbox_image_id(&s->sb), false, err) < 0))
		return -1;

	remove_sockets();
	rename(SANDBOX_CONSOLE, SANDBOX_CONSOLE ".previous");
	if (agent_listen(".", &s->agent, err) < 0)
		return -1;
	s->ctl_listen = ctl_listen(SANDBOX_CTL, err);
	if (s->ctl_listen < 0)
		return -1;

	/* With timing, gantry-init logs its milestones on the console too. */
	n = snprintf(s->append, sizeof(s->append),
		     "root=/dev/vda rootfstype=erofs ro init=/sbin/gantry-init gantry.persist=1 "
		     "gantry.hostname=%s %s%s",
		     s->sb.name, s->sb.writable ? "gantry.rw=1" : "gantry.readonly=1",
		     timing ? " gantry.debug=1" : "");
	if (n < 0 || (size_t)n >= sizeof(s->append))
		return gantry_error(err, 0, "kernel command line too long");
	s->cfg = (struct vmm_config){
		.kernel = s->kernel,
		.append = s->append,
		.console = SANDBOX_CONSOLE,
		.vsock_dir = ".",
		.cpus = (unsigned int)s->sb.cpus,
		.mem_mib = s->sb.mem_mib,
		.timing = timing,
	};
	s->cfg.disks[s->cfg.nr_disks++] = (struct vmm_disk){ s->sysroot, true };
	s->cfg.disks[s->cfg.nr_disks++] = (struct vmm_disk){ s->sb.image_path, true };
	if (s->sb.writable)
		s->cfg.disks[s->cfg.nr_disks++] = (struct vmm_disk){ s->sb.rwlayer, false };
	if (vmm_validate(&s->cfg, err) < 0)
		return -1;

	/* Before any thread exists, so the VMM's threads inherit the mask. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	s->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (s->sigfd < 0 || pipe2(s->vm_done, O_CLOEXEC | O_NONBLOCK) < 0)
		return gantry_error_errno(err, "signalfd");
	if (s->cfg.timing)
		sup_log("booting");
	if (pthread_create(&s->thread, NULL, vm_thread, s) != 0)
		return gantry_error(err, 0, "cannot start the VM thread");
	s->thread_on = true;
	if (agent_wait_ready(s->agent, SUP_AGENT_TIMEOUT_MS, NULL, err) < 0) {
		if (s->vm_rc < 0) {
			gantry_error_free(err);
			return gantry_error(err, 0, "%s", gantry_error_str(s->vm_err));
		}
		return gantry_error_prefix(err, "the guest did not come up (see %s/%s)", s->dir,
					   SANDBOX_CONSOLE);
	}
	if (agent_take_link(s->agent, &s->control, &s->stdio_listen, err) < 0)
		return -1;
	s->sb.state = SANDBOX_RUNNING;
	s->sb.pid = (long)getpid();
	free(s->sb.reason);
	s->sb.reason = NULL;
	return sandbox_save(".", &s->sb, err);
}

enum { F_DONE, F_SIG, F_CONTROL, F_STDIO, F_CTL, F_CLIENTS };

static __attribute__((noreturn)) void serve(struct sup *s)
{
	struct pollfd fds[F_CLIENTS + SUP_MAX_CLIENTS];
	struct client *owner[F_CLIENTS + SUP_MAX_CLIENTS];

	for (;;) {
		size_t n = F_CLIENTS;
		int timeout = -1;

		fds[F_DONE] = (struct pollfd){ .fd = s->vm_done[0], .events = POLLIN };
		fds[F_SIG] = (struct pollfd){ .fd = s->sigfd, .events = POLLIN };
		fds[F_CONTROL] = (struct pollfd){ .fd = s->control, .events = POLLIN };
		fds[F_STDIO] = (struct pollfd){ .fd = s->stdio_listen, .events = POLLIN };
		fds[F_CTL] = (struct pollfd){ .fd = s->ctl_listen, .events = POLLIN };
		uint64_t now = now_ms(), wake = UINT64_MAX;

		for (size_t i = 0; i < SUP_MAX_CLIENTS; i++) {
			struct client *c = s->clients[i];

			if (c == NULL)
				continue;
			if (c->deadline && now >= c->deadline) {
				client_drop(s, c); /* no request line in time */
				continue;
			}
			if (c->deadline)
				wake = MIN(wake, c->deadline);
			owner[n] = c;
			fds[n++] = (struct pollfd){ .fd = c->fd, .events = POLLIN };
		}
		if (s->stopping) {
			if (now >= s->stop_deadline)
				finish(s, true);
			wake = MIN(wake, s->stop_deadline);
		}
		if (wake != UINT64_MAX)
			timeout = (int)(wake - now);
		if (poll(fds, n, timeout) < 0) {
			if (errno != EINTR)
				sup_log("poll: %s", strerror(errno));
			continue;
		}
		if (fds[F_DONE].revents) {
			pthread_join(s->thread, NULL);
			finish(s, false);
		}
		if (fds[F_SIG].revents) {
			struct signalfd_siginfo si;

			while (read(s->sigfd, &si, sizeof(si)) > 0)
				if (si.ssi_signo != SIGHUP)
					begin_stop(s, "signal");
		}
		if (fds[F_CONTROL].revents && s->control >= 0)
			guest_frames(s);
		if (fds[F_STDIO].revents)
			accept_stream(s);
		for (size_t i = F_CLIENTS; i < n; i++) {
			/* A client dropped by an earlier event is gone. */
			for (size_t j = 0; j < SUP_MAX_CLIENTS; j++) {
				if (s->clients[j] == owner[i] && fds[i].revents) {
					client_event(s, owner[i]);
					break;
				}
			}
		}
		if (fds[F_CTL].revents)
			accept_client(s);
	}
}

int supervisor_main(int argc, char **argv)
{
	static struct sup s = { .ready_fd = SUPERVISOR_READY_FD,
				.control = -1,
				.stdio_listen = -1,
				.ctl_listen = -1,
				.sigfd = -1,
				.vm_done = { -1, -1 } };
	gantry_error_t err = NULL;

	if (argc != 1 || !sandbox_name_valid(argv[0])) {
		fprintf(stderr, "gantry: %s is for Gantry's own use\n", SUPERVISOR_ROLE);
		return 2;
	}
	if (fcntl(s.ready_fd, F_GETFD) < 0)
		s.ready_fd = -1;
	else
		fcntl(s.ready_fd, F_SETFD, FD_CLOEXEC);
	s.name = argv[0];
	s.dec = xmalloc(sizeof(*s.dec));
	proto_decoder_init(s.dec);
	sup_log("starting sandbox `%s`", s.name);
	if (setup(&s, &err) < 0) {
		sup_log("%s", gantry_error_str(err));
		ready(&s, gantry_error_str(err));
		fflush(stderr);
		/* A VM that is up goes with us. */
		_exit(1);
	}
	sup_log("ready (guest agent and %s)", SANDBOX_CTL);
	ready(&s, NULL);
	serve(&s);
}

/* --- spawning ------------------------------------------------------------------------------ */

static void rotate_log(const char *path)
{
	struct stat st;
	cleanup_free char *prev = NULL;

	if (stat(path, &st) < 0 || (uint64_t)st.st_size < SUP_LOG_ROTATE)
		return;
	xasprintf(&prev, "%s.previous", path);
	rename(path, prev);
}

/* An fd above the ready fd, so the dup2s below cannot clobber it. */
static int high_fd(int fd)
{
	int hi;

	if (fd < 0 || fd > SUPERVISOR_READY_FD)
		return fd;
	hi = fcntl(fd, F_DUPFD_CLOEXEC, SUPERVISOR_READY_FD + 1);
	close(fd);
	return hi;
}

/* The grandchild: a new session with no terminal, stdio to the log, the
 * ready pipe as fd 3, then the supervisor role itself. No exec: the binary
 * is already loaded, and pages of libraries the supervisor never uses (the
 * registry and archive code's) never become resident in it. */
static __attribute__((noreturn)) void spawn_child(const char *name, const char *log, int ready_w)
{
	char *args[] = { (char *)name, NULL };
	sigset_t none;
	int null, logfd;
	pid_t pid;

	setsid();
	pid = fork();
	if (pid != 0)
		_exit(pid < 0);
	null = high_fd(open("/dev/null", O_RDWR | O_CLOEXEC));
	logfd = high_fd(open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
	if (null < 0 || logfd < 0)
		_exit(127);
	if (ready_w != SUPERVISOR_READY_FD && dup2(ready_w, SUPERVISOR_READY_FD) < 0)
		_exit(127);
	if (dup2(null, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0)
		_exit(127);
	close_range(SUPERVISOR_READY_FD + 1, ~0U, 0);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	_exit(supervisor_main(1, args));
}

int supervisor_spawn(const char *name, const char *dir, gantry_error_t *err)
{
	cleanup_free char *log = NULL;
	char buf[4096];
	size_t got = 0;
	uint64_t deadline = now_ms() + SUP_READY_TIMEOUT_MS;
	int p[2], status;
	pid_t pid;

	xasprintf(&log, "%s/%s", dir, SANDBOX_LOG);
	rotate_log(log);
	if (pipe2(p, O_CLOEXEC) < 0)
		return gantry_error_errno(err, "pipe");
	p[1] = high_fd(p[1]);
	/* Nothing buffered may reach the supervisor's log twice. */
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return gantry_error_errno(err, "fork");
	}
	if (pid == 0)
		spawn_child(name, log, p[1]);
	close(p[1]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	for (;;) {
		struct pollfd pf = { .fd = p[0], .events = POLLIN };
		uint64_t now = now_ms();
		ssize_t n;
		int r;

		if (now >= deadline) {
			close(p[0]);
			return gantry_error(err, 0, "sandbox `%s` was not ready in %d s (see %s)",
					    name, SUP_READY_TIMEOUT_MS / 1000, log);
		}
		r = poll(&pf, 1, (int)(deadline - now));
		if (r < 0 && errno == EINTR)
			continue;
		n = r > 0 ? read(p[0], buf + got, sizeof(buf) - 1 - got) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || got + (size_t)n == sizeof(buf) - 1) {
			if (n > 0)
				got += (size_t)n;
			break;
		}
		got += (size_t)n;
	}
	close(p[0]);
	buf[got] = '\0';
	if (strncmp(buf, "ok\n", 3) == 0)
		return 0;
	if (strncmp(buf, "error: ", 7) == 0) {
		buf[strcspn(buf, "\n")] = '\0';
		return gantry_error(err, 0, "%s", buf + 7);
	}
	return gantry_error(err, 0, "the supervisor of `%s` ended before it was ready (see %s)",
			    name, log);
}
