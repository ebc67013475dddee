/* Ending sandboxes (see lifecycle.h): stop, stop with a save (pause),
 * dropping a save, and delete, each under the sandbox's lock. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/files.h"
#include "common/util.h"
#include "sandbox/ctl.h"
#include "sandbox/lifecycle.h"
#include "sandbox/lifecycle_priv.h"
#include "sandbox/rwlayer.h"
#include "snapshot/files.h"

#define STOP_WAIT_MS (CTL_STOP_TIMEOUT_MS + 10000)
#define TERM_WAIT_MS 10000 /* SIGTERM to SIGKILL, as docker stop */

int sandbox_discard_save(const char *name, gantry_error_t *err)
{
	cleanup_free char *dir = NULL, *pause = NULL;
	struct sandbox sb = { 0 };

	if (lifecycle_open_as(name, false, &dir, &sb, err) < 0)
		return -1;
	sandbox_free(&sb);
	if (sandbox_is_running(dir))
		return gantry_error(err, 0, "sandbox `%s` is running", name);
	xasprintf(&pause, "%s/%s", dir, SANDBOX_PAUSE);
	snap_remove(pause);
	return 0;
}

/* Wait for the lifetime lock to be free: the supervisor has exited. */
static int wait_gone(const char *dir, uint64_t deadline)
{
	struct timespec pause = { .tv_nsec = 10 * 1000000L };

	while (sandbox_is_running(dir)) {
		if (now_ms() >= deadline)
			return -1;
		nanosleep(&pause, NULL);
	}
	return 0;
}

/* The process pid holding dir's lock (a supervisor, a one-shot exec):
 * SIGTERM, then SIGKILL if it holds the lock TERM_WAIT_MS later. */
static void end_holder(const char *dir, long pid)
{
	if (pid <= 0 || !sandbox_is_running(dir))
		return;
	kill((pid_t)pid, SIGTERM);
	if (wait_gone(dir, now_ms() + TERM_WAIT_MS) < 0) {
		kill((pid_t)pid, SIGKILL);
		wait_gone(dir, now_ms() + 5000);
	}
}

static int stop_running(const char *name, const char *dir, struct sandbox *sb, gantry_error_t *err)
{
	uint64_t deadline = now_ms() + STOP_WAIT_MS;
	cleanup_close int fd = -1;
	gantry_error_t cerr = NULL;

	if (ctl_connect(dir, &fd, &cerr) == 0 &&
	    ctl_call(fd, CTL_OP_STOP, STOP_WAIT_MS, NULL, &cerr) == 0 &&
	    wait_gone(dir, deadline) == 0) {
		gantry_error_free(&cerr);
		return 0;
	}
	/* A supervisor that does not answer: end it. */
	gantry_error_free(&cerr);
	if (sandbox_load(dir, sb, NULL) == 0)
		end_holder(dir, sb->pid);
	if (sandbox_is_running(dir))
		return gantry_error(err, 0, "sandbox `%s` did not stop", name);
	return 0;
}

/* A one-shot exec's process: SIGTERM, which it forwards to its command
 * (or which cancels its boot), then SIGKILL; its entry goes with it. */
static int stop_oneshot(const char *name, const char *dir, long pid, gantry_error_t *err)
{
	end_holder(dir, pid);
	if (sandbox_is_running(dir))
		return gantry_error(err, 0, "one-shot exec `%s` did not stop", name);
	lifecycle_oneshot_gone(name, dir);
	return 0;
}

int sandbox_stop(const char *name, gantry_error_t *err)
{
	cleanup_free char *dir = NULL;
	struct sandbox sb = { 0 };
	int r;

	if (lifecycle_open_as(name, true, &dir, &sb, err) < 0)
		return -1;
	if (sb.transient) {
		r = stop_oneshot(name, dir, sb.pid, err);
		sandbox_free(&sb);
		return r;
	}
	sandbox_free(&sb);
	if (!sandbox_is_running(dir))
		return 0; /* stopped already: as asked */
	r = stop_running(name, dir, &sb, err);
	sandbox_free(&sb);
	return r;
}

/* A running sandbox's ctl.sock, connected (*fd), for a request that a
 * one-shot exec cannot take (not_oneshot says why). */
static int running_ctl(const char *name, const char *not_oneshot, char **dir, int *fd,
		       gantry_error_t *err)
{
	struct sandbox sb = { 0 };
	int r = -1;

	if (lifecycle_open_as(name, true, dir, &sb, err) < 0)
		goto out;
	if (sb.transient)
		gantry_error(err, 0, "%s", not_oneshot);
	else if (!sandbox_is_running(*dir))
		gantry_error(err, 0, "it is not running");
	else
		r = ctl_connect(*dir, fd, err);
out:
	sandbox_free(&sb);
	return r;
}

int sandbox_pause(const char *name, bool with_secrets, gantry_error_t *err)
{
	json_t *req = json_pack("{s:s,s:b,s:b}", "op", CTL_OP_STOP, "snapshot", 1, "secrets",
				with_secrets);
	cleanup_free char *dir = NULL;
	cleanup_close int fd = -1;
	int r = -1;

	/* A refusal leaves it running, and so does a supervisor that does
	 * not answer: nothing is ended here. */
	if (running_ctl(name, "a one-shot exec is not saved", &dir, &fd, err) < 0 ||
	    ctl_request(fd, req, STOP_WAIT_MS, NULL, err) < 0)
		goto out;
	if (wait_gone(dir, now_ms() + STOP_WAIT_MS) < 0) {
		gantry_error(err, 0, "it did not stop");
		goto out;
	}
	r = 0;
out:
	json_decref(req);
	return r < 0 ? gantry_error_prefix(err, "stop and save `%s`", name) : 0;
}

int sandbox_freeze(const char *name, bool freeze, gantry_error_t *err)
{
	json_t *req = json_pack("{s:s,s:b}", "op", CTL_OP_FREEZE, "frozen", freeze);
	cleanup_free char *dir = NULL;
	cleanup_close int fd = -1;
	int r = -1;

	if (running_ctl(name, "a one-shot exec is not paused", &dir, &fd, err) == 0)
		r = ctl_request(fd, req, STOP_WAIT_MS, NULL, err);
	json_decref(req);
	return r < 0 ? gantry_error_prefix(err, "%s `%s`", freeze ? "pause" : "unpause", name) : 0;
}

/* Its sandbox.json is there and does not read. */
static bool broken(const char *dir)
{
	struct sandbox sb = { 0 };
	gantry_error_t why = NULL;
	bool b = sandbox_load(dir, &sb, &why) < 0 && why && why->status != ENOENT;

	sandbox_free(&sb);
	gantry_error_free(&why);
	return b;
}

/* A sandbox whose sandbox.json does not read: its directory and the
 * layer Gantry would have made for it (a -rwlayer of the user's is never
 * under rwlayers/), unless its supervisor still runs. */
static int delete_broken(const char *name, const char *dir, gantry_error_t *err)
{
	cleanup_free char *layer = NULL;
	cleanup_close int lock = -1;

	gantry_error_free(err);
	if (sandbox_is_running(dir) || sandbox_lock(dir, true, &lock, err) != 1)
		return gantry_error(err, 0,
				    "sandbox `%s` is broken but its supervisor still runs: end it "
				    "first",
				    name);
	if (sandbox_rwlayer_default(name, &layer, err) < 0)
		return -1;
	rwlayer_remove(layer);
	return sandbox_dir_remove(name, dir, err);
}

int sandbox_delete(const char *name, bool force, gantry_error_t *err)
{
	cleanup_free char *dir = NULL;
	cleanup_close int lock = -1;
	struct sandbox sb = { 0 }, again = { 0 };

	if (force && sandbox_name_valid(name) && sandbox_dir(name, &dir, err) == 0 && broken(dir))
		return delete_broken(name, dir, err);
	free(dir);
	dir = NULL;
	if (lifecycle_open_as(name, true, &dir, &sb, err) < 0) {
		if (dir && broken(dir))
			gantry_error_prefix(err, "sandbox `%s` is broken (a forced delete removes it)",
					    name);
		return -1;
	}
	if (sb.transient) {
		int r = stop_oneshot(name, dir, sb.pid, err);

		sandbox_free(&sb);
		return r;
	}
	if (lifecycle_creator_alive(&sb)) {
		gantry_error(err, 0, "sandbox `%s` is being created (by process %ld); try again",
			     name, sb.pid);
		goto fail;
	}
	if (sandbox_is_running(dir) && stop_running(name, dir, &again, err) < 0)
		goto fail;
	sandbox_free(&again);
	/* Hold the lock so a racing resume cannot boot what we remove. */
	if (sandbox_lock(dir, true, &lock, err) != 1) {
		gantry_error(err, 0, "sandbox `%s` is busy (being resumed?)", name);
		goto fail;
	}
	/* While we hold the name: once the directory is gone, a new start of
	 * it may make a layer of the same path. */
	if (sb.writable && sb.rwlayer_managed)
		rwlayer_remove(sb.rwlayer);
	if (sandbox_dir_remove(name, dir, err) < 0)
		goto fail;
	sandbox_free(&sb);
	return 0;
fail:
	sandbox_free(&sb);
	sandbox_free(&again);
	return -1;
}

/* What a listing shows: running while the lock is held, else the file's
 * word with a dead supervisor's crash recorded. */
