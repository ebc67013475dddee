/* What the supervisor's tests share (test_supervisor.c,
 * test_supervisor_ops.c): a supervisor with a fake guest (a socketpair for
 * its control connection, the stdio port's door for its stdio dials) and a
 * listening ctl.sock in a temporary directory, served one round at a time
 * with sup_serve_once(); ctl.sock clients, and a status request that must
 * be answered within a bound. Include after <cmocka.h>. */
#ifndef GANTRY_TESTS_UNIT_SUPERVISOR_RIG_H
#define GANTRY_TESTS_UNIT_SUPERVISOR_RIG_H

#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/door.h"
#include "common/files.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "proto/agent.h"
#include "sandbox/ctl.h"
#include "supervisor/supervisor_priv.h"

#define ROUND_MS 20

struct rig {
	char dir[64];
	struct sup *s;
	int guest; /* the fake guest's end of the control connection */
};

static int rig_setup(void **state)
{
	struct rig *r = xzalloc(sizeof(*r));
	cleanup_free char *ctl = NULL;
	int sv[2];

	snprintf(r->dir, sizeof(r->dir), "/tmp/gantry-suptest.XXXXXX");
	assert_non_null(mkdtemp(r->dir));
	r->s = xzalloc(sizeof(*r->s));
	sup_init(r->s, "t");
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
	r->s->control = sv[0];
	r->guest = sv[1];
	xasprintf(&ctl, "%s/%s", r->dir, SANDBOX_CTL);
	r->s->stdio_listen = doors_open(&r->s->doors, PROTO_STDIO_PORT, NULL);
	r->s->ctl_listen = unix_listen(ctl, 64, NULL);
	assert_true(r->s->stdio_listen >= 0 && r->s->ctl_listen >= 0);
	*state = r;
	return 0;
}

static int rig_teardown(void **state)
{
	struct rig *r = *state;

	for (size_t i = 0; i < SUP_MAX_CLIENTS; i++)
		if (r->s->clients[i])
			client_drop(r->s, r->s->clients[i]);
	for (size_t i = 0; i < SUP_MAX_STREAMS; i++)
		if (r->s->streams[i].fd >= 0)
			close(r->s->streams[i].fd);
	if (r->s->control >= 0)
		close(r->s->control);
	outq_free(&r->s->control_q);
	close(r->s->stdio_listen);
	doors_free(&r->s->doors);
	close(r->s->ctl_listen);
	close(r->guest);
	free(r->s->dec);
	free(r->s);
	rm_tree(r->dir);
	free(r);
	return 0;
}

static bool readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1;
}

/* Serve rounds until fd is readable; the milliseconds it took, or -1. */
static int64_t serve_until(struct rig *r, int fd, int max_ms)
{
	uint64_t t0 = now_ms();

	while (now_ms() - t0 < (uint64_t)max_ms) {
		sup_serve_once(r->s, ROUND_MS);
		if (readable(fd))
			return (int64_t)(now_ms() - t0);
	}
	return -1;
}

static int client(struct rig *r, const char *op)
{
	char line[64];
	int fd;

	assert_int_equal(ctl_connect(r->dir, &fd, NULL), 0);
	snprintf(line, sizeof(line), "{\"op\":\"%s\"}\n", op);
	assert_int_equal(write(fd, line, strlen(line)), (ssize_t)strlen(line));
	return fd;
}

/* A status request answered within a bound while whatever the test set up
 * goes on. */
static void assert_status_answered(struct rig *r, int max_ms)
{
	char line[CTL_LINE_MAX];
	int fd = client(r, CTL_OP_STATUS);
	int64_t took = serve_until(r, fd, max_ms);

	print_message("status answered in %lld ms\n", (long long)took);
	assert_true(took >= 0);
	assert_int_equal(ctl_read_line(fd, line, sizeof(line), 1000, NULL), 0);
	assert_non_null(strstr(line, "\"ok\":true"));
	close(fd);
}

#endif
