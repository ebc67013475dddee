/* Small shared helpers: checked allocation and GCC cleanup attributes, in the
 * style of crun (cleanup_free, cleanup_close). */
#ifndef GANTRY_COMMON_UTIL_H
#define GANTRY_COMMON_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#define ARRAY_SIZE(a)	 (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b)	 ((a) < (b) ? (a) : (b))
#define MAX(a, b)	 ((a) > (b) ? (a) : (b))
/* The struct of type t whose member m p points to. */
#define container_of(p, t, m) ((t *)(void *)((char *)(p) - offsetof(t, m)))
#define ALIGN_UP(x, a)	 (((x) + ((a)-1)) & ~((__typeof__(x))(a)-1))
#define ALIGN_DOWN(x, a) ((x) & ~((__typeof__(x))(a)-1))

#define KiB (1024ULL)
#define MiB (1024ULL * KiB)
#define GiB (1024ULL * MiB)

/* Allocation failure aborts with a message; nothing else aborts. */
void *xmalloc(size_t size);
void *xzalloc(size_t size);
void *xrealloc(void *p, size_t size);
char *xstrdup(const char *s);
/* The first n bytes of s (fewer where s ends first), NUL-terminated. */
char *xstrndup(const char *s, size_t n);
int xasprintf(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void cleanup_freep(void *p);
void cleanup_closep(int *fd);
void cleanup_fclosep(void *f);

#define cleanup_free   __attribute__((cleanup(cleanup_freep)))
#define cleanup_close  __attribute__((cleanup(cleanup_closep)))
#define cleanup_fclose __attribute__((cleanup(cleanup_fclosep)))

/* Close *fd if open and mark it closed. Inline: the guest's static
 * programs use it without linking this folder. */
static inline void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Hand ownership out of a cleanup variable. */
#define steal_pointer(pp)                                                                          \
	({                                                                                         \
		__typeof__(*(pp)) _p = *(pp);                                                      \
		*(pp) = NULL;                                                                      \
		_p;                                                                                \
	})
#define steal_fd(fdp)                                                                              \
	({                                                                                         \
		int _fd = *(fdp);                                                                  \
		*(fdp) = -1;                                                                       \
		_fd;                                                                               \
	})

/* Parse a decimal unsigned integer: 0, or -1 when s is not one, -2 when it
 * is larger than max. */
int parse_u64(const char *s, uint64_t max, uint64_t *out);
/* A descriptor's number as a worker's argument gives it (s may be NULL):
 * 0, or -1 when it is not one. */
int parse_fd(const char *s, int *out);

/* Read/write the whole buffer, retrying on EINTR and short transfers. */
int read_full(int fd, void *buf, size_t len);
int write_full(int fd, const void *buf, size_t len);
/* The same at offset off (pwrite); 0, or -1 with errno (0 on a short one). */
int pwrite_full(int fd, const void *buf, size_t len, off_t off);
/* pread all of len at off; 0, or -1 with errno (EIO: the file ended first). */
int pread_full(int fd, void *buf, size_t len, off_t off);

/* CLOCK_MONOTONIC in milliseconds: whole ones for deadlines, fractional
 * ones for timings. */
uint64_t now_ms(void);
double now_ms_frac(void);

#endif
