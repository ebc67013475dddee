/* dlopen() on first use (see lazy.h). */
#include <dlfcn.h>
#include <stdio.h>

#include "common/lazy.h"

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

int lazy_load(struct lazy_lib *lib, gantry_error_t *err)
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
