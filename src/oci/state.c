/* A container's record under the runtime's --root (oci.h): ROOT/ID/
 * state.json, written whole (rename) by create and start, and the status
 * derived from it as runc derives its own: from whether the process it
 * names still runs. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/files.h"
#include "common/json.h"
#include "common/util.h"
#include "oci/oci.h"
#include "sandbox/lifecycle.h"

#define STATE_JSON "state.json"
#define STATE_MAX  (1u << 20)

int oci_state_dir(const char *root, const char *id, bool make, char **out, gantry_error_t *err)
{
	if (!oci_id_valid(id))
		return gantry_error(err, 0, "invalid container id `%.64s`: %s", id, OCI_ID_RULE);
	if (make) {
		if (mkdir_p(root, err) < 0)
			return -1;
		chmod(root, 0700);
	}
	xasprintf(out, "%s/%s", root, id);
	if (make && mkdir(*out, 0700) < 0) {
		int e = errno;

		free(steal_pointer(out));
		if (e == EEXIST)
			return gantry_error(err, EEXIST, "container with id exists: %s", id);
		return gantry_error(err, e, "mkdir %s/%s: %s", root, id, strerror(e));
	}
	return 0;
}

uint64_t oci_pid_start(pid_t pid)
{
	unsigned long long start;
	char state;

	/* A zombie has ended: its status is all that is left of it. */
	if (proc_start(pid, &start, &state) < 0 || state == 'Z' || state == 'X')
		return 0;
	return start;
}

int oci_state_load(const char *dir, struct oci_state *st, gantry_error_t *err)
{
	cleanup_free char *path = NULL, *text = NULL;
	uint64_t pid = 0;
	size_t len;
	json_t *j;
	int r = -1;

	memset(st, 0, sizeof(*st));
	xasprintf(&path, "%s/%s", dir, STATE_JSON);
	if (read_file_max(path, STATE_MAX, &text, &len, err) < 0)
		return -1;
	if (text == NULL)
		return gantry_error(err, ENOENT, "`%s`", path);
	j = jsonh_load(text, len, path, err);
	if (j == NULL)
		return -1;
	if (jsonh_string(j, "id", true, &st->id, err) < 0 ||
	    jsonh_string(j, "bundle", true, &st->bundle, err) < 0 ||
	    jsonh_string(j, "rootfs", false, &st->root, err) < 0 ||
	    jsonh_string(j, "created", false, &st->created, err) < 0 ||
	    jsonh_u64(j, "pid", false, &pid, err) < 0 ||
	    jsonh_u64(j, "pid_starttime", false, &st->pid_start, err) < 0)
		goto out;
	st->pid = (pid_t)MIN(pid, (uint64_t)INT32_MAX);
	st->started = json_is_true(json_object_get(j, "started"));
	st->annotations = json_object_get(j, "annotations");
	st->annotations = json_is_object(st->annotations) ? json_incref(st->annotations)
							   : json_object();
	r = 0;
out:
	json_decref(j);
	if (r < 0)
		oci_state_free(st);
	return r;
}

int oci_state_save(const char *dir, const struct oci_state *st, gantry_error_t *err)
{
	cleanup_free char *path = NULL, *text = NULL;
	json_t *j = oci_state_json(st);

	json_object_set_new(j, "pid", json_integer(st->pid));
	json_object_set_new(j, "pid_starttime", json_integer((json_int_t)st->pid_start));
	json_object_set_new(j, "started", json_boolean(st->started));
	text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	xasprintf(&path, "%s/%s", dir, STATE_JSON);
	return write_file_atomic(path, text, strlen(text), 0600, err);
}

void oci_state_free(struct oci_state *st)
{
	free(st->id);
	free(st->bundle);
	free(st->root);
	free(st->created);
	json_decref(st->annotations);
	memset(st, 0, sizeof(*st));
}

enum oci_status oci_status_of(const struct oci_state *st)
{
	cleanup_free char *dir = NULL, *frozen = NULL;

	if (st->pid <= 0)
		return OCI_CREATING;
	if (st->pid_start == 0 || oci_pid_start(st->pid) != st->pid_start)
		return OCI_STOPPED;
	if (sandbox_dir(st->id, &dir, NULL) == 0) {
		xasprintf(&frozen, "%s/%s", dir, SANDBOX_FROZEN);
		if (access(frozen, F_OK) == 0)
			return OCI_PAUSED;
	}
	return st->started ? OCI_RUNNING : OCI_CREATED;
}

const char *oci_status_name(enum oci_status s)
{
	static const char *const names[] = { "creating", "created", "running", "stopped",
					     "paused" };

	return names[s];
}

json_t *oci_state_json(const struct oci_state *st)
{
	enum oci_status s = oci_status_of(st);
	json_t *j = json_object();

	json_object_set_new(j, "ociVersion", json_string(OCI_SPEC_VERSION));
	json_object_set_new(j, "id", json_string(st->id));
	json_object_set_new(j, "pid", json_integer(s == OCI_STOPPED ? 0 : st->pid));
	json_object_set_new(j, "status", json_string(oci_status_name(s)));
	json_object_set_new(j, "bundle", json_string(st->bundle));
	json_object_set_new(j, "rootfs", jsonh_string_or_null(st->root));
	json_object_set_new(j, "created", jsonh_string_or_null(st->created));
	json_object_set_new(j, "owner", json_string(""));
	json_object_set_new(j, "annotations",
			    st->annotations ? json_incref(st->annotations) : json_object());
	return j;
}
