/* A sandbox as JSON (see sandbox_to_json in lifecycle.h): what `gantry
 * inspect`, `ls --json` and the API show of it. */
#include <stdio.h>

#include "common/files.h"
#include "common/json.h"
#include "common/util.h"
#include "confine/confine.h"
#include "image/config.h"
#include "sandbox/lifecycle.h"
#include "sandbox/state.h"
#include "secret/spec.h"

static json_t *paths_json(const struct sandbox *sb, const char *dir)
{
	static const char *const files[][2] = {
		{ "state", SANDBOX_JSON },
		{ "ctl", SANDBOX_CTL },
		{ "log", SANDBOX_LOG },
		{ "console", SANDBOX_CONSOLE },
	};
	json_t *o = json_pack("{s:s}", "dir", dir);

	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		cleanup_free char *p = NULL;

		xasprintf(&p, "%s/%s", dir, files[i][1]);
		json_object_set_new(o, files[i][0], json_string(p));
	}
	json_object_set_new(o, "rwlayer", jsonh_string_or_null(sb->rwlayer));
	json_object_set_new(o, "image", jsonh_string_or_null(sb->image_path));
	return o;
}

/* isolation.json as its last boot wrote it, or null. */
static json_t *isolation_json(const char *dir)
{
	cleanup_free char *path = NULL, *buf = NULL;
	json_t *j = NULL;
	size_t len;

	xasprintf(&path, "%s/%s", dir, CONFINE_FILE);
	if (read_file_max(path, 1 << 20, &buf, &len, NULL) == 0 && buf)
		j = json_loadb(buf, len, 0, NULL);
	return j ? j : json_null();
}

/* Its secrets' names: never a value, nor where one comes from. */
static json_t *secret_names_json(const struct sandbox *sb)
{
	json_t *a = json_array();

	for (size_t i = 0; i < sb->nr_secrets; i++)
		json_array_append_new(
			a, json_stringn(sb->secrets[i], secret_spec_name_len(sb->secrets[i])));
	return a;
}

json_t *sandbox_to_json(const struct sandbox *sb, const char *dir)
{
	cleanup_free char *own = NULL;
	json_t *iso = NULL, *deg;
	json_t *o =
		json_pack("{s:s,s:s,s:i,s:s?,s:I,s:I,s:I,s:b}", "name", sb->name, "state",
			  sandbox_shown_state(sb), "pid", (int)sb->pid, "image", sb->image,
			  "cpus", (json_int_t)sb->cpus, "mem_mib", (json_int_t)sb->mem_mib,
			  "disk_mib", (json_int_t)sb->disk_mib, "writable", sb->writable);

	json_object_set_new(o, "oneshot", json_boolean(sb->transient));
	json_object_set_new(o, "image_digest", jsonh_string_or_null(sb->image_digest));
	json_object_set_new(o, "rwlayer", jsonh_string_or_null(sb->rwlayer));
	json_object_set_new(o, "rwlayer_managed", json_boolean(sb->rwlayer_managed));
	json_object_set_new(o, "created", jsonh_string_or_null(sb->created));
	json_object_set_new(o, "reason", jsonh_string_or_null(sb->reason));
	json_object_set_new(o, "net", json_boolean(sb->net));
	json_object_set_new(o, "ports", jsonh_from_strv(sb->ports, sb->nr_ports));
	json_object_set(o, "net_policy", sb->net_policy ? sb->net_policy : json_null());
	json_object_set_new(o, "allow_local_net", json_boolean(sb->allow_local_net));
	json_object_set_new(o, "proxy", jsonh_string_or_null(sb->proxy));
	json_object_set_new(o, "no_proxy", jsonh_string_or_null(sb->no_proxy));
	json_object_set_new(o, "proxy_enforce", json_boolean(sb->proxy_enforce));
	json_object_set_new(o, "oauth_custody", json_boolean(sb->oauth_custody));
	json_object_set_new(o, "process_isolation", json_string(confine_mode_name(sb->isolation)));
	json_object_set_new(o, "shares", jsonh_from_strv(sb->shares, sb->nr_shares));
	json_object_set_new(o, "secrets", secret_names_json(sb));
	/* What does not hold, by role; inspect (dir) gives the whole report. */
	if (dir == NULL && sandbox_dir(sb->name, &own, NULL) == 0)
		iso = isolation_json(own);
	else if (dir)
		iso = isolation_json(dir);
	deg = json_object_get(iso, "degraded");
	json_object_set_new(o, "isolation_degraded", deg ? json_incref(deg) : json_null());
	json_object_set_new(o, "saved", json_boolean((dir || own) && sandbox_saved(dir ? dir : own)));
	if (dir == NULL) {
		json_decref(iso);
		return o;
	}
	json_object_set_new(o, "isolation", iso ? iso : json_null());
	if (sb->config) {
		const struct image_config *c = sb->config;

		json_object_set_new(o, "config",
				    json_pack("{s:o,s:o,s:o,s:s,s:s}", "entrypoint",
					      jsonh_from_strv(c->entrypoint, c->nentrypoint), "cmd",
					      jsonh_from_strv(c->cmd, c->ncmd), "env",
					      jsonh_from_strv(c->env, c->nenv), "user",
					      c->user ? c->user : "", "working_dir",
					      c->working_dir ? c->working_dir : ""));
	} else {
		json_object_set_new(o, "config", json_null());
	}
	json_object_set_new(o, "paths", paths_json(sb, dir));
	return o;
}
