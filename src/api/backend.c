/* The manager API's backend over the lifecycle (sandbox/lifecycle.h):
 * what `gantry serve` runs. A CreateRequest becomes the struct
 * sandbox_opts `gantry start` would make; the lifecycle's option names
 * become the request's fields in errors (api_field_of). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/api.h"
#include "common/text.h"
#include "common/util.h"
#include "sandbox/lifecycle.h"
#include "secret/spec.h"

const char *api_field_of(const char *option)
{
	static const struct {
		const char *option, *field;
	} fields[] = {
		{ "cpus", "cpus" },
		{ "mem_mib", "memoryMiB" },
		{ "disk_mib", "diskSizeMiB" },
		{ "rwlayer", "rwlayer" },
		{ "ports", "publish" },
		{ "shares", "shares" },
		{ "net_policy", "networkPolicy" },
		{ "allow_local_net", "allowLocalNetwork" },
		{ "proxy", "proxy" },
		{ "no_proxy", "noProxy" },
		{ "proxy_enforce", "proxyEnforce" },
		{ "isolation", "processIsolation" },
		{ "env", "env" },
		{ "workdir", "workdir" },
		{ "user", "user" },
		{ "entrypoint", "entrypoint" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
		if (strcmp(option, fields[i].option) == 0)
			return fields[i].field;
	return NULL;
}

/* s as a JSON string, what is not UTF-8 in it made '?' (an image's
 * name, a crash's reason: not ours to trust). */
static json_t *jstr(const char *s)
{
	cleanup_free char *t = text_sanitize_utf8(xstrdup(s));

	return json_string(t);
}

static json_t *strings(char *const *v, size_t n, bool names)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, names ? json_stringn(v[i], secret_spec_name_len(v[i]))
					       : jstr(v[i]));
	return a;
}

static json_t *opt_string(const char *s)
{
	return s ? jstr(s) : json_null();
}

static json_t *sandbox_json(const struct sandbox *sb)
{
	return json_pack("{s:s,s:s,s:I,s:o,s:o,s:I,s:I,s:I,s:b,s:b,s:o,s:o,s:o,s:o,s:o}", "name",
			 sb->name, "state", sandbox_state_name(sb->state), "pid",
			 (json_int_t)(sb->state == SANDBOX_RUNNING ? sb->pid : 0), "image",
			 jstr(sb->image ? sb->image : ""), "imageDigest",
			 opt_string(sb->image_digest), "cpus", (json_int_t)sb->cpus, "memoryMiB",
			 (json_int_t)sb->mem_mib, "diskSizeMiB", (json_int_t)sb->disk_mib,
			 "writable", sb->writable, "net", sb->net, "ports",
			 strings(sb->ports, sb->nr_ports, false), "shares",
			 strings(sb->shares, sb->nr_shares, false), "secrets",
			 strings(sb->secrets, sb->nr_secrets, true), "created",
			 opt_string(sb->created), "reason", opt_string(sb->reason));
}

static int list(json_t **out, gantry_error_t *err)
{
	struct sandbox *v = NULL;
	size_t n = 0;

	if (sandbox_list(&v, &n, err) < 0)
		return -1;
	*out = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(*out, sandbox_json(&v[i]));
	sandbox_list_free(v, n);
	return 0;
}

static int get(const char *name, json_t **out, gantry_error_t *err)
{
	struct sandbox *v = NULL;
	size_t n = 0;
	int ret;

	/* The list's view: a one-shot's entry and a live state. */
	if (sandbox_list(&v, &n, err) < 0)
		return -1;
	ret = gantry_error(err, ENOENT, "no sandbox `%s`", name);
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].name, name) == 0) {
			gantry_error_free(err);
			*out = sandbox_json(&v[i]);
			ret = 0;
			break;
		}
	sandbox_list_free(v, n);
	return ret;
}

static const char *str(json_t *req, const char *key)
{
	return json_string_value(json_object_get(req, key));
}

static void boolean(json_t *req, const char *key, bool *out)
{
	json_t *v = json_object_get(req, key);

	if (v)
		*out = json_is_true(v);
}

static void number(json_t *req, const char *key, uint64_t *out)
{
	json_t *v = json_object_get(req, key);

	if (v)
		*out = (uint64_t)json_integer_value(v);
}

/* Each string of the array field key through fn (a flag's parser). */
static int each(json_t *req, const char *key, void *opaque,
		int (*fn)(void *opaque, const char *s, gantry_error_t *err), gantry_error_t *err)
{
	size_t i;
	json_t *e;

	json_array_foreach(json_object_get(req, key), i,
			   e) if (fn(opaque, json_string_value(e), err) <
				  0) return gantry_error_as_usage(err);
	return 0;
}

static int env_one(void *opaque, const char *spec, gantry_error_t *err)
{
	return sandbox_process_opts_env(opaque, spec, err);
}

/* secretNames: `-secret NAME` and the rest of its grammar, the values
 * from this server's environment. */
static int secret_one(void *opaque, const char *spec, gantry_error_t *err)
{
	struct sandbox_opts *o = opaque;
	cleanup_free char *name = xstrndup(spec, secret_spec_name_len(spec));

	if (o->secrets == NULL) {
		o->secrets = xzalloc(sizeof(*o->secrets));
		secret_store_init(o->secrets);
	}
	return secret_store_add(o->secrets, spec, strchr(spec, '=') ? NULL : getenv(name), err);
}

static int create(json_t *req, const struct gantry_cancel *cancel, gantry_error_t *err)
{
	struct sandbox_opts o;
	int ret = -1;

	sandbox_opts_init(&o);
	o.name = str(req, "name");
	o.image = str(req, "image");
	number(req, "cpus", &o.cpus);
	number(req, "memoryMiB", &o.mem_mib);
	number(req, "diskSizeMiB", &o.disk_mib);
	boolean(req, "writable", &o.writable);
	o.rwlayer = str(req, "rwlayer");
	boolean(req, "net", &o.net);
	o.net_policy = str(req, "networkPolicy");
	boolean(req, "allowLocalNetwork", &o.allow_local_net);
	o.proxy = str(req, "proxy");
	o.no_proxy = str(req, "noProxy");
	boolean(req, "proxyEnforce", &o.proxy_enforce);
	o.isolation = str(req, "processIsolation");
	o.process.workdir = str(req, "workdir");
	o.process.user = str(req, "user");
	o.process.entrypoint = str(req, "entrypoint");
	if (each(req, "publish", &o, sandbox_opts_publish, err) == 0 &&
	    each(req, "shares", &o, sandbox_opts_share, err) == 0 &&
	    each(req, "env", &o.process, env_one, err) == 0 &&
	    each(req, "secretNames", &o, secret_one, err) == 0)
		ret = sandbox_create(&o, cancel, err);
	sandbox_opts_free(&o);
	return ret;
}

static const char *env_of(const char *name)
{
	return getenv(name);
}

static int start(const char *name, const struct gantry_cancel *cancel, gantry_error_t *err)
{
	return sandbox_resume(name, env_of, cancel, err);
}

static int stop(const char *name, gantry_error_t *err)
{
	return sandbox_stop(name, err);
}

static int pause_(const char *name, gantry_error_t *err)
{
	return sandbox_pause(name, false, err);
}

static int remove_(const char *name, gantry_error_t *err)
{
	return sandbox_delete(name, true, err);
}

static int snapshot(const char *name, const char *snap, gantry_error_t *err)
{
	return sandbox_snapshot_take(name, snap, false, NULL, err);
}

static int start_from(const char *name, const char *snap, const struct gantry_cancel *cancel,
		      gantry_error_t *err)
{
	return sandbox_start_from(name, snap, NULL, 0, env_of, cancel, err);
}

static int exec(const char *name, const struct api_exec *x, int in, int out, int err_fd, int sig,
		const struct gantry_cancel *cancel, struct api_exec_result *res,
		gantry_error_t *err)
{
	struct sandbox_process_opts po = {
		.args = x->argv,
		.nargs = x->argc,
		.env = x->env,
		.nr_env = x->nr_env,
		.workdir = x->cwd,
		.entrypoint = x->raw ? "" : NULL,
	};
	const struct sandbox_stdio io = {
		.in = in, .out = out, .err = err_fd, .tty = x->tty, .signal_fd = sig
	};
	struct agent_result ar = { 0 };

	if (sandbox_process_opts_check(&po, err) < 0)
		return gantry_error_as_usage(err);
	if (sandbox_exec(name, &po, &io, cancel, &ar, err) < 0)
		return -1;
	if (ar.error) /* never ran: what a shell says, on its output */
		dprintf(err_fd, "gantry: %s\n", ar.message ? ar.message : "cannot run");
	/* The CLI's rule: 128+N for signal N; 126, 127 when it cannot run. */
	res->exit_code = agent_result_status(&ar);
	res->signal = ar.signaled ? ar.code : 0;
	agent_result_free(&ar);
	return 0;
}

const struct api_backend api_lifecycle_backend = {
	.list = list,
	.get = get,
	.create = create,
	.start = start,
	.stop = stop,
	.pause = pause_,
	.remove = remove_,
	.snapshot = snapshot,
	.start_from = start_from,
	.snapshots = sandbox_snapshot_list,
	.snapshot_remove = sandbox_snapshot_remove,
	.exec = exec,
	.processes = sandbox_processes_json,
};
