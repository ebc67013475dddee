/* Shared libraries loaded the first time they are needed, by soname, and
 * called through pointers: a process that never needs one never maps or
 * relocates it. Each user lists its functions in an X-macro, defines the
 * pointers with LAZY_DEFINE and a struct lazy_lib with LAZY_ENTRY's
 * table, and calls lazy_load() at its entry points (image/lazylib.h:
 * libarchive, libcurl, libcrypto; net/slirp.c: libslirp). */
#ifndef GANTRY_COMMON_LAZY_H
#define GANTRY_COMMON_LAZY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

#define LAZY_DECLARE(f) extern typeof(f) *sym_##f;
#define LAZY_DEFINE(f)	typeof(f) *sym_##f;
#define LAZY_ENTRY(f)	{ #f, (void **)&sym_##f },

struct lazy_sym {
	const char *name;
	void **slot;
};

struct lazy_lib {
	const char *soname;
	const char *package; /* Debian's, for the error message */
	const struct lazy_sym *syms;
	size_t nr_syms;
	void (*after)(void); /* once loaded; NULL: nothing */
	pthread_mutex_t lock;
	bool tried;
	char failure[512]; /* "" once loaded */
};

/* A struct lazy_lib for soname (from Debian's package) with list, a
 * static array of LAZY_ENTRY's, and any more fields (.after). */
#define LAZY_LIB(so, pkg, list, ...)                                                               \
	{ .soname = so,                                                                            \
	  .package = pkg,                                                                          \
	  .syms = list,                                                                            \
	  .nr_syms = sizeof(list) / sizeof((list)[0]),                                             \
	  .lock = PTHREAD_MUTEX_INITIALIZER,                                                       \
	  __VA_ARGS__ }

/* Load lib and resolve every symbol of its list, once per process (later
 * calls return the first result). -1 with one line naming the library,
 * why it did not load, and the Debian package that has it. */
int lazy_load(struct lazy_lib *lib, gantry_error_t *err);

#endif
