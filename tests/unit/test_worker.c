/* Unit tests for sandbox/worker.c's channel: requests and answers matched
 * by id, so an answer that comes after its request gave up is dropped, not
 * read as the next request's. The worker is the other end of a socketpair,
 * its answers queued before the request is made. */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "worker/worker.h"

struct chan {
	int ours, theirs;
	uint64_t next_id;
};

static int setup(void **state)
{
	struct chan *c = calloc(1, sizeof(*c));
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	c->ours = sv[0];
	c->theirs = sv[1];
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	struct chan *c = *state;

	close(c->ours);
	if (c->theirs >= 0)
		close(c->theirs);
	free(c);
	return 0;
}

static void worker_says(struct chan *c, const char *text)
{
	assert_int_equal(send(c->theirs, text, strlen(text), 0), (ssize_t)strlen(text));
}

/* The request the worker got: its id. */
static json_int_t worker_got(struct chan *c, const char *op)
{
	bool eof;
	json_t *req = worker_recv_json(c->theirs, 1000, &eof);
	json_int_t id;

	assert_non_null(req);
	assert_string_equal(json_string_value(json_object_get(req, "op")), op);
	id = json_integer_value(json_object_get(req, "id"));
	json_decref(req);
	return id;
}

static void test_late_answer_is_dropped(void **state)
{
	struct chan *c = *state;
	bool eof = true;
	json_t *a;

	/* Silence: the first request gives up. */
	a = worker_request(c->ours, &c->next_id, json_pack("{s:s}", "op", "one"), NULL, 0, 50, &eof);
	assert_null(a);
	assert_false(eof);
	assert_int_equal(worker_got(c, "one"), 1);
	/* Its answer comes late, then a bad message, then the second's. */
	worker_says(c, "{\"ok\":true,\"id\":1,\"which\":\"one\"}");
	worker_says(c, "not json");
	worker_says(c, "{\"ok\":true,\"id\":2,\"which\":\"two\"}");
	a = worker_request(c->ours, &c->next_id, json_pack("{s:s}", "op", "two"), NULL, 0, 1000,
			   &eof);
	assert_non_null(a);
	assert_string_equal(json_string_value(json_object_get(a, "which")), "two");
	json_decref(a);
	assert_int_equal(worker_got(c, "two"), 2);
}

static void test_hang_up_is_eof(void **state)
{
	struct chan *c = *state;
	bool eof = false;

	worker_says(c, "{\"ok\":true,\"id\":9}");
	close(c->theirs);
	c->theirs = -1;
	assert_null(worker_request(c->ours, &c->next_id, json_pack("{s:s}", "op", "x"), NULL, 0, -1,
				   &eof));
	assert_true(eof);
}

static void test_answer_to_copies_the_id(void **state)
{
	json_t *req = json_pack("{s:s,s:i}", "op", "rm", "id", 42);
	json_t *a = worker_answer_to(req, json_pack("{s:b}", "ok", 1));
	json_t *none = json_pack("{s:s}", "op", "rm");

	(void)state;
	assert_int_equal(json_integer_value(json_object_get(a, "id")), 42);
	json_decref(a);
	/* A request without one gets an answer without one. */
	a = worker_answer_to(none, json_pack("{s:b}", "ok", 1));
	assert_null(json_object_get(a, "id"));
	assert_null(worker_answer_to(req, NULL));
	json_decref(a);
	json_decref(none);
	json_decref(req);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_late_answer_is_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hang_up_is_eof, setup, teardown),
		cmocka_unit_test(test_answer_to_copies_the_id),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
