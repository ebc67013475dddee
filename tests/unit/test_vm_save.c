/* Unit tests for what saving a VM writes besides KVM's state, and how a
 * restore reads it back: a virtio device's transport and queues
 * (virtio_dev_save/restore, through a real state file), the serial
 * port's registers, and guest RAM as a sparse memory file mapped back
 * copy-on-write (guest_mem_save, guest_mem_init_file). A state file is
 * hostile input: values a driver could never have set are refused with
 * the device named. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "common/util.h"
#include "snapshot/state.h"
#include "virtio/devices.h"
#include "vmm/serial.h"

#define GUEST_SIZE (1 * MiB)
#include "guest.h"

#define DESC_GPA  0x1000ULL
#define AVAIL_GPA 0x2000ULL
#define USED_GPA  0x3000ULL

struct fx {
	struct guest g;
	struct virtio_dev *d;
};

static int fx_setup(void **state)
{
	struct fx *f = xzalloc(sizeof(*f));
	struct virtq *vq;

	f->g.buf = xzalloc(GUEST_SIZE);
	guest_mem_init_buffer(&f->g.mem, f->g.buf, GUEST_SIZE);
	f->d = virtio_rng_create(&f->g.mem);
	vq = &f->d->vqs[0];
	vq->num = 64;
	vq->desc_gpa = DESC_GPA;
	vq->avail_gpa = AVAIL_GPA;
	vq->used_gpa = USED_GPA;
	assert_int_equal(virtq_enable(vq, &f->g.mem, true), 0);
	vq->last_avail = 17;
	vq->used_idx = 15;
	vq->signalled_used = 14;
	vq->signalled_valid = true;
	f->d->driver_features = f->d->features & ((1ULL << VIRTIO_F_VERSION_1_BIT) |
						  (1ULL << VIRTIO_RING_F_EVENT_IDX));
	f->d->status = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
		       VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK;
	f->d->config_generation = 3;
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	f->d->ops->destroy(f->d);
	free(f->g.buf);
	free(f);
	return 0;
}

/* d saved as the only device of a state file: the file's bytes. */
static uint8_t *save_one(struct virtio_dev *d, size_t *len)
{
	struct state_writer w;
	gantry_error_t err = NULL;
	uint8_t *buf = NULL;

	state_writer_init(&w);
	assert_int_equal(virtio_dev_save(d, &w, &err), 0);
	assert_int_equal(state_finish(&w, &buf, len, &err), 0);
	return buf;
}

/* Restore file into a fresh rng over f's RAM: 0, or -1 with err's text
 * in why. */
static int restore_into_new(struct fx *f, const uint8_t *file, size_t len, struct virtio_dev **out,
			    char *why, size_t why_len)
{
	struct state_file sf;
	gantry_error_t err = NULL;
	struct virtio_dev *d = virtio_rng_create(&f->g.mem);
	int r;

	assert_int_equal(state_parse(file, len, &sf, &err), 0);
	r = virtio_dev_restore(d, &sf, 0, &err);
	state_file_free(&sf);
	if (r < 0) {
		snprintf(why, why_len, "%s", gantry_error_str(err));
		gantry_error_free(&err);
		d->ops->destroy(d);
		d = NULL;
	}
	*out = d;
	return r;
}

static void test_device_round_trip(void **state)
{
	struct fx *f = *state;
	struct virtio_dev *d;
	size_t len;
	cleanup_free uint8_t *file = save_one(f->d, &len);
	char why[256];
	const struct virtq *a = &f->d->vqs[0], *b;

	assert_int_equal(restore_into_new(f, file, len, &d, why, sizeof(why)), 0);
	b = &d->vqs[0];
	assert_int_equal(d->status, f->d->status);
	assert_int_equal(d->driver_features, f->d->driver_features);
	assert_int_equal(d->config_generation, 3);
	assert_true(b->ready && b->event_idx);
	assert_int_equal(b->num, a->num);
	assert_int_equal(b->desc_gpa, DESC_GPA);
	assert_int_equal(b->last_avail, 17);
	assert_int_equal(b->used_idx, 15);
	assert_int_equal(b->signalled_used, 14);
	assert_true(b->signalled_valid);
	/* The rings' host views point into this VM's RAM again. */
	assert_ptr_equal(b->desc, f->g.buf + DESC_GPA);
	assert_ptr_equal(b->used, f->g.buf + USED_GPA);
	d->ops->destroy(d);
}

/* The saved device's transport state is the first section's data. */
static uint8_t *first_section(uint8_t *file)
{
	return file + STATE_HEADER_LEN + STATE_SECTION_HDR;
}

/* Rewrite the trailer after an edit, as a forger would. */
static void reseal(uint8_t *file, size_t len)
{
	uint64_t crc = state_crc64(0, file, len - STATE_TRAILER_LEN);

	memcpy(file + len - STATE_TRAILER_LEN, &crc, sizeof(crc));
}

/* struct dev_saved's layout (virtio/dev.c): 8 u32, u64 features, then
 * per queue u64 desc, avail, used, u16 num, last_avail, used_idx,
 * signalled_used, u8 ready, broken, event_idx, signalled_valid, pad. */
#define OFF_DEVICE_ID 0
#define OFF_FEATURES  32
#define OFF_Q0	      40
#define OFF_Q_DESC    0
#define OFF_Q_NUM     24

static void refused(struct fx *f, size_t off, const void *v, size_t n, const char *want)
{
	size_t len;
	cleanup_free uint8_t *file = save_one(f->d, &len);
	struct virtio_dev *d;
	char why[256] = "";

	memcpy(first_section(file) + off, v, n);
	reseal(file, len);
	assert_int_equal(restore_into_new(f, file, len, &d, why, sizeof(why)), -1);
	if (strstr(why, want) == NULL)
		fail_msg("refused as `%s`, want `%s`", why, want);
	assert_null(strchr(why, '\n'));
}

static void test_hostile_device_state(void **state)
{
	struct fx *f = *state;
	uint32_t blk = 2;
	uint64_t bits = 1ULL << 60;
	uint16_t huge = 4096;
	uint64_t outside = GUEST_SIZE - 8;

	refused(f, OFF_DEVICE_ID, &blk, sizeof(blk), "device 0 is a 2");
	refused(f, OFF_FEATURES, &bits, sizeof(bits), "never offered");
	refused(f, OFF_Q0 + OFF_Q_NUM, &huge, sizeof(huge), "4096 entries");
	refused(f, OFF_Q0 + OFF_Q_DESC, &outside, sizeof(outside), "not in guest RAM");
}

/* file's sections again, but its "VDBL" (the device's blob): left out
 * (blob NULL), as a file from before it, or with blob. */
static uint8_t *with_blob(const uint8_t *file, size_t len, const void *blob, size_t blob_len,
			  size_t *out_len)
{
	const uint32_t vdbl = STATE_TAG('V', 'D', 'B', 'L');
	struct state_writer w;
	struct state_file sf;
	gantry_error_t err = NULL;
	uint8_t *out = NULL;

	assert_int_equal(state_parse(file, len, &sf, &err), 0);
	state_writer_init(&w);
	for (uint32_t i = 0; i < sf.count; i++)
		if (sf.sections[i].tag != vdbl)
			state_put(&w, sf.sections[i].tag, sf.sections[i].data, sf.sections[i].len);
	if (blob)
		state_put(&w, vdbl, blob, blob_len);
	state_file_free(&sf);
	assert_int_equal(state_finish(&w, &out, out_len, &err), 0);
	return out;
}

/* A device with nothing beyond its section writes an empty blob; a file
 * from before blobs restores; a blob for a device that never writes one
 * is refused, naming it. */
static void test_device_blob(void **state)
{
	struct fx *f = *state;
	size_t len, n;
	cleanup_free uint8_t *file = save_one(f->d, &len);
	cleanup_free uint8_t *old = with_blob(file, len, NULL, 0, &n);
	cleanup_free uint8_t *forged = NULL;
	struct virtio_dev *d;
	char why[256] = "";

	assert_true(n < len);
	assert_int_equal(restore_into_new(f, old, n, &d, why, sizeof(why)), 0);
	d->ops->destroy(d);
	forged = with_blob(file, len, "junk", 4, &n);
	assert_int_equal(restore_into_new(f, forged, n, &d, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "a blob section it never writes"));
}

static void test_missing_device_section(void **state)
{
	struct fx *f = *state;
	struct state_writer w;
	struct state_file sf;
	gantry_error_t err = NULL;
	cleanup_free uint8_t *buf = NULL;
	size_t len;

	state_writer_init(&w);
	assert_int_equal(state_finish(&w, &buf, &len, &err), 0);
	assert_int_equal(state_parse(buf, len, &sf, &err), 0);
	assert_int_equal(virtio_dev_restore(f->d, &sf, 0, &err), -1);
	assert_non_null(err);
	gantry_error_free(&err);
	state_file_free(&sf);
}

static void test_serial_round_trip(void **state)
{
	struct serial a, b;
	struct state_writer w;
	struct state_file sf;
	gantry_error_t err = NULL;
	cleanup_free uint8_t *buf = NULL;
	size_t len;
	uint8_t v;

	(void)state;
	serial_init(&a, NULL, NULL);
	serial_init(&b, NULL, NULL);
	v = 0x80; /* DLAB: the divisor latch */
	serial_access(&a, 3, &v, 1, true);
	v = 0x0c;
	serial_access(&a, 0, &v, 1, true);
	v = 0x03; /* 8N1, DLAB off */
	serial_access(&a, 3, &v, 1, true);
	v = 0x5a;
	serial_access(&a, 7, &v, 1, true); /* scratch */
	state_writer_init(&w);
	serial_save(&a, &w);
	assert_int_equal(state_finish(&w, &buf, &len, &err), 0);
	assert_int_equal(state_parse(buf, len, &sf, &err), 0);
	assert_int_equal(serial_restore(&b, &sf, &err), 0);
	state_file_free(&sf);
	serial_access(&b, 7, &v, 1, false);
	assert_int_equal(v, 0x5a);
	serial_access(&b, 3, &v, 1, false);
	assert_int_equal(v, 0x03);
	assert_int_equal(b.dll, 0x0c);
	serial_destroy(&a);
	serial_destroy(&b);
}

/* RAM with a few pages touched saves as a sparse file of RAM's size that
 * maps back with the same bytes; the restored VM's writes stay its own.
 * Through pagemap, or reading each page. */
static void memory_file(bool use_pagemap)
{
	struct guest_mem m, r;
	gantry_error_t err = NULL;
	char path[] = "/tmp/gantry-test-memXXXXXX";
	int fd = mkstemp(path), fd2;
	int pagemap = use_pagemap ? open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC) : -1;
	uint64_t written;
	struct stat st;
	uint8_t *p;

	assert_true(fd >= 0);
	unlink(path);
	strcpy(path, "/tmp/gantry-test-memXXXXXX");
	fd2 = mkstemp(path);
	assert_true(fd2 >= 0);
	unlink(path);
	assert_int_equal(guest_mem_init(&m, 64 * MiB, &err), 0);
	p = guest_ptr(&m, 0x1000, 1);
	memset(p, 0xab, 4096);
	p = guest_ptr(&m, 40 * MiB + 12, 5);
	memcpy(p, "hello", 5);
	assert_int_equal(guest_mem_save(&m, fd, pagemap, &written, &err), 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 64 * MiB);
	assert_true(written < 64 * MiB);
	assert_true((uint64_t)st.st_blocks * 512 <= written + 64 * 1024);

	assert_int_equal(guest_mem_init_file(&r, 64 * MiB, fd, &err), 0);
	p = guest_ptr(&r, 0x1000, 4096);
	for (int i = 0; i < 4096; i++)
		assert_int_equal(p[i], 0xab);
	assert_memory_equal(guest_ptr(&r, 40 * MiB + 12, 5), "hello", 5);
	assert_int_equal(*(uint8_t *)guest_ptr(&r, 20 * MiB, 1), 0);
	/* Copy-on-write: the file keeps what was saved. */
	memcpy(guest_ptr(&r, 40 * MiB + 12, 5), "world", 5);
	assert_int_equal(pread(fd, path, 5, 40 * MiB + 12), 5);
	assert_memory_equal(path, "hello", 5);

	/* Saved again, a file-backed RAM is read page by page (the pages it
	 * never touched are the file's): all of it is there. */
	assert_int_equal(guest_mem_save(&r, fd2, pagemap, &written, &err), 0);
	assert_true(written >= 2 * 4096 && written < 64 * MiB);
	assert_int_equal(pread(fd2, path, 5, 40 * MiB + 12), 5);
	assert_memory_equal(path, "world", 5);
	assert_int_equal(pread(fd2, path, 1, 0x1000), 1);
	assert_int_equal((uint8_t)path[0], 0xab);
	guest_mem_destroy(&r);

	/* A file of another size is refused, in one line. */
	assert_int_equal(guest_mem_init_file(&r, 32 * MiB, fd, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "not the 32 MiB"));
	gantry_error_free(&err);
	guest_mem_destroy(&m);
	close(fd);
	close(fd2);
	if (pagemap >= 0)
		close(pagemap);
}

static void test_memory_file_by_pagemap(void **state)
{
	(void)state;
	memory_file(true);
}

static void test_memory_file_by_reading(void **state)
{
	(void)state;
	memory_file(false);
}

/* RAM in a memfd (a VM with a share worker): a page only the other
 * process wrote, through the memfd, is saved too, though this process
 * never mapped it in; a fresh memfd RAM loads the file back. */
static void test_memory_file_of_a_memfd(void **state)
{
	struct guest_mem m, r;
	gantry_error_t err = NULL;
	char path[] = "/tmp/gantry-test-memXXXXXX";
	int pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	int fd = mkstemp(path);
	uint64_t written;
	uint8_t *p;

	(void)state;
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(guest_mem_init_shared(&m, 64 * MiB, &err), 0);
	memcpy(guest_ptr(&m, 0x3000, 5), "local", 5);
	/* What the share worker writes: through the memfd, not our mapping. */
	assert_int_equal(pwrite(m.fd, "remote", 6, 50 * MiB + 7), 6);
	assert_int_equal(guest_mem_save(&m, fd, pagemap, &written, &err), 0);
	assert_true(written >= 2 * 4096 && written < 64 * MiB);

	assert_int_equal(guest_mem_init_file(&r, 64 * MiB, fd, &err), 0);
	assert_memory_equal(guest_ptr(&r, 0x3000, 5), "local", 5);
	assert_memory_equal(guest_ptr(&r, 50 * MiB + 7, 6), "remote", 6);
	p = guest_ptr(&r, 20 * MiB, 1);
	assert_int_equal(*p, 0);
	guest_mem_destroy(&r);

	/* A memory file of another size is refused. */
	assert_int_equal(guest_mem_init_file(&r, 32 * MiB, fd, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "not the 32 MiB"));
	gantry_error_free(&err);
	guest_mem_destroy(&m);
	close(fd);
	if (pagemap >= 0)
		close(pagemap);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_device_round_trip, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_hostile_device_state, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_missing_device_section, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_device_blob, fx_setup, fx_teardown),
		cmocka_unit_test(test_serial_round_trip),
		cmocka_unit_test(test_memory_file_by_pagemap),
		cmocka_unit_test(test_memory_file_by_reading),
		cmocka_unit_test(test_memory_file_of_a_memfd),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
