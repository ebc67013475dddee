/* libFuzzer target for the snapshot state file's reader (snapshot/state.c):
 * a file as a user's disk may hold it, truncated, corrupted or written by
 * hand. A file it takes must have every section inside the buffer, and
 * written again section by section it must read back the same. Then what
 * a restore reads from it without KVM: two vCPUs' state (vmm/vmstate.c),
 * a virtio device's transport and queues over a small guest RAM and the
 * serial port's registers; each either takes it or refuses in one line. Most inputs
 * fail the checksum: the seeds (tests/fuzz/corpus/state) are whole files,
 * and a second pass parses each input with its checksum made good, so the
 * checks behind it are reached too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot/state.h"
#include "virtio/devices.h"
#include "vmm/serial.h"
#include "vmm/vmstate.h"

#define RAM_SIZE (64 * 1024)

static void refused_in_one_line(gantry_error_t *err)
{
	if (*err == NULL || strchr(gantry_error_str(*err), '\n'))
		abort();
	gantry_error_free(err);
}

/* The readers a restore runs before KVM sees anything. */
static void restore_readers(const struct state_file *sf)
{
	static uint8_t ram[RAM_SIZE];
	static struct vcpu_state vs;
	struct guest_mem mem;
	struct virtio_dev *d;
	struct serial ser;
	gantry_error_t err = NULL;

	for (unsigned int i = 0; i < 2; i++)
		if (vcpu_state_read(sf, i, &vs, &err) < 0)
			refused_in_one_line(&err);
		else if (vs.nr_msrs > VCPU_MSRS_MAX || vs.xcrs.nr_xcrs > KVM_MAX_XCRS)
			abort();
	guest_mem_init_buffer(&mem, ram, sizeof(ram));
	d = virtio_rng_create(&mem);
	if (virtio_dev_restore(d, sf, 0, &err) < 0) {
		refused_in_one_line(&err);
	} else {
		for (unsigned int q = 0; q < d->ops->num_queues; q++) {
			const struct virtq *vq = &d->vqs[q];

			if (vq->ready && (vq->num == 0 || vq->num > VIRTQ_RING_MAX || !vq->desc))
				abort();
		}
	}
	d->ops->destroy(d);
	serial_init(&ser, NULL, NULL);
	if (serial_restore(&ser, sf, &err) < 0)
		refused_in_one_line(&err);
	serial_destroy(&ser);
}

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
	restore_readers(&sf);
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
