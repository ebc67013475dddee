/* Port-I/O and MMIO dispatch (see bus.h). */
#include <string.h>

#include "common/util.h"
#include "vmm/bus.h"

int bus_register(struct bus *b, uint64_t base, uint64_t len, bus_access_fn fn, void *opaque,
		 const char *name, gantry_error_t *err)
{
	unsigned int i;

	if (len == 0 || base + len < base)
		return gantry_error(err, 0, "%s: empty or wrapping range", name);
	for (i = 0; i < b->nr; i++) {
		const struct bus_range *r = &b->ranges[i];

		if (base < r->base + r->len && r->base < base + len)
			return gantry_error(err, 0, "%s at %#llx overlaps %s", name,
					    (unsigned long long)base, r->name);
		if (r->base > base)
			break;
	}
	b->ranges = xrealloc(b->ranges, (b->nr + 1) * sizeof(*b->ranges));
	memmove(&b->ranges[i + 1], &b->ranges[i], (b->nr - i) * sizeof(*b->ranges));
	b->ranges[i] = (struct bus_range){ base, len, fn, opaque, name };
	b->nr++;
	return 0;
}

bool bus_dispatch(const struct bus *b, uint64_t addr, uint8_t *data, uint32_t len, bool is_write)
{
	unsigned int lo = 0, hi = b->nr;

	while (lo < hi) {
		unsigned int mid = lo + (hi - lo) / 2;
		const struct bus_range *r = &b->ranges[mid];

		if (addr < r->base) {
			hi = mid;
		} else if (addr - r->base >= r->len) {
			lo = mid + 1;
		} else {
			if (len > r->len - (addr - r->base))
				return false;
			r->fn(r->opaque, addr - r->base, data, len, is_write);
			return true;
		}
	}
	return false;
}

void bus_free(struct bus *b)
{
	free(b->ranges);
	b->ranges = NULL;
	b->nr = 0;
}
