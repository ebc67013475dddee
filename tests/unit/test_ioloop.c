/* The device I/O loop: a paused loop runs no callback until let go, then
 * takes up what came meanwhile, also when paused again at once; a loop
 * paused and stopped ends. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "vmm/ioloop.h"

struct counter {
	atomic_int calls;
};

static void on_ready(void *opaque, int fd, unsigned int events)
{
	struct counter *c = opaque;
	uint64_t v;

	(void)events;
	if (read(fd, &v, sizeof(v)) == sizeof(v))
		atomic_fetch_add(&c->calls, 1);
}

static void kick(int fd)
{
	uint64_t one = 1;

	assert_int_equal(write(fd, &one, sizeof(one)), sizeof(one));
}

/* Up to 10 s for the loop thread to have made want calls. */
static int wait_calls(struct counter *c, int want)
{
	struct timespec tick = { .tv_nsec = 1000000L };

	for (int i = 0; i < 10000 && atomic_load(&c->calls) < want; i++)
		nanosleep(&tick, NULL);
	return atomic_load(&c->calls);
}

/* A loop started on a new eventfd, whose readiness c counts: the fd. */
static int loop_up(struct ioloop *l, struct counter *c)
{
	gantry_error_t err = NULL;
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(ioloop_init(l, &err), 0);
	assert_int_equal(ioloop_add(l, fd, on_ready, c, &err), 0);
	assert_int_equal(ioloop_start(l, &err), 0);
	return fd;
}

static void test_pause_holds_callbacks(void **state)
{
	struct timespec settle = { .tv_nsec = 50 * 1000000L };
	struct ioloop l;
	struct counter c = { 0 };
	int fd = loop_up(&l, &c);

	(void)state;
	kick(fd);
	assert_int_equal(wait_calls(&c, 1), 1);

	ioloop_pause(&l);
	kick(fd);
	nanosleep(&settle, NULL);
	assert_int_equal(atomic_load(&c.calls), 1);
	/* Twice in a row, as two live saves would. */
	ioloop_unpause(&l);
	assert_int_equal(wait_calls(&c, 2), 2);
	ioloop_pause(&l);
	ioloop_unpause(&l);
	kick(fd);
	assert_int_equal(wait_calls(&c, 3), 3);

	/* Paused, then stopped: the thread ends. */
	ioloop_pause(&l);
	ioloop_stop(&l);
	ioloop_destroy(&l);
	close(fd);
}

/* A pause asked for as the last one is let go, before the loop thread
 * left its park: the loop goes on serving (it once took that pause's
 * request, once let go, as a stop). */
static void test_pause_right_after_unpause(void **state)
{
	struct ioloop l;
	struct counter c = { 0 };
	int fd = loop_up(&l, &c);

	(void)state;
	for (int i = 0; i < 2000; i++) {
		ioloop_pause(&l);
		ioloop_unpause(&l);
	}
	kick(fd);
	assert_int_equal(wait_calls(&c, 1), 1);
	ioloop_stop(&l);
	ioloop_destroy(&l);
	close(fd);
}

static void test_pause_of_a_loop_not_started(void **state)
{
	struct ioloop l;
	gantry_error_t err = NULL;

	(void)state;
	assert_int_equal(ioloop_init(&l, &err), 0);
	ioloop_pause(&l);
	ioloop_unpause(&l);
	ioloop_destroy(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pause_holds_callbacks),
		cmocka_unit_test(test_pause_right_after_unpause),
		cmocka_unit_test(test_pause_of_a_loop_not_started),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
