/* A live snapshot of the running sandbox (ctl "snapshot"): the VM saved
 * while it stays up, its writable layer copied as the save left it. And
 * a pause without a save (ctl "freeze"). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "common/files.h"
#include "common/log.h"
#include "common/util.h"
#include "sandbox/snapshots.h"
#include "snapshot/files.h"
#include "supervisor/supervisor_priv.h"

/* The save just written, from SANDBOX_PAUSE into dir: moved, the VM
 * handed new files for its next save; or, dir on another filesystem,
 * copied, the VM keeping its files. */
static int save_into(struct sup *s, const char *dir, gantry_error_t *err)
{
	int state_fd, mem_fd, r = snap_take(&s->pause, dir, &state_fd, &mem_fd, err);

	if (r > 0) {
		machine_checkpoint_go(&s->m, state_fd, mem_fd);
		close(s->pause.state_fd);
		close(s->pause.mem_fd);
		s->pause.state_fd = state_fd;
		s->pause.mem_fd = mem_fd;
		return 0;
	}
	if (r == 0) {
		static const char *const names[][2] = { { SNAP_MEMORY_NEW, SNAP_MEMORY },
							{ SNAP_STATE_NEW, SNAP_STATE } };

		for (size_t i = 0; i < ARRAY_SIZE(names) && r == 0; i++) {
			cleanup_free char *from = NULL, *to = NULL;

			xasprintf(&from, "%s/%s", SANDBOX_PAUSE, names[i][0]);
			xasprintf(&to, "%s/%s", dir, names[i][1]);
			r = sandbox_snapshot_copy(from, to, err);
		}
	}
	machine_checkpoint_go(&s->m, -1, -1);
	return r;
}

static int snapshot_live(struct sup *s, const char *dir, bool with_secrets, gantry_error_t *err)
{
	cleanup_free char *layer = NULL, *origin = NULL;
	double t0 = now_ms_frac(), t_saved;
	const char *why = sup_pause_refused(s, true, with_secrets);

	if (why)
		return gantry_error(err, 0, "%s", why);
	if (!s->sb.writable)
		return gantry_error(err, 0, "it has no writable layer to snapshot");
	if (machine_checkpoint(&s->m, SUP_SAVE_MS, err) < 0)
		return -1;
	t_saved = now_ms_frac();
	/* The VM is paused: its disk is as its saved page cache knows it. */
	xasprintf(&layer, "%s/%s", dir, SNAPSHOT_LAYER);
	if (sandbox_snapshot_copy(s->sb.rwlayer, layer, err) < 0) {
		machine_checkpoint_go(&s->m, -1, -1);
		return -1;
	}
	if (save_into(s, dir, err) < 0)
		return -1;
	/* Whose save it is: a clone made from it renews its identity. */
	xasprintf(&origin, "%s/%s", dir, SNAP_ORIGIN);
	if (write_file_atomic(origin, s->name, strlen(s->name), 0600, err) < 0)
		return -1;
	log_info("saved live into %s: paused %.1f ms (the save %.1f ms)", dir, now_ms_frac() - t0,
		 t_saved - t0);
	return 0;
}

void ctl_snapshot(struct sup *s, struct client *c, json_t *j, size_t end)
{
	const char *dir = json_string_value(json_object_get(j, "dir"));
	gantry_error_t err = NULL;

	client_line_done(c, end);
	if (dir == NULL || dir[0] != '/')
		gantry_error(&err, 0, "a snapshot wants the absolute path of an empty directory");
	else
		snapshot_live(s, dir, json_is_true(json_object_get(j, "secrets")), &err);
	client_answer(s, c, err ? gantry_error_str(err) : NULL);
	gantry_error_free(&err);
}

/* --- a pause without a save ------------------------------------------------------------------ */

static int sup_freeze(struct sup *s, bool freeze, gantry_error_t *err)
{
	int fd;

	if (s->frozen == freeze)
		return 0;
	if (machine_freeze(&s->m, freeze, SUP_FREEZE_MS, err) < 0)
		return -1;
	s->frozen = freeze;
	if (!freeze) {
		unlink(SANDBOX_FROZEN);
	} else if ((fd = open(SANDBOX_FROZEN, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) >= 0) {
		close(fd);
	}
	log_info("%s (asked to)", freeze ? "paused" : "running on");
	return 0;
}

void sup_thaw_for_end(struct sup *s)
{
	gantry_error_t err = NULL;

	if (s->frozen && sup_freeze(s, false, &err) < 0) {
		log_warn("%s", gantry_error_str(err));
		gantry_error_free(&err);
	}
}

void ctl_freeze(struct sup *s, struct client *c, json_t *j, size_t end)
{
	gantry_error_t err = NULL;

	client_line_done(c, end);
	if (s->stopping)
		gantry_error(&err, 0, "the sandbox is stopping");
	else
		sup_freeze(s, json_is_true(json_object_get(j, "frozen")), &err);
	client_answer(s, c, err ? gantry_error_str(err) : NULL);
	gantry_error_free(&err);
}
