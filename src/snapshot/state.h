/* A snapshot's state file: the machine's state (vCPUs, interrupt chips,
 * clock, devices) as tagged sections, versioned and checksummed. It is
 * read as hostile input: a snapshot directory is a sandbox's data, and a
 * file may be truncated, corrupted or written by hand. Every field is
 * bounded before use; a file that is not exactly what the format says is
 * refused with one line naming what is wrong.
 *
 *   header    8 bytes  magic "GANTRYST"
 *             u32      format version (STATE_VERSION)
 *             u32      section count (at most STATE_SECTIONS_MAX)
 *             u64      length of the sections that follow, in bytes
 *   section   u32      tag (four ASCII letters or digits: STATE_TAG)
 *             u32      0 (reserved)
 *             u64      length of the data
 *             data, then zero bytes to the next multiple of 8
 *   trailer   u64      CRC-64/XZ of header and sections
 *
 * Integers are little-endian. A section's data is what its owner wrote;
 * its owner reads it back with state_get(), which wants the exact length.
 * The same tag may come several times (one section per vCPU); state_get()
 * takes the Nth. */
#ifndef GANTRY_SNAPSHOT_STATE_H
#define GANTRY_SNAPSHOT_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define STATE_MAGIC	   "GANTRYST"
#define STATE_VERSION	   1
#define STATE_SECTIONS_MAX 4096
#define STATE_SIZE_MAX	   (64u << 20) /* the whole file */
#define STATE_HEADER_LEN   24
#define STATE_SECTION_HDR  16
#define STATE_TRAILER_LEN  8

#define STATE_TAG(a, b, c, d)                                                                      \
	((uint32_t)(uint8_t)(a) | (uint32_t)(uint8_t)(b) << 8 | (uint32_t)(uint8_t)(c) << 16 |     \
	 (uint32_t)(uint8_t)(d) << 24)

struct state_section {
	uint32_t tag;
	const uint8_t *data; /* inside the buffer state_parse() was given */
	uint64_t len;
};

/* A parsed file: its sections point into the caller's buffer, which must
 * outlive it. */
struct state_file {
	uint32_t version;
	struct state_section *sections;
	uint32_t count;
};

/* Parse buf (len bytes) whole: magic, version, bounds, padding, checksum.
 * Every section is checked to lie inside buf. */
int state_parse(const uint8_t *buf, size_t len, struct state_file *sf, gantry_error_t *err);
void state_file_free(struct state_file *sf);
/* The index'th section of tag (from 0), or NULL. */
const struct state_section *state_find(const struct state_file *sf, uint32_t tag,
				       unsigned int index);
/* Copy the index'th section of tag into out, whose size len must be the
 * section's exactly; a missing or other-sized section is an error naming
 * it. */
int state_get(const struct state_file *sf, uint32_t tag, unsigned int index, void *out, size_t len,
	      gantry_error_t *err);
/* "VCPU": a tag as text, its bytes outside [A-Za-z0-9] shown as '?'. */
void state_tag_name(uint32_t tag, char name[5]);

/* Building a file: sections added in order, then the header and trailer
 * made. A writer that failed (too many sections, too large) says so at
 * state_finish() and holds nothing more. */
struct state_writer {
	uint8_t *buf;
	size_t len, cap;
	uint32_t count;
	int error; /* an errno once it failed; later calls do nothing */
};

void state_writer_init(struct state_writer *w);
void state_put(struct state_writer *w, uint32_t tag, const void *data, size_t len);
/* The whole file in *out (malloc()ed, *len bytes), the writer emptied. */
int state_finish(struct state_writer *w, uint8_t **out, size_t *len, gantry_error_t *err);
void state_writer_free(struct state_writer *w);

/* CRC-64/XZ (ECMA-182 polynomial, reflected; what Firecracker checks its
 * state file with): crc of the bytes so far, 0 to begin. */
uint64_t state_crc64(uint64_t crc, const void *data, size_t len);

#endif
