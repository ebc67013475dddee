/* Helpers shared by the `gantry image` subcommands (image.c, image_login.c). */
#ifndef GANTRY_CLI_IMAGE_H
#define GANTRY_CLI_IMAGE_H

#include "cli/flags.h"
#include "common/error.h"

#define IMAGE_HELP_FLAG(p) { "help", FLAG_BOOL, (p), NULL, NULL, "show this help", 0 }

/* Flags and positional arguments in any order; *pos (free it) gets the
 * positional ones. */
int image_parse(const char *cmd, const struct flag *flags, int argc, char **argv, char ***pos,
		int *npos, gantry_error_t *err);
/* Parse and check the count (max -1: any); 0 to go on, -1 when help was
 * shown, else the exit status of a usage error. */
int image_args(const char *cmd, const char *synopsis, const char *text, const struct flag *flags,
	       int argc, char **argv, int min, int max, char ***pos, int *npos);
/* Print the error; the exit status 1. */
int image_fail(gantry_error_t *err);

int image_login(int argc, char **argv);
int image_logout(int argc, char **argv);
int image_credentials(int argc, char **argv);

#endif
