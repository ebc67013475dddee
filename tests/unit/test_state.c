/* The snapshot state file (snapshot/state.c): a file written and read
 * back, and every way a file can be wrong refused with one line. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "snapshot/files.h"
#include "snapshot/state.h"

#define VCPU STATE_TAG('V', 'C', 'P', 'U')
#define PIT2 STATE_TAG('P', 'I', 'T', '2')

struct regs {
	uint64_t rip, rsp, rflags;
};

/* A file of two VCPU sections and a PIT2 section of 3 bytes (padded). */
static void sample(uint8_t **buf, size_t *len)
{
	struct state_writer w;
	struct regs r0 = { 0x1000, 0x8000, 2 }, r1 = { 0x2000, 0x9000, 0x202 };
	gantry_error_t err = NULL;

	state_writer_init(&w);
	state_put(&w, VCPU, &r0, sizeof(r0));
	state_put(&w, VCPU, &r1, sizeof(r1));
	state_put(&w, PIT2, "abc", 3);
	assert_int_equal(state_finish(&w, buf, len, &err), 0);
}

/* The one-line error buf gives, its checksum made good again first when
 * fix_crc (so the check under test is not the checksum's). */
static char *refusal(uint8_t *buf, size_t len, bool fix_crc)
{
	struct state_file sf;
	gantry_error_t err = NULL;
	char *msg;
	uint64_t crc;

	if (fix_crc && len >= STATE_TRAILER_LEN) {
		crc = state_crc64(0, buf, len - STATE_TRAILER_LEN);
		for (int i = 0; i < 8; i++)
			buf[len - 8 + i] = (uint8_t)(crc >> (8 * i));
	}
	assert_int_equal(state_parse(buf, len, &sf, &err), -1);
	assert_null(sf.sections);
	msg = strdup(gantry_error_str(err));
	assert_null(strchr(msg, '\n'));
	gantry_error_free(&err);
	return msg;
}

static void expect(uint8_t *buf, size_t len, bool fix_crc, const char *words)
{
	char *msg = refusal(buf, len, fix_crc);

	if (strstr(msg, words) == NULL)
		fail_msg("`%s` does not say `%s`", msg, words);
	free(msg);
}

static void test_round_trip(void **state)
{
	struct state_file sf;
	gantry_error_t err = NULL;
	struct regs r;
	uint8_t *buf;
	size_t len;
	char pit[3];

	(void)state;
	sample(&buf, &len);
	assert_int_equal(len, STATE_HEADER_LEN + 2 * (16 + 24) + 16 + 8 + STATE_TRAILER_LEN);
	assert_memory_equal(buf, STATE_MAGIC, 8);
	assert_int_equal(state_parse(buf, len, &sf, &err), 0);
	assert_int_equal(sf.count, 3);
	assert_int_equal(state_get(&sf, VCPU, 1, &r, sizeof(r), &err), 0);
	assert_int_equal(r.rip, 0x2000);
	assert_int_equal(state_get(&sf, VCPU, 0, &r, sizeof(r), &err), 0);
	assert_int_equal(r.rsp, 0x8000);
	assert_int_equal(state_get(&sf, PIT2, 0, pit, sizeof(pit), &err), 0);
	assert_memory_equal(pit, "abc", 3);
	assert_null(state_find(&sf, VCPU, 2));
	/* Wrong size, missing: errors that name the section. */
	assert_int_equal(state_get(&sf, PIT2, 0, &r, sizeof(r), &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "PIT2 #0: 3 bytes"));
	gantry_error_free(&err);
	assert_int_equal(state_get(&sf, VCPU, 5, &r, sizeof(r), &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "no section VCPU #5"));
	gantry_error_free(&err);
	state_file_free(&sf);
	free(buf);
}

static void test_empty_file(void **state)
{
	struct state_writer w;
	struct state_file sf;
	gantry_error_t err = NULL;
	uint8_t *buf;
	size_t len;

	(void)state;
	state_writer_init(&w);
	assert_int_equal(state_finish(&w, &buf, &len, &err), 0);
	assert_int_equal(len, STATE_HEADER_LEN + STATE_TRAILER_LEN);
	assert_int_equal(state_parse(buf, len, &sf, &err), 0);
	assert_int_equal(sf.count, 0);
	state_file_free(&sf);
	free(buf);
}

static void test_refusals(void **state)
{
	uint8_t *buf, *copy;
	size_t len;

	(void)state;
	sample(&buf, &len);
	copy = malloc(len);
#define FRESH() memcpy(copy, buf, len)
	FRESH();
	expect(copy, 10, false, "not a Gantry state file");
	copy[0] = 'X';
	expect(copy, len, false, "not a Gantry state file");
	/* Truncated anywhere: the header's length no longer matches. */
	for (size_t cut = STATE_HEADER_LEN + STATE_TRAILER_LEN; cut < len; cut += 7) {
		FRESH();
		expect(copy, cut, false, "truncated");
	}
	/* One byte flipped in the body: the checksum. */
	FRESH();
	copy[STATE_HEADER_LEN + 20] ^= 0x40;
	expect(copy, len, false, "checksum mismatch");
	FRESH();
	copy[8] = 2; /* version */
	expect(copy, len, true, "format version 2");
	FRESH();
	copy[12] = 0xff, copy[13] = 0xff; /* 65535 sections */
	expect(copy, len, true, "sections, over");
	FRESH();
	copy[12] = 4; /* one more section than there is */
	expect(copy, len, true, "section 4 of 4: runs past the end");
	FRESH();
	copy[12] = 2; /* one fewer: bytes left over */
	expect(copy, len, true, "after the last section");
	FRESH();
	copy[STATE_HEADER_LEN + 4] = 1; /* reserved */
	expect(copy, len, true, "reserved field set");
	FRESH();
	copy[STATE_HEADER_LEN] = 0; /* the tag */
	expect(copy, len, true, "not four letters");
	FRESH();
	copy[STATE_HEADER_LEN + 15] = 0x80; /* a length of 2^63 and more */
	expect(copy, len, true, "past the end of the file");
	FRESH();
	copy[len - STATE_TRAILER_LEN - 1] = 1; /* PIT2's padding */
	expect(copy, len, true, "padding not zero");
#undef FRESH
	free(copy);
	free(buf);
}

static void test_writer_limits(void **state)
{
	struct state_writer w;
	gantry_error_t err = NULL;
	uint8_t *buf;
	size_t len;

	(void)state;
	state_writer_init(&w);
	state_put(&w, STATE_TAG('b', 'a', 'd', '\n'), "x", 1);
	assert_int_equal(state_finish(&w, &buf, &len, &err), -1);
	assert_null(buf);
	gantry_error_free(&err);
	state_writer_init(&w);
	for (int i = 0; i <= STATE_SECTIONS_MAX; i++)
		state_put(&w, VCPU, NULL, 0);
	assert_int_equal(state_finish(&w, &buf, &len, &err), -1);
	gantry_error_free(&err);
	state_writer_init(&w);
	state_put(&w, VCPU, NULL, STATE_SIZE_MAX);
	assert_int_equal(state_finish(&w, &buf, &len, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "over its size limit"));
	gantry_error_free(&err);
}

/* CRC-64/XZ's check value: the CRC of "123456789". */
static void test_crc64(void **state)
{
	(void)state;
	assert_true(state_crc64(0, "123456789", 9) == 0x995DC9BBDF1939FAULL);
	assert_true(state_crc64(state_crc64(0, "1234", 4), "56789", 5) == 0x995DC9BBDF1939FAULL);
}

/* The save's files: what a directory holds in their places (a FIFO, a
 * link to somebody's file) is never opened as one. A restore refuses a
 * FIFO at once (it would block for good); a save makes its files anew. */
static void test_files_are_our_own(void **state)
{
	char dir[] = "/tmp/snap-test-XXXXXX", p[128], victim[128];
	struct snap_save s;
	gantry_error_t err = NULL;
	int st_fd, mem_fd, fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(p, sizeof(p), "%s/%s", dir, SNAP_STATE);
	assert_int_equal(mkfifo(p, 0600), 0);
	snprintf(p, sizeof(p), "%s/%s", dir, SNAP_MEMORY);
	assert_int_equal(close(open(p, O_CREAT | O_WRONLY, 0600)), 0);
	assert_int_equal(snap_open_restore(dir, &st_fd, &mem_fd, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "is not a file"));
	gantry_error_free(&err);
	/* A link where a save's new file goes: replaced, its target kept. */
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	fd = open(victim, O_CREAT | O_WRONLY, 0644);
	assert_int_equal(write(fd, "mine", 4), 4);
	close(fd);
	snprintf(p, sizeof(p), "%s/%s", dir, SNAP_MEMORY_NEW);
	assert_int_equal(symlink(victim, p), 0);
	assert_int_equal(snap_open_save(&s, dir, &err), 0);
	assert_int_equal(write(s.mem_fd, "guest ram", 9), 9);
	assert_int_equal(snap_finish(&s, false, &err), 0);
	fd = open(victim, O_RDONLY);
	assert_int_equal(read(fd, p, sizeof(p)), 4);
	close(fd);
	assert_memory_equal(p, "mine", 4);
	unlink(victim);
	snap_remove(dir);
	snprintf(p, sizeof(p), "%s/%s", dir, SNAP_STATE);
	unlink(p);
	snprintf(p, sizeof(p), "%s/%s", dir, SNAP_MEMORY);
	unlink(p);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip), cmocka_unit_test(test_empty_file),
		cmocka_unit_test(test_refusals),   cmocka_unit_test(test_writer_limits),
		cmocka_unit_test(test_crc64),
		cmocka_unit_test(test_files_are_our_own),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
