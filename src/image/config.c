/* Image config fields, the process argv and User resolution (see config.h). */
#include <stdbool.h>
#include <string.h>

#include "common/json.h"
#include "common/util.h"
#include "image/config.h"
#include "image/digest.h"

/* Supplementary groups kept for one user. */
#define IMAGE_MAX_GROUPS 256
/* Names in errors come from the image: keep them short. */
#define NAME_SHOWN 64

void image_config_free(struct image_config *cfg)
{
	strv_free(cfg->env);
	strv_free(cfg->entrypoint);
	strv_free(cfg->cmd);
	free(cfg->user);
	free(cfg->working_dir);
	free(cfg->passwd);
	free(cfg->group);
	*cfg = (struct image_config){ 0 };
}

/* The process fields, in the image config's "config" object or our own
 * metadata object (same names). */
static int fields_parse(json_t *c, struct image_config *cfg, gantry_error_t *err)
{
	if (c && !json_is_null(c) && !json_is_object(c))
		return gantry_error(err, 0, "`config` is not an object");
	if (jsonh_strv(c, "Env", IMAGE_CONFIG_MAX_STRV, &cfg->env, &cfg->nenv, err) < 0 ||
	    jsonh_strv(c, "Entrypoint", IMAGE_CONFIG_MAX_STRV, &cfg->entrypoint, &cfg->nentrypoint,
		       err) < 0 ||
	    jsonh_strv(c, "Cmd", IMAGE_CONFIG_MAX_STRV, &cfg->cmd, &cfg->ncmd, err) < 0 ||
	    jsonh_string(c, "User", false, &cfg->user, err) < 0 ||
	    jsonh_string(c, "WorkingDir", false, &cfg->working_dir, err) < 0)
		return -1;
	if (cfg->user == NULL)
		cfg->user = xstrdup("");
	if (cfg->working_dir == NULL)
		cfg->working_dir = xstrdup("");
	for (size_t i = 0; i < cfg->nenv; i++)
		if (strchr(cfg->env[i], '=') == NULL || cfg->env[i][0] == '=')
			return gantry_error(err, 0, "Env entry `%.*s` is not KEY=value", NAME_SHOWN,
					    cfg->env[i]);
	return 0;
}

static int diff_ids_parse(json_t *j, char ***out, size_t *n, gantry_error_t *err)
{
	json_t *rootfs = json_object_get(j, "rootfs");

	if (rootfs == NULL || json_is_null(rootfs))
		return 0;
	if (!json_is_object(rootfs))
		return gantry_error(err, 0, "`rootfs` is not an object");
	if (jsonh_strv(rootfs, "diff_ids", IMAGE_CONFIG_MAX_STRV, out, n, err) < 0)
		return -1;
	for (size_t i = 0; i < *n; i++)
		if (digest_check((*out)[i], err) < 0)
			return gantry_error_prefix(err, "diff_ids[%zu]", i);
	return 0;
}

int image_config_parse(const char *buf, size_t len, struct image_config *cfg, char ***diff_ids,
		       size_t *ndiff_ids, gantry_error_t *err)
{
	json_t *j = jsonh_load(buf, len, "image config", err);
	char **ids = NULL;
	size_t nids = 0;
	int ret = -1;

	*cfg = (struct image_config){ 0 };
	if (j == NULL)
		return -1;
	if (!json_is_object(j)) {
		gantry_error(err, 0, "image config is not a JSON object");
		goto out;
	}
	if (fields_parse(json_object_get(j, "config"), cfg, err) < 0 ||
	    diff_ids_parse(j, &ids, &nids, err) < 0) {
		gantry_error_prefix(err, "image config");
		goto out;
	}
	if (diff_ids) {
		*diff_ids = steal_pointer(&ids);
		*ndiff_ids = nids;
	}
	ret = 0;
out:
	strv_free(ids);
	json_decref(j);
	if (ret < 0) {
		image_config_free(cfg);
		gantry_error_sanitize(err, 0);
	}
	return ret;
}

json_t *image_config_to_json(const struct image_config *cfg)
{
	json_t *j = json_object();

	json_object_set_new(j, "Env", jsonh_from_strv(cfg->env, cfg->nenv));
	json_object_set_new(j, "Entrypoint",
			    cfg->entrypoint ? jsonh_from_strv(cfg->entrypoint, cfg->nentrypoint)
					    : json_null());
	json_object_set_new(j, "Cmd",
			    cfg->cmd ? jsonh_from_strv(cfg->cmd, cfg->ncmd) : json_null());
	json_object_set_new(j, "User", json_string(cfg->user ? cfg->user : ""));
	json_object_set_new(j, "WorkingDir", json_string(cfg->working_dir ? cfg->working_dir : ""));
	json_object_set_new(j, "passwd", jsonh_string_or_null(cfg->passwd));
	json_object_set_new(j, "group", jsonh_string_or_null(cfg->group));
	return j;
}

int image_config_from_json(json_t *j, struct image_config *cfg, gantry_error_t *err)
{
	*cfg = (struct image_config){ 0 };
	if (!json_is_object(j))
		return gantry_error(err, 0, "config is not an object");
	if (fields_parse(j, cfg, err) < 0 ||
	    jsonh_string(j, "passwd", false, &cfg->passwd, err) < 0 ||
	    jsonh_string(j, "group", false, &cfg->group, err) < 0) {
		image_config_free(cfg);
		return gantry_error_sanitize(err, 0);
	}
	return 0;
}

size_t image_config_argv(const struct image_config *cfg, char *const *user_args, size_t nuser,
			 char ***argv)
{
	size_t nent = cfg ? cfg->nentrypoint : 0;
	char *const *rest = nuser ? user_args : cfg ? cfg->cmd : NULL;
	size_t nrest = nuser ? nuser : cfg ? cfg->ncmd : 0;
	char **v;

	if (nent + nrest == 0) {
		v = xzalloc(2 * sizeof(*v));
		v[0] = xstrdup(IMAGE_DEFAULT_SHELL);
		*argv = v;
		return 1;
	}
	v = xzalloc((nent + nrest + 1) * sizeof(*v));
	for (size_t i = 0; i < nent; i++)
		v[i] = xstrdup(cfg->entrypoint[i]);
	for (size_t i = 0; i < nrest; i++)
		v[nent + i] = xstrdup(rest[i]);
	*argv = v;
	return nent + nrest;
}

/* /etc/passwd and /etc/group lines: fields split at ':', at most max. */
struct etc_line {
	char *buf;
	char *f[7];
	size_t n;
};

/* Split the next line of *p; false at the end of the file. */
static bool etc_next(const char **p, struct etc_line *l, size_t max)
{
	const char *s = *p, *nl;
	size_t len;

	free(l->buf);
	*l = (struct etc_line){ 0 };
	if (s == NULL || *s == '\0')
		return false;
	nl = strchr(s, '\n');
	len = nl ? (size_t)(nl - s) : strlen(s);
	l->buf = xmalloc(len + 1);
	memcpy(l->buf, s, len);
	l->buf[len] = '\0';
	*p = s + len + (nl != NULL);
	for (char *c = l->buf; l->n < max;) {
		char *colon = strchr(c, ':');

		l->f[l->n++] = c;
		if (colon == NULL)
			break;
		*colon = '\0';
		c = colon + 1;
	}
	return true;
}

static bool parse_id(const char *s, uint32_t *out)
{
	uint64_t v;

	if (s == NULL || *s == '\0' || parse_u64(s, UINT32_MAX - 1, &v) < 0)
		return false;
	*out = (uint32_t)v;
	return true;
}

static bool is_number(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

struct pw {
	char *name;
	uint32_t uid, gid;
	char *home;
};

/* Find a passwd entry by name (or by uid when name is NULL). */
static bool pw_find(const char *passwd, const char *name, uint32_t uid, struct pw *out)
{
	struct etc_line l = { 0 };
	const char *p = passwd;
	bool found = false;

	while (!found && etc_next(&p, &l, 7)) {
		uint32_t u, g;

		if (l.n < 4 || l.f[0][0] == '\0' || l.f[0][0] == '#' || l.f[0][0] == '+' ||
		    l.f[0][0] == '-' || !parse_id(l.f[2], &u) || !parse_id(l.f[3], &g))
			continue;
		if (name ? strcmp(l.f[0], name) != 0 : u != uid)
			continue;
		out->name = xstrdup(l.f[0]);
		out->uid = u;
		out->gid = g;
		out->home = xstrdup(l.n >= 6 && l.f[5][0] ? l.f[5] : "/");
		found = true;
	}
	free(l.buf);
	return found;
}

static bool gr_find(const char *group, const char *name, uint32_t *gid)
{
	struct etc_line l = { 0 };
	const char *p = group;
	bool found = false;

	while (!found && etc_next(&p, &l, 4)) {
		if (l.n < 3 || l.f[0][0] == '#' || strcmp(l.f[0], name) != 0)
			continue;
		found = parse_id(l.f[2], gid);
	}
	free(l.buf);
	return found;
}

static bool member_of(char *members, const char *user)
{
	char *save = NULL;

	for (char *m = strtok_r(members, ",", &save); m; m = strtok_r(NULL, ",", &save))
		if (strcmp(m, user) == 0)
			return true;
	return false;
}

static void supplementary(const char *group, const char *user, struct image_user *u)
{
	struct etc_line l = { 0 };
	const char *p = group;

	while (etc_next(&p, &l, 4) && u->ngroups < IMAGE_MAX_GROUPS) {
		uint32_t gid;
		bool dup = false;

		if (l.n < 4 || l.f[0][0] == '#' || !parse_id(l.f[2], &gid) || gid == u->gid ||
		    !member_of(l.f[3], user))
			continue;
		for (size_t i = 0; i < u->ngroups; i++)
			dup |= u->groups[i] == gid;
		if (dup)
			continue;
		u->groups = xrealloc(u->groups, (u->ngroups + 1) * sizeof(*u->groups));
		u->groups[u->ngroups++] = gid;
	}
	free(l.buf);
}

void image_user_free(struct image_user *u)
{
	free(u->groups);
	free(u->home);
	*u = (struct image_user){ 0 };
}

static int user_resolve(const struct image_config *cfg, const char *spec, struct image_user *out,
			gantry_error_t *err)
{
	const char *passwd = cfg ? cfg->passwd : NULL, *group = cfg ? cfg->group : NULL;
	cleanup_free char *copy = NULL;
	char *user, *grp;
	struct pw pw = { 0 };
	bool have_pw;

	*out = (struct image_user){ 0 };
	if (spec == NULL || *spec == '\0')
		spec = cfg && cfg->user ? cfg->user : "";
	copy = xstrdup(*spec ? spec : "0");
	user = copy;
	grp = strchr(copy, ':');
	if (grp)
		*grp++ = '\0';
	if (*user == '\0' || (grp && *grp == '\0'))
		return gantry_error(err, 0,
				    "user `%.*s`: expected user, uid, user:group or uid:gid",
				    NAME_SHOWN, spec);
	if (is_number(user)) {
		if (!parse_id(user, &out->uid))
			return gantry_error(err, 0, "user `%.*s`: uid out of range", NAME_SHOWN,
					    user);
		have_pw = passwd && pw_find(passwd, NULL, out->uid, &pw);
	} else {
		if (passwd == NULL)
			return gantry_error(err, 0, "user `%.*s`: the image has no /etc/passwd",
					    NAME_SHOWN, user);
		have_pw = pw_find(passwd, user, 0, &pw);
		if (!have_pw)
			return gantry_error(err, 0, "user `%.*s`: not in the image's /etc/passwd",
					    NAME_SHOWN, user);
		out->uid = pw.uid;
	}
	out->gid = have_pw ? pw.gid : 0;
	out->home = xstrdup(have_pw ? pw.home : "/");
	if (grp && is_number(grp)) {
		if (!parse_id(grp, &out->gid))
			goto range;
	} else if (grp) {
		if (group == NULL || !gr_find(group, grp, &out->gid)) {
			gantry_error(err, 0, "group `%.*s`: not in the image's /etc/group",
				     NAME_SHOWN, grp);
			goto fail;
		}
	} else if (have_pw && group) {
		supplementary(group, pw.name, out);
	}
	free(pw.name);
	free(pw.home);
	return 0;
range:
	gantry_error(err, 0, "group `%.*s`: gid out of range", NAME_SHOWN, grp);
fail:
	free(pw.name);
	free(pw.home);
	image_user_free(out);
	return -1;
}

int image_config_user(const struct image_config *cfg, const char *spec, struct image_user *out,
		      gantry_error_t *err)
{
	if (user_resolve(cfg, spec, out, err) < 0)
		return gantry_error_sanitize(err, 0); /* names come from the image or the user */
	return 0;
}
