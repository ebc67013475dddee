/* What an image says about running it: the process fields of the OCI image
 * config (Env, Entrypoint, Cmd, User, WorkingDir) and the image's own
 * /etc/passwd and /etc/group, which the User field is resolved against when
 * a sandbox starts. Parsed from the image config at conversion, kept in the
 * cache's metadata JSON afterwards. */
#ifndef GANTRY_IMAGE_CONFIG_H
#define GANTRY_IMAGE_CONFIG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* The command when the image names none. */
#define IMAGE_DEFAULT_SHELL "/bin/sh"
/* Entries of Env, Entrypoint, Cmd and diff_ids. */
#define IMAGE_CONFIG_MAX_STRV 4096
/* /etc/passwd and /etc/group larger than this are not kept. */
#define IMAGE_ETC_MAX (1u << 20)

struct image_config {
	char **env; /* NULL-terminated, "KEY=value" */
	size_t nenv;
	char **entrypoint;
	size_t nentrypoint;
	char **cmd;
	size_t ncmd;
	char *user;	   /* "" when the image names none (root) */
	char *working_dir; /* "" when the image names none ("/") */
	char *passwd;	   /* the image's /etc/passwd, or NULL */
	char *group;	   /* the image's /etc/group, or NULL */
};

/* Parse an OCI (or Docker) image config blob. diff_ids (may be NULL) gets
 * rootfs.diff_ids, NULL-terminated. passwd and group stay NULL. */
int image_config_parse(const char *buf, size_t len, struct image_config *cfg, char ***diff_ids,
		       size_t *ndiff_ids, gantry_error_t *err);
void image_config_free(struct image_config *cfg);

/* Our metadata form: {"Env":[...],"Entrypoint":[...],"Cmd":[...],"User":"",
 * "WorkingDir":"","passwd":"...","group":"..."}. */
json_t *image_config_to_json(const struct image_config *cfg);
int image_config_from_json(json_t *j, struct image_config *cfg, gantry_error_t *err);

/* The process argv: Entrypoint, then user_args if there are any (a command
 * after `--`), else Cmd; with neither Entrypoint nor a command, /bin/sh.
 * cfg may be NULL (a prebuilt .erofs). *argv is NULL-terminated (free with
 * strv_free); returns the count. */
size_t image_config_argv(const struct image_config *cfg, char *const *user_args, size_t nuser,
			 char ***argv);

struct image_user {
	uint32_t uid;
	uint32_t gid;
	uint32_t *groups; /* supplementary groups from /etc/group */
	size_t ngroups;
	char *home; /* from /etc/passwd, else "/" */
};

/* Resolve spec ("name", "uid", "name:group", "uid:gid" and mixes; NULL or ""
 * means cfg->user, and "" there means root) against the image's /etc/passwd
 * and /etc/group. A name the files do not list is an error naming it. */
int image_config_user(const struct image_config *cfg, const char *spec, struct image_user *out,
		      gantry_error_t *err);
void image_user_free(struct image_user *u);

#endif
