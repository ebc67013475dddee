/* Pull progress lines (see progress.h). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "image/progress.h"

static double elapsed(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

static void human(char *buf, size_t size, double v)
{
	if (v >= (double)GiB)
		snprintf(buf, size, "%.2f GiB", v / (double)GiB);
	else if (v >= (double)MiB)
		snprintf(buf, size, "%.1f MiB", v / (double)MiB);
	else
		snprintf(buf, size, "%.0f KiB", v / (double)KiB);
}

static void draw(struct progress *p, const char *end)
{
	char done[32], total[32] = "?", rate[32];
	struct timespec now;
	double t;

	clock_gettime(CLOCK_MONOTONIC, &now);
	t = elapsed(&p->start, &now);
	human(done, sizeof(done), (double)p->done);
	if (p->total >= 0)
		human(total, sizeof(total), (double)p->total);
	human(rate, sizeof(rate), t > 0 ? (double)p->done / t : 0);
	dprintf(p->fd, "\r  %-20s %10s / %-10s %10s/s%s\033[K", p->label, done, total, rate, end);
	p->drawn = now;
}

void progress_start(struct progress *p, int fd, const char *label, int64_t total)
{
	*p = (struct progress){ .on = fd > 0 && isatty(fd), .fd = fd, .total = total };
	snprintf(p->label, sizeof(p->label), "%s", label);
	clock_gettime(CLOCK_MONOTONIC, &p->start);
	if (p->on)
		draw(p, "");
}

void progress_add(struct progress *p, uint64_t n)
{
	struct timespec now;

	p->done += n;
	if (!p->on)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (elapsed(&p->drawn, &now) >= 1.0 / PROGRESS_HZ)
		draw(p, "");
}

void progress_end(struct progress *p, bool ok)
{
	if (p->on) {
		draw(p, ok ? "  done" : "  failed");
		(void)!write(p->fd, "\n", 1);
	}
	p->on = false;
}
