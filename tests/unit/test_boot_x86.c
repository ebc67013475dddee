/* Unit tests for vmm/boot_x86.c: kernel loaders (ELF and bzImage, well formed
 * and malformed), initrd placement, e820, zero page, GDT and page tables. */
#include <assert.h>
#include <elf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include <asm/e820.h>
#include <asm/bootparam.h>

#include "common/util.h"
#include "vmm/boot_x86.h"

#define GUEST_SIZE (64 * MiB)
#include "guest.h"

static void expect_error(int ret, gantry_error_t *err, const char *needle)
{
	assert_int_equal(ret, -1);
	assert_non_null(*err);
	if (strstr((*err)->msg, needle) == NULL)
		fail_msg("error \"%s\" does not mention \"%s\"", (*err)->msg, needle);
	gantry_error_free(err);
}

/* ---- crafted ELF ---- */

#define ELF_SEG0_PADDR	0x100000ULL
#define ELF_SEG0_FILESZ 0x80
#define ELF_SEG0_MEMSZ	0x1000
#define ELF_SEG1_PADDR	0x200000ULL
#define ELF_SEG1_FILESZ 0x40
#define ELF_SEG1_MEMSZ	0x2000
#define ELF_DATA_OFF	0x100
#define ELF_ENTRY	(ELF_SEG0_PADDR + 0x10)
#define ELF_SIZE	(ELF_DATA_OFF + ELF_SEG0_FILESZ + ELF_SEG1_FILESZ)

struct elf_image {
	Elf64_Ehdr eh;
	Elf64_Phdr ph[2];
	uint8_t pad[ELF_DATA_OFF - sizeof(Elf64_Ehdr) - 2 * sizeof(Elf64_Phdr)];
	uint8_t data[ELF_SEG0_FILESZ + ELF_SEG1_FILESZ];
};

static void make_elf(struct elf_image *e)
{
	size_t i;

	memset(e, 0, sizeof(*e));
	memcpy(e->eh.e_ident, ELFMAG, SELFMAG);
	e->eh.e_ident[EI_CLASS] = ELFCLASS64;
	e->eh.e_ident[EI_DATA] = ELFDATA2LSB;
	e->eh.e_ident[EI_VERSION] = EV_CURRENT;
	e->eh.e_type = ET_EXEC;
	e->eh.e_machine = EM_X86_64;
	e->eh.e_version = EV_CURRENT;
	e->eh.e_entry = ELF_ENTRY;
	e->eh.e_phoff = offsetof(struct elf_image, ph);
	e->eh.e_ehsize = sizeof(Elf64_Ehdr);
	e->eh.e_phentsize = sizeof(Elf64_Phdr);
	e->eh.e_phnum = 2;

	e->ph[0] = (Elf64_Phdr){ .p_type = PT_LOAD,
				 .p_offset = ELF_DATA_OFF,
				 .p_vaddr = 0xffffffff80000000ULL + ELF_SEG0_PADDR,
				 .p_paddr = ELF_SEG0_PADDR,
				 .p_filesz = ELF_SEG0_FILESZ,
				 .p_memsz = ELF_SEG0_MEMSZ };
	e->ph[1] = (Elf64_Phdr){ .p_type = PT_LOAD,
				 .p_offset = ELF_DATA_OFF + ELF_SEG0_FILESZ,
				 .p_vaddr = 0xffffffff80000000ULL + ELF_SEG1_PADDR,
				 .p_paddr = ELF_SEG1_PADDR,
				 .p_filesz = ELF_SEG1_FILESZ,
				 .p_memsz = ELF_SEG1_MEMSZ };
	for (i = 0; i < sizeof(e->data); i++)
		e->data[i] = (uint8_t)(i + 1);
}

static void test_elf_load(void **state)
{
	struct guest *g = *state;
	gantry_error_t err = NULL;
	struct boot_image k;
	struct elf_image e;
	size_t i;

	static_assert(sizeof(struct elf_image) == ELF_SIZE, "crafted ELF has no padding");
	make_elf(&e);
	assert_int_equal(boot_load_kernel(&g->mem, &e, sizeof(e), &k, &err), 0);
	assert_null(err);
	assert_int_equal(k.format, BOOT_FORMAT_ELF);
	assert_int_equal(k.entry, ELF_ENTRY);
	assert_int_equal(k.kernel_end, ELF_SEG1_PADDR + ELF_SEG1_MEMSZ);
	assert_int_equal(k.cmdline_size, BOOT_CMDLINE_MAX - 1);
	assert_true(k.initrd_addr_max >= GUEST_SIZE - 1);

	assert_memory_equal(g->buf + ELF_SEG0_PADDR, e.data, ELF_SEG0_FILESZ);
	for (i = ELF_SEG0_FILESZ; i < ELF_SEG0_MEMSZ; i++)
		assert_int_equal(g->buf[ELF_SEG0_PADDR + i], 0);
	assert_int_equal(g->buf[ELF_SEG0_PADDR + ELF_SEG0_MEMSZ], GARBAGE);

	assert_memory_equal(g->buf + ELF_SEG1_PADDR, e.data + ELF_SEG0_FILESZ, ELF_SEG1_FILESZ);
	for (i = ELF_SEG1_FILESZ; i < ELF_SEG1_MEMSZ; i++)
		assert_int_equal(g->buf[ELF_SEG1_PADDR + i], 0);
	assert_int_equal(g->buf[ELF_SEG1_PADDR + ELF_SEG1_MEMSZ], GARBAGE);
	assert_int_equal(g->buf[ELF_SEG1_PADDR - 1], GARBAGE);
}

/* Guest RAM starts on a 2 MiB boundary in both regions, so KVM can back a
 * guest 2 MiB page with one huge host page (and one nested page table
 * entry), and the ELF segments loaded into it are in RAM, not in a file. */
static void test_ram_aligned(void **state)
{
	struct guest_mem mem;
	gantry_error_t err = NULL;
	unsigned int i;

	(void)state;
	assert_int_equal(guest_mem_init(&mem, GUEST_MEM_HOLE_START + 6 * MiB, &err), 0);
	assert_int_equal(mem.nr_regions, 2);
	for (i = 0; i < mem.nr_regions; i++) {
		assert_int_equal((uintptr_t)mem.regions[i].hva % (2 * MiB), 0);
		/* The whole region is usable, first byte to last. */
		mem.regions[i].hva[0] = 1;
		mem.regions[i].hva[mem.regions[i].size - 1] = 1;
	}
	guest_mem_destroy(&mem);
}

/* Load a modified copy of the crafted ELF and expect it refused. */
static void expect_elf_rejected(struct guest *g, const struct elf_image *e, size_t len,
				const char *needle)
{
	gantry_error_t err = NULL;
	struct boot_image k;

	expect_error(boot_load_kernel(&g->mem, e, len, &k, &err), &err, needle);
	/* Nothing was written for a refused image. */
	assert_int_equal(g->buf[ELF_SEG0_PADDR], GARBAGE);
}

static void test_elf_malformed(void **state)
{
	struct guest *g = *state;
	struct elf_image e;

	make_elf(&e);
	expect_elf_rejected(g, &e, 40, "truncated");

	make_elf(&e);
	e.eh.e_ident[EI_CLASS] = ELFCLASS32;
	expect_elf_rejected(g, &e, sizeof(e), "ELFCLASS64");

	make_elf(&e);
	e.eh.e_ident[EI_DATA] = ELFDATA2MSB;
	expect_elf_rejected(g, &e, sizeof(e), "little-endian");

	make_elf(&e);
	e.eh.e_machine = EM_386;
	expect_elf_rejected(g, &e, sizeof(e), "machine");

	make_elf(&e);
	e.eh.e_type = ET_DYN;
	expect_elf_rejected(g, &e, sizeof(e), "type");

	make_elf(&e);
	e.eh.e_phentsize = 32;
	expect_elf_rejected(g, &e, sizeof(e), "e_phentsize");

	make_elf(&e);
	e.eh.e_phnum = 0xffff;
	expect_elf_rejected(g, &e, sizeof(e), "e_phnum");

	make_elf(&e);
	e.eh.e_phnum = 0;
	expect_elf_rejected(g, &e, sizeof(e), "e_phnum");

	make_elf(&e);
	e.eh.e_phoff = sizeof(e) - sizeof(Elf64_Phdr);
	expect_elf_rejected(g, &e, sizeof(e), "program headers");

	make_elf(&e);
	e.eh.e_phoff = UINT64_MAX - 8;
	expect_elf_rejected(g, &e, sizeof(e), "program headers");

	/* PT_LOAD data past the end of the file. */
	make_elf(&e);
	e.ph[1].p_offset = sizeof(e) - 0x10;
	expect_elf_rejected(g, &e, sizeof(e), "program header 1: segment data lies outside");

	/* p_offset + p_filesz wraps around. */
	make_elf(&e);
	e.ph[1].p_offset = UINT64_MAX - 8;
	expect_elf_rejected(g, &e, sizeof(e), "program header 1: segment data lies outside");

	make_elf(&e);
	e.ph[0].p_memsz = ELF_SEG0_FILESZ - 1;
	expect_elf_rejected(g, &e, sizeof(e), "p_filesz");

	/* Segment running past the end of guest RAM. */
	make_elf(&e);
	e.ph[1].p_paddr = GUEST_SIZE - 0x1000;
	expect_elf_rejected(g, &e, sizeof(e), "program header 1: segment at");

	/* Segment whose end wraps around. */
	make_elf(&e);
	e.ph[1].p_paddr = UINT64_MAX - 0xfff;
	expect_elf_rejected(g, &e, sizeof(e), "outside guest RAM");

	/* Segment over the boot structures below 1 MiB. */
	make_elf(&e);
	e.ph[1].p_paddr = BOOT_ZERO_PAGE;
	expect_elf_rejected(g, &e, sizeof(e), "outside guest RAM");

	make_elf(&e);
	e.ph[0].p_type = PT_NOTE;
	e.ph[1].p_type = PT_NULL;
	expect_elf_rejected(g, &e, sizeof(e), "no PT_LOAD");

	make_elf(&e);
	e.eh.e_entry = ELF_SEG0_PADDR + ELF_SEG0_MEMSZ; /* one past segment 0 */
	expect_elf_rejected(g, &e, sizeof(e), "entry point");

	make_elf(&e);
	e.eh.e_entry = 0xffffffff81000000ULL; /* a virtual address */
	expect_elf_rejected(g, &e, sizeof(e), "entry point");
}

/* ---- crafted bzImage ---- */

#define BZ_SETUP_SECTS 4
#define BZ_PM_OFF      ((BZ_SETUP_SECTS + 1) * 512)
#define BZ_PAYLOAD     0x1000
#define BZ_SIZE	       (BZ_PM_OFF + BZ_PAYLOAD)
#define BZ_INIT_SIZE   0x400000
#define BZ_ALIGN       0x200000
#define BZ_HDR_END     0x26c /* kernel_info_offset + 4, protocol 2.15 */

static void bz_set_header(uint8_t *img, const struct setup_header *h)
{
	memcpy(img + 0x1f1, h, sizeof(*h));
}

static void bz_get_header(const uint8_t *img, struct setup_header *h)
{
	memcpy(h, img + 0x1f1, sizeof(*h));
}

static uint8_t *make_bzimage(void)
{
	uint8_t *img = xzalloc(BZ_SIZE);
	struct setup_header h;
	size_t i;

	memset(&h, 0, sizeof(h));
	h.setup_sects = BZ_SETUP_SECTS;
	h.boot_flag = 0xAA55;
	h.jump = (uint16_t)(0xeb | (BZ_HDR_END - 0x202) << 8);
	memcpy(&h.header, "HdrS", 4);
	h.version = 0x020f;
	h.loadflags = LOADED_HIGH;
	h.initrd_addr_max = 0x7fffffff;
	h.kernel_alignment = BZ_ALIGN;
	h.relocatable_kernel = 1;
	h.xloadflags = XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G;
	h.cmdline_size = 2047;
	h.pref_address = 0x1000000;
	h.init_size = BZ_INIT_SIZE;
	bz_set_header(img, &h);
	for (i = 0; i < BZ_PAYLOAD; i++)
		img[BZ_PM_OFF + i] = (uint8_t)(i * 7 + 3);
	return img;
}

static void test_bzimage_load(void **state)
{
	struct guest *g = *state;
	cleanup_free uint8_t *img = make_bzimage();
	gantry_error_t err = NULL;
	struct boot_image k;

	assert_int_equal(sizeof(struct setup_header), BZ_HDR_END - 0x1f1);
	assert_int_equal(boot_load_kernel(&g->mem, img, BZ_SIZE, &k, &err), 0);
	assert_int_equal(k.format, BOOT_FORMAT_BZIMAGE);
	assert_int_equal(k.entry, BOOT_BZIMAGE_LOAD + 0x200);
	assert_int_equal(k.kernel_end, BOOT_BZIMAGE_LOAD + BZ_INIT_SIZE);
	assert_int_equal(k.initrd_addr_max, 0x7fffffff);
	assert_int_equal(k.cmdline_size, 2047);
	assert_int_equal(k.setup_header_len, BZ_HDR_END - 0x1f1);
	assert_memory_equal(k.setup_header, img + 0x1f1, k.setup_header_len);
	assert_memory_equal(g->buf + BOOT_BZIMAGE_LOAD, img + BZ_PM_OFF, BZ_PAYLOAD);
	assert_int_equal(g->buf[BOOT_BZIMAGE_LOAD - 1], GARBAGE);
}

static void test_bzimage_placement(void **state)
{
	struct guest *g = *state;
	cleanup_free uint8_t *img = make_bzimage();
	gantry_error_t err = NULL;
	struct setup_header h;
	struct boot_image k;

	/* setup_sects == 0 means 4. */
	bz_get_header(img, &h);
	h.setup_sects = 0;
	bz_set_header(img, &h);
	assert_int_equal(boot_load_kernel(&g->mem, img, BZ_SIZE, &k, &err), 0);
	assert_memory_equal(g->buf + BOOT_BZIMAGE_LOAD, img + BZ_PM_OFF, BZ_PAYLOAD);

	/* Larger alignment moves the load address up. */
	h.kernel_alignment = 32 * MiB;
	bz_set_header(img, &h);
	assert_int_equal(boot_load_kernel(&g->mem, img, BZ_SIZE, &k, &err), 0);
	assert_int_equal(k.entry, 32 * MiB + 0x200);
	assert_memory_equal(g->buf + 32 * MiB, img + BZ_PM_OFF, BZ_PAYLOAD);

	/* A non-relocatable kernel goes to pref_address. */
	h.relocatable_kernel = 0;
	h.pref_address = 8 * MiB;
	bz_set_header(img, &h);
	assert_int_equal(boot_load_kernel(&g->mem, img, BZ_SIZE, &k, &err), 0);
	assert_int_equal(k.entry, 8 * MiB + 0x200);
	assert_int_equal(k.kernel_end, 8 * MiB + BZ_INIT_SIZE);
	assert_memory_equal(g->buf + 8 * MiB, img + BZ_PM_OFF, BZ_PAYLOAD);

	/* A header length byte past the struct is capped. */
	img[0x201] = 0xff;
	assert_int_equal(boot_load_kernel(&g->mem, img, BZ_SIZE, &k, &err), 0);
	assert_int_equal(k.setup_header_len, sizeof(struct setup_header));
	/* A shorter one (protocol 2.12 ends at 0x268) is honoured. */
	img[0x201] = 0x268 - 0x202;
	assert_int_equal(boot_load_kernel(&g->mem, img, BZ_SIZE, &k, &err), 0);
	assert_int_equal(k.setup_header_len, 0x268 - 0x1f1);
	assert_null(err);
}

static void expect_bz_rejected(struct guest *g, const uint8_t *img, size_t len, const char *needle)
{
	gantry_error_t err = NULL;
	struct boot_image k;

	expect_error(boot_load_kernel(&g->mem, img, len, &k, &err), &err, needle);
	assert_int_equal(g->buf[BOOT_BZIMAGE_LOAD], GARBAGE);
}

static void test_bzimage_malformed(void **state)
{
	struct guest *g = *state;
	cleanup_free uint8_t *img = make_bzimage();
	struct setup_header h, good;

	bz_get_header(img, &good);

	/* Cut inside the setup header: the signature is there, the rest is not. */
	expect_bz_rejected(g, img, 0x210, "truncated");

	h = good;
	h.version = 0x020b;
	bz_set_header(img, &h);
	expect_bz_rejected(g, img, BZ_SIZE, "2.11");

	h = good;
	h.xloadflags = 0;
	bz_set_header(img, &h);
	expect_bz_rejected(g, img, BZ_SIZE, "64-bit");

	h = good;
	h.loadflags = 0;
	bz_set_header(img, &h);
	expect_bz_rejected(g, img, BZ_SIZE, "loaded high");

	h = good;
	h.setup_sects = 200;
	bz_set_header(img, &h);
	expect_bz_rejected(g, img, BZ_SIZE, "setup_sects 200");

	/* No protected-mode kernel at all. */
	bz_set_header(img, &good);
	expect_bz_rejected(g, img, BZ_PM_OFF, "setup_sects");

	h = good;
	h.kernel_alignment = 0;
	bz_set_header(img, &h);
	expect_bz_rejected(g, img, BZ_SIZE, "kernel_alignment");

	h = good;
	h.kernel_alignment = 0x300000;
	bz_set_header(img, &h);
	expect_bz_rejected(g, img, BZ_SIZE, "kernel_alignment");

	h = good;
	h.init_size = GUEST_SIZE;
	bz_set_header(img, &h);
	expect_bz_rejected(g, img, BZ_SIZE, "outside low guest RAM");

	h = good;
	h.relocatable_kernel = 0;
	h.pref_address = UINT64_MAX - 0xfff;
	bz_set_header(img, &h);
	expect_bz_rejected(g, img, BZ_SIZE, "outside low guest RAM");

	h = good;
	h.relocatable_kernel = 0;
	h.pref_address = 0x1000;
	bz_set_header(img, &h);
	expect_bz_rejected(g, img, BZ_SIZE, "outside low guest RAM");

	/* Signature broken: neither format. */
	bz_set_header(img, &good);
	img[0x202] = 'X';
	expect_bz_rejected(g, img, BZ_SIZE, "not a vmlinux ELF or bzImage");
	img[0x202] = 'H';
	img[0x1fe] = 0;
	expect_bz_rejected(g, img, BZ_SIZE, "not a vmlinux ELF or bzImage");
}

static void test_not_a_kernel(void **state)
{
	struct guest *g = *state;
	static const char junk[] = "#!/bin/sh\necho this is not a kernel\n";
	gantry_error_t err = NULL;
	struct boot_image k;

	expect_error(boot_load_kernel(&g->mem, junk, sizeof(junk), &k, &err), &err,
		     "kernel image: not a vmlinux ELF or bzImage");
	expect_error(boot_load_kernel(&g->mem, junk, 0, &k, &err), &err, "not a vmlinux");
	expect_error(boot_load_kernel(&g->mem, ELFMAG, 3, &k, &err), &err, "not a vmlinux");
}

/* ---- initrd ---- */

static void test_initrd_placement(void **state)
{
	struct guest *g = *state;
	struct boot_image k = {
		.format = BOOT_FORMAT_ELF,
		.kernel_end = 0x202000,
		.initrd_addr_max = 0xffffffff,
		.cmdline_size = BOOT_CMDLINE_MAX - 1,
	};
	cleanup_free uint8_t *rd = xmalloc(GUEST_SIZE);
	gantry_error_t err = NULL;
	uint64_t gpa;
	size_t i;

	for (i = 0; i < GUEST_SIZE; i++)
		rd[i] = (uint8_t)(i ^ (i >> 8));

	/* Highest page-aligned spot below the top of RAM. */
	assert_int_equal(boot_load_initrd(&g->mem, &k, rd, 0x1800, &gpa, &err), 0);
	assert_int_equal(gpa, GUEST_SIZE - 0x2000);
	assert_memory_equal(g->buf + gpa, rd, 0x1800);

	/* Page-sized: ends exactly at the top. */
	assert_int_equal(boot_load_initrd(&g->mem, &k, rd, 0x3000, &gpa, &err), 0);
	assert_int_equal(gpa, GUEST_SIZE - 0x3000);

	/* Below initrd_addr_max when that is lower. */
	k.initrd_addr_max = 8 * MiB - 1;
	assert_int_equal(boot_load_initrd(&g->mem, &k, rd, 0x1800, &gpa, &err), 0);
	assert_int_equal(gpa, 8 * MiB - 0x2000);
	assert_true(gpa + 0x1800 <= 8 * MiB);

	/* Exactly filling the space above kernel_end. */
	k.initrd_addr_max = 0xffffffff;
	assert_int_equal(boot_load_initrd(&g->mem, &k, rd, GUEST_SIZE - 0x202000, &gpa, &err), 0);
	assert_int_equal(gpa, 0x202000);
	assert_memory_equal(g->buf + gpa, rd, GUEST_SIZE - 0x202000);

	/* One byte more would start below kernel_end. */
	expect_error(boot_load_initrd(&g->mem, &k, rd, GUEST_SIZE - 0x202000 + 1, &gpa, &err), &err,
		     "does not fit");

	/* An unaligned kernel_end rounds up to the next page. */
	k.kernel_end = 0x202001;
	expect_error(boot_load_initrd(&g->mem, &k, rd, GUEST_SIZE - 0x202000, &gpa, &err), &err,
		     "initrd of 62 MiB does not fit");
	assert_int_equal(boot_load_initrd(&g->mem, &k, rd, GUEST_SIZE - 0x203000, &gpa, &err), 0);
	assert_int_equal(gpa, 0x203000);

	/* Larger than all of RAM. */
	expect_error(boot_load_initrd(&g->mem, &k, rd, (size_t)GUEST_SIZE + 1, &gpa, &err), &err,
		     "does not fit");
	/* No room at all below a low initrd_addr_max. */
	k.initrd_addr_max = 0x1fffff;
	expect_error(boot_load_initrd(&g->mem, &k, rd, 0x1000, &gpa, &err), &err, "does not fit");

	k.initrd_addr_max = 0xffffffff;
	expect_error(boot_load_initrd(&g->mem, &k, rd, 0, &gpa, &err), &err, "empty");
}

/* ---- e820 ---- */

static void fake_mem(struct guest_mem *m, uint64_t size)
{
	memset(m, 0, sizeof(*m));
	m->ram_size = size;
	m->regions[0].size = MIN(size, GUEST_MEM_HOLE_START);
	m->nr_regions = 1;
	if (size > GUEST_MEM_HOLE_START) {
		m->regions[1].gpa = GUEST_MEM_HIGH_START;
		m->regions[1].size = size - GUEST_MEM_HOLE_START;
		m->nr_regions = 2;
	}
}

static void expect_e820(const struct boot_e820 *e, uint64_t addr, uint64_t size)
{
	assert_int_equal(e->addr, addr);
	assert_int_equal(e->size, size);
	assert_int_equal(e->type, E820_RAM);
}

static void test_e820(void **state)
{
	struct boot_e820 e[BOOT_E820_MAX];
	struct guest_mem m;

	(void)state;
	fake_mem(&m, 256 * MiB);
	assert_int_equal(boot_e820_build(&m, e, BOOT_E820_MAX), 2);
	expect_e820(&e[0], 0, BOOT_EBDA_START);
	expect_e820(&e[1], BOOT_HIGH_RAM, 256 * MiB - BOOT_HIGH_RAM);

	fake_mem(&m, 3 * GiB);
	assert_int_equal(boot_e820_build(&m, e, BOOT_E820_MAX), 2);
	expect_e820(&e[0], 0, BOOT_EBDA_START);
	expect_e820(&e[1], BOOT_HIGH_RAM, 3 * GiB - BOOT_HIGH_RAM);

	fake_mem(&m, 4 * GiB);
	assert_int_equal(boot_e820_build(&m, e, BOOT_E820_MAX), 3);
	expect_e820(&e[0], 0, BOOT_EBDA_START);
	expect_e820(&e[1], BOOT_HIGH_RAM, 3 * GiB - BOOT_HIGH_RAM);
	expect_e820(&e[2], 4 * GiB, 1 * GiB);

	/* The MP table sits in the hole between the two low entries. */
	assert_true(BOOT_MPTABLE_ADDR >= e[0].addr + e[0].size && BOOT_MPTABLE_ADDR < e[1].addr);

	/* A short output array is filled, not overrun. */
	memset(e, 0, sizeof(e));
	assert_int_equal(boot_e820_build(&m, e, 1), 1);
	expect_e820(&e[0], 0, BOOT_EBDA_START);
	assert_int_equal(e[1].size, 0);
}

/* ---- zero page ---- */

static const struct boot_params *zero_page(const struct guest *g)
{
	return (const struct boot_params *)(g->buf + BOOT_ZERO_PAGE);
}

static void test_zero_page_elf(void **state)
{
	struct guest *g = *state;
	const struct boot_params *bp = zero_page(g);
	gantry_error_t err = NULL;
	struct boot_image k;
	struct elf_image e;
	static const char cmdline[] = "console=ttyS0 reboot=k panic=-1";
	uint32_t magic;
	unsigned int i;

	make_elf(&e);
	assert_int_equal(boot_load_kernel(&g->mem, &e, sizeof(e), &k, &err), 0);
	assert_int_equal(boot_setup_zero_page(&g->mem, &k, cmdline, 0x3000000, 0x12345, &err), 0);
	assert_null(err);

	assert_int_equal(bp->hdr.type_of_loader, 0xff);
	assert_int_equal(bp->hdr.boot_flag, 0xAA55);
	memcpy(&magic, "HdrS", 4);
	assert_int_equal(bp->hdr.header, magic);
	assert_int_equal(bp->hdr.version, 0x020f);
	assert_true(bp->hdr.loadflags & LOADED_HIGH);
	assert_true(bp->hdr.loadflags & CAN_USE_HEAP);
	assert_int_equal(bp->hdr.heap_end_ptr, 0xfe00);
	assert_int_equal(bp->hdr.cmd_line_ptr, BOOT_CMDLINE_ADDR);
	assert_int_equal(bp->ext_cmd_line_ptr, 0);
	assert_int_equal(bp->hdr.cmdline_size, BOOT_CMDLINE_MAX - 1);
	assert_string_equal((const char *)g->buf + BOOT_CMDLINE_ADDR, cmdline);
	assert_int_equal(bp->hdr.ramdisk_image, 0x3000000);
	assert_int_equal(bp->hdr.ramdisk_size, 0x12345);
	assert_int_equal(bp->ext_ramdisk_image, 0);
	assert_int_equal(bp->ext_ramdisk_size, 0);
	assert_int_equal(bp->hdr.setup_data, 0);

	assert_int_equal(bp->e820_entries, 2);
	assert_int_equal(bp->e820_table[0].addr, 0);
	assert_int_equal(bp->e820_table[0].size, BOOT_EBDA_START);
	assert_int_equal(bp->e820_table[0].type, E820_RAM);
	assert_int_equal(bp->e820_table[1].addr, BOOT_HIGH_RAM);
	assert_int_equal(bp->e820_table[1].size, GUEST_SIZE - BOOT_HIGH_RAM);
	assert_int_equal(bp->e820_table[1].type, E820_RAM);
	assert_int_equal(bp->e820_table[2].size, 0);

	/* Everything else was zeroed, not left as garbage. */
	assert_int_equal(bp->sentinel, 0);
	for (i = 0; i < sizeof(bp->screen_info); i++)
		assert_int_equal(((const uint8_t *)&bp->screen_info)[i], 0);

	/* No initrd: the ramdisk fields stay zero. */
	assert_int_equal(boot_setup_zero_page(&g->mem, &k, "", 0, 0, &err), 0);
	assert_int_equal(bp->hdr.ramdisk_image, 0);
	assert_int_equal(bp->hdr.ramdisk_size, 0);
	assert_int_equal(g->buf[BOOT_CMDLINE_ADDR], 0);

	/* An initrd above 4 GiB uses the ext_ fields. */
	assert_int_equal(boot_setup_zero_page(&g->mem, &k, "", 0x123456000ULL, 0x1000, &err), 0);
	assert_int_equal(bp->hdr.ramdisk_image, 0x23456000);
	assert_int_equal(bp->ext_ramdisk_image, 1);
}

static void test_zero_page_bzimage(void **state)
{
	struct guest *g = *state;
	const struct boot_params *bp = zero_page(g);
	cleanup_free uint8_t *img = make_bzimage();
	gantry_error_t err = NULL;
	struct setup_header h;
	struct boot_image k;

	bz_get_header(img, &h);
	h.version = 0x020d;
	h.kernel_version = 0x1234;
	h.loadflags |= QUIET_FLAG;
	bz_set_header(img, &h);
	assert_int_equal(boot_load_kernel(&g->mem, img, BZ_SIZE, &k, &err), 0);
	assert_int_equal(boot_setup_zero_page(&g->mem, &k, "quiet", 0, 0, &err), 0);

	/* The kernel's header fields are kept ... */
	assert_int_equal(bp->hdr.version, 0x020d);
	assert_int_equal(bp->hdr.setup_sects, BZ_SETUP_SECTS);
	assert_int_equal(bp->hdr.kernel_version, 0x1234);
	assert_int_equal(bp->hdr.init_size, BZ_INIT_SIZE);
	assert_int_equal(bp->hdr.kernel_alignment, BZ_ALIGN);
	assert_int_equal(bp->hdr.xloadflags, XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G);
	assert_true(bp->hdr.loadflags & QUIET_FLAG);
	/* ... and the loader's are filled in. */
	assert_int_equal(bp->hdr.type_of_loader, 0xff);
	assert_true(bp->hdr.loadflags & LOADED_HIGH);
	assert_true(bp->hdr.loadflags & CAN_USE_HEAP);
	assert_int_equal(bp->hdr.cmd_line_ptr, BOOT_CMDLINE_ADDR);
	assert_int_equal(bp->hdr.cmdline_size, 2047);
	assert_string_equal((const char *)g->buf + BOOT_CMDLINE_ADDR, "quiet");
	assert_int_equal(bp->e820_entries, 2);
	/* Bytes past the setup header in the zero page are zero. */
	assert_int_equal(bp->_pad7[0], 0);
}

static void test_cmdline_too_long(void **state)
{
	struct guest *g = *state;
	struct boot_image k = {
		.format = BOOT_FORMAT_ELF,
		.kernel_end = 0x202000,
		.initrd_addr_max = 0xffffffff,
		.cmdline_size = BOOT_CMDLINE_MAX - 1,
	};
	char *line = xmalloc(BOOT_CMDLINE_MAX + 1);
	gantry_error_t err = NULL;

	memset(line, 'a', BOOT_CMDLINE_MAX);
	line[BOOT_CMDLINE_MAX] = '\0';
	expect_error(boot_setup_zero_page(&g->mem, &k, line, 0, 0, &err), &err,
		     "command line is 2048 bytes");

	line[BOOT_CMDLINE_MAX - 1] = '\0';
	assert_int_equal(boot_setup_zero_page(&g->mem, &k, line, 0, 0, &err), 0);
	assert_int_equal(strlen((const char *)g->buf + BOOT_CMDLINE_ADDR), BOOT_CMDLINE_MAX - 1);

	/* A kernel stating a smaller limit gets it. */
	k.cmdline_size = 255;
	line[256] = '\0';
	expect_error(boot_setup_zero_page(&g->mem, &k, line, 0, 0, &err), &err, "255");
	line[255] = '\0';
	assert_int_equal(boot_setup_zero_page(&g->mem, &k, line, 0, 0, &err), 0);

	/* A kernel stating a larger one is held to ours. */
	k.cmdline_size = 100000;
	memset(line, 'a', BOOT_CMDLINE_MAX);
	expect_error(boot_setup_zero_page(&g->mem, &k, line, 0, 0, &err), &err, "2047");
	free(line);
}

/* ---- GDT and page tables ---- */

static void test_page_tables(void **state)
{
	struct guest *g = *state;
	const uint8_t *pml4 = g->buf + BOOT_PML4_ADDR;
	const uint8_t *pdpt = g->buf + BOOT_PDPT_ADDR;
	const uint8_t *pd = g->buf + BOOT_PD_ADDR;
	gantry_error_t err = NULL;
	unsigned int i;

	assert_int_equal(boot_setup_page_tables(&g->mem, &err), 0);
	assert_null(err);

	assert_int_equal(rd64(pml4), BOOT_PDPT_ADDR | 0x3);
	for (i = 1; i < 512; i++)
		assert_int_equal(rd64(pml4 + 8 * i), 0);

	for (i = 0; i < 4; i++)
		assert_int_equal(rd64(pdpt + 8 * i), (BOOT_PD_ADDR + i * 0x1000ULL) | 0x3);
	for (i = 4; i < 512; i++)
		assert_int_equal(rd64(pdpt + 8 * i), 0);

	for (i = 0; i < 4 * 512; i++)
		assert_int_equal(rd64(pd + 8 * i), (uint64_t)i * 2 * MiB | 0x83);
	assert_int_equal(rd64(pd + 8 * 2047), (4 * GiB - 2 * MiB) | 0x83);
	/* Nothing past the last page directory. */
	assert_int_equal(g->buf[BOOT_PD_ADDR + 4 * 0x1000], GARBAGE);

	/* GDT: null, null, code, data, TSS. */
	assert_int_equal(boot_gdt_entry(0), 0);
	assert_int_equal(boot_gdt_entry(1), 0);
	assert_int_equal(boot_gdt_entry(BOOT_GDT_CODE / 8), 0x00af9b000000ffffULL);
	assert_int_equal(boot_gdt_entry(BOOT_GDT_DATA / 8), 0x00cf93000000ffffULL);
	assert_int_equal(boot_gdt_entry(BOOT_GDT_TSS / 8), 0x0080890000000000ULL);
	for (i = 0; i <= BOOT_GDT_TSS / 8; i++)
		assert_int_equal(rd64(g->buf + BOOT_GDT_ADDR + 8 * i), boot_gdt_entry(i));
	/* The code segment is 64-bit (L) and not 32-bit (D). */
	assert_true(boot_gdt_entry(BOOT_GDT_CODE / 8) & (1ULL << 53));
	assert_false(boot_gdt_entry(BOOT_GDT_CODE / 8) & (1ULL << 54));
}

static void test_too_small_guest(void **state)
{
	uint8_t *buf = xzalloc(0x8000);
	gantry_error_t err = NULL;
	struct guest_mem m;
	struct boot_image k = { .cmdline_size = 255 };

	(void)state;
	guest_mem_init_buffer(&m, buf, 0x8000);
	expect_error(boot_setup_page_tables(&m, &err), &err, "too small");
	expect_error(boot_setup_zero_page(&m, &k, "x", 0, 0, &err), &err, "too small");
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_elf_load, guest_setup, guest_teardown),
		cmocka_unit_test(test_ram_aligned),
		cmocka_unit_test_setup_teardown(test_elf_malformed, guest_setup, guest_teardown),
		cmocka_unit_test_setup_teardown(test_bzimage_load, guest_setup, guest_teardown),
		cmocka_unit_test_setup_teardown(test_bzimage_placement, guest_setup,
						guest_teardown),
		cmocka_unit_test_setup_teardown(test_bzimage_malformed, guest_setup,
						guest_teardown),
		cmocka_unit_test_setup_teardown(test_not_a_kernel, guest_setup, guest_teardown),
		cmocka_unit_test_setup_teardown(test_initrd_placement, guest_setup, guest_teardown),
		cmocka_unit_test(test_e820),
		cmocka_unit_test_setup_teardown(test_zero_page_elf, guest_setup, guest_teardown),
		cmocka_unit_test_setup_teardown(test_zero_page_bzimage, guest_setup,
						guest_teardown),
		cmocka_unit_test_setup_teardown(test_cmdline_too_long, guest_setup, guest_teardown),
		cmocka_unit_test_setup_teardown(test_page_tables, guest_setup, guest_teardown),
		cmocka_unit_test(test_too_small_guest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
