/* Unit tests for agent/session.c, the host side of the agent protocol,
 * first part: guests that play by the rules or fail plainly. Echo stdin
 * back, refuse the command, die on a signal, send a stale stream first,
 * hang up mid-session, speak another protocol version or say they cannot
 * run anything; a HELLO that never comes, a cancelled wait, and listen
 * errors. The fake gantry-init and the fixture are in agent_rig.h; the
 * hostile or stuck guests the host must not wait on are in
 * test_agent_stuck.c. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_rig.h"

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
	atomic_bool *go; /* the guest has the EXEC: the session runs */
};

static void *signal_later(void *opaque)
{
	struct signaller *s = opaque;
	gantry_error_t err = NULL;
	uint64_t until = now_ms() + 20000;

	while (!atomic_load(s->go) && now_ms() < until)
		usleep(1000);
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
	s.go = &f->guest.exec_seen;
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
	/* Its socket goes with the agent: not before the guest dialled. */
	for (uint64_t until = now_ms() + 20000;
	     !atomic_load(&f->guest.dialed) && now_ms() < until;)
		usleep(1000);
	agent_free(f->agent); /* hangs up on the silent guest */
	f->agent = NULL;
	pthread_join(f->guest.thread, NULL);
	f->started = false;
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
		cmocka_unit_test(test_listen_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
