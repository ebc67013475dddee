/* Guest physical memory: anonymous MAP_NORESERVE mappings faulted lazily
 * (guest_mem_init_shared's memfd serves the share worker's request slots,
 * share/rpc.h, which both processes map).
 * RAM sits below the 32-bit MMIO hole, and whatever does not fit there is
 * placed from 4 GiB up. Every guest-supplied address is translated through
 * guest_ptr(), which refuses ranges that leave a region or overflow. */
#ifndef GANTRY_VMM_MEMORY_H
#define GANTRY_VMM_MEMORY_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

#define GUEST_MEM_HOLE_START  0xc0000000ULL  /* 3 GiB: MMIO devices, IOAPIC, LAPIC */
#define GUEST_MEM_HIGH_START  0x100000000ULL /* 4 GiB */
#define GUEST_MEM_MAX_REGIONS 2

struct guest_region {
	uint64_t gpa;
	uint64_t size;
	uint8_t *hva;
	uint64_t fd_off; /* its offset in guest_mem.fd */
};

struct guest_mem {
	struct guest_region regions[GUEST_MEM_MAX_REGIONS];
	unsigned int nr_regions;
	uint64_t ram_size; /* total bytes of RAM */
	bool mapped;	   /* regions were mmap()ed by guest_mem_init */
	/* guest_mem_init_file: a saved VM's memory file mapped private, so
	 * a page given back reads the file's again, not zeros. */
	bool file_backed;
	int fd; /* guest_mem_init_shared's memfd, else -1 */
};

/* Map guest RAM: fd < 0, anonymous memory; else fd's [off, off + size),
 * shared. On a 2 MiB boundary, with huge pages asked for (used where the
 * host offers them: THP, and shmem_enabled for a memfd) and kept out of
 * core dumps. NULL with errno. The VMM's and the share worker's view. */
void *guest_ram_map(uint64_t size, int fd, uint64_t off);
/* Map size bytes of guest RAM. */
int guest_mem_init(struct guest_mem *m, uint64_t size, gantry_error_t *err);
/* The same, the RAM one memfd (m->fd, close-on-exec) of size bytes:
 * region 0 at offset 0, region 1 at region 0's size, each mapped shared
 * on 2 MiB boundaries; sealed at that size (F_SEAL_SHRINK, GROW, SEAL). */
int guest_mem_init_shared(struct guest_mem *m, uint64_t size, gantry_error_t *err);
/* Map a saved VM's memory file (guest_mem_save's) of exactly size bytes
 * as its RAM, copy-on-write: the file is never written, and VMs started
 * from one file share its page cache. fd stays the caller's. */
int guest_mem_init_file(struct guest_mem *m, uint64_t size, int fd, gantry_error_t *err);
/* Write RAM into fd as that file: the regions one after the other, only
 * pages in use (the others, never touched, given back or all zero, are
 * holes). pagemap: /proc/self/pagemap, opened by the caller, which says
 * which pages are in use without reading them; -1: each page is read.
 * *written: the bytes written. */
int guest_mem_save(const struct guest_mem *m, int fd, int pagemap, uint64_t *written,
		   gantry_error_t *err);
/* RAM in 4 KiB pages only (MADV_NOHUGEPAGE on each region): for density,
 * where a huge page resident whole for one byte the guest touched costs
 * more than the faults it saves. */
void guest_mem_small_pages(const struct guest_mem *m);
/* Describe a caller-owned buffer as guest RAM at gpa 0 (tests, fuzzers). */
void guest_mem_init_buffer(struct guest_mem *m, void *buf, uint64_t size);
void guest_mem_destroy(struct guest_mem *m);

/* Host address of [gpa, gpa + len) when that range lies wholly inside one
 * RAM region; NULL otherwise (including len == 0 at the end of a region is
 * allowed, a range that wraps around is not). */
void *guest_ptr(const struct guest_mem *m, uint64_t gpa, uint64_t len);

/* Give the host back the whole pages of [hva, hva + len), a range inside
 * one RAM region (as guest_ptr returns it): the guest reads zeros there
 * next. Returns the bytes given back (0 for a range under one page, or on
 * buffers not mapped by guest_mem_init). */
uint64_t guest_mem_discard(const struct guest_mem *m, void *hva, uint64_t len);

/* Top of RAM below the MMIO hole (exclusive). */
uint64_t guest_mem_low_top(const struct guest_mem *m);

#endif
