/* dlopen() of libarchive and libcurl on first use (see lazylib.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#include "image/lazylib.h"

/* The sonames the headers we build against describe; the static asserts
 * catch a major version whose soname differs. */
_Static_assert(ARCHIVE_VERSION_NUMBER >= 3000000 && ARCHIVE_VERSION_NUMBER < 4000000,
	       "libarchive 3 is libarchive.so.13");
_Static_assert(LIBCURL_VERSION_MAJOR == 7 || LIBCURL_VERSION_MAJOR == 8,
	       "libcurl 7 and 8 are libcurl.so.4");

#define LAZY_DEFINE(f) typeof(f) *sym_##f;
ARCHIVE_SYMS(LAZY_DEFINE)
CURL_SYMS(LAZY_DEFINE)
#undef LAZY_DEFINE

struct lazy_sym {
	const char *name;
	void **slot;
};

#define LAZY_ENTRY(f) { #f, (void **)&sym_##f },
static const struct lazy_sym archive_syms[] = { ARCHIVE_SYMS(LAZY_ENTRY) };
static const struct lazy_sym curl_syms[] = { CURL_SYMS(LAZY_ENTRY) };
#undef LAZY_ENTRY

struct lazy_lib {
	const char *soname;
	const char *package; /* Debian's, for the error message */
	const struct lazy_sym *syms;
	size_t nr_syms;
	void (*after)(void);
	pthread_mutex_t lock;
	bool tried;
	char failure[512]; /* "" once loaded */
};

static void curl_after(void)
{
	sym_curl_global_init(CURL_GLOBAL_DEFAULT);
}

static struct lazy_lib archive_lib = {
	.soname = "libarchive.so.13",
	.package = "libarchive13",
	.syms = archive_syms,
	.nr_syms = sizeof(archive_syms) / sizeof(archive_syms[0]),
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

static struct lazy_lib curl_lib = {
	.soname = "libcurl.so.4",
	.package = "libcurl4",
	.syms = curl_syms,
	.nr_syms = sizeof(curl_syms) / sizeof(curl_syms[0]),
	.after = curl_after,
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

static void lazy_try(struct lazy_lib *lib)
{
	/* Never unloaded: the handle lives as long as the process. */
	void *h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
	const char *why;

	if (h == NULL) {
		why = dlerror();
		snprintf(lib->failure, sizeof(lib->failure), "cannot load %s (apt-get install %s): %s",
			 lib->soname, lib->package, why ? why : "unknown dlopen error");
		return;
	}
	for (size_t i = 0; i < lib->nr_syms; i++) {
		*lib->syms[i].slot = dlsym(h, lib->syms[i].name);
		if (*lib->syms[i].slot == NULL) {
			snprintf(lib->failure, sizeof(lib->failure),
				 "%s lacks %s: a version older than gantry was built for "
				 "(apt-get install %s)",
				 lib->soname, lib->syms[i].name, lib->package);
			return;
		}
	}
	if (lib->after)
		lib->after();
}

static int lazy_load(struct lazy_lib *lib, gantry_error_t *err)
{
	int ret;

	pthread_mutex_lock(&lib->lock);
	if (!lib->tried) {
		lazy_try(lib);
		lib->tried = true;
	}
	ret = lib->failure[0] ? gantry_error(err, 0, "%s", lib->failure) : 0;
	pthread_mutex_unlock(&lib->lock);
	return ret;
}

int lazy_archive(gantry_error_t *err)
{
	return lazy_load(&archive_lib, err);
}

int lazy_curl(gantry_error_t *err)
{
	return lazy_load(&curl_lib, err);
}
