/* Unit tests for src/sandbox, second part: the library against a
 * supervisor this binary plays. The control socket's peer check and
 * request/answer framing, a session through a fake supervisor, sessions
 * from threads and one cancelled, and starts from threads and one
 * cancelled midway (the start executes this binary as the supervisor). The
 * rig is sandbox_rig.h; names, sandbox.json, the lock and writable layers
 * are in test_sandbox.c. No VM boots here. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/settings.h"
#include "agent/session.h"
#include "common/cancel.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "proto/agent.h"
#include "sandbox/ctl.h"
#include "common/files.h"
#include "sandbox/lifecycle.h"
#include "sandbox/state.h"
#include "sandbox/spawn.h"
#include "sandbox_rig.h"

static void test_ctl_round_trip(void **state)
{
	int sv[2];
	json_t *reply = NULL;
	gantry_error_t err = NULL;
	char line[256];
	const char answer[] = "{\"ok\":true,\"pid\":7}\n{\"not\":\"read\"}\n";

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_true(unix_peer_is_us(sv[0]));
	assert_int_equal(write(sv[1], answer, sizeof(answer) - 1), (ssize_t)sizeof(answer) - 1);
	assert_int_equal(ctl_call(sv[0], CTL_OP_STATUS, 1000, &reply, &err), 0);
	assert_int_equal(json_integer_value(json_object_get(reply, "pid")), 7);
	json_decref(reply);
	/* The request went out as one line... */
	assert_int_equal(ctl_read_line(sv[1], line, sizeof(line), 1000, &err), 0);
	assert_string_equal(line, "{\"op\":\"status\"}");
	/* ...and nothing past the answer's newline was consumed. */
	assert_int_equal(ctl_read_line(sv[0], line, sizeof(line), 1000, &err), 0);
	assert_string_equal(line, "{\"not\":\"read\"}");

	/* A refusal is an error carrying the supervisor's words. */
	assert_int_equal(write(sv[1], "{\"ok\":false,\"error\":\"permission denied\"}\n", 41), 41);
	assert_int_equal(ctl_call(sv[0], CTL_OP_EXEC, 1000, NULL, &err), -1);
	assert_string_equal(gantry_error_str(err), "permission denied");
	gantry_error_free(&err);
	close(sv[1]);
	assert_int_equal(ctl_call(sv[0], CTL_OP_STOP, 1000, NULL, &err), -1);
	gantry_error_free(&err);
	close(sv[0]);
}

/* A fake supervisor on a thread: the other end of an agent_attach link. It
 * answers EXEC with STARTED, passes a stdio stream (SCM_RIGHTS) with its
 * STREAM frame, writes output on it and reports EXIT 5. */
static void *fake_supervisor(void *arg)
{
	int fd = *(int *)arg, sv[2];
	uint8_t *buf = xmalloc(PROTO_MAX_FRAME);
	struct proto_msg m, out = { .type = PROTO_STARTED };
	uint8_t frame[64];
	ssize_t len;
	const char *why;
	uint32_t id;

	assert_int_equal(proto_read_msg(fd, buf, &m, &why), 1);
	assert_int_equal(m.type, PROTO_EXEC);
	assert_string_equal(m.u.exec.argv[0], "hello");
	id = m.u.exec.id;
	proto_msg_free(&m);
	out.u.started.id = id;
	out.u.started.pid = 42;
	assert_int_equal(proto_write_msg(fd, &out), 0);

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	out = (struct proto_msg){ .type = PROTO_STREAM };
	out.u.stream.id = id;
	len = proto_encode(&out, frame, sizeof(frame));
	assert_true(len > 0);
	assert_int_equal(unix_send_fd(fd, frame, (size_t)len, sv[1], 0), len);
	close(sv[1]);

	/* The guest's side of the stream: stdin's EOF arrives, output goes. */
	assert_int_equal(proto_read_msg(sv[0], buf, &m, &why), 1);
	assert_int_equal(m.type, PROTO_EOF);
	out = (struct proto_msg){ .type = PROTO_STDOUT };
	out.u.data.data = (const uint8_t *)"hi\n";
	out.u.data.len = 3;
	assert_int_equal(proto_write_msg(sv[0], &out), 0);
	for (uint32_t i = 1; i <= 2; i++) {
		out = (struct proto_msg){ .type = PROTO_EOF };
		out.u.eof.fd = i;
		assert_int_equal(proto_write_msg(sv[0], &out), 0);
	}
	close(sv[0]);
	out = (struct proto_msg){ .type = PROTO_EXIT };
	out.u.exit.id = id;
	out.u.exit.code = 5;
	assert_int_equal(proto_write_msg(fd, &out), 0);
	free(buf);
	return NULL;
}

static void test_session_through_supervisor(void **state)
{
	char *argv[] = { "hello", NULL };
	struct agent_process p = { .argv = argv, .in_fd = -1, .err_fd = -1 };
	struct agent_result res;
	gantry_error_t err = NULL;
	struct agent *a;
	pthread_t t;
	int sv[2], out[2];
	char got[16] = { 0 };

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(pipe(out), 0);
	p.out_fd = out[1];
	assert_int_equal(pthread_create(&t, NULL, fake_supervisor, &sv[1]), 0);
	assert_int_equal(agent_attach(sv[0], &a, &err), 0);
	assert_int_equal(agent_run(a, &p, &res, &err), 0);
	assert_int_equal(res.pid, 42);
	assert_int_equal(agent_result_status(&res), 5);
	close(out[1]);
	assert_int_equal(read(out[0], got, sizeof(got)), 3);
	assert_string_equal(got, "hi\n");
	pthread_join(t, NULL);
	agent_result_free(&res);
	agent_free(a);
	close(out[0]);
	close(sv[1]);
}

/* One connection to a supervisor's ctl.sock, as far as `exec` goes: the
 * request line is answered ok, then the session goes as fake_supervisor
 * plays it. */
static void *fake_ctl_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char c = 0, line[128];
	size_t n = 0;

	while (c != '\n' && n < sizeof(line) && read(fd, &c, 1) == 1)
		line[n++] = c;
	assert_true(n > 0 && n < sizeof(line));
	line[n - 1] = '\0';
	assert_non_null(strstr(line, "\"exec\""));
	assert_int_equal(write(fd, "{\"ok\":true}\n", 12), 12);
	fake_supervisor(&fd);
	close(fd);
	return NULL;
}

#define EXEC_THREADS 8

struct exec_thread {
	pthread_t t;
	int out[2];
	struct agent_result res;
	int rc;
};

/* sandbox_exec as any front end's thread calls it: its own output. */
static void *exec_one(void *arg)
{
	struct exec_thread *x = arg;
	char *argv[] = { "hello", NULL };
	struct sandbox_stdio io = { .in = -1, .out = x->out[1], .err = -1, .signal_fd = -1 };
	gantry_error_t err = NULL;

	x->rc = sandbox_exec("eight", &(struct sandbox_process_opts){ .args = argv, .nargs = 1 },
			     &io, NULL, &x->res, &err);
	if (x->rc < 0)
		fprintf(stderr, "exec: %s\n", gantry_error_str(err));
	gantry_error_free(&err);
	return NULL;
}

/* A sandbox that runs as far as a client can tell: its state saved
 * running, its lifetime lock held as its supervisor holds it (*lock), and
 * a listening ctl.sock (returned). */
static int running_sandbox(const char *name, int backlog, char **dir, int *lock)
{
	cleanup_free char *sock = NULL;
	struct sandbox sb = { 0 };
	gantry_error_t err = NULL;
	int lfd;

	make_sandbox(name, dir, &sb);
	sb.state = SANDBOX_RUNNING;
	sb.pid = getpid();
	assert_int_equal(sandbox_save(*dir, &sb, &err), 0);
	sandbox_free(&sb);
	assert_int_equal(sandbox_lock(*dir, true, lock, &err), 1);
	xasprintf(&sock, "%s/%s", *dir, SANDBOX_CTL);
	lfd = unix_listen(sock, backlog, &err);
	assert_true(lfd >= 0);
	return lfd;
}

/* Eight sessions in one sandbox from eight threads of one process at once:
 * the library keeps no process-wide state for a session. */
static void test_execs_from_threads(void **state)
{
	cleanup_free char *dir = NULL;
	struct exec_thread x[EXEC_THREADS];
	pthread_t conns[EXEC_THREADS];
	int lock = -1, lfd;

	(void)state;
	lfd = running_sandbox("eight", EXEC_THREADS, &dir, &lock);
	for (int i = 0; i < EXEC_THREADS; i++) {
		memset(&x[i], 0, sizeof(x[i]));
		assert_int_equal(pipe2(x[i].out, O_CLOEXEC), 0);
		assert_int_equal(pthread_create(&x[i].t, NULL, exec_one, &x[i]), 0);
	}
	/* Every one connected before any is answered: all eight at once. */
	int fds[EXEC_THREADS];

	for (int i = 0; i < EXEC_THREADS; i++) {
		struct pollfd p = { .fd = lfd, .events = POLLIN };

		assert_int_equal(poll(&p, 1, 10000), 1); /* the listener does not block */
		fds[i] = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		assert_true(fds[i] >= 0);
	}
	for (int i = 0; i < EXEC_THREADS; i++)
		assert_int_equal(pthread_create(&conns[i], NULL, fake_ctl_conn,
						(void *)(intptr_t)fds[i]), 0);
	for (int i = 0; i < EXEC_THREADS; i++) {
		char got[16] = { 0 };

		pthread_join(x[i].t, NULL);
		pthread_join(conns[i], NULL);
		assert_int_equal(x[i].rc, 0);
		assert_int_equal(agent_result_status(&x[i].res), 5);
		close(x[i].out[1]);
		assert_int_equal(read(x[i].out[0], got, sizeof(got)), 3);
		assert_string_equal(got, "hi\n");
		close(x[i].out[0]);
		agent_result_free(&x[i].res);
	}
	close(lfd);
	close(lock);
}

/* A session whose caller cancels it: the call returns ECANCELED at once
 * and hangs up, which is how the supervisor learns to SIGHUP it. */
struct cancelled_exec {
	const struct gantry_cancel *cancel;
	int rc, status;
};

static void *exec_cancelled(void *arg)
{
	struct cancelled_exec *x = arg;
	char *argv[] = { "sleep", "100", NULL };
	struct sandbox_stdio io = { .in = -1, .out = -1, .err = -1, .signal_fd = -1 };
	struct agent_result res;
	gantry_error_t err = NULL;

	x->rc = sandbox_exec("slow", &(struct sandbox_process_opts){ .args = argv, .nargs = 2 },
			     &io, x->cancel, &res, &err);
	x->status = err ? err->status : 0;
	gantry_error_free(&err);
	agent_result_free(&res);
	return NULL;
}

static void test_exec_cancelled(void **state)
{
	cleanup_free char *dir = NULL;
	struct cancelled_exec x = { 0 };
	struct gantry_cancel cancel;
	gantry_error_t err = NULL;
	struct pollfd p;
	char c = 0, buf[4096];
	int lock = -1, lfd, fd;
	pthread_t t;

	(void)state;
	lfd = running_sandbox("slow", 1, &dir, &lock);
	assert_int_equal(cancel_init(&cancel, &err), 0);
	x.cancel = &cancel;
	assert_int_equal(pthread_create(&t, NULL, exec_cancelled, &x), 0);
	p = (struct pollfd){ .fd = lfd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 10000), 1);
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(fd >= 0);
	while (c != '\n' && read(fd, &c, 1) == 1)
		;
	assert_int_equal(write(fd, "{\"ok\":true}\n", 12), 12);
	/* Its EXEC comes; no answer ever will. */
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 10000), 1);
	assert_true(read(fd, buf, sizeof(buf)) > 0);
	cancel_fire(&cancel);
	pthread_join(t, NULL);
	assert_int_equal(x.rc, -1);
	assert_int_equal(x.status, ECANCELED);
	/* Hung up. */
	assert_int_equal(poll(&p, 1, 10000), 1);
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	assert_int_equal(read(fd, buf, sizeof(buf)), 0);
	close(fd);
	close(lfd);
	close(lock);
	cancel_destroy(&cancel);
}

/* --- a start cancelled midway -------------------------------------------------------------- */

#define FAKE_SUP_PIDFILE "fake-supervisor-%s.pid" /* by sandbox name */
#define FAKE_SUP_READY   "FAKE_SUPERVISOR_READY" /* set: it says ok */

/* What this binary does when the start executes it as the supervisor: it
 * says its pid as the real one does, then "boots" until it is ended. */
static int pretend_supervisor(const char *name)
{
	cleanup_free char *path = NULL;
	FILE *f;

	dprintf(SUPERVISOR_READY_FD, "pid %d\n", (int)getpid());
	xasprintf(&path, "%s/" FAKE_SUP_PIDFILE, getenv("GANTRY_HOME"), name);
	f = fopen(path, "w");
	if (f) {
		fprintf(f, "%d\n", (int)getpid());
		fclose(f);
	}
	if (getenv(FAKE_SUP_READY))
		dprintf(SUPERVISOR_READY_FD, "ok\n");
	sleep(60);
	return 1;
}

static long pretend_supervisor_pid(const char *name)
{
	cleanup_free char *path = NULL, *text = NULL;
	size_t len;

	xasprintf(&path, "%s/" FAKE_SUP_PIDFILE, home, name);
	if (read_file_max(path, 64, &text, &len, NULL) < 0 || text == NULL)
		return 0;
	return strtol(text, NULL, 10);
}

struct create_thread {
	const struct sandbox_opts *o;
	const struct gantry_cancel *cancel;
	int rc, status;
	pthread_t t;
};

static void *create_one(void *arg)
{
	struct create_thread *c = arg;
	gantry_error_t err = NULL;

	c->rc = sandbox_create(c->o, c->cancel, &err);
	c->status = err ? err->status : 0;
	gantry_error_free(&err);
	return NULL;
}

static bool process_gone(long pid)
{
	cleanup_free char *path = NULL;
	char stat[512] = { 0 }, *state;
	FILE *f;

	if (kill((pid_t)pid, 0) < 0)
		return true;
	xasprintf(&path, "/proc/%ld/stat", pid);
	f = fopen(path, "r");
	if (f == NULL)
		return true;
	(void)!fread(stat, 1, sizeof(stat) - 1, f);
	fclose(f);
	state = strrchr(stat, ')');
	return state && state[1] == ' ' && state[2] == 'Z'; /* ended, not reaped yet */
}

/* A kernel and an image that pass the start's checks: the pretend
 * supervisor boots neither. */
static void fake_assets(char **image)
{
	cleanup_free char *assets = NULL, *kernel = NULL;
	unsigned char sb[2048] = { 0 };
	uint32_t magic = 0xE0F5E1E2; /* EROFS, at 1024 */
	int fd;

	xasprintf(&assets, "%s/assets", home);
	assert_int_equal(mkdir(assets, 0700), 0);
	xasprintf(&kernel, "%s/vmlinux", assets);
	fd = open(kernel, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	xasprintf(image, "%s/img.erofs", home);
	memcpy(sb + 1024, &magic, sizeof(magic));
	fd = open(*image, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	assert_int_equal(write(fd, sb, sizeof(sb)), (ssize_t)sizeof(sb));
	close(fd);
	setenv("GANTRY_ASSETS", assets, 1);
	gantry_settings_load();
}

/* The start is cancelled while its supervisor boots: the supervisor is
 * ended, and the name, its directory and the writable layer the start
 * made are gone. */
static void test_cancel_start_midway(void **state)
{
	cleanup_free char *image = NULL, *dir = NULL, *layer = NULL;
	struct sandbox_opts o = { .name = "cx", .cpus = 1, .mem_mib = 256, .disk_mib = 64,
				  .writable = true };
	struct create_thread c = { .o = &o };
	struct gantry_cancel cancel;
	gantry_error_t err = NULL;
	long pid = 0;

	(void)state;
	fake_assets(&image);
	o.image = image;
	o.isolation = "off";

	assert_int_equal(cancel_init(&cancel, &err), 0);
	c.cancel = &cancel;
	assert_int_equal(pthread_create(&c.t, NULL, create_one, &c), 0);
	for (int i = 0; i < 1000 && (pid = pretend_supervisor_pid("cx")) == 0; i++)
		usleep(10000);
	assert_true(pid > 0);
	assert_int_equal(sandbox_dir("cx", &dir, &err), 0);
	assert_int_equal(sandbox_rwlayer_default("cx", &layer, &err), 0);
	assert_int_equal(access(dir, F_OK), 0); /* midway: claimed, layer made */
	assert_int_equal(access(layer, F_OK), 0);

	cancel_fire(&cancel);
	pthread_join(c.t, NULL);
	assert_int_equal(c.rc, -1);
	assert_int_equal(c.status, ECANCELED);
	assert_true(process_gone(pid));
	assert_int_not_equal(access(dir, F_OK), 0);
	assert_int_not_equal(access(layer, F_OK), 0);
	{
		struct sandbox *v = NULL;
		size_t n = 9;

		assert_int_equal(sandbox_list(&v, &n, &err), 0);
		assert_int_equal(n, 0);
		sandbox_list_free(v, n);
	}
	/* A cancel fired before the call: nothing is made at all. */
	c.rc = 0;
	create_one(&c);
	assert_int_equal(c.rc, -1);
	assert_int_equal(c.status, ECANCELED);
	assert_int_not_equal(access(dir, F_OK), 0);
	cancel_destroy(&cancel);
	unsetenv("GANTRY_ASSETS");
	gantry_settings_load();
}

#define CREATE_THREADS 8

/* Eight starts of eight names from eight threads of one process at once:
 * each claims its own name and layer, none waits on another. */
static void test_creates_from_threads(void **state)
{
	cleanup_free char *image = NULL;
	struct sandbox_opts o[CREATE_THREADS];
	struct create_thread c[CREATE_THREADS];
	char names[CREATE_THREADS][8];
	struct sandbox *v = NULL;
	gantry_error_t err = NULL;
	size_t n = 0;

	(void)state;
	fake_assets(&image);
	setenv(FAKE_SUP_READY, "1", 1);
	gantry_settings_load();
	for (int i = 0; i < CREATE_THREADS; i++) {
		snprintf(names[i], sizeof(names[i]), "t%d", i);
		sandbox_opts_init(&o[i]);
		o[i].name = names[i];
		o[i].image = image;
		o[i].disk_mib = 64;
		o[i].net = false;
		o[i].isolation = "off";
		c[i] = (struct create_thread){ .o = &o[i] };
		assert_int_equal(pthread_create(&c[i].t, NULL, create_one, &c[i]), 0);
	}
	for (int i = 0; i < CREATE_THREADS; i++) {
		cleanup_free char *layer = NULL;
		long pid;

		pthread_join(c[i].t, NULL);
		assert_int_equal(c[i].rc, 0);
		assert_int_equal(sandbox_rwlayer_default(names[i], &layer, &err), 0);
		assert_int_equal(access(layer, F_OK), 0);
		pid = pretend_supervisor_pid(names[i]);
		assert_true(pid > 0);
		kill((pid_t)pid, SIGKILL);
	}
	assert_int_equal(sandbox_list(&v, &n, &err), 0);
	assert_int_equal(n, CREATE_THREADS);
	sandbox_list_free(v, n);
	unsetenv(FAKE_SUP_READY);
	gantry_settings_load();
	unsetenv("GANTRY_ASSETS");
	gantry_settings_load();
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], SUPERVISOR_ROLE) == 0)
		return pretend_supervisor(argv[2]);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ctl_round_trip),
		cmocka_unit_test(test_session_through_supervisor),
		cmocka_unit_test_setup_teardown(test_execs_from_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_cancelled, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel_start_midway, setup, teardown),
		cmocka_unit_test_setup_teardown(test_creates_from_threads, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
