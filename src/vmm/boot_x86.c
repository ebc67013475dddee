/* x86-64 Linux boot without firmware (see boot_x86.h). Follows the kernel's
 * Documentation/x86/boot.rst: 64-bit boot protocol, boot_params at
 * BOOT_ZERO_PAGE, paging on with an identity map, __BOOT_CS/__BOOT_DS. */
#include <assert.h>
#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <asm/e820.h>
#include <asm/bootparam.h>

#include "common/util.h"
#include "vmm/boot_x86.h"

#define PAGE_SIZE 4096ULL

/* File offsets in a bzImage (boot.rst, "THE REAL-MODE KERNEL HEADER"). */
#define BZ_HDR_OFFSET	   0x1f1 /* struct setup_header */
#define BZ_BOOT_FLAG	   0x1fe
#define BZ_HDR_LEN_OFFSET  0x201 /* jump's second byte: header length past 0x202 */
#define BZ_MAGIC_OFFSET	   0x202
#define BZ_MAGIC	   0x53726448U /* "HdrS" */
#define BZ_BOOT_FLAG_MAGIC 0xAA55
#define BZ_MIN_VERSION	   0x020c /* 2.12: xloadflags says whether there is a 64-bit entry */
#define BZ_SECTOR	   512
#define BZ_DEFAULT_SECTS   4	 /* setup_sects == 0 means 4 */
#define BZ_ENTRY_64	   0x200 /* 64-bit entry, offset from the protected-mode kernel */
#define BZ_OLD_CMDLINE	   255	 /* cmdline_size before protocol 2.06 */

#define ELF_MAX_PHNUM 64 /* a vmlinux has a handful; anything more is hostile */

#define BOOT_LOADER_UNDEFINED 0xff   /* type_of_loader for an unregistered loader */
#define BOOT_ELF_VERSION      0x020f /* protocol we speak to a vmlinux */
#define BOOT_HEAP_END	      0xfe00 /* end of the (unused) real-mode heap */

#define PTE_PRESENT (1ULL << 0)
#define PTE_RW	    (1ULL << 1)
#define PTE_PS	    (1ULL << 7)
#define PT_ENTRIES  512
#define PD_PAGES    (BOOT_IDENTITY_MAP / (PT_ENTRIES * 2 * MiB))

static_assert(BOOT_E820_MAX <= E820_MAX_ENTRIES_ZEROPAGE, "e820 table too big for the zero page");
static_assert(sizeof(struct boot_params) == PAGE_SIZE, "boot_params is one page");
static_assert(sizeof(((struct boot_image *)0)->setup_header) >= sizeof(struct setup_header),
	      "boot_image.setup_header too small");
static_assert(BOOT_PD_ADDR + PD_PAGES * PAGE_SIZE <= BOOT_CMDLINE_ADDR,
	      "page directories overlap the command line");

/* Index i of the GDT: null, null, 64-bit code, data, TSS (and the TSS
 * descriptor's upper half, which is zero). */
static const uint64_t boot_gdt[] = {
	0x0000000000000000ULL, /* null */
	0x0000000000000000ULL, /* unused, as in the kernel's boot GDT */
	0x00af9b000000ffffULL, /* BOOT_GDT_CODE: present, DPL 0, code r/x, L, G */
	0x00cf93000000ffffULL, /* BOOT_GDT_DATA: present, DPL 0, data r/w, D/B, G */
	0x0080890000000000ULL, /* BOOT_GDT_TSS: present, available 64-bit TSS, G */
	0x0000000000000000ULL, /* TSS base bits 63:32 */
};

static bool range_in_file(uint64_t off, uint64_t size, size_t len)
{
	return off <= len && size <= len - off;
}

/* One PT_LOAD (already checked): its file data copied, the rest up to
 * p_memsz zeroed. */
static void load_segment(struct guest_mem *m, const uint8_t *img, const Elf64_Phdr *ph)
{
	uint8_t *dst = guest_ptr(m, ph->p_paddr, ph->p_memsz);

	memcpy(dst, img + ph->p_offset, ph->p_filesz);
	memset(dst + ph->p_filesz, 0, ph->p_memsz - ph->p_filesz);
}

static int load_elf(struct guest_mem *m, const uint8_t *img, size_t len,
		    struct boot_image *out, gantry_error_t *err)
{
	bool entry_loaded = false;
	unsigned int i, nload = 0;
	uint64_t end = 0;
	Elf64_Ehdr eh;
	Elf64_Phdr ph;

	if (len < sizeof(eh))
		return gantry_error(err, 0, "ELF header is truncated (file is %zu bytes)", len);
	memcpy(&eh, img, sizeof(eh));
	if (eh.e_ident[EI_CLASS] != ELFCLASS64)
		return gantry_error(err, 0, "ELF class %u is not ELFCLASS64", eh.e_ident[EI_CLASS]);
	if (eh.e_ident[EI_DATA] != ELFDATA2LSB)
		return gantry_error(err, 0, "ELF data encoding %u is not little-endian",
				    eh.e_ident[EI_DATA]);
	if (eh.e_machine != EM_X86_64)
		return gantry_error(err, 0, "ELF machine %u is not x86-64", eh.e_machine);
	if (eh.e_type != ET_EXEC)
		return gantry_error(err, 0, "ELF type %u is not an executable", eh.e_type);
	if (eh.e_phentsize != sizeof(Elf64_Phdr))
		return gantry_error(err, 0, "ELF e_phentsize %u is not %zu", eh.e_phentsize,
				    sizeof(Elf64_Phdr));
	if (eh.e_phnum == 0 || eh.e_phnum > ELF_MAX_PHNUM)
		return gantry_error(err, 0, "ELF e_phnum %u is not between 1 and %u", eh.e_phnum,
				    ELF_MAX_PHNUM);
	if (!range_in_file(eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(ph), len))
		return gantry_error(err, 0,
				    "ELF program headers (e_phoff 0x%llx) lie outside the file",
				    (unsigned long long)eh.e_phoff);

	/* Check every segment before writing any of them to guest memory. */
	for (i = 0; i < eh.e_phnum; i++) {
		memcpy(&ph, img + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type != PT_LOAD)
			continue;
		if (!range_in_file(ph.p_offset, ph.p_filesz, len))
			return gantry_error(
				err, EINVAL,
				"ELF program header %u: segment data lies outside the file", i);
		if (ph.p_filesz > ph.p_memsz)
			return gantry_error(
				err, EINVAL,
				"ELF program header %u: p_filesz 0x%llx exceeds p_memsz 0x%llx", i,
				(unsigned long long)ph.p_filesz, (unsigned long long)ph.p_memsz);
		/* Below 1 MiB lie the zero page, page tables and MP table. */
		if (ph.p_paddr < BOOT_HIGH_RAM || guest_ptr(m, ph.p_paddr, ph.p_memsz) == NULL)
			return gantry_error(err, 0,
					    "ELF program header %u: segment at 0x%llx (0x%llx "
					    "bytes) lies outside guest RAM above 1 MiB",
					    i, (unsigned long long)ph.p_paddr,
					    (unsigned long long)ph.p_memsz);
		if (eh.e_entry >= ph.p_paddr && eh.e_entry - ph.p_paddr < ph.p_memsz)
			entry_loaded = true;
		end = MAX(end, ph.p_paddr + ph.p_memsz);
		nload++;
	}
	if (nload == 0)
		return gantry_error(err, 0, "ELF file has no PT_LOAD segment");
	if (!entry_loaded)
		return gantry_error(err, 0,
				    "ELF entry point 0x%llx lies outside every PT_LOAD segment",
				    (unsigned long long)eh.e_entry);

	for (i = 0; i < eh.e_phnum; i++) {
		memcpy(&ph, img + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type == PT_LOAD)
			load_segment(m, img, &ph);
	}

	out->format = BOOT_FORMAT_ELF;
	out->entry = eh.e_entry;
	out->kernel_end = end;
	/* A 64-bit kernel takes an initrd anywhere below 4 GiB; placement clips
	 * this to low RAM. */
	out->initrd_addr_max = 0xffffffffU;
	out->cmdline_size = BOOT_CMDLINE_MAX - 1;
	return 0;
}

static int load_bzimage(struct guest_mem *m, const uint8_t *img, size_t len, struct boot_image *out,
			gantry_error_t *err)
{
	uint64_t pm_off, payload, size, load, low_top = guest_mem_low_top(m);
	struct setup_header hdr;
	unsigned int sects;
	size_t hdr_len;

	if (len < BZ_HDR_OFFSET + sizeof(hdr))
		return gantry_error(err, 0, "bzImage setup header is truncated (file is %zu bytes)",
				    len);
	memcpy(&hdr, img + BZ_HDR_OFFSET, sizeof(hdr));
	if (hdr.version < BZ_MIN_VERSION)
		return gantry_error(err, 0, "bzImage boot protocol %u.%02u is older than 2.12",
				    hdr.version >> 8, hdr.version & 0xff);
	if (!(hdr.xloadflags & XLF_KERNEL_64))
		return gantry_error(err, 0, "bzImage has no 64-bit entry point (xloadflags 0x%x)",
				    hdr.xloadflags);
	if (!(hdr.loadflags & LOADED_HIGH))
		return gantry_error(err, 0, "bzImage is not loaded high (loadflags 0x%x)",
				    hdr.loadflags);

	sects = hdr.setup_sects ? hdr.setup_sects : BZ_DEFAULT_SECTS;
	pm_off = (uint64_t)(sects + 1) * BZ_SECTOR;
	if (pm_off >= len)
		return gantry_error(
			err, EINVAL,
			"bzImage setup_sects %u puts the kernel past the end of the file",
			hdr.setup_sects);
	payload = len - pm_off;

	if (hdr.relocatable_kernel == 0) {
		load = hdr.pref_address;
	} else {
		uint32_t a = hdr.kernel_alignment;

		if (a == 0 || (a & (a - 1)) != 0)
			return gantry_error(err, EINVAL,
					    "bzImage kernel_alignment 0x%x is not a power of two",
					    a);
		load = ALIGN_UP(BOOT_BZIMAGE_LOAD, (uint64_t)a);
	}
	size = MAX((uint64_t)hdr.init_size, payload);
	if (load < BOOT_HIGH_RAM || load > low_top || size > low_top - load ||
	    guest_ptr(m, load, size) == NULL)
		return gantry_error(
			err, EINVAL,
			"bzImage needs 0x%llx bytes at 0x%llx, outside low guest RAM (0x%llx)",
			(unsigned long long)size, (unsigned long long)load,
			(unsigned long long)low_top);

	memcpy(guest_ptr(m, load, payload), img + pm_off, payload);

	hdr_len = BZ_MAGIC_OFFSET + img[BZ_HDR_LEN_OFFSET] - BZ_HDR_OFFSET;
	out->setup_header_len = MIN(hdr_len, sizeof(hdr));
	memcpy(out->setup_header, img + BZ_HDR_OFFSET, out->setup_header_len);

	out->format = BOOT_FORMAT_BZIMAGE;
	out->entry = load + BZ_ENTRY_64;
	out->kernel_end = load + size;
	out->initrd_addr_max = hdr.initrd_addr_max;
	/* Always true past the version check; kept for the protocol's sake. */
	out->cmdline_size = hdr.version >= 0x0206 ? hdr.cmdline_size : BZ_OLD_CMDLINE;
	return 0;
}

static bool is_bzimage(const uint8_t *img, size_t len)
{
	uint32_t magic;
	uint16_t flag;

	if (len < BZ_MAGIC_OFFSET + sizeof(magic))
		return false;
	memcpy(&flag, img + BZ_BOOT_FLAG, sizeof(flag));
	memcpy(&magic, img + BZ_MAGIC_OFFSET, sizeof(magic));
	return flag == BZ_BOOT_FLAG_MAGIC && magic == BZ_MAGIC;
}

bool boot_kernel_format_ok(const void *img, size_t len)
{
	return (len >= SELFMAG && memcmp(img, ELFMAG, SELFMAG) == 0) || is_bzimage(img, len);
}

int boot_load_kernel(struct guest_mem *m, const void *img, size_t len, struct boot_image *out,
		     gantry_error_t *err)
{
	const uint8_t *p = img;
	int ret;

	memset(out, 0, sizeof(*out));
	if (len >= SELFMAG && memcmp(p, ELFMAG, SELFMAG) == 0)
		ret = load_elf(m, p, len, out, err);
	else if (is_bzimage(p, len))
		ret = load_bzimage(m, p, len, out, err);
	else
		ret = gantry_error(err, 0, "not a vmlinux ELF or bzImage");
	if (ret < 0)
		return gantry_error_prefix(err, "kernel image");
	return 0;
}

int boot_load_initrd(struct guest_mem *m, const struct boot_image *k, const void *initrd,
		     size_t len, uint64_t *gpa_out, gantry_error_t *err)
{
	uint64_t top = MIN((uint64_t)k->initrd_addr_max + 1, guest_mem_low_top(m));
	uint64_t bottom = MAX(ALIGN_UP(k->kernel_end, PAGE_SIZE), BOOT_HIGH_RAM);
	uint64_t gpa;
	void *dst;

	if (len == 0)
		return gantry_error(err, 0, "initrd is empty");
	if (len > top || ALIGN_DOWN(top - len, PAGE_SIZE) < bottom)
		return gantry_error(err, 0,
				    "initrd of %llu MiB does not fit in guest memory between "
				    "0x%llx (past the kernel) and 0x%llx",
				    (unsigned long long)((len + MiB - 1) / MiB),
				    (unsigned long long)bottom, (unsigned long long)top);
	gpa = ALIGN_DOWN(top - len, PAGE_SIZE);
	dst = guest_ptr(m, gpa, len);
	if (dst == NULL)
		return gantry_error(err, 0, "initrd at 0x%llx lies outside guest RAM",
				    (unsigned long long)gpa);
	memcpy(dst, initrd, len);
	*gpa_out = gpa;
	return 0;
}

unsigned int boot_e820_build(const struct guest_mem *m, struct boot_e820 *out, unsigned int max)
{
	uint64_t low_top = guest_mem_low_top(m);
	unsigned int i, n = 0;

	if (n < max && low_top > 0)
		out[n++] = (struct boot_e820){ 0, MIN(low_top, BOOT_EBDA_START), E820_RAM };
	if (n < max && low_top > BOOT_HIGH_RAM)
		out[n++] = (struct boot_e820){ BOOT_HIGH_RAM, low_top - BOOT_HIGH_RAM, E820_RAM };
	for (i = 1; i < m->nr_regions && n < max; i++)
		out[n++] = (struct boot_e820){ m->regions[i].gpa, m->regions[i].size, E820_RAM };
	return n;
}

int boot_setup_zero_page(struct guest_mem *m, const struct boot_image *k, const char *cmdline,
			 uint64_t initrd_gpa, uint64_t initrd_len, gantry_error_t *err)
{
	struct boot_e820 e820[BOOT_E820_MAX];
	size_t cmdlen = strlen(cmdline);
	size_t cmdmax = MIN((size_t)k->cmdline_size, (size_t)BOOT_CMDLINE_MAX - 1);
	struct boot_params bp;
	unsigned int i, n;
	void *zp, *cl;
	uint32_t magic = BZ_MAGIC;

	if (cmdlen > cmdmax)
		return gantry_error(
			err, E2BIG,
			"kernel command line is %zu bytes, longer than the limit of %zu", cmdlen,
			cmdmax);
	zp = guest_ptr(m, BOOT_ZERO_PAGE, sizeof(bp));
	cl = guest_ptr(m, BOOT_CMDLINE_ADDR, cmdlen + 1);
	if (zp == NULL || cl == NULL)
		return gantry_error(err, 0, "guest RAM too small for the zero page");

	memset(&bp, 0, sizeof(bp));
	if (k->format == BOOT_FORMAT_BZIMAGE)
		memcpy(&bp.hdr, k->setup_header, MIN(k->setup_header_len, sizeof(bp.hdr)));
	else
		bp.hdr.version = BOOT_ELF_VERSION;
	bp.hdr.type_of_loader = BOOT_LOADER_UNDEFINED;
	bp.hdr.boot_flag = BZ_BOOT_FLAG_MAGIC;
	memcpy(&bp.hdr.header, &magic, sizeof(magic));
	/* KEEP_SEGMENTS is obsolete and the 64-bit entry ignores it. */
	bp.hdr.loadflags |= LOADED_HIGH | CAN_USE_HEAP;
	bp.hdr.heap_end_ptr = BOOT_HEAP_END;
	bp.hdr.cmd_line_ptr = (uint32_t)BOOT_CMDLINE_ADDR;
	bp.hdr.cmdline_size = k->cmdline_size;
	if (initrd_len > 0) {
		/* The ext_ fields carry the upper 32 bits (protocol 2.12+). */
		bp.hdr.ramdisk_image = (uint32_t)initrd_gpa;
		bp.hdr.ramdisk_size = (uint32_t)initrd_len;
		bp.ext_ramdisk_image = (uint32_t)(initrd_gpa >> 32);
		bp.ext_ramdisk_size = (uint32_t)(initrd_len >> 32);
	}

	n = boot_e820_build(m, e820, BOOT_E820_MAX);
	bp.e820_entries = (uint8_t)n;
	for (i = 0; i < n; i++) {
		bp.e820_table[i].addr = e820[i].addr;
		bp.e820_table[i].size = e820[i].size;
		bp.e820_table[i].type = e820[i].type;
	}

	memcpy(zp, &bp, sizeof(bp));
	memcpy(cl, cmdline, cmdlen + 1);
	return 0;
}

uint64_t boot_gdt_entry(unsigned int i)
{
	return i < ARRAY_SIZE(boot_gdt) ? boot_gdt[i] : 0;
}

int boot_setup_page_tables(struct guest_mem *m, gantry_error_t *err)
{
	uint8_t *gdt = guest_ptr(m, BOOT_GDT_ADDR, sizeof(boot_gdt));
	uint8_t *pml4 = guest_ptr(m, BOOT_PML4_ADDR, PAGE_SIZE);
	uint8_t *pdpt = guest_ptr(m, BOOT_PDPT_ADDR, PAGE_SIZE);
	uint8_t *pd = guest_ptr(m, BOOT_PD_ADDR, PD_PAGES * PAGE_SIZE);
	uint64_t e;
	unsigned int i;

	if (gdt == NULL || pml4 == NULL || pdpt == NULL || pd == NULL)
		return gantry_error(err, 0, "guest RAM too small for the boot page tables");

	memcpy(gdt, boot_gdt, sizeof(boot_gdt));

	memset(pml4, 0, PAGE_SIZE);
	memset(pdpt, 0, PAGE_SIZE);
	memset(pd, 0, PD_PAGES * PAGE_SIZE);
	e = BOOT_PDPT_ADDR | PTE_PRESENT | PTE_RW;
	memcpy(pml4, &e, sizeof(e));
	for (i = 0; i < PD_PAGES; i++) {
		e = (BOOT_PD_ADDR + i * PAGE_SIZE) | PTE_PRESENT | PTE_RW;
		memcpy(pdpt + i * sizeof(e), &e, sizeof(e));
	}
	for (i = 0; i < PD_PAGES * PT_ENTRIES; i++) {
		e = (uint64_t)i * 2 * MiB | PTE_PRESENT | PTE_RW | PTE_PS;
		memcpy(pd + i * sizeof(e), &e, sizeof(e));
	}
	return 0;
}
