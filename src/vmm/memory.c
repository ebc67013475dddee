/* Guest physical memory (see memory.h). */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "common/util.h"
#include "vmm/memory.h"

/* Guest RAM on 2 MiB boundaries: KVM maps a guest 2 MiB page with one
 * nested page table entry only when the host address is aligned like the
 * guest one and the host page behind it is a huge page (THP). */
#define RAM_ALIGN (2u * MiB)
#define PAGE_SIZE 4096u

static void *ram_map(uint64_t size, int fd, uint64_t off, int share)
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
	if (fd >= 0 && mmap(start, size, PROT_READ | PROT_WRITE, share | MAP_FIXED | MAP_NORESERVE,
			    fd, (off_t)off) == MAP_FAILED) {
		munmap(start, size);
		return NULL;
	}
	/* Guest RAM is worth huge pages when the host offers them. */
	madvise(start, size, MADV_HUGEPAGE);
	/* Keep guest memory out of core dumps of the VMM. */
	madvise(start, size, MADV_DONTDUMP);
	return start;
}

void *guest_ram_map(uint64_t size, int fd, uint64_t off)
{
	return ram_map(size, fd, off, MAP_SHARED);
}

/* fd < 0: anonymous; share: MAP_SHARED, the memfd kept in m->fd, or
 * MAP_PRIVATE, a file the caller keeps. */
static int mem_init(struct guest_mem *m, uint64_t size, int fd, int share, gantry_error_t *err)
{
	uint64_t low = MIN(size, GUEST_MEM_HOLE_START);

	memset(m, 0, sizeof(*m));
	m->mapped = true;
	m->fd = share == MAP_SHARED ? fd : -1;
	m->file_backed = fd >= 0 && share == MAP_PRIVATE;
	m->ram_size = size;
	m->regions[0].gpa = 0;
	m->regions[0].size = low;
	m->regions[0].hva = ram_map(low, fd, 0, share);
	if (m->regions[0].hva == NULL) {
		gantry_error_errno(err, "cannot map %llu MiB of guest memory",
				   (unsigned long long)(size / MiB));
		guest_mem_destroy(m);
		return -1;
	}
	m->nr_regions = 1;
	if (size > low) {
		struct guest_region *r = &m->regions[1];

		r->gpa = GUEST_MEM_HIGH_START;
		r->size = size - low;
		r->fd_off = low;
		r->hva = ram_map(r->size, fd, low, share);
		if (r->hva == NULL) {
			guest_mem_destroy(m);
			return gantry_error_errno(err, "cannot map %llu MiB of guest memory",
						  (unsigned long long)(size / MiB));
		}
		m->nr_regions = 2;
	}
	return 0;
}

int guest_mem_init(struct guest_mem *m, uint64_t size, gantry_error_t *err)
{
	return mem_init(m, size, -1, MAP_PRIVATE, err);
}

/* A memory file (guest_mem_save's) is a regular file of RAM's size. */
static int mem_file_check(int fd, uint64_t size, gantry_error_t *err)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return gantry_error_errno(err, "the memory file");
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != size)
		return gantry_error(
			err, 0, "the memory file is %llu bytes, not the %llu MiB of RAM",
			(unsigned long long)st.st_size, (unsigned long long)(size / MiB));
	return 0;
}

int guest_mem_init_file(struct guest_mem *m, uint64_t size, int fd, gantry_error_t *err)
{
	if (mem_file_check(fd, size, err) < 0)
		return -1;
	return mem_init(m, size, fd, MAP_PRIVATE, err);
}

#define PAGEMAP_PRESENT (1ULL << 63)
#define PAGEMAP_SWAPPED (1ULL << 62)
#define PAGEMAP_BATCH	512

static bool page_is_zero(const uint8_t *p)
{
	static const uint8_t zero[PAGE_SIZE];

	return p[0] == 0 && memcmp(p, zero, PAGE_SIZE) == 0;
}

/* Mark vec[p] for the pages of [r's offset in fd, + r->size) that fd
 * holds data for (SEEK_DATA: shmem counts a swapped-out page as data). */
static int pages_with_data(int fd, const struct guest_region *r, uint8_t *vec)
{
	off_t end = (off_t)(r->fd_off + r->size), at = (off_t)r->fd_off, hole;

	memset(vec, 0, r->size / PAGE_SIZE);
	while (at < end) {
		at = lseek(fd, at, SEEK_DATA);
		if (at < 0 && errno == ENXIO)
			return 0;
		if (at < 0)
			return -1;
		if (at >= end)
			return 0;
		hole = lseek(fd, at, SEEK_HOLE);
		if (hole < 0)
			return -1;
		hole = MIN(hole, end);
		for (off_t o = at & ~(off_t)(PAGE_SIZE - 1); o < hole; o += PAGE_SIZE)
			vec[(o - (off_t)r->fd_off) / PAGE_SIZE] = 1;
		at = hole;
	}
	return 0;
}

/* Which of a region's pages hold data (vec[p] = 1). Through pagemap, an
 * anonymous page does when it is present or swapped out (mincore would
 * call a swapped one empty); RAM in a memfd, which another process (the
 * share worker) writes too, through the memfd's own data ranges; without
 * pagemap, and for a file-backed region (whose pages not yet read are
 * the file's, not zeros), each page is read and kept unless all zero. */
static int pages_in_use(const struct guest_mem *m, const struct guest_region *r, int pagemap,
			uint8_t *vec)
{
	size_t pages = r->size / PAGE_SIZE;
	uint64_t ent[PAGEMAP_BATCH];

	if (m->fd >= 0)
		return pages_with_data(m->fd, r, vec);
	if (pagemap < 0 || m->file_backed) {
		for (size_t p = 0; p < pages; p++)
			vec[p] = !page_is_zero(r->hva + p * PAGE_SIZE);
		return 0;
	}
	for (size_t p = 0; p < pages; p += PAGEMAP_BATCH) {
		size_t n = MIN((size_t)PAGEMAP_BATCH, pages - p);
		off_t at = (off_t)(((uintptr_t)r->hva / PAGE_SIZE + p) * sizeof(ent[0]));

		if (pread(pagemap, ent, n * sizeof(ent[0]), at) != (ssize_t)(n * sizeof(ent[0])))
			return -1;
		for (size_t i = 0; i < n; i++)
			vec[p + i] = (ent[i] & (PAGEMAP_PRESENT | PAGEMAP_SWAPPED)) != 0;
	}
	return 0;
}

/* The next run of marked pages at or after *p, [*p, *end); false when
 * there is none. */
static bool next_run(const uint8_t *vec, size_t pages, size_t *p, size_t *end)
{
	while (*p < pages && !vec[*p])
		(*p)++;
	for (*end = *p; *end < pages && vec[*end]; (*end)++)
		;
	return *p < pages;
}

int guest_mem_save(const struct guest_mem *m, int fd, int pagemap, uint64_t *written,
		   gantry_error_t *err)
{
	uint64_t off = 0;

	*written = 0;
	if (ftruncate(fd, 0) < 0 || ftruncate(fd, (off_t)m->ram_size) < 0)
		return gantry_error_errno(err, "the memory file");
	for (unsigned int i = 0; i < m->nr_regions; i++) {
		const struct guest_region *r = &m->regions[i];
		size_t pages = r->size / PAGE_SIZE;
		cleanup_free uint8_t *vec = xmalloc(pages ? pages : 1);
		size_t end;

		if (pages_in_use(m, r, pagemap, vec) < 0)
			return gantry_error_errno(err, "pagemap");
		/* Runs of pages in use; the rest are holes, which read as
		 * zeros as those pages did. */
		for (size_t p = 0; next_run(vec, pages, &p, &end); p = end) {
			if (pwrite_full(fd, r->hva + p * PAGE_SIZE, (end - p) * PAGE_SIZE,
				       (off_t)(off + p * PAGE_SIZE)) < 0)
				return gantry_error_errno(err, "the memory file");
			*written += (end - p) * PAGE_SIZE;
		}
		off += r->size;
	}
	if (fsync(fd) < 0)
		return gantry_error_errno(err, "the memory file");
	return 0;
}

int guest_mem_init_shared(struct guest_mem *m, uint64_t size, gantry_error_t *err)
{
	int fd = memfd_create("guest-ram", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return gantry_error_errno(err, "memfd_create");
	/* Its size for good: the other process that maps it never finds
	 * a page gone (SIGBUS), whatever this one does later. */
	if (ftruncate(fd, (off_t)size) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		gantry_error_errno(err, "cannot size %llu MiB of guest memory",
				   (unsigned long long)(size / MiB));
		close(fd);
		return -1;
	}
	return mem_init(m, size, fd, MAP_SHARED, err);
}

void guest_mem_small_pages(const struct guest_mem *m)
{
	for (unsigned int i = 0; i < m->nr_regions; i++)
		madvise(m->regions[i].hva, m->regions[i].size, MADV_NOHUGEPAGE);
}

void guest_mem_init_buffer(struct guest_mem *m, void *buf, uint64_t size)
{
	memset(m, 0, sizeof(*m));
	m->regions[0].gpa = 0;
	m->regions[0].size = size;
	m->regions[0].hva = buf;
	m->nr_regions = 1;
	m->ram_size = size;
	m->fd = -1;
}

void guest_mem_destroy(struct guest_mem *m)
{
	unsigned int i;

	if (m->mapped) {
		for (i = 0; i < m->nr_regions; i++)
			munmap(m->regions[i].hva, m->regions[i].size);
		if (m->fd >= 0)
			close(m->fd);
	}
	memset(m, 0, sizeof(*m));
	m->fd = -1;
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

uint64_t guest_mem_discard(const struct guest_mem *m, void *hva, uint64_t len)
{
	uintptr_t start = ((uintptr_t)hva + PAGE_SIZE - 1) & ~(uintptr_t)(PAGE_SIZE - 1);
	uintptr_t end = ((uintptr_t)hva + len) & ~(uintptr_t)(PAGE_SIZE - 1);

	if (!m->mapped || end <= start || (uintptr_t)hva + len < (uintptr_t)hva)
		return 0;
	/* A shared memfd's pages live in the file: only punching them out
	 * of it frees them (and the other process's view reads zeros too). */
	if (madvise((void *)start, end - start, m->fd >= 0 ? MADV_REMOVE : MADV_DONTNEED) < 0)
		return 0;
	return end - start;
}

uint64_t guest_mem_low_top(const struct guest_mem *m)
{
	return m->nr_regions ? m->regions[0].size : 0;
}
