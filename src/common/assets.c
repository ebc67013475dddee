/* Locating the guest assets (see assets.h). */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/assets.h"
#include "common/settings.h"
#include "common/util.h"

static int assets_dir(char **out, gantry_error_t *err)
{
	const char *env = gantry_setting("GANTRY_ASSETS");
	char self[PATH_MAX], *dir;
	struct stat st;
	ssize_t n;

	if (env && *env) {
		*out = xstrdup(env);
		return 0;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		return gantry_error_errno(err, "cannot find the gantry binary");
	self[n] = '\0';
	/* A build tree's binary has them beside it; an installed one under
	 * PREFIX/lib/gantry, PREFIX/bin being where it is. */
	dir = dirname(self);
	xasprintf(out, "%s/assets", dir);
	if (stat(*out, &st) == 0 && S_ISDIR(st.st_mode))
		return 0;
	free(*out);
	xasprintf(out, "%s/%s", dirname(dir), ASSETS_INSTALLED);
	return 0;
}

int assets_path(const char *name, char **out, gantry_error_t *err)
{
	cleanup_free char *dir = NULL;
	struct stat st;

	if (assets_dir(&dir, err) < 0)
		return -1;
	xasprintf(out, "%s/%s", dir, name);
	if (stat(*out, &st) < 0) {
		gantry_error_errno(err, "guest asset `%s` (build it with `make assets` and install "
					"it with `make install`, or set GANTRY_ASSETS)",
				   *out);
		free(*out);
		*out = NULL;
		return -1;
	}
	return 0;
}
