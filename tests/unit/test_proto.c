/* Unit tests for proto/codec.c and proto/stream.c: every message survives a
 * round trip, both decoders agree, text a guest sends for display comes out
 * sanitised, and every malformed frame (truncated, oversize, bad string
 * lengths, too many strings, trailing bytes, out-of-range fields) is an
 * error rather than a crash or a partial message. */
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

static uint8_t frame[PROTO_MAX_FRAME + 64];

static size_t encode(const struct proto_msg *m)
{
	ssize_t n = proto_encode(m, frame, sizeof(frame));

	assert_true(n >= PROTO_HDR_SIZE);
	return (size_t)n;
}

static void decode_ok(size_t len, struct proto_msg *out)
{
	const char *why = NULL;

	if (proto_decode(frame, len, out, &why) < 0)
		fail_msg("decode failed: %s", why);
}

static const char *decode_err(const void *buf, size_t len)
{
	struct proto_msg m;
	const char *why = NULL;

	assert_int_equal(proto_decode(buf, len, &m, &why), -1);
	assert_non_null(why);
	return why;
}

/* Also through the incremental decoder, one byte at a time. */
static void incremental_same(size_t len, uint16_t type)
{
	static struct proto_decoder d;
	struct proto_msg m;
	const char *why;

	proto_decoder_init(&d);
	for (size_t i = 0; i < len; i++) {
		assert_int_equal(proto_decoder_next(&d, &m, &why), 0);
		assert_int_equal(proto_decoder_push(&d, frame + i, 1), 1);
	}
	assert_int_equal(proto_decoder_next(&d, &m, &why), 1);
	assert_int_equal(m.type, type);
	proto_msg_free(&m);
	assert_int_equal(proto_decoder_next(&d, &m, &why), 0);
	assert_int_equal(proto_decoder_pending(&d), 0);
}

static void test_hello(void **state)
{
	struct proto_msg m = { .type = PROTO_HELLO }, out;
	size_t n;

	(void)state;
	m.u.hello.version = PROTO_VERSION;
	m.u.hello.uptime_ms = 0x123456789aULL;
	m.u.hello.ncpus = 4;
	m.u.hello.kernel = "6.1.0-gantry";
	n = encode(&m);
	decode_ok(n, &out);
	assert_int_equal(out.type, PROTO_HELLO);
	assert_int_equal(out.u.hello.version, PROTO_VERSION);
	assert_true(out.u.hello.uptime_ms == 0x123456789aULL);
	assert_int_equal(out.u.hello.ncpus, 4);
	assert_string_equal(out.u.hello.kernel, "6.1.0-gantry");
	proto_msg_free(&out);
	incremental_same(n, PROTO_HELLO);
}

/* READY: an empty message (ready) and one saying why not. */
static void test_ready(void **state)
{
	struct proto_msg m = { .type = PROTO_READY }, out;
	size_t n;

	(void)state;
	n = encode(&m);
	decode_ok(n, &out);
	assert_int_equal(out.type, PROTO_READY);
	assert_string_equal(out.u.ready.message, "");
	proto_msg_free(&out);
	m.u.ready.message = "container root: mount overlay: ENOSPC";
	n = encode(&m);
	decode_ok(n, &out);
	assert_string_equal(out.u.ready.message, m.u.ready.message);
	proto_msg_free(&out);
	incremental_same(n, PROTO_READY);
}

/* MOUNT, UNMOUNT and DONE round-trip; a bad flag, id 0 or an over-long
 * tag is refused by both sides; DONE's message is text for display. */
static void test_mounts(void **state)
{
	struct proto_msg m = { .type = PROTO_MOUNT }, out;
	uint8_t buf[PROTO_MAX_FRAME];
	const char *why;
	ssize_t n;

	(void)state;
	m.u.mount = (typeof(m.u.mount)){ .id = 3, .flags = PROTO_MOUNT_RO, .tag = "src",
					  .path = "/work space" };
	n = (ssize_t)encode(&m);
	decode_ok((size_t)n, &out);
	assert_int_equal(out.u.mount.id, 3);
	assert_int_equal(out.u.mount.flags, PROTO_MOUNT_RO);
	assert_string_equal(out.u.mount.tag, "src");
	assert_string_equal(out.u.mount.path, "/work space");
	proto_msg_free(&out);
	incremental_same((size_t)n, PROTO_MOUNT);

	m.type = PROTO_UNMOUNT;
	n = (ssize_t)encode(&m);
	decode_ok((size_t)n, &out);
	assert_int_equal(out.type, PROTO_UNMOUNT);
	assert_string_equal(out.u.mount.path, "/work space");
	assert_null(out.u.mount.tag);
	proto_msg_free(&out);

	m.type = PROTO_MOUNT;
	m.u.mount.flags = 2;
	assert_true(proto_encode(&m, buf, sizeof(buf)) < 0);
	m.u.mount.flags = 0;
	m.u.mount.tag = "0123456789012345678901234567890123456"; /* 37 */
	assert_true(proto_encode(&m, buf, sizeof(buf)) < 0);
	m.u.mount.tag = "src";
	m.u.mount.id = 0;
	assert_true(proto_encode(&m, buf, sizeof(buf)) < 0);
	/* A flag the encoder would refuse, written by hand. */
	m.u.mount.id = 1;
	n = proto_encode(&m, buf, sizeof(buf));
	assert_true(n > 0);
	buf[PROTO_HDR_SIZE + 4] = 0x80;
	assert_int_equal(proto_decode(buf, (size_t)n, &out, &why), -1);

	m = (struct proto_msg){ .type = PROTO_DONE };
	m.u.done.id = 3;
	m.u.done.error = 2;
	m.u.done.message = "mkdir: \x1b[2J no";
	n = (ssize_t)encode(&m);
	decode_ok((size_t)n, &out);
	assert_int_equal(out.u.done.error, 2);
	assert_null(strchr(out.u.done.message, '\x1b'));
	proto_msg_free(&out);
}

/* RENEW carries entropy, the clock, the shares and the CA; RENEWED's
 * message is the guest's text, sanitised; unknown flags, too many shares
 * and a CA too long fail. */
static void test_renew(void **state)
{
	struct proto_msg m = { .type = PROTO_RENEW }, out;
	char *shares[] = { "work:rw:L3dvcms", "data:ro:L2RhdGE", NULL };
	char *many[PROTO_MAX_SHARES + 2];
	static char long_ca[PROTO_MAX_CA + 2];
	uint8_t buf[PROTO_MAX_FRAME];
	const char *why;
	ssize_t n;

	(void)state;
	m.u.renew.time_ns = 1764979200123456789ull;
	for (int i = 0; i < PROTO_RENEW_WORDS; i++)
		m.u.renew.entropy[i] = 0x0123456789abcdefull * (uint64_t)(i + 1);
	m.u.renew.hostname = "";
	m.u.renew.shares = shares;
	m.u.renew.nr_shares = 2;
	m.u.renew.ca = "TUlJQmZqQ0NB";
	n = (ssize_t)encode(&m);
	decode_ok((size_t)n, &out);
	assert_string_equal(out.u.renew.ca, "TUlJQmZqQ0NB");
	assert_string_equal(out.u.renew.config, "");
	assert_true(out.u.renew.time_ns == m.u.renew.time_ns);
	assert_memory_equal(out.u.renew.entropy, m.u.renew.entropy, sizeof(m.u.renew.entropy));
	assert_string_equal(out.u.renew.hostname, "");
	assert_int_equal(out.u.renew.nr_shares, 2);
	assert_string_equal(out.u.renew.shares[1], "data:ro:L2RhdGE");
	assert_null(out.u.renew.shares[2]);
	proto_msg_free(&out);
	incremental_same((size_t)n, PROTO_RENEW);
	/* Without a CA, none is written: the RENEW a guest from before the
	 * field reads. */
	m.u.renew.ca = NULL;
	n = (ssize_t)encode(&m);
	decode_ok((size_t)n, &out);
	assert_string_equal(out.u.renew.ca, "");
	proto_msg_free(&out);
	memset(long_ca, 'A', PROTO_MAX_CA + 1);
	long_ca[PROTO_MAX_CA + 1] = '\0';
	m.u.renew.ca = long_ca;
	assert_true(proto_encode(&m, buf, sizeof(buf)) < 0);
	m.u.renew.ca = NULL;
	/* A template's config, with no CA before it. */
	m.u.renew.config = "gantry.hostroot=1 gantry.net=192.168.127.2/24";
	n = (ssize_t)encode(&m);
	decode_ok((size_t)n, &out);
	assert_string_equal(out.u.renew.ca, "");
	assert_string_equal(out.u.renew.config, m.u.renew.config);
	proto_msg_free(&out);
	{
		static char long_config[PROTO_MAX_CONFIG + 2];

		memset(long_config, 'c', PROTO_MAX_CONFIG + 1);
		m.u.renew.config = long_config;
		assert_true(proto_encode(&m, buf, sizeof(buf)) < 0);
	}
	m.u.renew.config = NULL;

	for (int i = 0; i <= PROTO_MAX_SHARES; i++)
		many[i] = "s:rw:L3M";
	many[PROTO_MAX_SHARES + 1] = NULL;
	m.u.renew.shares = many;
	m.u.renew.nr_shares = PROTO_MAX_SHARES + 1;
	assert_true(proto_encode(&m, buf, sizeof(buf)) < 0);
	/* The same count written by hand is refused by the decoder. */
	m.u.renew.nr_shares = PROTO_MAX_SHARES;
	n = proto_encode(&m, buf, sizeof(buf));
	assert_true(n > 0);
	buf[PROTO_HDR_SIZE + 8 + 8 * PROTO_RENEW_WORDS + 4] = PROTO_MAX_SHARES + 1;
	assert_int_equal(proto_decode(buf, (size_t)n, &out, &why), -1);

	m = (struct proto_msg){ .type = PROTO_RENEWED };
	m.u.renewed.flags = PROTO_RENEWED_RANDOM | PROTO_RENEWED_CLOCK;
	m.u.renewed.message = "work: \x1b[2J gone";
	n = (ssize_t)encode(&m);
	decode_ok((size_t)n, &out);
	assert_int_equal(out.u.renewed.flags, PROTO_RENEWED_RANDOM | PROTO_RENEWED_CLOCK);
	assert_null(strchr(out.u.renewed.message, '\x1b'));
	proto_msg_free(&out);
	m.u.renewed.flags = 0x100;
	assert_true(proto_encode(&m, buf, sizeof(buf)) < 0);
	m.u.renewed.flags = PROTO_RENEWED_ALL;
	assert_true(proto_encode(&m, buf, sizeof(buf)) > 0);
	m.u.renewed.flags = 0;
	n = proto_encode(&m, buf, sizeof(buf));
	buf[PROTO_HDR_SIZE + 1] = 0x01; /* flags 0x100, by hand */
	assert_int_equal(proto_decode(buf, (size_t)n, &out, &why), -1);
}

static void test_exec(void **state)
{
	char *argv[] = { "sh", "-c", "echo \"hi\" there", NULL };
	char *env[] = { "PATH=/bin", "EMPTY=", "UNICODE=\xc3\xa9", NULL };
	uint32_t gids[] = { 5, 7, 65534 };
	struct proto_msg m = { .type = PROTO_EXEC }, out;
	struct proto_exec *e = &m.u.exec;
	size_t n;

	(void)state;
	*e = (struct proto_exec){ .id = 9,
				  .argv = argv,
				  .argc = 3,
				  .env = env,
				  .envc = 3,
				  .cwd = "/work dir",
				  .uid = 1000,
				  .gid = 1001,
				  .gids = gids,
				  .ngids = 3,
				  .flags = PROTO_EXEC_TTY,
				  .rows = 24,
				  .cols = 80 };
	n = encode(&m);
	decode_ok(n, &out);
	assert_int_equal(out.u.exec.id, 9);
	assert_int_equal(out.u.exec.argc, 3);
	for (int i = 0; i < 3; i++)
		assert_string_equal(out.u.exec.argv[i], argv[i]);
	assert_null(out.u.exec.argv[3]);
	assert_int_equal(out.u.exec.envc, 3);
	for (int i = 0; i < 3; i++)
		assert_string_equal(out.u.exec.env[i], env[i]);
	assert_null(out.u.exec.env[3]);
	assert_string_equal(out.u.exec.cwd, "/work dir");
	assert_int_equal(out.u.exec.uid, 1000);
	assert_int_equal(out.u.exec.gid, 1001);
	assert_int_equal(out.u.exec.ngids, 3);
	assert_memory_equal(out.u.exec.gids, gids, sizeof(gids));
	assert_int_equal(out.u.exec.flags, PROTO_EXEC_TTY);
	assert_int_equal(out.u.exec.rows, 24);
	assert_int_equal(out.u.exec.cols, 80);
	proto_msg_free(&out);
	incremental_same(n, PROTO_EXEC);

	/* No env, no groups, empty cwd. */
	e->envc = 0;
	e->env = NULL;
	e->ngids = 0;
	e->cwd = "";
	e->flags = 0;
	n = encode(&m);
	decode_ok(n, &out);
	assert_int_equal(out.u.exec.envc, 0);
	assert_null(out.u.exec.env[0]);
	assert_string_equal(out.u.exec.cwd, "");
	proto_msg_free(&out);
}

static void test_small_messages(void **state)
{
	struct proto_msg msgs[] = {
		{ .type = PROTO_STARTED, .u.started = { 3, 77 } },
		{ .type = PROTO_EXIT, .u.exit = { .id = 3, .signaled = false, .code = 255 } },
		{ .type = PROTO_EXIT, .u.exit = { .id = 3, .signaled = true, .code = 9 } },
		{ .type = PROTO_SIGNAL, .u.signal = { 3, 15 } },
		{ .type = PROTO_RESIZE, .u.resize = { 3, 50, 132 } },
		{ .type = PROTO_SHUTDOWN, .u.shutdown = { 42 } },
		{ .type = PROTO_STREAM, .u.stream = { 3 } },
		{ .type = PROTO_EOF, .u.eof = { 2 } },
	};
	struct proto_msg out;

	(void)state;
	for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
		size_t n = encode(&msgs[i]);

		decode_ok(n, &out);
		assert_int_equal(out.type, msgs[i].type);
		assert_memory_equal(&out.u, &msgs[i].u, sizeof(out.u.resize));
		proto_msg_free(&out);
		incremental_same(n, msgs[i].type);
	}
}

static void test_exit_status(void **state)
{
	struct proto_exit code = { .code = 3 }, sig = { .signaled = true, .code = 9 };

	(void)state;
	assert_int_equal(proto_exit_status(&code), 3);
	assert_int_equal(proto_exit_status(&sig), 137);
}

static void test_error(void **state)
{
	struct proto_msg m = { .type = PROTO_ERROR }, out;
	size_t n;

	(void)state;
	m.u.error.id = 4;
	m.u.error.code = PROTO_ERR_NOT_FOUND;
	m.u.error.message = "exec: \"foo\": executable file not found in $PATH";
	n = encode(&m);
	decode_ok(n, &out);
	assert_int_equal(out.u.error.id, 4);
	assert_int_equal(out.u.error.code, 127);
	assert_string_equal(out.u.error.message, m.u.error.message);
	proto_msg_free(&out);
}

/* What a guest sends for display is sanitised as it is decoded, by both
 * decoders: ESC, BEL and a C1 control become '?', so a host that prints an
 * ERROR cannot be made to recolour or retitle a terminal. EXEC's strings go
 * the other way and are not text for display: they stay exact. */
static void test_guest_text_sanitised(void **state)
{
	static struct proto_decoder d;
	char *argv[] = { "printf", "\x1b[31m\a", NULL };
	struct proto_msg m = { .type = PROTO_ERROR }, out;
	const char *why;
	size_t n;

	(void)state;
	m.u.error.id = 2;
	m.u.error.code = PROTO_ERR_RUNTIME;
	m.u.error.message = "crun: \x1b]0;owned\a\x1b[2J done \xc2\x9b!";
	n = encode(&m);
	decode_ok(n, &out);
	assert_string_equal(out.u.error.message, "crun: ?]0;owned??[2J done ?!");
	proto_msg_free(&out);
	proto_decoder_init(&d);
	assert_int_equal(proto_decoder_push(&d, frame, n), n);
	assert_int_equal(proto_decoder_next(&d, &out, &why), 1);
	assert_string_equal(out.u.error.message, "crun: ?]0;owned??[2J done ?!");
	proto_msg_free(&out);

	m = (struct proto_msg){ .type = PROTO_READY, .u.ready.message = "no root\x1b[K\n" };
	n = encode(&m);
	decode_ok(n, &out);
	assert_string_equal(out.u.ready.message, "no root?[K?");
	proto_msg_free(&out);

	m = (struct proto_msg){ .type = PROTO_HELLO,
				.u.hello.version = PROTO_VERSION,
				.u.hello.kernel = "6.1\a" };
	n = encode(&m);
	decode_ok(n, &out);
	assert_string_equal(out.u.hello.kernel, "6.1?");
	proto_msg_free(&out);

	m = (struct proto_msg){ .type = PROTO_EXEC };
	m.u.exec = (struct proto_exec){ .id = 1, .argv = argv, .argc = 2, .cwd = "/\x1b" };
	n = encode(&m);
	decode_ok(n, &out);
	assert_string_equal(out.u.exec.argv[1], argv[1]);
	assert_string_equal(out.u.exec.cwd, "/\x1b");
	proto_msg_free(&out);
}

static void test_data(void **state)
{
	static uint8_t big[PROTO_MAX_DATA];
	struct proto_msg m = { .type = PROTO_STDOUT }, out;
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7);
	m.u.data.data = big;
	m.u.data.len = sizeof(big);
	n = encode(&m);
	assert_int_equal(n, PROTO_HDR_SIZE + PROTO_MAX_DATA);
	decode_ok(n, &out);
	assert_int_equal(out.u.data.len, sizeof(big));
	assert_memory_equal(out.u.data.data, big, sizeof(big));
	proto_msg_free(&out);

	/* One byte over the data limit does not encode. */
	m.u.data.len = PROTO_MAX_DATA + 1;
	assert_int_equal(proto_encode(&m, frame, sizeof(frame)), -1);
	/* Nor does an empty data frame (EOF says that). */
	m.u.data.len = 0;
	assert_int_equal(proto_encode(&m, frame, sizeof(frame)), -1);
}

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
		cmocka_unit_test(test_hello),
		cmocka_unit_test(test_ready),
		cmocka_unit_test(test_exec),
		cmocka_unit_test(test_mounts),
		cmocka_unit_test(test_renew),
		cmocka_unit_test(test_small_messages),
		cmocka_unit_test(test_exit_status),
		cmocka_unit_test(test_error),
		cmocka_unit_test(test_guest_text_sanitised),
		cmocka_unit_test(test_data),
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
