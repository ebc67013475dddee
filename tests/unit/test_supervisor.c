/* The supervisor's loop against a fake guest and real ctl.sock clients,
 * first part: a hostile guest or client must never hold the loop. Silent
 * stdio dials and a STREAM frame sent in part, a guest that stops reading
 * its control connection and one that catches up, a session asked for once
 * the guest is gone, a client that stops reading its answers or says
 * nothing, and frames for no session. The rig is supervisor_rig.h; the
 * requests that reach the network worker, the shares, the credential broker
 * and the secrets are in test_supervisor_ops.c. No VM boots here. */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "proto/agent.h"
#include "sandbox/ctl.h"
#include "supervisor/supervisor_priv.h"
#include "supervisor_rig.h"

static void send_frame(int fd, const struct proto_msg *m)
{
	assert_int_equal(proto_write_msg(fd, m), 0);
}

/* A session's client: exec request, its ok, then EXEC with client id. */
static int open_session(struct rig *r, uint32_t id)
{
	char *argv[] = { "true", NULL };
	struct proto_msg m = { .type = PROTO_EXEC };
	char line[256];
	int fd = client(r, CTL_OP_EXEC);

	assert_true(serve_until(r, fd, 2000) >= 0);
	assert_int_equal(ctl_read_line(fd, line, sizeof(line), 1000, NULL), 0);
	assert_string_equal(line, "{\"ok\":true}");
	m.u.exec.id = id;
	m.u.exec.argv = argv;
	m.u.exec.argc = 1;
	send_frame(fd, &m);
	return fd;
}

/* A session with client id 7 whose EXEC reached the guest. Returns the
 * client's fd and the id the guest sees. */
static int start_session(struct rig *r, uint32_t *guest_id)
{
	struct proto_msg got;
	uint8_t buf[PROTO_MAX_FRAME];
	const char *why;
	int fd = open_session(r, 7);

	assert_true(serve_until(r, r->guest, 2000) >= 0);
	assert_int_equal(proto_read_msg(r->guest, buf, &got, &why), 1);
	assert_int_equal(got.type, PROTO_EXEC);
	assert_int_not_equal(got.u.exec.id, 7);
	*guest_id = got.u.exec.id;
	proto_msg_free(&got);
	return fd;
}

static int dial_stdio(struct rig *r)
{
	int fd = doors_dial(&r->s->doors, PROTO_STDIO_PORT);

	assert_true(fd >= 0);
	assert_int_equal(fcntl(fd, F_SETFL, 0), 0);
	return fd;
}

/* Receive one frame and the fd that came with it. */
static void recv_stream(int fd, uint32_t want_id)
{
	uint8_t frame[PROTO_HDR_SIZE + 4];
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { frame, sizeof(frame) };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	struct proto_msg m;
	const char *why;
	int passed;

	assert_int_equal(recvmsg(fd, &msg, MSG_WAITALL), sizeof(frame));
	assert_int_equal(proto_decode(frame, sizeof(frame), &m, &why), 0);
	assert_int_equal(m.type, PROTO_STREAM);
	assert_int_equal(m.u.stream.id, want_id);
	cm = CMSG_FIRSTHDR(&msg);
	assert_non_null(cm);
	memcpy(&passed, CMSG_DATA(cm), sizeof(passed));
	close(passed);
}

/* A workload holding silent connections to the host's stdio port: more of
 * them than may wait at once. Status is answered at once, and a session's
 * own stream still reaches it. */
static void test_silent_stdio_dials(void **state)
{
	struct rig *r = *state;
	struct proto_msg m = { .type = PROTO_STREAM };
	int silent[SUP_MAX_STREAMS + 16], fd, stream;
	uint32_t gid;

	for (size_t i = 0; i < ARRAY_SIZE(silent); i++) {
		silent[i] = dial_stdio(r);
		sup_serve_once(r->s, 0);
	}
	assert_status_answered(r, 1000);
	fd = start_session(r, &gid);
	stream = dial_stdio(r);
	m.u.stream.id = gid;
	send_frame(stream, &m);
	assert_true(serve_until(r, fd, 2000) >= 0);
	recv_stream(fd, 7);
	close(stream);
	close(fd);
	for (size_t i = 0; i < ARRAY_SIZE(silent); i++)
		close(silent[i]);
}

/* A dial that sends half its STREAM frame and stops holds nothing up. */
static void test_partial_stream_frame(void **state)
{
	struct rig *r = *state;
	int fd = dial_stdio(r);

	assert_int_equal(write(fd, "\0\0", 2), 2);
	sup_serve_once(r->s, 0);
	assert_status_answered(r, 1000);
	close(fd);
}

/* A second session, asked for while the guest owes us reading: its EXEC
 * (client id 9) waits in its socket. */
static int late_session(struct rig *r)
{
	int fd = open_session(r, 9);

	assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	return fd;
}

/* The guest stops reading its control connection while a session floods
 * it: status goes on being answered, the session's frames wait in its own
 * socket, and after the stall bound the guest is cut and the session told. */
static void test_guest_stops_reading(void **state)
{
	struct rig *r = *state;
	struct proto_msg m = { .type = PROTO_RESIZE };
	uint8_t frame[64], buf[PROTO_MAX_FRAME];
	struct proto_msg got;
	const char *why;
	uint32_t gid;
	ssize_t len;
	int fd = start_session(r, &gid), e, flood = 0, late = -1;
	uint64_t t0;

	m.u.resize.id = 7;
	m.u.resize.rows = 24;
	m.u.resize.cols = 80;
	len = proto_encode(&m, frame, sizeof(frame));
	assert_true(len > 0);
	assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	t0 = now_ms();
	while (now_ms() - t0 < (uint64_t)SUP_GUEST_STALL_MS + 3000 && r->s->control >= 0) {
		uint64_t before = now_ms();

		/* The client writes what its socket takes. */
		for (int i = 0; i < 256 && send(fd, frame, (size_t)len, MSG_NOSIGNAL) == len; i++)
			flood++;
		sup_serve_once(r->s, ROUND_MS);
		/* Frames wait in the client's socket, not here. */
		assert_true(r->s->control_q.bytes <= SUP_GUEST_HIGH + (size_t)len);
		if (late < 0 && sup_guest_busy(r->s))
			late = late_session(r);
		if (r->s->control >= 0) {
			assert_non_null(r->s->clients[0]);
			/* Every second of the stall, others are still served. */
			if ((before - t0) / 1000 != (now_ms() - t0) / 1000)
				assert_status_answered(r, 1000);
		}
	}
	print_message("%d frames sent; guest cut after %llu ms\n", flood,
		      (unsigned long long)(now_ms() - t0));
	assert_int_equal(r->s->control, -1);
	assert_non_null(r->s->guest_gone);
	/* The session hears why. */
	assert_int_equal(fcntl(fd, F_SETFL, 0), 0);
	do {
		e = proto_read_msg(fd, buf, &got, &why);
		assert_int_equal(e, 1);
		if (got.type != PROTO_ERROR)
			proto_msg_free(&got);
	} while (got.type != PROTO_ERROR);
	assert_int_equal(got.u.error.id, 7);
	assert_non_null(strstr(got.u.error.message, "stopped reading"));
	proto_msg_free(&got);
	/* A session whose EXEC was held back hears it too, under its own id. */
	assert_int_equal(fcntl(late, F_SETFL, 0), 0);
	assert_int_equal(proto_read_msg(late, buf, &got, &why), 1);
	assert_int_equal(got.type, PROTO_ERROR);
	assert_int_equal(got.u.error.id, 9);
	proto_msg_free(&got);
	assert_status_answered(r, 1000);
	close(late);
	close(fd);
}

/* A guest that is slow but catches up before the stall bound gets every
 * frame a session sent, in order, and the session stays. */
static void test_guest_catches_up(void **state)
{
	struct rig *r = *state;
	struct proto_msg m = { .type = PROTO_RESIZE }, got;
	struct proto_decoder *dec = xmalloc(sizeof(*dec));
	uint8_t frame[64];
	uint32_t gid, seen = 0, sent = 0;
	ssize_t len;
	const char *why;
	int fd = start_session(r, &gid);
	uint64_t t0 = now_ms();

	proto_decoder_init(dec);
	assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(fcntl(r->guest, F_SETFL, O_NONBLOCK), 0);
	m.u.resize.id = 7;
	m.u.resize.cols = 80;
	/* A second of the guest reading nothing, then it reads all. */
	while (now_ms() - t0 < 1000 || seen < sent) {
		for (int i = 0; i < 64 && sent < 20000; i++) {
			m.u.resize.rows = sent + 1;
			len = proto_encode(&m, frame, sizeof(frame));
			if (send(fd, frame, (size_t)len, MSG_NOSIGNAL) != len)
				break;
			sent++;
		}
		sup_serve_once(r->s, ROUND_MS);
		if (now_ms() - t0 < 1000)
			continue;
		while (proto_decoder_fill(dec, r->guest) > 0) {
			while (proto_decoder_next(dec, &got, &why) > 0) {
				assert_int_equal(got.type, PROTO_RESIZE);
				assert_int_equal(got.u.resize.id, gid);
				assert_int_equal(got.u.resize.rows, ++seen);
				proto_msg_free(&got);
			}
		}
		assert_true(now_ms() - t0 < 30000);
	}
	print_message("%u frames held back and delivered in order\n", seen);
	assert_true(sent > 1000);
	assert_non_null(r->s->clients[0]);
	assert_true(r->s->control >= 0);
	free(dec);
	close(fd);
}

/* A new session is refused with the reason once the guest is gone. */
static void test_exec_after_guest_gone(void **state)
{
	struct rig *r = *state;
	char line[256];
	int fd;

	close(r->guest);
	r->guest = -1;
	sup_serve_once(r->s, ROUND_MS);
	assert_int_equal(r->s->control, -1);
	fd = client(r, CTL_OP_EXEC);
	assert_true(serve_until(r, fd, 1000) >= 0);
	assert_int_equal(ctl_read_line(fd, line, sizeof(line), 1000, NULL), 0);
	assert_non_null(strstr(line, "closed its control connection"));
	close(fd);
	r->guest = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* A session client that stops reading while the guest sends it frames is
 * hung up on once its queue is full; the guest hears SIGHUP for it. */
static void test_client_stops_reading(void **state)
{
	struct rig *r = *state;
	struct proto_msg m = { .type = PROTO_STARTED }, got;
	uint8_t buf[PROTO_MAX_FRAME];
	const char *why;
	uint32_t gid;
	int fd = start_session(r, &gid), sent = 0;
	bool hup = false;

	assert_int_equal(fcntl(r->guest, F_SETFL, O_NONBLOCK), 0);
	m.u.started.id = gid;
	m.u.started.pid = 1;
	for (int round = 0; round < 2000 && r->s->clients[0]; round++) {
		for (int i = 0; i < 64 && proto_write_msg(r->guest, &m) == 0; i++)
			sent++;
		sup_serve_once(r->s, 0);
	}
	print_message("%d frames for a client that reads nothing\n", sent);
	for (size_t i = 0; i < SUP_MAX_CLIENTS; i++)
		assert_null(r->s->clients[i]);
	assert_int_equal(fcntl(r->guest, F_SETFL, 0), 0);
	while (!hup && readable(r->guest) && proto_read_msg(r->guest, buf, &got, &why) == 1) {
		hup = got.type == PROTO_SIGNAL && got.u.signal.id == gid &&
		      got.u.signal.signo == SIGHUP;
		proto_msg_free(&got);
	}
	assert_true(hup);
	assert_status_answered(r, 1000);
	close(fd);
}

/* Frames for id 0 (no session has it) reach no client: not a status or
 * stop client, nor a session that has not sent its EXEC yet. */
static void test_frames_for_no_session(void **state)
{
	struct rig *r = *state;
	struct proto_msg m = { .type = PROTO_EXIT };
	char line[256];
	int idle, session, stream;

	assert_int_equal(ctl_connect(r->dir, &idle, NULL), 0);
	session = client(r, CTL_OP_EXEC);
	assert_true(serve_until(r, session, 2000) >= 0);
	assert_int_equal(ctl_read_line(session, line, sizeof(line), 1000, NULL), 0);
	m.u.exit.id = 0;
	send_frame(r->guest, &m);
	m.type = PROTO_STREAM;
	m.u.stream.id = 0;
	stream = dial_stdio(r);
	send_frame(stream, &m);
	for (int i = 0; i < 10; i++)
		sup_serve_once(r->s, ROUND_MS);
	assert_false(readable(idle));
	assert_false(readable(session));
	assert_false(r->s->clients[1]->done);
	close(stream);
	close(session);
	close(idle);
}

/* A client that connects and says nothing does not delay another. */
static void test_silent_client(void **state)
{
	struct rig *r = *state;
	int silent;

	assert_int_equal(ctl_connect(r->dir, &silent, NULL), 0);
	sup_serve_once(r->s, 0);
	assert_status_answered(r, 1000);
	close(silent);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_silent_stdio_dials, rig_setup, rig_teardown),
		cmocka_unit_test_setup_teardown(test_partial_stream_frame, rig_setup, rig_teardown),
		cmocka_unit_test_setup_teardown(test_guest_stops_reading, rig_setup, rig_teardown),
		cmocka_unit_test_setup_teardown(test_guest_catches_up, rig_setup, rig_teardown),
		cmocka_unit_test_setup_teardown(test_exec_after_guest_gone, rig_setup,
						rig_teardown),
		cmocka_unit_test_setup_teardown(test_client_stops_reading, rig_setup, rig_teardown),
		cmocka_unit_test_setup_teardown(test_silent_client, rig_setup, rig_teardown),
		cmocka_unit_test_setup_teardown(test_frames_for_no_session, rig_setup,
						rig_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
