/* Unit tests for proto/codec.c and proto/stream.c, first part: every
 * message survives a round trip, both decoders agree, and text a guest
 * sends for display comes out sanitised. The helpers are in proto_rig.h;
 * malformed frames, the incremental decoder over a stream and frames on a
 * socket are in test_proto_malformed.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/util.h"
#include "proto/agent.h"
/* The codec's test helpers; not every one of them is used here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "proto_rig.h"
#pragma GCC diagnostic pop

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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
