/* Unit tests for agent/session.c, the host side of the agent protocol,
 * second part: the hostile or stuck guests the host must not wait on. One
 * that stops reading (past the queue's cap, and below it until the stall
 * bound), a stdio dial that says nothing, an exit without the output's
 * end, a flood into a host fd nobody reads, and Ctrl-C once the process is
 * gone. Most wait out one of the library's bounds, seconds each. The rig
 * is agent_rig.h; the guests that play by the rules or fail plainly are in
 * test_agent.c. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_rig.h"

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

	/* Bounded too: a run that failed before the EXEC reached the guest
	 * fails its test rather than hanging it. */
	while (!atomic_load(fl->go) && now_ms() < until)
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
	uint64_t until = now_ms() + 20000;

	while (!atomic_load(&in->g->exit_sent) && now_ms() < until)
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_guest_stops_reading, setup, teardown),
		cmocka_unit_test_setup_teardown(test_guest_stalls, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mute_stdio_dial, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exit_without_eof, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stuck_host_output_cancels, setup, teardown),
		cmocka_unit_test_setup_teardown(test_interrupt_after_exit, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
