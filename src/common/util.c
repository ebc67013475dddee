/* Checked allocation, cleanup helpers and full reads/writes. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

static void oom(void)
{
	static const char msg[] = "gantry: out of memory\n";

	(void)!write(2, msg, sizeof(msg) - 1);
	abort();
}

void *xmalloc(size_t size)
{
	void *p = malloc(size ? size : 1);

	if (p == NULL)
		oom();
	return p;
}

void *xzalloc(size_t size)
{
	void *p = calloc(1, size ? size : 1);

	if (p == NULL)
		oom();
	return p;
}

void *xrealloc(void *old, size_t size)
{
	void *p = realloc(old, size ? size : 1);

	if (p == NULL)
		oom();
	return p;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s);

	if (p == NULL)
		oom();
	return p;
}

char *xstrndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *p = xmalloc(len + 1);

	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

int xasprintf(char **out, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vasprintf(out, fmt, ap);
	va_end(ap);
	if (r < 0)
		oom();
	return r;
}

void cleanup_freep(void *p)
{
	free(*(void **)p);
}

void cleanup_closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}

void cleanup_fclosep(void *f)
{
	FILE **fp = f;

	if (*fp)
		fclose(*fp);
}

int parse_fd(const char *s, int *out)
{
	uint64_t v;

	if (s == NULL || parse_u64(s, INT_MAX, &v) < 0)
		return -1;
	*out = (int)v;
	return 0;
}

int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (s == NULL || *s == '\0')
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -2;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (v > max)
		return -2;
	*out = v;
	return 0;
}

int read_full(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len > 0) {
		ssize_t r = read(fd, p, len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0) {
			errno = EIO;
			return -1;
		}
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

int pwrite_full(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t r = pwrite(fd, p, len, off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		len -= (size_t)r;
		off += r;
	}
	return 0;
}

int pread_full(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;

	while (len > 0) {
		ssize_t r = pread(fd, p, len, off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = EIO;
			return -1;
		}
		p += r;
		len -= (size_t)r;
		off += r;
	}
	return 0;
}

int write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t r = write(fd, p, len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

double now_ms_frac(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
