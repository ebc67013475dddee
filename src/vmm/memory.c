/* Guest physical memory (see memory.h). */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/util.h"
#include "vmm/memory.h"

static void *map_ram(uint64_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	/* Guest RAM is worth huge pages when the host offers them. */
	madvise(p, size, MADV_HUGEPAGE);
	/* Keep guest memory out of core dumps of the VMM. */
	madvise(p, size, MADV_DONTDUMP);
	return p;
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

bool guest_mem_map_file(struct guest_mem *m, uint64_t gpa, int fd, uint64_t off, uint64_t len)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	void *hva, *p;

	if (!m->mapped || len == 0 || (gpa | off | len) & (page - 1))
		return false;
	hva = guest_ptr(m, gpa, len);
	if (hva == NULL)
		return false;
	p = mmap(hva, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, (off_t)off);
	if (p == MAP_FAILED) {
		/* MAP_FIXED failed before replacing anything, or left a hole:
		 * put anonymous zeroed RAM back either way. */
		mmap(hva, len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
		return false;
	}
	madvise(p, len, MADV_DONTDUMP);
	return true;
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
