/* What the agent library's tests share (test_agent.c, test_agent_stuck.c):
 * a fake gantry-init on a thread that dials the library's Unix sockets the
 * way the VMM's vsock device does for a real guest and plays the script
 * the test gives it; the fixture, an agent listening in a temporary
 * directory; temporary files for a session's stdio; and a cancel from
 * another thread. Include after <cmocka.h>. */
#ifndef GANTRY_TESTS_UNIT_AGENT_RIG_H
#define GANTRY_TESTS_UNIT_AGENT_RIG_H

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent/session.h"
#include "common/util.h"
#include "proto/agent.h"

enum script {
	GUEST_ECHO,	  /* STDIN comes back on STDOUT; "bye" on STDERR; exit 7 */
	GUEST_NOT_FOUND,  /* ERROR 127 */
	GUEST_SIGNALED,	  /* waits for SIGNAL, then dies of it */
	GUEST_STALE,	  /* a stream for another session first */
	GUEST_HANG_UP,	  /* closes the control connection after EXEC */
	GUEST_OLD,	  /* HELLO with another protocol version */
	GUEST_SILENT,	  /* connects and says nothing */
	GUEST_UNREADY,	  /* HELLO, then READY saying why it cannot run anything */
	GUEST_DEAF,	  /* after EXEC, reads nothing until released */
	GUEST_MUTE_DIAL,  /* a stdio dial that never says STREAM, then ECHO's session */
	GUEST_NO_EOF,	  /* EXIT, with the stream left open and its EOFs never sent */
	GUEST_FLOOD,	  /* STDOUT frames until the host goes away */
	GUEST_EXIT_FLOOD, /* EXIT first, then GUEST_FLOOD */
};

struct guest {
	enum script script;
	char dir[64];
	pthread_t thread;
	struct proto_exec exec; /* what EXEC said (argv[0], cwd, flags kept) */
	char argv0[64], cwd[64], env0[64];
	uint32_t shutdown_status;
	bool got_shutdown;
	uint32_t signo;
	int release[2]; /* written by the test (or teardown): stop holding on */
	atomic_bool dialed, exec_seen, exit_sent;
};

static uint8_t gbuf[PROTO_MAX_FRAME];

static int dial(const char *dir, int port)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%d.sock", dir, port);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void send_msg(int fd, struct proto_msg m)
{
	assert_int_equal(proto_write_msg(fd, &m), 0);
}

static int read_msg(int fd, struct proto_msg *m)
{
	const char *why;

	return proto_read_msg(fd, gbuf, m, &why);
}

static void send_data(int fd, uint16_t type, const void *p, size_t n)
{
	struct proto_msg m = { .type = type, .u.data = { p, n } };

	send_msg(fd, m);
}

static void send_eof(int fd, uint32_t which)
{
	send_msg(fd, (struct proto_msg){ .type = PROTO_EOF, .u.eof = { which } });
}

static int open_stream(struct guest *g, uint32_t id)
{
	int s = dial(g->dir, PROTO_STDIO_PORT);

	send_msg(s, (struct proto_msg){ .type = PROTO_STREAM, .u.stream = { id } });
	return s;
}

/* Echo STDIN frames as STDOUT until EOF(stdin). */
static void echo(int s)
{
	static uint8_t copy[PROTO_MAX_DATA];
	struct proto_msg m;

	while (read_msg(s, &m) > 0) {
		if (m.type == PROTO_EOF && m.u.eof.fd == 0)
			break;
		assert_int_equal(m.type, PROTO_STDIN);
		memcpy(copy, m.u.data.data, m.u.data.len);
		send_data(s, PROTO_STDOUT, copy, m.u.data.len);
	}
}

/* Hold on until the test lets go. */
static void wait_release(struct guest *g)
{
	char c;

	(void)!read(g->release[0], &c, 1);
}

/* STDOUT frames until the stream refuses one (the host closed it). */
static void flood(int s)
{
	static uint8_t chunk[PROTO_MAX_DATA];
	struct proto_msg m = { .type = PROTO_STDOUT, .u.data = { chunk, sizeof(chunk) } };

	memset(chunk, 'x', sizeof(chunk));
	while (proto_write_msg(s, &m) == 0)
		;
}

static void send_exit(int c, struct guest *g, uint32_t id, uint32_t code)
{
	send_msg(c, (struct proto_msg){ .type = PROTO_EXIT, .u.exit = { id, false, code } });
	atomic_store(&g->exit_sent, true);
}

static void *guest_main(void *opaque)
{
	struct guest *g = opaque;
	struct proto_msg m;
	uint32_t id;
	int c, s, mute;

	c = dial(g->dir, PROTO_CONTROL_PORT);
	atomic_store(&g->dialed, true);
	if (g->script == GUEST_SILENT) {
		/* Hold the connection until the host gives up on it. */
		while (read(c, gbuf, 1) > 0)
			;
		close(c);
		return NULL;
	}
	send_msg(c, (struct proto_msg){
			    .type = PROTO_HELLO,
			    .u.hello = { .version = g->script == GUEST_OLD ? 99 : PROTO_VERSION,
					 .uptime_ms = 123,
					 .ncpus = 2,
					 .kernel = "fake" } });
	if (g->script == GUEST_OLD) {
		close(c);
		return NULL;
	}
	send_msg(c, (struct proto_msg){ .type = PROTO_READY,
					.u.ready.message =
						g->script == GUEST_UNREADY ? "no root" : NULL });
	if (g->script == GUEST_UNREADY) {
		close(c);
		return NULL;
	}
	assert_int_equal(read_msg(c, &m), 1);
	assert_int_equal(m.type, PROTO_EXEC);
	id = m.u.exec.id;
	g->exec = m.u.exec;
	snprintf(g->argv0, sizeof(g->argv0), "%s", m.u.exec.argv[0]);
	snprintf(g->cwd, sizeof(g->cwd), "%s", m.u.exec.cwd);
	snprintf(g->env0, sizeof(g->env0), "%s", m.u.exec.envc ? m.u.exec.env[0] : "");
	proto_msg_free(&m);
	atomic_store(&g->exec_seen, true);

	switch (g->script) {
	case GUEST_DEAF:
		s = open_stream(g, id);
		send_msg(c, (struct proto_msg){ .type = PROTO_STARTED, .u.started = { id, 42 } });
		wait_release(g);
		close(s);
		break;
	case GUEST_NO_EOF:
		s = open_stream(g, id);
		send_data(s, PROTO_STDOUT, "partial", 7);
		send_exit(c, g, id, 3);
		wait_release(g);
		close(s);
		break;
	case GUEST_EXIT_FLOOD:
	case GUEST_FLOOD:
		s = open_stream(g, id);
		if (g->script == GUEST_EXIT_FLOOD)
			send_exit(c, g, id, 5);
		flood(s);
		close(s);
		break;
	case GUEST_NOT_FOUND:
		send_msg(c, (struct proto_msg){ .type = PROTO_ERROR,
						.u.error = { id, PROTO_ERR_NOT_FOUND,
							     "exec: \"nope\": executable file not "
							     "found in $PATH" } });
		break;
	case GUEST_HANG_UP:
		close(c);
		return NULL;
	case GUEST_SIGNALED:
		s = open_stream(g, id);
		send_msg(c, (struct proto_msg){ .type = PROTO_STARTED, .u.started = { id, 42 } });
		assert_int_equal(read_msg(c, &m), 1);
		assert_int_equal(m.type, PROTO_SIGNAL);
		g->signo = m.u.signal.signo;
		send_eof(s, 1);
		send_eof(s, 2);
		close(s);
		send_msg(c, (struct proto_msg){ .type = PROTO_EXIT,
						.u.exit = { id, true, g->signo } });
		break;
	case GUEST_STALE:
		s = open_stream(g, id + 100);
		close(s);
		/* then the real one */
		__attribute__((fallthrough));
	case GUEST_MUTE_DIAL:
	case GUEST_ECHO:
		mute = g->script == GUEST_MUTE_DIAL ? dial(g->dir, PROTO_STDIO_PORT) : -1;
		s = open_stream(g, id);
		send_msg(c, (struct proto_msg){ .type = PROTO_STARTED, .u.started = { id, 42 } });
		echo(s);
		send_data(s, PROTO_STDERR, "bye\n", 4);
		send_eof(s, 1);
		send_eof(s, 2);
		/* EXIT before the stream closes: the host still waits for EOFs. */
		send_msg(c, (struct proto_msg){ .type = PROTO_EXIT, .u.exit = { id, false, 7 } });
		close(s);
		if (mute >= 0)
			close(mute);
		break;
	default:
		break;
	}
	/* Then wait for SHUTDOWN, or the host going away. */
	while (read_msg(c, &m) > 0) {
		if (m.type == PROTO_SHUTDOWN) {
			g->got_shutdown = true;
			g->shutdown_status = m.u.shutdown.status;
			proto_msg_free(&m);
			break;
		}
		proto_msg_free(&m);
	}
	close(c);
	return NULL;
}

struct fixture {
	char dir[64];
	struct agent *agent;
	struct guest guest;
	bool started;
};

static int setup(void **state)
{
	struct fixture *f = xzalloc(sizeof(*f));
	gantry_error_t err = NULL;

	f->guest.release[0] = f->guest.release[1] = -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/gantry-agent-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	if (agent_listen(f->dir, &f->agent, &err) < 0)
		fail_msg("agent_listen: %s", gantry_error_str(err));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char path[128];

	agent_free(f->agent);
	if (f->started) {
		(void)!write(f->guest.release[1], "", 1);
		pthread_join(f->guest.thread, NULL);
	}
	if (f->guest.release[0] >= 0) {
		close(f->guest.release[0]);
		close(f->guest.release[1]);
	}
	snprintf(path, sizeof(path), "%s/%d.sock", f->dir, PROTO_CONTROL_PORT);
	assert_int_equal(access(path, F_OK), -1); /* agent_free removed them */
	rmdir(f->dir);
	free(f);
	return 0;
}

static void start_guest(struct fixture *f, enum script script)
{
	f->guest.script = script;
	snprintf(f->guest.dir, sizeof(f->guest.dir), "%s", f->dir);
	assert_int_equal(pipe2(f->guest.release, O_CLOEXEC), 0);
	assert_int_equal(pthread_create(&f->guest.thread, NULL, guest_main, &f->guest), 0);
	f->started = true;
}

static void hello(struct fixture *f)
{
	struct proto_hello h;
	gantry_error_t err = NULL;

	if (agent_wait_ready(f->agent, 5000, &h, &err) < 0)
		fail_msg("agent_wait_ready: %s", gantry_error_str(err));
	assert_int_equal(h.version, PROTO_VERSION);
	assert_int_equal(h.uptime_ms, 123);
	assert_int_equal(h.ncpus, 2);
	assert_string_equal(h.kernel, "fake");
}

/* A temporary file holding data, or empty; rewound. */
static int temp_file(const void *data, size_t len)
{
	FILE *f = tmpfile();
	int fd;

	assert_non_null(f);
	fd = dup(fileno(f));
	fclose(f);
	if (len)
		assert_int_equal(write_full(fd, data, len), 0);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static size_t slurp(int fd, uint8_t *buf, size_t cap)
{
	ssize_t n;

	lseek(fd, 0, SEEK_SET);
	n = read(fd, buf, cap);
	assert_true(n >= 0);
	return (size_t)n;
}

static void *cancel_later(void *opaque)
{
	usleep(50 * 1000);
	agent_cancel(opaque);
	return NULL;
}

#endif
