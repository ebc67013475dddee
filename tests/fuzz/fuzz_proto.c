/* libFuzzer target for the agent protocol (proto/codec.c and the decoder in
 * proto/stream.c): the bytes a hostile guest (or host) could send, through
 * both decoders.
 *
 * Input: one mode byte, then the bytes on the wire.
 *   mode bit 0 clear: the rest is one whole frame for proto_decode. A frame
 *     that decodes must encode back to exactly the same bytes (the encoding
 *     is canonical), and decode again; one that carries text for display
 *     comes out with that text sanitised (no control bytes), and then its
 *     encoding is stable.
 *   mode bit 0 set: the rest is a byte stream for the incremental decoder,
 *     pushed in chunks whose sizes come from the mode byte (1 to 128 bytes,
 *     or as much as fits), with frames taken out as they complete, until
 *     the stream ends or a frame is malformed.
 * Seeds: tests/fuzz/corpus/proto, each a mode byte and valid frames. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agent.h"

static uint8_t again[PROTO_MAX_FRAME], third[PROTO_MAX_FRAME];

/* The text a frame carries for display, or NULL. */
static const char *display_text(const struct proto_msg *m)
{
	switch (m->type) {
	case PROTO_HELLO:
		return m->u.hello.kernel;
	case PROTO_READY:
		return m->u.ready.message;
	case PROTO_ERROR:
		return m->u.error.message;
	case PROTO_DONE:
		return m->u.done.message;
	case PROTO_RENEWED:
		return m->u.renewed.message;
	default:
		return NULL;
	}
}

static void whole(const uint8_t *data, size_t size)
{
	struct proto_msg m, m2;
	const char *why, *text;
	ssize_t n, n2;

	if (proto_decode(data, size, &m, &why) < 0)
		return;
	text = display_text(&m);
	for (const char *p = text; p && *p; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			fprintf(stderr, "%s frame decodes with control byte %#x in its text\n",
				proto_type_name(m.type), (unsigned char)*p);
			abort();
		}
	}
	n = proto_encode(&m, again, sizeof(again));
	if (text == NULL && (n != (ssize_t)size || memcmp(again, data, size) != 0)) {
		fprintf(stderr, "%s frame of %zu bytes re-encodes as %zd different bytes\n",
			proto_type_name(m.type), size, n);
		abort();
	}
	if (n < 0 || proto_decode(again, (size_t)n, &m2, &why) < 0) {
		fprintf(stderr, "re-encoded %s frame does not decode: %s\n",
			proto_type_name(m.type), n < 0 ? "it does not encode" : why);
		abort();
	}
	/* Sanitised text sanitises to itself. */
	n2 = proto_encode(&m2, third, sizeof(third));
	if (n2 != n || memcmp(third, again, (size_t)n) != 0) {
		fprintf(stderr, "%s frame's encoding changes when decoded again\n",
			proto_type_name(m.type));
		abort();
	}
	proto_msg_free(&m2);
	proto_msg_free(&m);
}

static void stream(uint8_t mode, const uint8_t *data, size_t size)
{
	static struct proto_decoder d;
	size_t chunk = (mode >> 1) == 127 ? sizeof(d.buf) : (size_t)(mode >> 1) + 1;
	size_t off = 0;

	proto_decoder_init(&d);
	for (;;) {
		struct proto_msg m;
		const char *why;
		int r;

		while ((r = proto_decoder_next(&d, &m, &why)) > 0) {
			/* Touch what came out, as a consumer would. */
			if (m.type == PROTO_STDOUT && m.u.data.len)
				(void)*(volatile const uint8_t *)&m.u.data.data[m.u.data.len - 1];
			proto_msg_free(&m);
		}
		if (r < 0 || off == size)
			return;
		{
			size_t want = size - off < chunk ? size - off : chunk;
			size_t took = proto_decoder_push(&d, data + off, want);

			/* The decoder always has room for a frame it has not
			 * yet seen the end of. */
			if (took == 0) {
				fprintf(stderr, "decoder full with %zu bytes pending\n",
					proto_decoder_pending(&d));
				abort();
			}
			off += took;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] & 1)
		stream(data[0], data + 1, size - 1);
	else
		whole(data + 1, size - 1);
	return 0;
}
