/* The settings, resolved once (see settings.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/settings.h"
#include "common/util.h"

static const char *const names[] = {
	"GANTRY_HOME",
	"GANTRY_IMAGES",
	"GANTRY_ASSETS",
	"GANTRY_LOG",
	"GANTRY_KVM_DEVICE",
	"GANTRY_PROCESS_ISOLATION",
	"GANTRY_SECCOMP",
	"GANTRY_BOOT_TIMING",
	"GANTRY_GUEST_PROFILE",
	"GANTRY_FS_THREADS",
	"GANTRY_NET_DNS",
	"GANTRY_INSECURE_REGISTRIES",
	"HOME",
	"DOCKER_CONFIG",
	"XDG_RUNTIME_DIR",
	"TMPDIR",
	"SSL_CERT_FILE",
};
static char *values[ARRAY_SIZE(names)];

static pthread_once_t loaded = PTHREAD_ONCE_INIT;

static int find(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (strcmp(names[i], name) == 0)
			return (int)i;
	return -1;
}

static void put(size_t i, const char *value)
{
	free(values[i]);
	values[i] = value && *value ? xstrdup(value) : NULL;
}

static void read_all(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		put(i, getenv(names[i]));
}

static void nothing(void)
{
}

void gantry_settings_load(void)
{
	/* Loaded now: the first gantry_setting() reads nothing again. */
	pthread_once(&loaded, nothing);
	read_all();
}

bool gantry_setting_known(const char *name)
{
	return find(name) >= 0;
}

const char *gantry_setting(const char *name)
{
	int i = find(name);

	if (i < 0)
		abort(); /* not a setting: a programming error */
	pthread_once(&loaded, read_all);
	return values[i];
}

int gantry_settings_set(const char *name, const char *value, gantry_error_t *err)
{
	int i = find(name);

	if (i < 0)
		return gantry_error(err, EINVAL, "`%s` is not a setting", name);
	pthread_once(&loaded, read_all);
	put((size_t)i, value);
	return 0;
}
