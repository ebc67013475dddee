/* What the environment configures, resolved once: Gantry's own variables
 * (GANTRY_HOME, GANTRY_IMAGES, GANTRY_ASSETS, GANTRY_PROCESS_ISOLATION,
 * ...) and the few of the system's it reads (HOME, DOCKER_CONFIG,
 * XDG_RUNTIME_DIR, TMPDIR). The library asks gantry_setting() and never
 * getenv(), so a front end decides them once, before any thread: from the
 * environment (the default, read at the first ask or by
 * gantry_settings_load), or its own values (gantry_settings_set), which
 * the workers it starts get as their environment too (child_env_only). */
#ifndef GANTRY_COMMON_SETTINGS_H
#define GANTRY_COMMON_SETTINGS_H

#include <stdbool.h>

#include "common/error.h"

/* name's value, or NULL when unset or empty; name must be one of the
 * settings (settings.c lists them: another aborts, a programming error).
 * The string lives until the next load or set. */
const char *gantry_setting(const char *name);
/* (Re)read every setting from the environment. */
void gantry_settings_load(void);
/* Give name its value (NULL: unset) instead of the environment's; an
 * unknown name is an error. */
int gantry_settings_set(const char *name, const char *value, gantry_error_t *err);
/* Whether name is one of the settings. */
bool gantry_setting_known(const char *name);

#endif
