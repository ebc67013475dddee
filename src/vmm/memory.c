/* Guest physical memory (see memory.h). */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "common/util.h"
#include "vmm/memory.h"

/* Guest RAM on 2 MiB boundaries: KVM maps a guest 2 MiB page with one
 * nested page table entry only when the host address is aligned like the
 * guest one and the host page behind it is a huge page (THP). */
#define RAM_ALIGN (2u * MiB)

static void *map_ram(uint64_t size)
{
	uint64_t span = size + RAM_ALIGN;
	uint8_t *p = mmap(NULL, span, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	uint8_t *start;
	uintptr_t skip;

	if (p == MAP_FAILED)
		return NULL;
	skip = (RAM_ALIGN - (uintptr_t)p % RAM_ALIGN) % RAM_ALIGN;
	start = p + skip;
	if (skip)
		munmap(p, skip);
	munmap(start + size, span - skip - size);
	/* Guest RAM is worth huge pages when the host offers them. */
	madvise(start, size, MADV_HUGEPAGE);
	/* Keep guest memory out of core dumps of the VMM. */
	madvise(start, size, MADV_DONTDUMP);
	return start;
}

int guest_mem_init(struct guest_mem *m, uint64_t size, gantry_error_t *err)
{
	uint64_t low = MIN(size, GUEST_MEM_HOLE_START);

	memset(m, 0, sizeof(*m));
	m->mapped = true;
	m->ram_size = size;
	m->regions[0].gpa = 0;
	m->regions[0].size = low;
	m->regions[0].hva = map_ram(low);
	if (m->regions[0].hva == NULL)
		return gantry_error_errno(err, "cannot map %llu MiB of guest memory",
					  (unsigned long long)(size / MiB));
	m->nr_regions = 1;
	if (size > low) {
		struct guest_region *r = &m->regions[1];

		r->gpa = GUEST_MEM_HIGH_START;
		r->size = size - low;
		r->hva = map_ram(r->size);
		if (r->hva == NULL) {
			guest_mem_destroy(m);
			return gantry_error_errno(err, "cannot map %llu MiB of guest memory",
						  (unsigned long long)(size / MiB));
		}
		m->nr_regions = 2;
	}
	return 0;
}

void guest_mem_init_buffer(struct guest_mem *m, void *buf, uint64_t size)
{
	memset(m, 0, sizeof(*m));
	m->regions[0].gpa = 0;
	m->regions[0].size = size;
	m->regions[0].hva = buf;
	m->nr_regions = 1;
	m->ram_size = size;
}

void guest_mem_destroy(struct guest_mem *m)
{
	unsigned int i;

	if (m->mapped) {
		for (i = 0; i < m->nr_regions; i++)
			munmap(m->regions[i].hva, m->regions[i].size);
	}
	memset(m, 0, sizeof(*m));
}

void *guest_ptr(const struct guest_mem *m, uint64_t gpa, uint64_t len)
{
	unsigned int i;

	for (i = 0; i < m->nr_regions; i++) {
		const struct guest_region *r = &m->regions[i];
		uint64_t off;

		if (gpa < r->gpa)
			continue;
		off = gpa - r->gpa;
		if (off > r->size || len > r->size - off)
			continue;
		return r->hva + off;
	}
	return NULL;
}

uint64_t guest_mem_low_top(const struct guest_mem *m)
{
	return m->nr_regions ? m->regions[0].size : 0;
}
