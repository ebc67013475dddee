/* What every part of gantry-init may call, and which calls nothing else of
 * it: console lines (plain ones, and with gantry.debug=1 timestamped debug
 * ones), the clock, and formatting a path without truncating it. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "guest/guest.h"

void guest_log(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	/* One write per line: the console is a slow UART. */
	dprintf(2, "gantry-init: %s\n", buf);
}

int guest_pathf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

uint64_t guest_now_ms(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* With gantry.debug=1 (or --debug): what happened when, in uptime ms. */
void guest_debug(const struct guest *g, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	if (!g->cfg.debug)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	guest_log("[%llu] %s", (unsigned long long)guest_now_ms(CLOCK_BOOTTIME), buf);
}
