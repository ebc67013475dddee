/* What the protocol codec's tests share (test_proto.c,
 * test_proto_malformed.c): the frame buffer, encoding into it, decoding a
 * frame that must decode and one that must not (its reason returned), and
 * a frame through the incremental decoder one byte at a time. Include
 * after <cmocka.h>. */
#ifndef GANTRY_TESTS_UNIT_PROTO_RIG_H
#define GANTRY_TESTS_UNIT_PROTO_RIG_H

#include <stddef.h>
#include <stdint.h>

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

#endif
