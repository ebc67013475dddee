/* Intel MultiProcessor Specification 1.4 table (see mptable.h). Layouts
 * follow the spec's chapter 4: a 16-byte floating pointer structure, then
 * the base configuration table header and its entries. */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "common/util.h"
#include "vmm/mptable.h"

#define MP_SPEC_REV 4 /* 1.4 */

#define MP_ENTRY_PROCESSOR 0
#define MP_ENTRY_BUS	   1
#define MP_ENTRY_IOAPIC	   2
#define MP_ENTRY_IOINT	   3
#define MP_ENTRY_LOCALINT  4

#define MP_CPU_ENABLED	  0x01
#define MP_CPU_BSP	  0x02
#define MP_IOAPIC_ENABLED 0x01

#define MP_INT_INT    0
#define MP_INT_NMI    1
#define MP_INT_EXTINT 3

#define MP_LAPIC_VERSION  0x14	/* integrated xAPIC, as KVM's LAPIC reports */
#define MP_IOAPIC_VERSION 0x11	/* KVM's IO-APIC */
#define MP_CPU_SIGNATURE  0x600 /* family 6 */
#define MP_CPU_FEATURES	  0x201 /* CPUID.1:EDX FPU | APIC */
#define MP_ALL_LAPICS	  0xff
#define MP_ISA_BUS	  0
#define MP_IRQ0_PIN	  2 /* the 8254 timer is wired to IO-APIC pin 2 */

struct mp_floating {
	char signature[4]; /* "_MP_" */
	uint32_t physptr;  /* configuration table */
	uint8_t length;	   /* in 16-byte units */
	uint8_t spec_rev;
	uint8_t checksum;
	uint8_t feature[5]; /* 0: a configuration table is present */
} __attribute__((packed));

struct mp_config {
	char signature[4]; /* "PCMP" */
	uint16_t length;   /* base table including this header */
	uint8_t spec_rev;
	uint8_t checksum;
	char oem_id[8];
	char product_id[12];
	uint32_t oem_table;
	uint16_t oem_table_size;
	uint16_t entry_count;
	uint32_t lapic_addr;
	uint16_t ext_length;
	uint8_t ext_checksum;
	uint8_t reserved;
} __attribute__((packed));

struct mp_processor {
	uint8_t type;
	uint8_t lapic_id;
	uint8_t lapic_version;
	uint8_t flags;
	uint32_t signature;
	uint32_t features;
	uint32_t reserved[2];
} __attribute__((packed));

struct mp_bus {
	uint8_t type;
	uint8_t bus_id;
	char bus_type[6];
} __attribute__((packed));

struct mp_ioapic {
	uint8_t type;
	uint8_t id;
	uint8_t version;
	uint8_t flags;
	uint32_t addr;
} __attribute__((packed));

/* I/O and local interrupt assignment entries share one layout. */
struct mp_intsrc {
	uint8_t type;
	uint8_t irq_type;
	uint16_t flags; /* 0: polarity and trigger conform to the bus */
	uint8_t src_bus;
	uint8_t src_irq;
	uint8_t dst_apic;
	uint8_t dst_pin; /* IO-APIC INTIN# or LAPIC LINTIN# */
} __attribute__((packed));

static_assert(sizeof(struct mp_floating) == 16, "MP floating pointer is 16 bytes");
static_assert(sizeof(struct mp_config) == 44, "MP config header is 44 bytes");
static_assert(sizeof(struct mp_processor) == 20, "MP processor entry is 20 bytes");
static_assert(sizeof(struct mp_bus) == 8, "MP bus entry is 8 bytes");
static_assert(sizeof(struct mp_ioapic) == 8, "MP IO-APIC entry is 8 bytes");
static_assert(sizeof(struct mp_intsrc) == 8, "MP interrupt entry is 8 bytes");

/* The 8259 PIC's output on every LAPIC's LINT0, NMI on LINT1. */
static const struct mp_intsrc local_ints[] = {
	{ .type = MP_ENTRY_LOCALINT,
	  .irq_type = MP_INT_EXTINT,
	  .src_bus = MP_ISA_BUS,
	  .dst_apic = MP_ALL_LAPICS,
	  .dst_pin = 0 },
	{ .type = MP_ENTRY_LOCALINT,
	  .irq_type = MP_INT_NMI,
	  .src_bus = MP_ISA_BUS,
	  .dst_apic = MP_ALL_LAPICS,
	  .dst_pin = 1 },
};
#define MP_LOCAL_INTS ARRAY_SIZE(local_ints)

static size_t config_size(unsigned int ncpus)
{
	return sizeof(struct mp_config) + ncpus * sizeof(struct mp_processor) +
	       sizeof(struct mp_bus) + sizeof(struct mp_ioapic) +
	       (MPTABLE_ISA_IRQS + MP_LOCAL_INTS) * sizeof(struct mp_intsrc);
}

size_t mptable_size(unsigned int ncpus)
{
	return sizeof(struct mp_floating) + config_size(ncpus);
}

static uint8_t checksum(const uint8_t *p, size_t len)
{
	uint8_t sum = 0;

	while (len--)
		sum += *p++;
	return (uint8_t)-sum;
}

/* Append one entry at *off in buf. */
static void put(uint8_t *buf, size_t *off, const void *entry, size_t len)
{
	memcpy(buf + *off, entry, len);
	*off += len;
}

int mptable_write(struct guest_mem *m, uint64_t gpa, unsigned int ncpus, gantry_error_t *err)
{
	cleanup_free uint8_t *buf = NULL;
	size_t size, off = 0, cfg_off = sizeof(struct mp_floating);
	struct mp_floating fp;
	struct mp_config cfg;
	struct mp_bus bus;
	struct mp_ioapic ioapic;
	unsigned int i;
	uint8_t ioapic_id = (uint8_t)ncpus;
	void *dst;

	if (ncpus == 0 || ncpus > MPTABLE_MAX_CPUS)
		return gantry_error(err, 0, "MP table: %u vCPUs is not between 1 and %u", ncpus,
				    MPTABLE_MAX_CPUS);
	size = mptable_size(ncpus);
	dst = guest_ptr(m, gpa, size);
	if (dst == NULL || gpa + cfg_off > UINT32_MAX)
		return gantry_error(err, 0, "MP table: %zu bytes at 0x%llx do not fit in guest RAM",
				    size, (unsigned long long)gpa);

	buf = xzalloc(size);

	memset(&fp, 0, sizeof(fp));
	memcpy(fp.signature, "_MP_", 4);
	fp.physptr = (uint32_t)(gpa + cfg_off);
	fp.length = sizeof(fp) / 16;
	fp.spec_rev = MP_SPEC_REV;
	put(buf, &off, &fp, sizeof(fp));

	memset(&cfg, 0, sizeof(cfg));
	memcpy(cfg.signature, "PCMP", 4);
	cfg.length = (uint16_t)config_size(ncpus);
	cfg.spec_rev = MP_SPEC_REV;
	memcpy(cfg.oem_id, "GANTRY  ", sizeof(cfg.oem_id));
	memcpy(cfg.product_id, "MICROVM     ", sizeof(cfg.product_id));
	cfg.entry_count = (uint16_t)(ncpus + 2 + MPTABLE_ISA_IRQS + MP_LOCAL_INTS);
	cfg.lapic_addr = MPTABLE_LAPIC_ADDR;
	put(buf, &off, &cfg, sizeof(cfg));

	for (i = 0; i < ncpus; i++) {
		struct mp_processor cpu = {
			.type = MP_ENTRY_PROCESSOR,
			.lapic_id = (uint8_t)i,
			.lapic_version = MP_LAPIC_VERSION,
			.flags = MP_CPU_ENABLED | (i == 0 ? MP_CPU_BSP : 0),
			.signature = MP_CPU_SIGNATURE,
			.features = MP_CPU_FEATURES,
		};

		put(buf, &off, &cpu, sizeof(cpu));
	}

	bus = (struct mp_bus){ .type = MP_ENTRY_BUS, .bus_id = MP_ISA_BUS };
	memcpy(bus.bus_type, "ISA   ", sizeof(bus.bus_type));
	put(buf, &off, &bus, sizeof(bus));

	ioapic = (struct mp_ioapic){
		.type = MP_ENTRY_IOAPIC,
		.id = ioapic_id,
		.version = MP_IOAPIC_VERSION,
		.flags = MP_IOAPIC_ENABLED,
		.addr = MPTABLE_IOAPIC_ADDR,
	};
	put(buf, &off, &ioapic, sizeof(ioapic));

	for (i = 0; i < MPTABLE_ISA_IRQS; i++) {
		struct mp_intsrc irq = {
			.type = MP_ENTRY_IOINT,
			.irq_type = MP_INT_INT,
			.src_bus = MP_ISA_BUS,
			.src_irq = (uint8_t)i,
			.dst_apic = ioapic_id,
			.dst_pin = (uint8_t)(i == 0 ? MP_IRQ0_PIN : i),
		};

		put(buf, &off, &irq, sizeof(irq));
	}

	put(buf, &off, local_ints, sizeof(local_ints));
	assert(off == size);

	buf[cfg_off + offsetof(struct mp_config, checksum)] =
		checksum(buf + cfg_off, size - cfg_off);
	buf[offsetof(struct mp_floating, checksum)] = checksum(buf, sizeof(fp));

	memcpy(dst, buf, size);
	return 0;
}
