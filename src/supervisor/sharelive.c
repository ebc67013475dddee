/* Shares changed while a sandbox runs (see supervisor_priv.h): the
 * ctl.sock ops share.add, share.rm and share.ls. The share server lives
 * in this process (the machine's), so an export is added or taken out at
 * once; the guest is then told to attach or detach the share's bind mount
 * in its container (MOUNT, UNMOUNT), and the change is answered, and saved
 * in sandbox.json unless ephemeral, when its DONE comes back.
 *
 * A remove without force waits, polling every SUP_SHARE_POLL_MS, until
 * the guest holds no file of the share open; the client hanging up calls
 * it off. Then the bind goes from the container first and the export
 * after it, so nothing open through it is cut. A forced remove takes the
 * export out first: what the guest still holds there answers EBADF or
 * ESTALE from then on. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "common/child.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "sandbox/ctl.h"
#include "sandbox/machine.h"
#include "sandbox/shares.h"
#include "supervisor/supervisor_priv.h"
#include "share/server.h"
#include "worker/worker.h"

void sup_shares_init(struct sup *s)
{
	struct sup_shares *sh = &s->shares;

	sh->live = strv_dup(s->sb.shares, s->sb.nr_shares);
	sh->nr_live = s->sb.nr_shares;
}

static void op_free(struct share_op *op)
{
	free(op->spec);
	free(op->path);
	free(op->why);
	*op = (struct share_op){ .stage = SHARE_FREE };
}

static void reply_err(struct sup *s, struct client *c, gantry_error_t *err)
{
	client_answer(s, c, gantry_error_str(*err));
	gantry_error_free(err);
}

static struct share_op *op_find(struct sup *s, const char *tag)
{
	for (size_t i = 0; i < SUP_SHARE_OPS; i++)
		if (s->shares.ops[i].stage != SHARE_FREE && strcmp(s->shares.ops[i].tag, tag) == 0)
			return &s->shares.ops[i];
	return NULL;
}

/* A slot for a change to tag, or NULL with c answered. */
static struct share_op *op_new(struct sup *s, struct client *c, const char *tag)
{
	cleanup_free char *msg = NULL;

	if (op_find(s, tag)) {
		xasprintf(&msg, "share `%s` is being changed: try again once that is done", tag);
		client_answer(s, c, msg);
		return NULL;
	}
	for (size_t i = 0; i < SUP_SHARE_OPS; i++) {
		struct share_op *op = &s->shares.ops[i];

		if (op->stage == SHARE_FREE) {
			*op = (struct share_op){ .stage = SHARE_GUEST,
						 .c = c,
						 .deadline = now_ms() + SUP_SHARE_GUEST_MS };
			snprintf(op->tag, sizeof(op->tag), "%s", tag);
			return op;
		}
	}
	client_answer(s, c, "too many share changes under way: try again");
	return NULL;
}

/* Ask the guest; the id its DONE will carry, or 0 when it cannot be sent. */
static uint32_t ask_guest(struct sup *s, uint16_t type, const char *tag, bool ro, const char *path)
{
	struct proto_msg m = { .type = type };
	uint32_t id = ++s->shares.next_id ? s->shares.next_id : ++s->shares.next_id;

	m.u.mount.id = id;
	m.u.mount.flags = ro ? PROTO_MOUNT_RO : 0;
	m.u.mount.tag = (char *)tag;
	m.u.mount.path = (char *)path;
	return sup_send_guest(s, &m, false) ? id : 0;
}

/* The live list: spec under its tag (NULL: the tag's share removed). */
static void live_set(struct sup_shares *sh, const char *tag, const char *spec)
{
	ssize_t at = shares_find(sh->live, sh->nr_live, tag);

	if (at >= 0)
		shares_remove(sh->live, &sh->nr_live, (size_t)at);
	if (spec == NULL)
		return;
	sh->live = xrealloc(sh->live, (sh->nr_live + 2) * sizeof(*sh->live));
	sh->live[sh->nr_live++] = xstrdup(spec);
	sh->live[sh->nr_live] = NULL;
}

/* sandbox.json, for a change that is not ephemeral: spec under its tag
 * (NULL: the tag's share removed). */
static int save(struct sup *s, const char *tag, const char *spec, gantry_error_t *err)
{
	struct sandbox *sb = &s->sb;
	ssize_t at = shares_find(sb->shares, sb->nr_shares, tag);

	if (at >= 0)
		shares_remove(sb->shares, &sb->nr_shares, (size_t)at);
	if (spec && shares_add(&sb->shares, &sb->nr_shares, spec, NULL, err) < 0)
		return gantry_error_prefix(err, "live, but not saved");
	return sandbox_save(".", sb, err);
}

/* --- share.add ------------------------------------------------------------------------------- */

/* May spec join the live shares (one under its tag replaced)? */
static int add_check(struct sup *s, const char *spec, const char *tag, gantry_error_t *err)
{
	char **v = NULL;
	size_t n = 0;
	int r = 0;

	for (size_t i = 0; i < s->shares.nr_live && r == 0; i++)
		if (shares_find(s->shares.live + i, 1, tag) < 0)
			r = shares_add(&v, &n, s->shares.live[i], NULL, err);
	if (r == 0)
		r = shares_add(&v, &n, spec, NULL, err);
	strv_free(v);
	return r;
}

static void share_add(struct sup *s, struct client *c, json_t *req)
{
	const char *spec = json_string_value(json_object_get(req, "spec"));
	bool replace = json_is_true(json_object_get(req, "replace"));
	gantry_error_t err = NULL;
	struct share_op *op = NULL;
	struct share_spec sp, old;
	ssize_t at;

	if (spec == NULL)
		return client_answer(s, c, "share.add: no spec");
	if (share_spec_parse(spec, NULL, &sp, &err) < 0)
		return reply_err(s, c, &err);
	at = shares_find(s->shares.live, s->shares.nr_live, sp.tag);
	if (at >= 0 && !replace) {
		/* The option that would replace it, as this process's front
		 * end names it. */
		gantry_error(&err, 0, "sandbox `%s` has a share `%s` already", s->name, sp.tag);
		gantry_error_prefix_opt(&err, "replace", " is off");
		reply_err(s, c, &err);
	} else if (add_check(s, spec, sp.tag, &err) < 0 ||
		   share_host_check(sp.host_path, NULL, &err) < 0) {
		reply_err(s, c, &err);
	} else if ((op = op_new(s, c, sp.tag)) != NULL) {
		op->add = true;
		op->ephemeral = json_is_true(json_object_get(req, "ephemeral"));
		op->spec = share_spec_format(&sp);
		/* The old one goes at once: its bind first, so nothing new is
		 * opened through it, then its export, cutting what is open. */
		if (at >= 0 && share_spec_parse(s->shares.live[at], NULL, &old, NULL) == 0) {
			ask_guest(s, PROTO_UNMOUNT, NULL, false, old.ctr_path);
			share_spec_free(&old);
			machine_share_drop(&s->m, sp.tag);
			live_set(&s->shares, sp.tag, NULL);
			log_info("share `%s` replaced", sp.tag);
		}
		if (machine_share_add(&s->m, &sp, &err) < 0) {
			if (at >= 0)
				gantry_error_prefix(&err, "the share it was to replace is gone");
			reply_err(s, c, &err);
			op_free(op);
		} else if ((op->last_id = ask_guest(s, PROTO_MOUNT, sp.tag, sp.ro, sp.ctr_path)) ==
			   0) {
			machine_share_drop(&s->m, sp.tag);
			client_answer(s, c, "the guest takes no more requests now: try again");
			op_free(op);
		}
	}
	share_spec_free(&sp);
}

/* --- share.rm -------------------------------------------------------------------------------- */

/* The bind goes from the container; the DONE ends it. */
static void rm_unmount(struct sup *s, struct share_op *op)
{
	op->stage = SHARE_GUEST;
	op->deadline = now_ms() + SUP_SHARE_GUEST_MS;
	op->last_id = ask_guest(s, PROTO_UNMOUNT, NULL, false, op->path);
	if (op->last_id == 0 && !op->exported) {
		/* Forced: out of the server already, so out of the list. */
		live_set(&s->shares, op->tag, NULL);
		client_answer(s, op->c, "removed, but the guest takes no more requests now: its "
					"mount point stays until the sandbox stops");
		op_free(op);
	} else if (op->last_id == 0) {
		client_answer(s, op->c, "the guest takes no more requests now: try again");
		op_free(op);
	}
}

static void share_rm(struct sup *s, struct client *c, json_t *req)
{
	const char *tag = json_string_value(json_object_get(req, "tag"));
	cleanup_free char *msg = NULL;
	struct share_op *op;
	struct share_spec sp;
	ssize_t at;

	if (tag == NULL)
		return client_answer(s, c, "share.rm: no tag");
	at = shares_find(s->shares.live, s->shares.nr_live, tag);
	if (at < 0) {
		xasprintf(&msg, "sandbox `%s` has no share `%s`", s->name, tag);
		return client_answer(s, c, msg);
	}
	if (share_spec_parse(s->shares.live[at], NULL, &sp, NULL) < 0)
		return client_answer(s, c, "share.rm: a live share that does not parse");
	op = op_new(s, c, tag);
	if (op) {
		op->ephemeral = json_is_true(json_object_get(req, "ephemeral"));
		op->path = xstrdup(sp.ctr_path);
		op->exported = true;
		if (json_is_true(json_object_get(req, "force"))) {
			machine_share_drop(&s->m, tag);
			op->exported = false;
		}
		if (op->exported && machine_share_handles(&s->m, tag) > 0)
			op->stage = SHARE_DRAIN;
		else
			rm_unmount(s, op);
	}
	share_spec_free(&sp);
}

static void op_finish(struct sup *s, struct share_op *op);

int sup_share_worker_fd(const struct sup *s)
{
	return s->m.share_started ? s->m.share_worker.chan : -1;
}

void sup_share_worker_gone(struct sup *s)
{
	struct share_worker *w = &s->m.share_worker;
	char how[64];
	int status;

	pthread_mutex_lock(&w->lock);
	close_fd(&w->chan);
	pthread_mutex_unlock(&w->lock);
	worker_reap(&w->pid, &status);
	child_describe_status(status, how, sizeof(how));
	/* It ends cleanly once the VMM worker hangs up on it: the VM is
	 * ending, which says so itself. */
	if (s->stopping || atomic_load(&s->m.ended) || (WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		log_info("share worker exited (%s)", how);
		return;
	}
	sup_audit(s, "worker", "exited", NULL, NULL, "share worker: %s", how);
	log_warn("share worker exited (%s): the guest's shares answer every request with an "
		 "I/O error", how);
	machine_worker_gone(&s->m, "share", how,
			    "the guest's shares answer every request with an I/O error");
}

size_t sup_live_share_fds(const struct sup *s, struct pollfd *fds)
{
	const struct machine_live_share *ls = s->m.live_shares;
	size_t n = 0;

	for (size_t i = 0; ls && i < FS_MAX_EXPORTS; i++)
		if (ls[i].tag && ls[i].w.chan >= 0)
			fds[n++] = (struct pollfd){ .fd = ls[i].w.chan, .events = 0 };
	return n;
}

void sup_live_share_gone(struct sup *s, int fd)
{
	struct machine_live_share *ls = s->m.live_shares;
	cleanup_free char *role = NULL, *meaning = NULL;
	char how[64];
	int status;

	for (size_t i = 0; ls && i < FS_MAX_EXPORTS; i++) {
		struct share_worker *w = &ls[i].w;

		if (ls[i].tag == NULL || w->chan != fd)
			continue;
		pthread_mutex_lock(&w->lock);
		close_fd(&w->chan);
		pthread_mutex_unlock(&w->lock);
		worker_reap(&w->pid, &status);
		child_describe_status(status, how, sizeof(how));
		if (s->stopping || atomic_load(&s->m.ended))
			return;
		xasprintf(&role, "share:%s", ls[i].tag);
		xasprintf(&meaning, "the share `%s` answers every request with an I/O error",
			  ls[i].tag);
		log_warn("share worker of `%s` exited (%s): %s", ls[i].tag, how, meaning);
		machine_worker_gone(&s->m, role, how, meaning);
		return;
	}
}

void sup_shares_tick(struct sup *s, uint64_t now, uint64_t *wake)
{
	for (size_t i = 0; i < SUP_SHARE_OPS; i++) {
		struct share_op *op = &s->shares.ops[i];

		if (op->stage == SHARE_GUEST && now >= op->deadline) {
			/* A guest that does not answer holds up nothing: an
			 * add fails, a remove goes through without it. */
			op->error = ETIMEDOUT;
			op->why = xstrdup("the guest did not answer in time");
			op_finish(s, op);
			continue;
		}
		if (op->stage == SHARE_GUEST)
			*wake = MIN(*wake, op->deadline);
		if (op->stage != SHARE_DRAIN)
			continue;
		if (op->c == NULL)
			op_free(op); /* called off */
		else if (machine_share_handles(&s->m, op->tag) == 0)
			rm_unmount(s, op);
		else
			*wake = MIN(*wake, now + SUP_SHARE_POLL_MS);
	}
}

/* --- the guest's answers --------------------------------------------------------------------- */

static void op_finish(struct sup *s, struct share_op *op)
{
	gantry_error_t err = NULL;
	cleanup_free char *msg = NULL;

	if (op->add && op->error) {
		/* Not in the container: not a share of it either. */
		machine_share_drop(&s->m, op->tag);
		xasprintf(&msg, "share `%s`: the guest could not mount it: %s", op->tag,
			  op->why && *op->why ? op->why : strerror((int)op->error));
		client_answer(s, op->c, msg);
	} else if (op->add) {
		live_set(&s->shares, op->tag, op->spec);
		if (!op->ephemeral && save(s, op->tag, op->spec, &err) < 0)
			reply_err(s, op->c, &err);
		else if (op->c)
			client_reply_json(s, op->c,
					  json_pack("{s:b,s:s}", "ok", 1, "share", op->spec));
		log_info("share `%s` added%s", op->tag, op->ephemeral ? " (ephemeral)" : "");
	} else {
		/* Detached, or never mounted (EINVAL): either way no longer in
		 * the container. Anything else is said, but the share goes. */
		if (op->error && op->error != EINVAL)
			log_warn("share `%s`: unmount in the guest: %s", op->tag,
				 op->why && *op->why ? op->why : strerror((int)op->error));
		if (op->exported)
			machine_share_drop(&s->m, op->tag);
		live_set(&s->shares, op->tag, NULL);
		if (!op->ephemeral && save(s, op->tag, NULL, &err) < 0)
			reply_err(s, op->c, &err);
		else
			client_answer(s, op->c, NULL);
		log_info("share `%s` removed%s", op->tag, op->ephemeral ? " (ephemeral)" : "");
	}
	op_free(op);
}

void sup_shares_done(struct sup *s, const struct proto_msg *m)
{
	for (size_t i = 0; i < SUP_SHARE_OPS; i++) {
		struct share_op *op = &s->shares.ops[i];

		if (op->stage != SHARE_GUEST || op->last_id != m->u.done.id)
			continue;
		op->error = m->u.done.error;
		op->why = xstrdup(m->u.done.message ? m->u.done.message : "");
		op_finish(s, op);
		return;
	}
	/* An UNMOUNT before a replacing MOUNT, or an id of nothing: said
	 * only when it failed, and not so often a guest can flood the log. */
	if (m->u.done.error && sup_log_due(&s->error_logged))
		log_warn("guest: mount request %u: %s", m->u.done.id, m->u.done.message);
}

void sup_shares_client_gone(struct sup *s, struct client *c)
{
	for (size_t i = 0; i < SUP_SHARE_OPS; i++)
		if (s->shares.ops[i].c == c)
			s->shares.ops[i].c = NULL;
}

void sup_shares_guest_gone(struct sup *s, const char *why)
{
	for (size_t i = 0; i < SUP_SHARE_OPS; i++) {
		struct share_op *op = &s->shares.ops[i];

		if (op->stage == SHARE_FREE)
			continue;
		client_answer(s, op->c, why);
		op_free(op);
	}
}

/* --- share.ls and the entry point ------------------------------------------------------------ */

static bool has(char *const *v, size_t n, const char *spec)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], spec) == 0)
			return true;
	return false;
}

static void share_ls(struct sup *s, struct client *c)
{
	struct sup_shares *sh = &s->shares;
	struct sandbox *sb = &s->sb;
	json_t *a = json_array();

	for (size_t i = 0; i < sh->nr_live; i++) {
		json_t *o = share_json(sh->live[i]);
		const char *tag = json_string_value(json_object_get(o, "tag"));

		json_object_set_new(o, "live", json_true());
		json_object_set_new(o, "saved", json_boolean(has(sb->shares, sb->nr_shares, sh->live[i])));
		json_object_set_new(o, "open", json_integer((json_int_t)machine_share_handles(
						       &s->m, tag ? tag : "")));
		json_array_append_new(a, o);
	}
	/* Saved for the next boot, but not in the container now (removed
	 * or replaced with --ephemeral). */
	for (size_t i = 0; i < sb->nr_shares; i++) {
		json_t *o;

		if (has(sh->live, sh->nr_live, sb->shares[i]))
			continue;
		o = share_json(sb->shares[i]);
		json_object_set_new(o, "live", json_false());
		json_object_set_new(o, "saved", json_true());
		json_array_append_new(a, o);
	}
	client_reply_json(s, c, json_pack("{s:b,s:o}", "ok", 1, "shares", a));
}

/* Every share request: c waits for its answer; false when it has it
 * already (the guest cannot take one, where changes says it must). */
static bool share_begin(struct sup *s, struct client *c, size_t end, bool changes)
{
	client_line_done(c, end);
	c->waiting = true;
	c->deadline = 0;
	if (!changes)
		return true;
	if (s->stopping || s->control < 0)
		client_answer(s, c, s->stopping ? "the sandbox is stopping" : s->guest_gone);
	else if (!machine_shares_running(&s->m))
		client_answer(s, c, "the sandbox has no share device (its root is read-only)");
	else
		return true;
	return false;
}

void ctl_share_ls(struct sup *s, struct client *c, json_t *req, size_t end)
{
	(void)req;
	if (share_begin(s, c, end, false))
		share_ls(s, c);
}

void ctl_share_add(struct sup *s, struct client *c, json_t *req, size_t end)
{
	if (share_begin(s, c, end, true))
		share_add(s, c, req);
}

void ctl_share_rm(struct sup *s, struct client *c, json_t *req, size_t end)
{
	if (share_begin(s, c, end, true))
		share_rm(s, c, req);
}
