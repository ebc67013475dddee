/* x86-64 Linux boot without firmware: load a vmlinux ELF or a bzImage, an
 * initrd, and build the zero page (boot_params), e820 map, command line, GDT
 * and identity page tables the kernel's 64-bit entry point expects. The vCPU
 * code turns struct boot_image into register state. */
#ifndef GANTRY_VMM_BOOT_X86_H
#define GANTRY_VMM_BOOT_X86_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "vmm/memory.h"

/* Fixed low-memory layout (guest physical addresses). */
#define BOOT_GDT_ADDR	  0x500ULL
#define BOOT_ZERO_PAGE	  0x7000ULL
#define BOOT_STACK_TOP	  0x8ff0ULL
#define BOOT_PML4_ADDR	  0x9000ULL /* PDPT at +0x1000, 4 PDs after it */
#define BOOT_PDPT_ADDR	  0xa000ULL
#define BOOT_PD_ADDR	  0xb000ULL
#define BOOT_IDENTITY_MAP (4ULL << 30) /* identity-mapped with 2 MiB pages */
#define BOOT_CMDLINE_ADDR 0x20000ULL
#define BOOT_CMDLINE_MAX  2048 /* x86 COMMAND_LINE_SIZE, including the NUL */
#define BOOT_MPTABLE_ADDR 0xf0000ULL
#define BOOT_EBDA_START	  0x9fc00ULL   /* low RAM ends here in the e820 map */
#define BOOT_HIGH_RAM	  0x100000ULL  /* 1 MiB */
#define BOOT_BZIMAGE_LOAD 0x1000000ULL /* bzImage load address if it states none */

/* GDT selectors the 64-bit boot protocol expects (__BOOT_CS / __BOOT_DS). */
#define BOOT_GDT_CODE 0x10
#define BOOT_GDT_DATA 0x18
#define BOOT_GDT_TSS  0x20

#define BOOT_E820_MAX 128

enum boot_format {
	BOOT_FORMAT_ELF,
	BOOT_FORMAT_BZIMAGE,
};

struct boot_image {
	enum boot_format format;
	uint64_t entry;	     /* 64-bit entry point, guest physical */
	uint64_t kernel_end; /* first byte past the loaded kernel image */
	/* bzImage only: the setup header bytes (from file offset 0x1f1) to copy
	 * into the zero page, and the fields the loader reads from it. */
	uint8_t setup_header[0x290 - 0x1f1];
	size_t setup_header_len;
	uint32_t initrd_addr_max; /* highest byte an initrd may occupy */
	uint32_t cmdline_size;	  /* longest command line without the NUL */
};

struct boot_e820 {
	uint64_t addr;
	uint64_t size;
	uint32_t type; /* 1 = RAM, 2 = reserved */
};

/* Load a kernel image that is a vmlinux ELF64 (x86-64, PT_LOAD segments at
 * their physical addresses) or a bzImage (boot protocol >= 2.12 with a
 * 64-bit entry). Every header field is checked against the file and guest
 * RAM before use; a malformed image fails with a message naming the field. */
/* Whether img looks like a kernel we load (ELF, or bzImage's magic),
 * before any guest memory exists. */
bool boot_kernel_format_ok(const void *img, size_t len);
int boot_load_kernel(struct guest_mem *m, const void *img, size_t len, struct boot_image *out,
		     gantry_error_t *err);
/* Copy an initrd to the highest page-aligned address below both the
 * kernel's initrd_addr_max and the top of low RAM, and above kernel_end. */
int boot_load_initrd(struct guest_mem *m, const struct boot_image *k, const void *initrd,
		     size_t len, uint64_t *gpa_out, gantry_error_t *err);

/* The e820 map for m: RAM 0..EBDA, RAM 1 MiB..low top, RAM from 4 GiB. */
unsigned int boot_e820_build(const struct guest_mem *m, struct boot_e820 *out, unsigned int max);

/* Write the zero page at BOOT_ZERO_PAGE (setup header, loader type,
 * command line pointer and size, initrd address and size, e820 table) and the
 * command line at BOOT_CMDLINE_ADDR. initrd_len == 0 means no initrd. */
int boot_setup_zero_page(struct guest_mem *m, const struct boot_image *k, const char *cmdline,
			 uint64_t initrd_gpa, uint64_t initrd_len, gantry_error_t *err);

/* Write the GDT at BOOT_GDT_ADDR and page tables identity-mapping the first
 * BOOT_IDENTITY_MAP bytes with 2 MiB pages, PML4 at BOOT_PML4_ADDR. */
int boot_setup_page_tables(struct guest_mem *m, gantry_error_t *err);

/* The 64-bit descriptor for GDT entry i as written by boot_setup_page_tables. */
uint64_t boot_gdt_entry(unsigned int i);

#endif
