/* Unit tests for proto/codec.c and proto/stream.c, second part: every
 * malformed frame (truncated, oversize, bad string lengths, too many
 * strings or groups, limits a guest refuses, trailing bytes, out-of-range
 * fields) is an error rather than a crash or a partial message, and the
 * encoder makes none; the incremental decoder over a stream of frames and
 * with garbage after one; frames read and written on a socket. The helpers
 * are in proto_rig.h; round trips and sanitised text are in test_proto.c. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "proto/agent.h"
#include "proto_rig.h"

/* A raw frame: header as given, then body. */
static size_t raw(uint32_t len, uint16_t type, uint16_t flags, const void *body, size_t body_len)
{
	frame[0] = (uint8_t)len;
	frame[1] = (uint8_t)(len >> 8);
	frame[2] = (uint8_t)(len >> 16);
	frame[3] = (uint8_t)(len >> 24);
	frame[4] = (uint8_t)type;
	frame[5] = (uint8_t)(type >> 8);
	frame[6] = (uint8_t)flags;
	frame[7] = (uint8_t)(flags >> 8);
	if (body_len)
		memcpy(frame + PROTO_HDR_SIZE, body, body_len);
	return PROTO_HDR_SIZE + body_len;
}

static void test_truncated(void **state)
{
	char *argv[] = { "true", NULL };
	struct proto_msg m = { .type = PROTO_EXEC };
	static uint8_t copy[4096];
	size_t n;

	(void)state;
	m.u.exec = (struct proto_exec){ .id = 1, .argv = argv, .argc = 1, .cwd = "/" };
	n = encode(&m);
	memcpy(copy, frame, n);
	for (size_t cut = 0; cut < n; cut++)
		decode_err(copy, cut);
	/* A header whose length says less than the body really needs. */
	for (uint32_t len = 0; len < n - PROTO_HDR_SIZE; len++) {
		memcpy(frame, copy, n);
		frame[0] = (uint8_t)len;
		assert_string_equal(decode_err(frame, PROTO_HDR_SIZE + len), "truncated body");
	}
}

static void test_trailing_bytes(void **state)
{
	struct proto_msg m = { .type = PROTO_SIGNAL, .u.signal = { 1, 9 } };
	size_t n;

	(void)state;
	n = encode(&m);
	/* Bytes past the frame the caller handed in. */
	frame[n] = 0;
	assert_string_equal(decode_err(frame, n + 1), "trailing bytes after the frame");
	/* Bytes inside the body past the message's fields. */
	frame[0] = 12;
	memset(frame + n, 0, 4);
	assert_string_equal(decode_err(frame, n + 4), "trailing bytes after the message");
}

static void test_bad_headers(void **state)
{
	static struct proto_decoder d;
	struct proto_msg m;
	const char *why;
	uint8_t body[4] = { 0 };
	size_t n;

	(void)state;
	n = raw(PROTO_MAX_CONTROL + 1, PROTO_EXEC, 0, body, 4);
	assert_string_equal(decode_err(frame, n), "frame body over its size limit");
	n = raw(PROTO_MAX_DATA + 1, PROTO_STDIN, 0, body, 4);
	assert_string_equal(decode_err(frame, n), "frame body over its size limit");
	n = raw(0xffffffffu, PROTO_HELLO, 0, body, 4);
	assert_string_equal(decode_err(frame, n), "frame body over its size limit");
	n = raw(4, 999, 0, body, 4);
	assert_string_equal(decode_err(frame, n), "unknown frame type");
	n = raw(4, 0, 0, body, 4);
	assert_string_equal(decode_err(frame, n), "unknown frame type");
	n = raw(4, PROTO_STREAM, 1, body, 4);
	assert_string_equal(decode_err(frame, n), "reserved header flags set");

	/* The incremental decoder refuses an oversize header at once, before
	 * the body it announces could arrive. */
	proto_decoder_init(&d);
	raw(PROTO_MAX_CONTROL + 1, PROTO_EXEC, 0, body, 0);
	proto_decoder_push(&d, frame, PROTO_HDR_SIZE);
	assert_int_equal(proto_decoder_next(&d, &m, &why), -1);
	assert_string_equal(why, "frame body over its size limit");
}

/* An EXEC body whose argv count and argv[0] length say what the caller
 * claims, whatever the bytes that follow. */
static size_t exec_body(uint8_t *buf, size_t cap, uint32_t argc_claim, const char *arg0,
			uint32_t arg0_len_claim)
{
	struct proto_writer w;

	proto_writer_init(&w, buf, cap);
	proto_put_u32(&w, 1);		   /* id */
	proto_put_u32(&w, argc_claim);	   /* argv count */
	proto_put_u32(&w, arg0_len_claim); /* argv[0] length */
	proto_put_bytes(&w, arg0, strlen(arg0));
	proto_put_u32(&w, 0); /* env count */
	proto_put_str(&w, "/");
	for (int i = 0; i < 6; i++) /* uid gid ngids flags rows cols */
		proto_put_u32(&w, 0);
	assert_true(proto_writer_finish(&w, PROTO_EXEC) > 0);
	return w.len;
}

static void test_bad_strings(void **state)
{
	struct proto_msg out;
	size_t n;

	(void)state;
	/* Sanity: the hand-made body is a good EXEC. */
	n = exec_body(frame, sizeof(frame), 1, "ls", 2);
	decode_ok(n, &out);
	assert_string_equal(out.u.exec.argv[0], "ls");
	proto_msg_free(&out);

	/* A string longer than the rest of the body. */
	n = exec_body(frame, sizeof(frame), 1, "ls", 1000);
	assert_string_equal(decode_err(frame, n), "truncated body");
	/* Longer than any string may be. */
	n = exec_body(frame, sizeof(frame), 1, "ls", PROTO_MAX_STRING + 1);
	assert_string_equal(decode_err(frame, n), "string too long");
	n = exec_body(frame, sizeof(frame), 1, "ls", 0xffffffffu);
	assert_string_equal(decode_err(frame, n), "string too long");
	/* A NUL inside. */
	{
		struct proto_writer w;

		proto_writer_init(&w, frame, sizeof(frame));
		proto_put_u32(&w, 1);
		proto_put_u32(&w, 1);
		proto_put_u32(&w, 3);
		proto_put_bytes(&w, "a\0b", 3);
		assert_true(proto_writer_finish(&w, PROTO_EXEC) > 0);
		assert_string_equal(decode_err(frame, w.len), "NUL inside a string");
	}
	/* An ERROR message string that overruns. */
	{
		struct proto_writer w;

		proto_writer_init(&w, frame, sizeof(frame));
		proto_put_u32(&w, 1);
		proto_put_u32(&w, 127);
		proto_put_u32(&w, 5);
		proto_put_bytes(&w, "abc", 3);
		assert_true(proto_writer_finish(&w, PROTO_ERROR) > 0);
		assert_string_equal(decode_err(frame, w.len), "truncated body");
	}
}

static void test_too_many_strings(void **state)
{
	size_t n;

	(void)state;
	n = exec_body(frame, sizeof(frame), PROTO_MAX_STRV + 1, "ls", 2);
	assert_string_equal(decode_err(frame, n), "too many strings");
	/* A count the body cannot hold is refused before allocating it. */
	n = exec_body(frame, sizeof(frame), 1000, "ls", 2);
	assert_string_equal(decode_err(frame, n), "truncated body");
	/* Zero arguments: no program to run. */
	{
		struct proto_writer w;

		proto_writer_init(&w, frame, sizeof(frame));
		proto_put_u32(&w, 1);
		proto_put_u32(&w, 0); /* argc */
		proto_put_u32(&w, 0); /* envc */
		proto_put_str(&w, "/");
		for (int i = 0; i < 6; i++)
			proto_put_u32(&w, 0);
		assert_true(proto_writer_finish(&w, PROTO_EXEC) > 0);
		assert_string_equal(decode_err(frame, w.len), "empty argv");
	}
}

/* An EXEC of `ls` in / as root written by hand up to its group count. */
static void exec_start(struct proto_writer *w)
{
	proto_writer_init(w, frame, sizeof(frame));
	proto_put_u32(w, 1);
	proto_put_u32(w, 1);
	proto_put_str(w, "ls");
	proto_put_u32(w, 0);
	proto_put_str(w, "/");
	proto_put_u32(w, 0);
	proto_put_u32(w, 0);
}

static void test_too_many_gids(void **state)
{
	struct proto_writer w;

	(void)state;
	exec_start(&w);
	proto_put_u32(&w, PROTO_MAX_GIDS + 1);
	for (int i = 0; i < PROTO_MAX_GIDS + 1 + 3; i++)
		proto_put_u32(&w, 0);
	assert_true(proto_writer_finish(&w, PROTO_EXEC) > 0);
	assert_string_equal(decode_err(frame, w.len), "too many groups");
}

/* An OCI process's limits and capability sets, and the limits a guest
 * refuses: a resource out of range or twice, a soft one over its hard. */
static void test_exec_limits_and_caps(void **state)
{
	char *argv[] = { "true", NULL };
	struct proto_rlimit lim[] = { { 7, 100, 200 }, { 6, 5, UINT64_MAX } };
	struct proto_msg m = { .type = PROTO_EXEC }, out;
	struct proto_exec *e = &m.u.exec;
	struct proto_writer w;
	size_t n;

	(void)state;
	*e = (struct proto_exec){ .id = 3, .argv = argv, .argc = 1, .cwd = "/",
				  .flags = PROTO_EXEC_RLIMITS | PROTO_EXEC_CAPS,
				  .rlimits = lim, .nrlimits = 2,
				  .caps = { 1, 2, 4, 1ULL << 40, 1ULL << 63 } };
	n = encode(&m);
	decode_ok(n, &out);
	assert_int_equal(out.u.exec.nrlimits, 2);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(out.u.exec.rlimits[i].resource, lim[i].resource);
		assert_true(out.u.exec.rlimits[i].soft == lim[i].soft);
		assert_true(out.u.exec.rlimits[i].hard == lim[i].hard);
	}
	assert_memory_equal(out.u.exec.caps, e->caps, sizeof(e->caps));
	proto_msg_free(&out);
	incremental_same(n, PROTO_EXEC);
	/* Without the flags, neither is on the wire. */
	e->flags = 0;
	assert_true(encode(&m) < n);
	e->nrlimits = PROTO_MAX_RLIMITS + 1;
	e->flags = PROTO_EXEC_RLIMITS;
	assert_int_equal(proto_encode(&m, frame, sizeof(frame)), -1);

	for (int bad = 0; bad < 3; bad++) {
		exec_start(&w);
		proto_put_u32(&w, 0);
		proto_put_u32(&w, PROTO_EXEC_RLIMITS);
		proto_put_u32(&w, 0);
		proto_put_u32(&w, 0);
		proto_put_u32(&w, 2);
		proto_put_u32(&w, bad == 0 ? PROTO_MAX_RLIMITS : 7);
		proto_put_u64(&w, 1);
		proto_put_u64(&w, 2);
		proto_put_u32(&w, bad == 1 ? 7 : 6);
		proto_put_u64(&w, bad == 2 ? 3 : 1);
		proto_put_u64(&w, 2);
		assert_true(proto_writer_finish(&w, PROTO_EXEC) > 0);
		assert_non_null(strstr(decode_err(frame, w.len), bad == 2 ? "soft" : "resource"));
	}
}

static void test_out_of_range_fields(void **state)
{
	struct {
		uint16_t type;
		uint32_t words[3];
		size_t n;
		const char *why;
	} cases[] = {
		{ PROTO_EXIT, { 1, 2, 0 }, 3, "bad EXIT kind" },
		{ PROTO_EXIT, { 1, 0, 256 }, 3, "EXIT code out of range" },
		{ PROTO_EXIT, { 1, 1, 0 }, 3, "EXIT code out of range" },
		{ PROTO_EXIT, { 1, 1, 65 }, 3, "EXIT code out of range" },
		{ PROTO_SIGNAL, { 1, 0 }, 2, "bad signal number" },
		{ PROTO_SIGNAL, { 1, 65 }, 2, "bad signal number" },
		{ PROTO_SHUTDOWN, { 256 }, 1, "SHUTDOWN status out of range" },
		{ PROTO_EOF, { 3 }, 1, "bad EOF fd" },
		{ PROTO_STARTED, { 1 }, 1, "truncated body" },
	};
	struct proto_msg m = { .type = PROTO_EXIT, .u.exit = { 1, true, 0 } };

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct proto_writer w;

		proto_writer_init(&w, frame, sizeof(frame));
		for (size_t j = 0; j < cases[i].n; j++)
			proto_put_u32(&w, cases[i].words[j]);
		assert_true(proto_writer_finish(&w, cases[i].type) > 0);
		assert_string_equal(decode_err(frame, w.len), cases[i].why);
	}
	/* Empty data frames are refused too. */
	raw(0, PROTO_STDERR, 0, NULL, 0);
	assert_string_equal(decode_err(frame, PROTO_HDR_SIZE), "empty data frame");
	/* And the encoder will not produce the bad values. */
	assert_int_equal(proto_encode(&m, frame, sizeof(frame)), -1);
}

static void test_encode_too_big(void **state)
{
	static char arg[PROTO_MAX_STRING];
	char *argv[4] = { arg, arg, arg, NULL };
	struct proto_msg m = { .type = PROTO_EXEC };

	(void)state;
	memset(arg, 'a', sizeof(arg) - 1);
	m.u.exec = (struct proto_exec){ .id = 1, .argv = argv, .argc = 3, .cwd = "/" };
	/* Three 32 KiB strings do not fit a 64 KiB body. */
	assert_int_equal(proto_encode(&m, frame, sizeof(frame)), -1);
	m.u.exec.argc = 1;
	assert_true(proto_encode(&m, frame, sizeof(frame)) > 0);
	/* Nor does any frame fit a buffer smaller than it. */
	assert_int_equal(proto_encode(&m, frame, 100), -1);
	/* An id of 0 is not a session. */
	m.u.exec.id = 0;
	assert_int_equal(proto_encode(&m, frame, sizeof(frame)), -1);
}

static void test_decoder_stream(void **state)
{
	static struct proto_decoder d;
	static uint8_t stream[3 * (PROTO_HDR_SIZE + PROTO_MAX_DATA) + 64];
	static uint8_t data[PROTO_MAX_DATA];
	struct proto_msg m;
	const char *why;
	size_t len = 0, off = 0;
	int frames = 0;

	(void)state;
	memset(data, 'z', sizeof(data));
	for (int i = 0; i < 3; i++) {
		struct proto_msg out = { .type = PROTO_STDOUT,
					 .u.data = { data, sizeof(data) - (size_t)i } };

		len += (size_t)proto_encode(&out, stream + len, sizeof(stream) - len);
	}
	{
		struct proto_msg eof = { .type = PROTO_EOF, .u.eof = { 1 } };

		len += (size_t)proto_encode(&eof, stream + len, sizeof(stream) - len);
	}
	/* Feed in odd-sized chunks, taking frames out as they complete. */
	proto_decoder_init(&d);
	while (off < len || proto_decoder_pending(&d)) {
		int r;

		off += proto_decoder_push(&d, stream + off, MIN(len - off, (size_t)5000));
		while ((r = proto_decoder_next(&d, &m, &why)) > 0) {
			if (frames < 3) {
				assert_int_equal(m.type, PROTO_STDOUT);
				assert_int_equal(m.u.data.len, PROTO_MAX_DATA - frames);
			} else {
				assert_int_equal(m.type, PROTO_EOF);
			}
			frames++;
			proto_msg_free(&m);
		}
		assert_int_equal(r, 0);
		if (off == len && proto_decoder_pending(&d))
			fail_msg("bytes left over");
	}
	assert_int_equal(frames, 4);
}

static void test_decoder_garbage_after_frame(void **state)
{
	static struct proto_decoder d;
	struct proto_msg m = { .type = PROTO_STREAM, .u.stream = { 5 } }, out;
	const char *why;
	size_t n;

	(void)state;
	n = encode(&m);
	proto_decoder_init(&d);
	proto_decoder_push(&d, frame, n);
	proto_decoder_push(&d, "\xff\xff\xff\xff\x01\x00\x00\x00", 8);
	assert_int_equal(proto_decoder_next(&d, &out, &why), 1);
	assert_int_equal(out.u.stream.id, 5);
	assert_int_equal(proto_decoder_next(&d, &out, &why), -1);
}

static void test_fd_io(void **state)
{
	static uint8_t buf[PROTO_MAX_FRAME];
	struct proto_msg m = { .type = PROTO_RESIZE, .u.resize = { 2, 30, 100 } }, out;
	const char *why;
	int sv[2];
	size_t n;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(proto_write_msg(sv[0], &m), 0);
	assert_int_equal(proto_read_msg(sv[1], buf, &out, &why), 1);
	assert_int_equal(out.type, PROTO_RESIZE);
	assert_int_equal(out.u.resize.cols, 100);

	/* A frame cut short by EOF. */
	n = encode(&m);
	assert_int_equal(write(sv[0], frame, n - 1), (ssize_t)n - 1);
	close(sv[0]);
	assert_int_equal(proto_read_msg(sv[1], buf, &out, &why), -1);
	assert_int_equal(errno, EPROTO);
	assert_string_equal(why, "truncated body");
	close(sv[1]);

	/* EOF at a frame boundary is a clean end. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	close(sv[0]);
	assert_int_equal(proto_read_msg(sv[1], buf, &out, &why), 0);
	close(sv[1]);

	/* A hostile header is refused before its body is read. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	n = raw(PROTO_MAX_CONTROL + 1, PROTO_HELLO, 0, NULL, 0);
	assert_int_equal(write(sv[0], frame, n), (ssize_t)n);
	assert_int_equal(proto_read_msg(sv[1], buf, &out, &why), -1);
	assert_int_equal(errno, EPROTO);
	close(sv[0]);
	close(sv[1]);

	/* Writing a message that does not encode says EMSGSIZE. */
	m.type = PROTO_SIGNAL;
	m.u.signal.signo = 0;
	assert_int_equal(proto_write_msg(1, &m), -1);
	assert_int_equal(errno, EMSGSIZE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_trailing_bytes),
		cmocka_unit_test(test_bad_headers),
		cmocka_unit_test(test_bad_strings),
		cmocka_unit_test(test_too_many_strings),
		cmocka_unit_test(test_too_many_gids),
		cmocka_unit_test(test_exec_limits_and_caps),
		cmocka_unit_test(test_out_of_range_fields),
		cmocka_unit_test(test_encode_too_big),
		cmocka_unit_test(test_decoder_stream),
		cmocka_unit_test(test_decoder_garbage_after_frame),
		cmocka_unit_test(test_fd_io),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
