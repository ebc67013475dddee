/* libFuzzer target for the snapshot state file's reader (snapshot/state.c):
 * a file as a user's disk may hold it, truncated, corrupted or written by
 * hand. A file it takes must have every section inside the buffer, and
 * written again section by section it must read back the same. Most inputs
 * fail the checksum: the seeds (tests/fuzz/corpus/state) are whole files,
 * and a second pass parses each input with its checksum made good, so the
 * checks behind it are reached too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot/state.h"

static void check(const uint8_t *data, size_t size)
{
	struct state_file sf, again;
	struct state_writer w;
	gantry_error_t err = NULL;
	uint8_t *out;
	size_t len;

	if (state_parse(data, size, &sf, &err) < 0) {
		if (err == NULL || strchr(gantry_error_str(err), '\n'))
			abort();
		gantry_error_free(&err);
		return;
	}
	state_writer_init(&w);
	for (uint32_t i = 0; i < sf.count; i++) {
		const struct state_section *s = &sf.sections[i];

		if (s->data < data || s->len > size || s->data + s->len > data + size)
			abort();
		state_put(&w, s->tag, s->data, s->len);
	}
	if (state_finish(&w, &out, &len, &err) < 0 || len != size || memcmp(out, data, size) ||
	    state_parse(out, len, &again, &err) < 0 || again.count != sf.count)
		abort();
	state_file_free(&again);
	state_file_free(&sf);
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *fixed;
	uint64_t crc;

	check(data, size);
	if (size < STATE_HEADER_LEN + STATE_TRAILER_LEN || size > STATE_SIZE_MAX)
		return 0;
	fixed = malloc(size);
	memcpy(fixed, data, size);
	crc = state_crc64(0, fixed, size - STATE_TRAILER_LEN);
	for (int i = 0; i < 8; i++)
		fixed[size - 8 + i] = (uint8_t)(crc >> (8 * i));
	check(fixed, size);
	free(fixed);
	return 0;
}
