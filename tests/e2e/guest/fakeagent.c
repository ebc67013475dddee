/* fakeagent: a hostile stand-in for gantry-init as PID 1 of a guest, for the
 * end-to-end tests that check the host never waits on its guest
 * (tests/e2e/test_hostile.py). It speaks just enough of the agent protocol
 * (src/proto/agent.h) for the host to take it for gantry-init: HELLO and
 * READY, then for each EXEC a STARTED, the session's stdio stream (its
 * STREAM frame, then EOF on stdout and stderr) and EXIT 0. SHUTDOWN, or the
 * host closing the control connection, ends the VM. What it does wrong is
 * chosen by the command an EXEC names:
 *
 *   fake-stop-reading       STARTED, then it never reads the control
 *                           connection again: what the host sends piles up
 *   fake-console BYTES      a child writes BYTES to the serial console, not
 *                           one newline among them; then the session prints
 *                           "fake-console: wrote BYTES bytes in MS ms" and
 *                           EXITs with the child's status
 *   fake-console BYTES die  the same, then a newline and the line
 *                           "fake-console: wrote BYTES bytes" on the console,
 *                           and the VM ends without an EXIT
 *   anything else           runs nothing: EXIT 0 at once
 *
 * and, before it dials the host, by the sandbox's name (gantry.hostname=NAME
 * on the kernel command line, read from /proc/cmdline):
 *
 *   fake-console-boot-BYTES  BYTES and that line on the console, then the VM
 *                            ends without the host ever hearing from it
 *
 * The console is /dev/ttyS0 in raw mode: the guest kernel has no iopl(), so
 * the bytes go through its 8250 driver, a VM exit or so for each. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#include "guest/poweroff.h"
#include "proto/agent.h"

#define CONSOLE_TTY	  "/dev/ttyS0" /* the VMM's 16550 (src/vmm/serial.c) */
#define FLOOD_CHUNK	  4096
#define DIAL_TIMEOUT_MS	  5000
#define DIAL_RETRY_MS	  10
#define CMDLINE_MAX	  4096
#define HOSTNAME_PARAM	  "gantry.hostname="
#define BOOT_FLOOD_PREFIX "fake-console-boot-"
#define MAX_STREAMS	  64 /* finished streams still open, read until the host closes them */
#define MAX_FLOODS	  8

struct flood {
	pid_t pid; /* 0: slot free */
	uint32_t id;
	int stream;
	unsigned long long bytes;
	uint64_t began_ms;
	bool die;
};

struct fake {
	int control;
	bool reading; /* false once a session said fake-stop-reading */
	int sigfd;
	int streams[MAX_STREAMS];
	size_t nstreams;
	struct flood floods[MAX_FLOODS];
	struct proto_decoder dec;
};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	dprintf(2, "fakeagent: %s\n", buf);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool parse_bytes(const char *s, unsigned long long *out)
{
	char *end;

	if (s == NULL || *s < '0' || *s > '9')
		return false;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno == 0 && *end == '\0';
}

/* BYTES bytes of 'x' on the serial console, in raw mode (nothing added,
 * nothing translated), drained; with marker, then a newline and a line
 * saying how many went, for a host that quotes the console's last lines.
 * 0, or -1 with errno. */
static int console_flood(unsigned long long bytes, bool marker)
{
	static char chunk[FLOOD_CHUNK];
	unsigned long long total = bytes;
	struct termios t;
	char line[96];
	int fd = open(CONSOLE_TTY, O_WRONLY | O_NOCTTY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (tcgetattr(fd, &t) == 0) {
		cfmakeraw(&t);
		tcsetattr(fd, TCSANOW, &t);
	}
	memset(chunk, 'x', sizeof(chunk));
	while (bytes) {
		size_t n = bytes < sizeof(chunk) ? (size_t)bytes : sizeof(chunk);
		ssize_t w = write(fd, chunk, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			return -1;
		}
		bytes -= (size_t)w;
	}
	if (marker) {
		snprintf(line, sizeof(line), "\nfake-console: wrote %llu bytes\n", total);
		(void)!write(fd, line, strlen(line));
	}
	tcdrain(fd);
	close(fd);
	return 0;
}

/* The bytes a sandbox named fake-console-boot-BYTES is to write at boot. */
static bool boot_flood_bytes(unsigned long long *bytes)
{
	char buf[CMDLINE_MAX];
	FILE *f = fopen("/proc/cmdline", "re");
	size_t n;

	if (f == NULL)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	for (char *tok = strtok(buf, " \n"); tok; tok = strtok(NULL, " \n")) {
		if (strncmp(tok, HOSTNAME_PARAM, strlen(HOSTNAME_PARAM)) != 0)
			continue;
		tok += strlen(HOSTNAME_PARAM);
		if (strncmp(tok, BOOT_FLOOD_PREFIX, strlen(BOOT_FLOOD_PREFIX)) == 0)
			return parse_bytes(tok + strlen(BOOT_FLOOD_PREFIX), bytes);
	}
	return false;
}

static int dial(unsigned int port)
{
	struct sockaddr_vm sa = {
		.svm_family = AF_VSOCK,
		.svm_cid = VMADDR_CID_HOST,
		.svm_port = port,
	};
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int dial_control(void)
{
	uint64_t deadline = now_ms() + DIAL_TIMEOUT_MS;
	struct timespec pause = { .tv_nsec = DIAL_RETRY_MS * 1000000L };
	int fd;

	while ((fd = dial(PROTO_CONTROL_PORT)) < 0 && now_ms() < deadline)
		nanosleep(&pause, NULL);
	return fd;
}

static __attribute__((noreturn)) void fake_end(int status)
{
	sync();
	guest_poweroff(status);
}

static void fake_send(struct fake *f, const struct proto_msg *m)
{
	if (proto_write_msg(f->control, m) < 0) {
		say("send %s: %s", proto_type_name(m->type), strerror(errno));
		fake_end(1);
	}
}

/* Frames on a stdio stream; the host may be gone already: no matter. */
static void stream_send(int fd, const struct proto_msg *m)
{
	if (fd >= 0 && proto_write_msg(fd, m) < 0)
		say("stdio stream: send %s: %s", proto_type_name(m->type), strerror(errno));
}

static int stream_open(uint32_t id)
{
	struct proto_msg m = { .type = PROTO_STREAM };
	int fd = dial(PROTO_STDIO_PORT);

	if (fd < 0) {
		say("dial the stdio port: %s", strerror(errno));
		return -1;
	}
	m.u.stream.id = id;
	stream_send(fd, &m);
	return fd;
}

/* EOF on stdout and stderr; the stream stays open, read and dropped, until
 * the host closes it (a close right away could cut what is in flight). */
static void stream_finish(struct fake *f, int fd, const char *out)
{
	struct proto_msg m = { .type = PROTO_STDOUT };

	if (fd < 0)
		return;
	if (out) {
		m.u.data.data = (const uint8_t *)out;
		m.u.data.len = strlen(out);
		stream_send(fd, &m);
	}
	m = (struct proto_msg){ .type = PROTO_EOF };
	m.u.eof.fd = 1;
	stream_send(fd, &m);
	m.u.eof.fd = 2;
	stream_send(fd, &m);
	if (f->nstreams == MAX_STREAMS) {
		close(f->streams[0]);
		memmove(f->streams, f->streams + 1, --f->nstreams * sizeof(int));
	}
	f->streams[f->nstreams++] = fd;
}

static void send_started(struct fake *f, uint32_t id, pid_t pid)
{
	struct proto_msg m = { .type = PROTO_STARTED };

	m.u.started.id = id;
	m.u.started.pid = (uint32_t)pid;
	fake_send(f, &m);
}

static void send_exit(struct fake *f, uint32_t id, uint32_t code)
{
	struct proto_msg m = { .type = PROTO_EXIT };

	m.u.exit.id = id;
	m.u.exit.code = code;
	fake_send(f, &m);
}

static void send_error(struct fake *f, uint32_t id, const char *message)
{
	struct proto_msg m = { .type = PROTO_ERROR };

	m.u.error.id = id;
	m.u.error.code = PROTO_ERR_CANNOT;
	m.u.error.message = (char *)message;
	fake_send(f, &m);
}

static void flood_start(struct fake *f, const struct proto_exec *e)
{
	struct flood *fl = NULL;
	unsigned long long bytes;
	pid_t pid;

	if (e->argc < 2 || !parse_bytes(e->argv[1], &bytes) ||
	    (e->argc == 3 && strcmp(e->argv[2], "die") != 0) || e->argc > 3) {
		send_error(f, e->id, "usage: fake-console BYTES [die]");
		return;
	}
	for (size_t i = 0; i < MAX_FLOODS && fl == NULL; i++)
		if (f->floods[i].pid == 0)
			fl = &f->floods[i];
	if (fl == NULL) {
		send_error(f, e->id, "too many fake-console sessions");
		return;
	}
	*fl = (struct flood){ .id = e->id, .bytes = bytes, .die = e->argc == 3 };
	fl->stream = stream_open(e->id);
	fl->began_ms = now_ms();
	pid = fork();
	if (pid < 0) {
		send_error(f, e->id, "fork failed");
		if (fl->stream >= 0)
			close(fl->stream);
		return;
	}
	if (pid == 0)
		_exit(console_flood(bytes, fl->die) < 0 ? 1 : 0);
	fl->pid = pid;
	send_started(f, e->id, pid);
}

static void flood_reaped(struct fake *f, pid_t pid, int status)
{
	char line[128];

	for (size_t i = 0; i < MAX_FLOODS; i++) {
		struct flood *fl = &f->floods[i];
		uint32_t code = WIFEXITED(status) ? (uint32_t)WEXITSTATUS(status) : 1;

		if (fl->pid != pid)
			continue;
		fl->pid = 0;
		if (fl->die)
			fake_end(0);
		snprintf(line, sizeof(line), "fake-console: wrote %llu bytes in %llu ms\n",
			 code ? 0ULL : fl->bytes, (unsigned long long)(now_ms() - fl->began_ms));
		stream_finish(f, fl->stream, line);
		send_exit(f, fl->id, code);
		return;
	}
}

static void handle_exec(struct fake *f, const struct proto_exec *e)
{
	const char *cmd = e->argv[0];

	if (strcmp(cmd, "fake-stop-reading") == 0) {
		send_started(f, e->id, getpid());
		say("session %u: the control connection is no longer read", e->id);
		f->reading = false;
	} else if (strcmp(cmd, "fake-console") == 0) {
		flood_start(f, e);
	} else {
		send_started(f, e->id, getpid());
		stream_finish(f, stream_open(e->id), NULL);
		send_exit(f, e->id, 0);
	}
}

static void read_control(struct fake *f)
{
	ssize_t n = proto_decoder_fill(&f->dec, f->control);
	struct proto_msg m;
	const char *why;
	int k;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0)
		fake_end(0); /* the host is gone */
	while (f->reading && (k = proto_decoder_next(&f->dec, &m, &why)) > 0) {
		if (m.type == PROTO_EXEC)
			handle_exec(f, &m.u.exec);
		else if (m.type == PROTO_SHUTDOWN)
			fake_end((int)m.u.shutdown.status);
		/* SIGNAL and RESIZE: nothing runs that could take them. */
		proto_msg_free(&m);
	}
	if (f->reading && k < 0) {
		say("control connection: %s", why);
		fake_end(1);
	}
}

static void reap(struct fake *f)
{
	struct signalfd_siginfo si;
	int status;
	pid_t pid;

	while (read(f->sigfd, &si, sizeof(si)) > 0)
		;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		flood_reaped(f, pid, status);
}

/* The first n streams were polled, in fds. */
static void read_streams(struct fake *f, const struct pollfd *fds, size_t n)
{
	char buf[4096];

	for (size_t i = n; i-- > 0;) {
		if (!fds[i].revents || read(f->streams[i], buf, sizeof(buf)) > 0)
			continue;
		close(f->streams[i]);
		memmove(f->streams + i, f->streams + i + 1, (--f->nstreams - i) * sizeof(int));
	}
}

static void send_hello(struct fake *f)
{
	struct proto_msg m = { .type = PROTO_HELLO };
	struct timespec ts;
	struct utsname u;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	m.u.hello.version = PROTO_VERSION;
	m.u.hello.uptime_ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	m.u.hello.ncpus = 1;
	m.u.hello.kernel = uname(&u) == 0 ? u.release : "";
	fake_send(f, &m);
	m = (struct proto_msg){ .type = PROTO_READY };
	fake_send(f, &m);
}

enum { P_SIG, P_CONTROL, P_STREAMS };

int main(void)
{
	static struct fake f = { .control = -1, .reading = true };
	struct pollfd fds[P_STREAMS + MAX_STREAMS];
	unsigned long long bytes;
	sigset_t chld;

	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 &&
	    errno != EBUSY)
		say("mount /proc: %s", strerror(errno));
	if (boot_flood_bytes(&bytes)) {
		if (console_flood(bytes, true) < 0)
			say("console flood: %s", strerror(errno));
		fake_end(1);
	}
	f.control = dial_control();
	if (f.control < 0) {
		say("cannot reach the host on vsock port %d: %s", PROTO_CONTROL_PORT,
		    strerror(errno));
		fake_end(1);
	}
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	f.sigfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
	if (f.sigfd < 0) {
		say("signalfd: %s", strerror(errno));
		fake_end(1);
	}
	proto_decoder_init(&f.dec);
	send_hello(&f);
	for (;;) {
		size_t polled = f.nstreams;

		fds[P_SIG] = (struct pollfd){ .fd = f.sigfd, .events = POLLIN };
		fds[P_CONTROL] =
			(struct pollfd){ .fd = f.reading ? f.control : -1, .events = POLLIN };
		for (size_t i = 0; i < f.nstreams; i++)
			fds[P_STREAMS + i] =
				(struct pollfd){ .fd = f.streams[i], .events = POLLIN };
		if (poll(fds, P_STREAMS + polled, -1) < 0) {
			if (errno != EINTR)
				say("poll: %s", strerror(errno));
			continue;
		}
		/* Streams first: reaping and EXECs add to the list. */
		read_streams(&f, fds + P_STREAMS, polled);
		if (fds[P_SIG].revents)
			reap(&f);
		if (fds[P_CONTROL].revents)
			read_control(&f);
	}
}
