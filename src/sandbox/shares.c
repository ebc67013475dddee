/* `gantry share add|rm|ls` (see shares.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json.h"
#include "common/util.h"
#include "sandbox/ctl.h"
#include "sandbox/lifecycle.h"
#include "sandbox/shares.h"
#include "share/spec.h"

#define SHARE_CTL_WAIT_MS 30000 /* the guest makes the mount point and mounts */

json_t *share_json(const char *spec)
{
	struct share_spec sp;
	json_t *o;

	if (share_spec_parse(spec, NULL, &sp, NULL) < 0)
		return json_pack("{s:s}", "spec", spec);
	o = json_pack("{s:s,s:s,s:s,s:s,s:b}", "spec", spec, "tag", sp.tag, "host", sp.host_path,
		      "path", sp.ctr_path, "ro", sp.ro);
	if (sp.ids) {
		json_object_set_new(o, "uid", json_integer(sp.uid));
		json_object_set_new(o, "gid", json_integer(sp.gid));
	}
	share_spec_free(&sp);
	return o;
}

/* spec checked here, as start would (its directory too): canonical. */
static int share_canonical(const char *spec, char **out, gantry_error_t *err)
{
	cleanup_free char *cwd = getcwd(NULL, 0);
	struct share_spec sp;
	int r;

	if (share_spec_parse(spec, cwd, &sp, err) < 0)
		return gantry_error_as_usage(err);
	r = share_host_check(sp.host_path, NULL, err);
	if (r < 0) {
		gantry_error_as_usage(err);
		gantry_error_prefix_opt(err, "shares", " `%s`", sp.tag);
	}
	else
		*out = share_spec_format(&sp);
	share_spec_free(&sp);
	return r;
}

static int not_running(const char *name, gantry_error_t *err)
{
	gantry_error_opt(err, "ephemeral", " is for a running sandbox: `%s` is not running", name);
	return gantry_error_as_conflict(err);
}

/* The saved share under spec's tag goes (--replace on a stopped one). */
static void drop_tag(struct sandbox *sb, const char *spec)
{
	struct share_spec sp;
	ssize_t at;

	if (share_spec_parse(spec, NULL, &sp, NULL) < 0)
		return;
	at = shares_find(sb->shares, sb->nr_shares, sp.tag);
	if (at >= 0)
		shares_remove(sb->shares, &sb->nr_shares, (size_t)at);
	share_spec_free(&sp);
}

int sandbox_share_add(const char *name, const char *spec, bool replace, bool ephemeral,
		      char **canonical, gantry_error_t *err)
{
	cleanup_free char *dir = NULL, *canon = NULL;
	cleanup_close int lock = -1;
	struct sandbox sb = { 0 };
	json_t *reply = NULL;
	int r = -1;

	if (share_canonical(spec, &canon, err) < 0 ||
	    sandbox_open_locked(name, &sb, &dir, &lock, err) < 0)
		goto out;
	if (!sb.writable && !sb.root) {
		gantry_error(err, 0, "sandbox `%s` has a read-only root: shares need a writable one",
			     name);
		goto out;
	}
	if (lock < 0) {
		json_t *req = json_pack("{s:s,s:s,s:b,s:b}", "op", CTL_OP_SHARE_ADD, "spec", canon,
					"replace", replace, "ephemeral", ephemeral);

		r = sandbox_request(name, dir, req, SHARE_CTL_WAIT_MS, &reply, err);
		if (r == 0 && canonical) {
			const char *kept = json_string_value(json_object_get(reply, "share"));

			*canonical = xstrdup(kept ? kept : canon);
		}
		goto out;
	}
	if (ephemeral) {
		not_running(name, err);
		goto out;
	}
	if (replace)
		drop_tag(&sb, canon);
	/* Its spec was checked: what fails now is the sandbox's shares. */
	r = shares_add(&sb.shares, &sb.nr_shares, canon, NULL, err);
	if (r < 0)
		gantry_error_as_conflict(err);
	if (r == 0)
		r = sandbox_save(dir, &sb, err);
	if (r == 0 && canonical)
		*canonical = xstrdup(canon);
out:
	json_decref(reply);
	sandbox_free(&sb);
	return r;
}

int sandbox_share_rm(const char *name, const char *tag, bool force, bool ephemeral,
		     void (*waiting)(const char *tag, long open), gantry_error_t *err)
{
	cleanup_free char *dir = NULL;
	cleanup_close int lock = -1;
	struct sandbox sb = { 0 };
	ssize_t at;
	int r = -1;

	if (sandbox_open_locked(name, &sb, &dir, &lock, err) < 0)
		goto out;
	if (lock < 0) {
		json_t *req = json_pack("{s:s,s:s,s:b,s:b}", "op", CTL_OP_SHARE_RM, "tag", tag,
					"force", force, "ephemeral", ephemeral);
		json_t *ls = NULL, *v;
		size_t i;

		/* Say why it may take a while before it does. */
		if (!force && waiting &&
		    sandbox_request(name, dir, json_pack("{s:s}", "op", CTL_OP_SHARE_LS), SHARE_CTL_WAIT_MS,
				    &ls, NULL) == 0) {
			json_array_foreach(json_object_get(ls, "shares"), i, v)
			{
				const char *t = json_string_value(json_object_get(v, "tag"));
				json_int_t open = json_integer_value(json_object_get(v, "open"));

				if (t && strcmp(t, tag) == 0 && open > 0)
					waiting(tag, (long)open);
			}
		}
		json_decref(ls);
		r = sandbox_request(name, dir, req, force ? SHARE_CTL_WAIT_MS : -1, NULL, err);
		goto out;
	}
	if (ephemeral) {
		not_running(name, err);
		goto out;
	}
	at = shares_find(sb.shares, sb.nr_shares, tag);
	if (at < 0) {
		gantry_error(err, 0, "sandbox `%s` has no share `%s`", name, tag);
		goto out;
	}
	shares_remove(sb.shares, &sb.nr_shares, (size_t)at);
	r = sandbox_save(dir, &sb, err);
out:
	sandbox_free(&sb);
	return r;
}

int sandbox_shares_list(const char *name, json_t **out, gantry_error_t *err)
{
	cleanup_free char *dir = NULL;
	struct sandbox sb = { 0 };
	json_t *shares = NULL, *reply = NULL;
	bool running;
	int r = -1;

	*out = NULL;
	if (sandbox_inspect(name, &sb, &dir, err) < 0 || sandbox_refuse_oneshot(&sb, err) < 0)
		goto out;
	running = sandbox_is_running(dir);
	if (running) {
		if (sandbox_request(name, dir, json_pack("{s:s}", "op", CTL_OP_SHARE_LS),
				    SHARE_CTL_WAIT_MS, &reply, err) < 0)
			goto out;
		shares = json_incref(json_object_get(reply, "shares"));
	} else {
		shares = json_array();
		for (size_t i = 0; i < sb.nr_shares; i++) {
			json_t *o = share_json(sb.shares[i]);

			json_object_set_new(o, "live", json_false());
			json_object_set_new(o, "saved", json_true());
			json_array_append_new(shares, o);
		}
	}
	*out = json_pack("{s:s,s:b,s:o}", "name", name, "running", running, "shares",
			 shares ? shares : json_array());
	r = 0;
out:
	json_decref(reply);
	sandbox_free(&sb);
	return r;
}
