/* The snapshot state file (see state.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "snapshot/state.h"

static uint64_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (unsigned int i = 0; i < 256; i++) {
		uint64_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0xC96C5795D7870F42ULL : c >> 1;
		crc_table[i] = c;
	}
}

uint64_t state_crc64(uint64_t crc, const void *data, size_t len)
{
	const uint8_t *p = data;

	pthread_once(&crc_once, crc_init);
	crc = ~crc;
	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t pad8(uint64_t n)
{
	return (8 - (n & 7)) & 7;
}

void state_tag_name(uint32_t tag, char name[5])
{
	for (int i = 0; i < 4; i++) {
		char c = (char)(tag >> (8 * i));

		name[i] = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
				  ? c
				  : '?';
	}
	name[4] = '\0';
}

static bool tag_ok(uint32_t tag)
{
	char name[5];

	state_tag_name(tag, name);
	return strchr(name, '?') == NULL;
}

/* The sections, each checked against what is left of the body. */
static int parse_sections(const uint8_t *body, uint64_t body_len, struct state_file *sf,
			  gantry_error_t *err)
{
	uint64_t off = 0;

	for (uint32_t i = 0; i < sf->count; i++) {
		struct state_section *s = &sf->sections[i];
		uint64_t len, pad;
		char name[5];

		if (body_len - off < STATE_SECTION_HDR)
			return gantry_error(err, 0, "section %u of %u: runs past the end", i + 1,
					    sf->count);
		s->tag = get32(body + off);
		len = get64(body + off + 8);
		state_tag_name(s->tag, name);
		if (!tag_ok(s->tag))
			return gantry_error(err, 0, "section %u: a tag that is not four letters",
					    i + 1);
		if (get32(body + off + 4) != 0)
			return gantry_error(err, 0, "section %u (%s): reserved field set", i + 1,
					    name);
		off += STATE_SECTION_HDR;
		pad = pad8(len);
		if (len > body_len - off || pad > body_len - off - len)
			return gantry_error(err, 0,
					    "section %u (%s): %llu bytes, past the end of the file",
					    i + 1, name, (unsigned long long)len);
		s->data = body + off;
		s->len = len;
		for (uint64_t k = 0; k < pad; k++)
			if (body[off + len + k] != 0)
				return gantry_error(err, 0, "section %u (%s): padding not zero",
						    i + 1, name);
		off += len + pad;
	}
	if (off != body_len)
		return gantry_error(err, 0, "%llu bytes after the last section",
				    (unsigned long long)(body_len - off));
	return 0;
}

int state_parse(const uint8_t *buf, size_t len, struct state_file *sf, gantry_error_t *err)
{
	uint64_t body_len;

	*sf = (struct state_file){ 0 };
	if (len < STATE_HEADER_LEN + STATE_TRAILER_LEN || memcmp(buf, STATE_MAGIC, 8) != 0)
		return gantry_error(err, 0, "not a Gantry state file");
	if (len > STATE_SIZE_MAX)
		return gantry_error(err, 0, "%zu bytes, over the %u a state file may have", len,
				    STATE_SIZE_MAX);
	sf->version = get32(buf + 8);
	if (sf->version != STATE_VERSION)
		return gantry_error(
			err, 0,
			"format version %u; this Gantry reads version %u (a snapshot of "
			"another release)",
			sf->version, STATE_VERSION);
	sf->count = get32(buf + 12);
	body_len = get64(buf + 16);
	if (body_len != len - STATE_HEADER_LEN - STATE_TRAILER_LEN)
		return gantry_error(err, 0, "truncated: %zu bytes, its header says %llu", len,
				    (unsigned long long)body_len + STATE_HEADER_LEN +
					    STATE_TRAILER_LEN);
	if (state_crc64(0, buf, len - STATE_TRAILER_LEN) != get64(buf + len - STATE_TRAILER_LEN))
		return gantry_error(err, 0, "checksum mismatch: the file is corrupt");
	if (sf->count > STATE_SECTIONS_MAX)
		return gantry_error(err, 0, "%u sections, over %u", sf->count, STATE_SECTIONS_MAX);
	sf->sections = xzalloc(MAX(sf->count, 1u) * sizeof(*sf->sections));
	if (parse_sections(buf + STATE_HEADER_LEN, body_len, sf, err) < 0) {
		state_file_free(sf);
		return -1;
	}
	return 0;
}

void state_file_free(struct state_file *sf)
{
	free(sf->sections);
	*sf = (struct state_file){ 0 };
}

const struct state_section *state_find(const struct state_file *sf, uint32_t tag,
				       unsigned int index)
{
	for (uint32_t i = 0; i < sf->count; i++)
		if (sf->sections[i].tag == tag && index-- == 0)
			return &sf->sections[i];
	return NULL;
}

int state_get(const struct state_file *sf, uint32_t tag, unsigned int index, void *out, size_t len,
	      gantry_error_t *err)
{
	const struct state_section *s = state_find(sf, tag, index);
	char name[5];

	state_tag_name(tag, name);
	if (s == NULL)
		return gantry_error(err, 0, "no section %s #%u", name, index);
	if (s->len != len)
		return gantry_error(err, 0, "section %s #%u: %llu bytes, not the %zu it holds",
				    name, index, (unsigned long long)s->len, len);
	memcpy(out, s->data, len);
	return 0;
}

/* ---- writing ---------------------------------------------------------- */

void state_writer_init(struct state_writer *w)
{
	*w = (struct state_writer){ 0 };
	w->cap = 4096;
	w->buf = xzalloc(w->cap);
	w->len = STATE_HEADER_LEN; /* made at the end */
}

static void reserve(struct state_writer *w, size_t more)
{
	if (w->cap - w->len >= more)
		return;
	while (w->cap - w->len < more)
		w->cap *= 2;
	w->buf = xrealloc(w->buf, w->cap);
}

void state_put(struct state_writer *w, uint32_t tag, const void *data, size_t len)
{
	size_t pad = (size_t)pad8(len);

	if (w->error)
		return;
	if (!tag_ok(tag) || w->count == STATE_SECTIONS_MAX) {
		w->error = EINVAL;
		return;
	}
	if (len > STATE_SIZE_MAX ||
	    w->len + STATE_SECTION_HDR + len + pad + STATE_TRAILER_LEN > STATE_SIZE_MAX) {
		w->error = EFBIG;
		return;
	}
	reserve(w, STATE_SECTION_HDR + len + pad);
	put32(w->buf + w->len, tag);
	put32(w->buf + w->len + 4, 0);
	put64(w->buf + w->len + 8, len);
	if (len)
		memcpy(w->buf + w->len + STATE_SECTION_HDR, data, len);
	memset(w->buf + w->len + STATE_SECTION_HDR + len, 0, pad);
	w->len += STATE_SECTION_HDR + len + pad;
	w->count++;
}

int state_finish(struct state_writer *w, uint8_t **out, size_t *len, gantry_error_t *err)
{
	*out = NULL;
	*len = 0;
	if (w->error) {
		int e = w->error;

		state_writer_free(w);
		return gantry_error(err, 0, "state file: %s",
				    e == EFBIG ? "over its size limit" : "a bad or extra section");
	}
	reserve(w, STATE_TRAILER_LEN);
	memcpy(w->buf, STATE_MAGIC, 8);
	put32(w->buf + 8, STATE_VERSION);
	put32(w->buf + 12, w->count);
	put64(w->buf + 16, w->len - STATE_HEADER_LEN);
	put64(w->buf + w->len, state_crc64(0, w->buf, w->len));
	*out = w->buf;
	*len = w->len + STATE_TRAILER_LEN;
	w->buf = NULL;
	state_writer_free(w);
	return 0;
}

void state_writer_free(struct state_writer *w)
{
	free(w->buf);
	*w = (struct state_writer){ 0 };
}
