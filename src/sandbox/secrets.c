/* A sandbox's secrets on their way to its supervisor (see secrets.h). */
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/json.h"
#include "common/util.h"
#include "sandbox/ctl.h"
#include "sandbox/secrets.h"

int sandbox_secrets_check(struct secret_store *st, gantry_error_t *err)
{
	int r = 0;

	if (st == NULL)
		return 0;
	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < st->n && r == 0; i++)
		if (st->v[i].spec.nr_hosts)
			r = gantry_error_usage(
				err,
				"secret `%s`: a session's own secrets go into its environment; "
				"one bound to hosts (NAME@HOST) is the sandbox's: gantry secret "
				"set",
				st->v[i].spec.name);
	pthread_mutex_unlock(&st->lock);
	return r;
}

/* A sandbox's secrets as kept: specs without values. Their sources are
 * read by its supervisor as it starts (one that fails fails the start),
 * not here too: a command would run twice. */
int sandbox_secrets_describe(struct secret_store *st, struct sandbox *sb, gantry_error_t *err)
{
	(void)err;
	if (st == NULL)
		return 0;
	pthread_mutex_lock(&st->lock);
	sb->secrets = xzalloc((st->n + 1) * sizeof(*sb->secrets));
	for (size_t i = 0; i < st->n; i++)
		sb->secrets[sb->nr_secrets++] = secret_spec_format(&st->v[i].spec);
	pthread_mutex_unlock(&st->lock);
	return 0;
}

static ssize_t secret_find(const struct sandbox *sb, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < sb->nr_secrets; i++)
		if (secret_spec_name_len(sb->secrets[i]) == len &&
		    strncmp(sb->secrets[i], name, len) == 0)
			return (ssize_t)i;
	return -1;
}

int sandbox_secret_keep(struct sandbox *sb, const char *spec, gantry_error_t *err)
{
	cleanup_free char *name = xstrndup(spec, secret_spec_name_len(spec));
	ssize_t at = secret_find(sb, name);

	if (at >= 0) {
		free(sb->secrets[at]);
		sb->secrets[at] = xstrdup(spec);
		return 0;
	}
	if (sb->nr_secrets == SECRETS_MAX)
		return gantry_error(err, 0, "sandbox `%s` has %d secrets already", sb->name,
				    SECRETS_MAX);
	sb->secrets = xrealloc(sb->secrets, (sb->nr_secrets + 2) * sizeof(*sb->secrets));
	sb->secrets[sb->nr_secrets++] = xstrdup(spec);
	sb->secrets[sb->nr_secrets] = NULL;
	return 0;
}

bool sandbox_secret_drop(struct sandbox *sb, const char *name)
{
	ssize_t at = secret_find(sb, name);

	if (at < 0)
		return false;
	free(sb->secrets[at]);
	memmove(&sb->secrets[at], &sb->secrets[at + 1],
		(sb->nr_secrets - (size_t)at) * sizeof(*sb->secrets)); /* its NULL too */
	sb->nr_secrets--;
	return true;
}

void sandbox_secrets_free(struct secret_store **st)
{
	if (*st) {
		secret_store_free(*st);
		free(*st);
		*st = NULL;
	}
}

/* The values of sb's secrets from the environment, from env (NULL in
 * *out when it has none); -1 when one is not set there. */
int sandbox_secrets_from_env(const struct sandbox *sb, sandbox_env_fn env,
			     struct secret_store **out, gantry_error_t *err)
{
	struct secret_store *st = xzalloc(sizeof(*st));
	int r = 0;

	secret_store_init(st);
	for (size_t i = 0; i < sb->nr_secrets && r == 0; i++) {
		struct secret_spec s;
		const char *v;

		if (secret_spec_parse(sb->secrets[i], &s, err) < 0) {
			r = -1;
			break;
		}
		v = s.source == SECRET_FROM_ENV && env ? env(s.name) : NULL;
		if (s.source == SECRET_FROM_ENV && v == NULL)
			r = gantry_error(err, 0,
					 "secret `%s` is not set in this environment: a resume "
					 "or a start from a snapshot takes it from there, as the "
					 "first start did",
					 s.name);
		else if (v)
			r = secret_store_add_value(st, s.name, strlen(s.name), v, strlen(v), err);
		secret_spec_free(&s);
	}
	if (r < 0 || st->n == 0)
		sandbox_secrets_free(&st);
	*out = st;
	return r;
}

/* --- `gantry secret set|rm|ls` and `gantry audit` --------------------------------------------- */

#define SECRET_CTL_MS 10000

int sandbox_secret_set(const char *name, const char *spec, sandbox_env_fn env, gantry_error_t *err)
{
	cleanup_free char *dir = NULL, *canon = NULL;
	cleanup_close int lock = -1, fd = -1;
	struct sandbox sb = { 0 };
	struct secret_spec sp;
	const char *value = NULL;
	int r = -1;

	if (secret_spec_parse(spec, &sp, err) < 0)
		return gantry_error_as_usage(err);
	if (sp.source == SECRET_FROM_ENV && (value = env ? env(sp.name) : NULL) == NULL)
		gantry_error_usage(err, "secret `%s` is not set in this environment", sp.name);
	else
		canon = secret_spec_format(&sp);
	secret_spec_free(&sp);
	if (canon == NULL || sandbox_open_locked(name, &sb, &dir, &lock, err) < 0 ||
	    sandbox_refuse_oneshot(&sb, err) < 0)
		goto out;
	if (lock < 0) {
		json_t *req = json_pack("{s:s,s:s}", "op", CTL_OP_SECRET_SET, "spec", canon);

		if (value)
			json_object_set_new(req, "length", json_integer((json_int_t)strlen(value)));
		r = ctl_connect(dir, &fd, err);
		if (r == 0)
			r = ctl_request_data(fd, req, value, value ? strlen(value) : 0,
					     SECRET_CTL_MS, NULL, err);
		json_decref(req);
		if (r < 0)
			gantry_error_prefix(err, "sandbox `%s`", name);
		goto out;
	}
	/* Stopped: kept for its next boot, which reads the value then. */
	r = sandbox_secret_keep(&sb, canon, err);
	if (r == 0)
		r = sandbox_save(dir, &sb, err);
out:
	sandbox_free(&sb);
	return r;
}

int sandbox_secret_rm(const char *name, const char *secret, gantry_error_t *err)
{
	cleanup_free char *dir = NULL;
	cleanup_close int lock = -1;
	struct sandbox sb = { 0 };
	int r = -1;

	if (!secret_name_valid(secret, strlen(secret)))
		return gantry_error_usage(err, "`%s` is not a secret name", secret);
	if (sandbox_open_locked(name, &sb, &dir, &lock, err) < 0 ||
	    sandbox_refuse_oneshot(&sb, err) < 0)
		goto out;
	if (lock < 0) {
		r = sandbox_request(name, dir,
				    json_pack("{s:s,s:s}", "op", CTL_OP_SECRET_RM, "name", secret),
				    SECRET_CTL_MS, NULL, err);
	} else if (!sandbox_secret_drop(&sb, secret)) {
		gantry_error(err, 0, "sandbox `%s` has no secret `%s`", name, secret);
	} else {
		r = sandbox_save(dir, &sb, err);
	}
out:
	sandbox_free(&sb);
	return r;
}

static size_t argv_count(char *const *v)
{
	size_t n = 0;

	while (v[n])
		n++;
	return n;
}

static json_t *secret_json(const char *spec)
{
	struct secret_spec sp;
	json_t *o;

	if (secret_spec_parse(spec, &sp, NULL) < 0)
		return json_pack("{s:s%}", "name", spec, secret_spec_name_len(spec));
	o = json_pack("{s:s,s:s}", "name", sp.name, "source", secret_source_name(sp.source));
	if (sp.source == SECRET_FROM_FILE)
		json_object_set_new(o, "path", json_string(sp.path));
	else if (sp.source == SECRET_FROM_CMD)
		json_object_set_new(o, "command", jsonh_from_strv(sp.argv, argv_count(sp.argv)));
	if (sp.nr_hosts)
		json_object_set_new(o, "hosts", jsonh_from_strv(sp.hosts, sp.nr_hosts));
	if (sp.ttl_ms >= 0)
		json_object_set_new(o, "ttlMs", json_integer(sp.ttl_ms));
	if (sp.inject)
		json_object_set_new(o, "inject", json_true());
	if (sp.header)
		json_object_set_new(o, "header", json_string(sp.header));
	if (sp.format)
		json_object_set_new(o, "format", json_string(sp.format));
	secret_spec_free(&sp);
	return o;
}

int sandbox_secrets_list(const char *name, json_t **out, gantry_error_t *err)
{
	cleanup_free char *dir = NULL;
	struct sandbox sb = { 0 };
	json_t *v;

	*out = NULL;
	if (sandbox_inspect(name, &sb, &dir, err) < 0 || sandbox_refuse_oneshot(&sb, err) < 0) {
		sandbox_free(&sb);
		return -1;
	}
	/* sandbox.json is the supervisor's to change while it runs: it
	 * saves each change as it makes it. */
	v = json_array();
	for (size_t i = 0; i < sb.nr_secrets; i++)
		json_array_append_new(v, secret_json(sb.secrets[i]));
	*out = json_pack("{s:s,s:b,s:o}", "name", name, "running", sandbox_is_running(dir),
			 "secrets", v);
	sandbox_free(&sb);
	return 0;
}

int sandbox_audit(const char *name, json_t **out, gantry_error_t *err)
{
	cleanup_free char *dir = NULL, *path = NULL;
	struct sandbox sb = { 0 };
	json_t *reply = NULL, *events = NULL;
	json_error_t jerr;
	int r = -1;

	*out = NULL;
	if (sandbox_inspect(name, &sb, &dir, err) < 0 || sandbox_refuse_oneshot(&sb, err) < 0)
		goto out;
	if (sandbox_is_running(dir)) {
		if (sandbox_request(name, dir, json_pack("{s:s}", "op", CTL_OP_AUDIT),
				    SECRET_CTL_MS, &reply, err) < 0)
			goto out;
		events = json_incref(json_object_get(reply, "events"));
	} else {
		xasprintf(&path, "%s/%s", dir, SANDBOX_AUDIT);
		reply = json_load_file(path, 0, &jerr);
		events = json_incref(json_object_get(reply, "events"));
		if (reply == NULL && access(path, F_OK) == 0) {
			gantry_error(err, 0, "sandbox `%s`: %s does not read: %s", name,
				     SANDBOX_AUDIT, jerr.text);
			goto out;
		}
	}
	if (!json_is_array(events)) {
		json_decref(events);
		events = json_array();
	}
	*out = json_pack("{s:s,s:o}", "name", name, "events", events);
	r = 0;
out:
	json_decref(reply);
	sandbox_free(&sb);
	return r;
}
