/* Unit tests for agent/session.c, the host side of the agent protocol. A
 * fake gantry-init runs on a thread and dials the library's Unix sockets the
 * way the VMM's vsock device does for a real guest; each test gives it a
 * script: echo stdin back, refuse the command, die on a signal, send a stale
 * stream first, hang up mid-session, speak another protocol version; and
 * the hostile or stuck ones the host must not wait on: stop reading, dial
 * and say nothing, exit without ending the output, flood a host fd nobody
 * reads. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

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
	atomic_bool exec_seen, exit_sent;
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

static void test_echo_session(void **state)
{
	static uint8_t in[1 << 20], out[(1 << 20) + 16];
	struct fixture *f = *state;
	char *argv[] = { "cat", NULL }, *env[] = { "A=b", NULL };
	struct agent_process p = { .argv = argv, .env = env, .cwd = "/srv" };
	struct agent_result res;
	gantry_error_t err = NULL;
	char errbuf[16] = { 0 };

	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)(i * 31 + (i >> 12));
	p.in_fd = temp_file(in, sizeof(in));
	p.out_fd = temp_file(NULL, 0);
	p.err_fd = temp_file(NULL, 0);
	start_guest(f, GUEST_ECHO);
	hello(f);
	if (agent_run(f->agent, &p, &res, &err) < 0)
		fail_msg("agent_run: %s", gantry_error_str(err));
	assert_false(res.error);
	assert_false(res.signaled);
	assert_int_equal(res.code, 7);
	assert_int_equal(res.pid, 42);
	assert_int_equal(agent_result_status(&res), 7);
	assert_int_equal(slurp(p.out_fd, out, sizeof(out)), sizeof(in));
	assert_memory_equal(out, in, sizeof(in));
	assert_int_equal(slurp(p.err_fd, (uint8_t *)errbuf, sizeof(errbuf) - 1), 4);
	assert_string_equal(errbuf, "bye\n");
	assert_string_equal(f->guest.argv0, "cat");
	assert_string_equal(f->guest.cwd, "/srv");
	assert_string_equal(f->guest.env0, "A=b");
	agent_result_free(&res);

	if (agent_shutdown(f->agent, 7, 5000, &err) < 0)
		fail_msg("agent_shutdown: %s", gantry_error_str(err));
	pthread_join(f->guest.thread, NULL);
	f->started = false;
	assert_true(f->guest.got_shutdown);
	assert_int_equal(f->guest.shutdown_status, 7);
	close(p.in_fd);
	close(p.out_fd);
	close(p.err_fd);
}

static void test_not_found(void **state)
{
	struct fixture *f = *state;
	char *argv[] = { "nope", NULL };
	struct agent_process p = { .argv = argv, .in_fd = -1, .out_fd = -1, .err_fd = -1 };
	struct agent_result res;
	gantry_error_t err = NULL;

	start_guest(f, GUEST_NOT_FOUND);
	hello(f);
	if (agent_run(f->agent, &p, &res, &err) < 0)
		fail_msg("agent_run: %s", gantry_error_str(err));
	assert_true(res.error);
	assert_int_equal(res.code, 127);
	assert_int_equal(agent_result_status(&res), 127);
	assert_string_equal(res.message, "exec: \"nope\": executable file not found in $PATH");
	assert_string_equal(f->guest.cwd, "/"); /* the default */
	agent_result_free(&res);
	assert_int_equal(agent_shutdown(f->agent, 127, 0, &err), 0);
}

struct signaller {
	struct agent *agent;
	int signo;
};

static void *signal_later(void *opaque)
{
	struct signaller *s = opaque;
	gantry_error_t err = NULL;

	usleep(100 * 1000);
	assert_int_equal(agent_signal(s->agent, s->signo, &err), 0);
	return NULL;
}

static void test_signal(void **state)
{
	struct fixture *f = *state;
	char *argv[] = { "sleep", "100", NULL };
	struct agent_process p = { .argv = argv, .in_fd = -1, .out_fd = -1, .err_fd = -1 };
	struct signaller s = { .signo = 9 };
	struct agent_result res;
	gantry_error_t err = NULL;
	pthread_t t;

	start_guest(f, GUEST_SIGNALED);
	hello(f);
	s.agent = f->agent;
	/* Between sessions there is nobody to signal: a no-op. */
	assert_int_equal(agent_signal(f->agent, 9, &err), 0);
	assert_int_equal(agent_signal(f->agent, 0, &err), -1);
	gantry_error_free(&err);
	pthread_create(&t, NULL, signal_later, &s);
	if (agent_run(f->agent, &p, &res, &err) < 0)
		fail_msg("agent_run: %s", gantry_error_str(err));
	pthread_join(t, NULL);
	assert_int_equal(f->guest.signo, 9);
	assert_true(res.signaled);
	assert_int_equal(res.code, 9);
	assert_int_equal(agent_result_status(&res), 137);
	agent_result_free(&res);
	assert_int_equal(agent_shutdown(f->agent, 0, 0, &err), 0);
}

static void test_stale_stream_is_skipped(void **state)
{
	struct fixture *f = *state;
	char *argv[] = { "cat", NULL };
	struct agent_process p = { .argv = argv, .in_fd = -1, .err_fd = -1 };
	struct agent_result res;
	gantry_error_t err = NULL;
	uint8_t out[16];

	p.out_fd = temp_file(NULL, 0);
	start_guest(f, GUEST_STALE);
	hello(f);
	if (agent_run(f->agent, &p, &res, &err) < 0)
		fail_msg("agent_run: %s", gantry_error_str(err));
	assert_int_equal(res.code, 7);
	assert_int_equal(slurp(p.out_fd, out, sizeof(out)), 0);
	agent_result_free(&res);
	assert_int_equal(agent_shutdown(f->agent, 0, 0, &err), 0);
	close(p.out_fd);
}

static void test_guest_hangs_up(void **state)
{
	struct fixture *f = *state;
	char *argv[] = { "true", NULL };
	struct agent_process p = { .argv = argv, .in_fd = -1, .out_fd = -1, .err_fd = -1 };
	struct agent_result res;
	gantry_error_t err = NULL;

	start_guest(f, GUEST_HANG_UP);
	hello(f);
	assert_int_equal(agent_run(f->agent, &p, &res, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "closed the control connection"));
	gantry_error_free(&err);
	/* And nothing more can be asked of it. */
	assert_int_equal(agent_run(f->agent, &p, &res, &err), -1);
	gantry_error_free(&err);
}

/* A guest playing script that agent_wait_ready() refuses, saying needle. */
static void expect_not_ready(struct fixture *f, enum script script, const char *needle)
{
	gantry_error_t err = NULL;

	start_guest(f, script);
	assert_int_equal(agent_wait_ready(f->agent, 5000, NULL, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), needle));
	gantry_error_free(&err);
}

static void test_version_mismatch(void **state)
{
	expect_not_ready(*state, GUEST_OLD, "protocol version 99");
}

static void test_not_ready(void **state)
{
	expect_not_ready(*state, GUEST_UNREADY, "cannot run processes: no root");
}

static void test_hello_timeout(void **state)
{
	struct fixture *f = *state;
	gantry_error_t err = NULL;

	/* Nobody dials. */
	assert_int_equal(agent_wait_ready(f->agent, 50, NULL, &err), -1);
	assert_int_equal(err->status, ETIMEDOUT);
	gantry_error_free(&err);
	/* A guest that connects but never says HELLO. */
	start_guest(f, GUEST_SILENT);
	assert_int_equal(agent_wait_ready(f->agent, 100, NULL, &err), -1);
	assert_int_equal(err->status, ETIMEDOUT);
	gantry_error_free(&err);
	agent_free(f->agent); /* hangs up on the silent guest */
	f->agent = NULL;
	pthread_join(f->guest.thread, NULL);
	f->started = false;
}

static void *cancel_later(void *opaque)
{
	usleep(50 * 1000);
	agent_cancel(opaque);
	return NULL;
}

static void test_cancel(void **state)
{
	struct fixture *f = *state;
	gantry_error_t err = NULL;
	pthread_t t;

	pthread_create(&t, NULL, cancel_later, f->agent);
	assert_int_equal(agent_wait_ready(f->agent, -1, NULL, &err), -1);
	assert_int_equal(err->status, ECANCELED);
	gantry_error_free(&err);
	pthread_join(t, NULL);
}

/* Frames towards a guest that stopped reading: SIGNALs from another thread
 * as fast as it can, RESIZEs from forwarded SIGWINCHs, stdin from a file. */
struct flooder {
	struct agent *agent;
	int signals; /* the write end of the session's signal_fd */
	atomic_bool stop;
	unsigned long sent;
	unsigned long max; /* 0: until the link is cut */
	atomic_bool *go;   /* the guest has the EXEC: a session runs */
};

static void *flood_control(void *opaque)
{
	struct flooder *fl = opaque;
	uint64_t until = now_ms() + 20000;

	while (!atomic_load(fl->go))
		usleep(1000);
	while (!atomic_load(&fl->stop) && now_ms() < until && (!fl->max || fl->sent < fl->max)) {
		gantry_error_t err = NULL;

		if (agent_signal(fl->agent, SIGTERM, &err) < 0) {
			gantry_error_free(&err);
			break;
		}
		if (++fl->sent % 64 == 0 && !fl->max) {
			unsigned char winch = SIGWINCH;

			(void)!write(fl->signals, &winch, 1);
		}
	}
	return NULL;
}

static void test_guest_stops_reading(void **state)
{
	static uint8_t in[4 << 20];
	struct fixture *f = *state;
	char *argv[] = { "cat", NULL };
	struct agent_process p = { .argv = argv, .tty = true, .out_fd = -1, .err_fd = -1 };
	struct flooder fl = { 0 };
	int sigs[2];
	struct agent_result res;
	gantry_error_t err = NULL;
	uint64_t t0;
	pthread_t t;

	p.in_fd = temp_file(in, sizeof(in));
	assert_int_equal(pipe2(sigs, O_CLOEXEC | O_NONBLOCK), 0);
	p.signal_fd = sigs[0];
	fl.signals = sigs[1];
	start_guest(f, GUEST_DEAF);
	hello(f);
	fl.agent = f->agent;
	fl.go = &f->guest.exec_seen;
	pthread_create(&t, NULL, flood_control, &fl);
	t0 = now_ms();
	assert_int_equal(agent_run(f->agent, &p, &res, &err), -1);
	/* Cut off when the queue passed its cap, long before the stall bound. */
	assert_true(now_ms() - t0 < AGENT_SEND_STALL_MS);
	assert_non_null(strstr(gantry_error_str(err), "the guest stopped reading its control "
						      "connection"));
	gantry_error_free(&err);
	atomic_store(&fl.stop, true);
	pthread_join(t, NULL);
	/* The link stays cut: no more sessions, no SHUTDOWN. */
	assert_int_equal(agent_signal(f->agent, SIGTERM, &err), 0); /* between sessions */
	assert_int_equal(agent_shutdown(f->agent, 0, 0, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "stopped reading"));
	gantry_error_free(&err);
	assert_int_equal(agent_run(f->agent, &p, &res, &err), -1);
	gantry_error_free(&err);
	close(p.in_fd);
	close(sigs[0]);
	close(sigs[1]);
}

/* A guest that stops reading once the socket is full: what waits below the
 * cap is cut off by the stall bound. */
static void test_guest_stalls(void **state)
{
	struct fixture *f = *state;
	char *argv[] = { "sleep", "100", NULL };
	struct agent_process p = { .argv = argv, .in_fd = -1, .out_fd = -1, .err_fd = -1 };
	/* Each frame is 16 bytes: far more than a socket buffer holds of them,
	 * far less than the queue's cap. */
	struct flooder fl = { .max = 10000 };
	struct agent_result res;
	gantry_error_t err = NULL;
	uint64_t t0, took;
	pthread_t t;

	assert_true(fl.max * 16 < AGENT_SEND_QUEUE_MAX);
	start_guest(f, GUEST_DEAF);
	hello(f);
	fl.agent = f->agent;
	fl.go = &f->guest.exec_seen;
	pthread_create(&t, NULL, flood_control, &fl);
	t0 = now_ms();
	assert_int_equal(agent_run(f->agent, &p, &res, &err), -1);
	took = now_ms() - t0;
	pthread_join(t, NULL);
	assert_int_equal(fl.sent, fl.max);
	assert_true(took >= AGENT_SEND_STALL_MS);
	assert_true(took < AGENT_SEND_STALL_MS + 3000);
	assert_non_null(strstr(gantry_error_str(err), "stopped reading its control connection"));
	assert_non_null(strstr(gantry_error_str(err), "none taken"));
	gantry_error_free(&err);
}

static void test_mute_stdio_dial(void **state)
{
	struct fixture *f = *state;
	char *argv[] = { "cat", NULL };
	struct agent_process p = { .argv = argv, .in_fd = -1 };
	struct agent_result res;
	gantry_error_t err = NULL;
	char errbuf[16] = { 0 };
	uint64_t t0, took;

	p.out_fd = temp_file(NULL, 0);
	p.err_fd = temp_file(NULL, 0);
	start_guest(f, GUEST_MUTE_DIAL);
	hello(f);
	t0 = now_ms();
	if (agent_run(f->agent, &p, &res, &err) < 0)
		fail_msg("agent_run: %s", gantry_error_str(err));
	took = now_ms() - t0;
	/* The silent dial held the session's own stream back for its bound. */
	assert_true(took >= AGENT_STREAM_ID_MS - 100);
	assert_true(took < AGENT_STREAM_ID_MS + 3000);
	assert_int_equal(res.code, 7);
	assert_int_equal(slurp(p.err_fd, (uint8_t *)errbuf, sizeof(errbuf) - 1), 4);
	assert_string_equal(errbuf, "bye\n");
	agent_result_free(&res);
	close(p.out_fd);
	close(p.err_fd);
}

static void test_exit_without_eof(void **state)
{
	struct fixture *f = *state;
	char *argv[] = { "true", NULL };
	struct agent_process p = { .argv = argv, .in_fd = -1, .err_fd = -1 };
	struct agent_result res;
	gantry_error_t err = NULL;
	uint8_t out[16];
	uint64_t t0, took;

	p.out_fd = temp_file(NULL, 0);
	start_guest(f, GUEST_NO_EOF);
	hello(f);
	t0 = now_ms();
	if (agent_run(f->agent, &p, &res, &err) < 0)
		fail_msg("agent_run: %s", gantry_error_str(err));
	took = now_ms() - t0;
	assert_true(took < AGENT_STREAM_GRACE_MS + 3000);
	assert_int_equal(res.code, 3);
	assert_int_equal(slurp(p.out_fd, out, sizeof(out)), 7);
	assert_memory_equal(out, "partial", 7);
	agent_result_free(&res);
	close(p.out_fd);
}

static void test_stuck_host_output_cancels(void **state)
{
	struct fixture *f = *state;
	char *argv[] = { "yes", NULL };
	struct agent_process p = { .argv = argv, .in_fd = -1, .err_fd = -1 };
	struct agent_result res;
	gantry_error_t err = NULL;
	int out[2], flags;
	uint64_t t0;
	pthread_t t;

	/* A pipe nobody reads: blocking, as a shell hands it over. */
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	p.out_fd = out[1];
	start_guest(f, GUEST_FLOOD);
	hello(f);
	pthread_create(&t, NULL, cancel_later, f->agent);
	t0 = now_ms();
	assert_int_equal(agent_run(f->agent, &p, &res, &err), -1);
	assert_int_equal(err->status, ECANCELED);
	assert_true(now_ms() - t0 < 3000);
	gantry_error_free(&err);
	pthread_join(t, NULL);
	/* The caller's description was never made non-blocking. */
	flags = fcntl(out[1], F_GETFL);
	assert_true(flags >= 0 && !(flags & O_NONBLOCK));
	close(out[0]);
	close(out[1]);
}

struct interrupter {
	struct guest *g;
	int signals; /* the write end of the session's signal_fd */
};

static void *interrupt_after_exit(void *opaque)
{
	struct interrupter *in = opaque;
	unsigned char sigint = SIGINT;

	while (!atomic_load(&in->g->exit_sent))
		usleep(10 * 1000);
	usleep(100 * 1000);
	(void)!write(in->signals, &sigint, 1);
	return NULL;
}

static void test_interrupt_after_exit(void **state)
{
	struct fixture *f = *state;
	char *argv[] = { "yes", NULL };
	struct agent_process p = { .argv = argv, .in_fd = -1, .err_fd = -1 };
	struct interrupter in = { .g = &f->guest };
	struct agent_result res;
	gantry_error_t err = NULL;
	int out[2], sigs[2];
	pthread_t t;

	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	assert_int_equal(pipe2(sigs, O_CLOEXEC), 0);
	p.out_fd = out[1];
	p.signal_fd = sigs[0];
	in.signals = sigs[1];
	start_guest(f, GUEST_EXIT_FLOOD);
	hello(f);
	pthread_create(&t, NULL, interrupt_after_exit, &in);
	/* The process is gone and its output will not fit: Ctrl-C ends the wait. */
	if (agent_run(f->agent, &p, &res, &err) < 0)
		fail_msg("agent_run: %s", gantry_error_str(err));
	assert_int_equal(res.code, 5);
	pthread_join(t, NULL);
	agent_result_free(&res);
	close(out[0]);
	close(out[1]);
	close(sigs[0]);
	close(sigs[1]);
}

static void test_listen_errors(void **state)
{
	struct agent *a = NULL;
	gantry_error_t err = NULL;
	char dir[200];

	(void)state;
	assert_int_equal(agent_listen("/nonexistent/dir", &a, &err), -1);
	assert_null(a);
	gantry_error_free(&err);
	/* A path too long for a Unix socket. */
	memset(dir, 'x', sizeof(dir) - 1);
	dir[0] = '/';
	dir[sizeof(dir) - 1] = '\0';
	assert_int_equal(agent_listen(dir, &a, &err), -1);
	assert_int_equal(err->status, ENAMETOOLONG);
	gantry_error_free(&err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_echo_session, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_found, setup, teardown),
		cmocka_unit_test_setup_teardown(test_signal, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_stream_is_skipped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_guest_hangs_up, setup, teardown),
		cmocka_unit_test_setup_teardown(test_version_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_ready, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hello_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
		cmocka_unit_test_setup_teardown(test_guest_stops_reading, setup, teardown),
		cmocka_unit_test_setup_teardown(test_guest_stalls, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mute_stdio_dial, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exit_without_eof, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stuck_host_output_cancels, setup, teardown),
		cmocka_unit_test_setup_teardown(test_interrupt_after_exit, setup, teardown),
		cmocka_unit_test(test_listen_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
