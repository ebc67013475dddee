/* A sandbox's processes (procs.h): gantry-init's helper run as a session
 * of the container (`PROTO_HELPER_PATH files 1 ps`, as root so that it
 * sees every process), its records read as a guest's words. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/text.h"
#include "common/util.h"
#include "proto/agent.h"
#include "proto/files.h"
#include "sandbox/drain.h"
#include "sandbox/lifecycle.h"
#include "sandbox/procs.h"

#define PROCS_WHY_MAX 300

/* Run the helper; its stdout into *out (malloc()ed, *len), its stderr's
 * first line into why. */
static int run_ps(const char *name, const struct gantry_cancel *cancel, char **out, size_t *len,
		  struct agent_result *res, char why[PROCS_WHY_MAX + 1], gantry_error_t *err)
{
	char *args[] = { PROTO_HELPER_PATH, PROTO_FILES_ARG, PROTO_FILES_VERSION, "ps", NULL };
	struct sandbox_process_opts po = {
		.args = args, .nargs = 4, .user = "0:0", .entrypoint = "", .workdir = "/"
	};
	struct drain o = { .fd = -1 }, e = { .fd = -1 };
	int po_[2] = { -1, -1 }, pe[2] = { -1, -1 }, devnull, rc = -1;
	char *buf = xmalloc(SANDBOX_PROCS_OUT_MAX + 1);

	why[0] = '\0';
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (devnull < 0 || pipe2(po_, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
		gantry_error_errno(err, "pipe");
		goto out;
	}
	if (drain_start(&o, po_[0], buf, SANDBOX_PROCS_OUT_MAX) < 0 ||
	    drain_start(&e, pe[0], why, PROCS_WHY_MAX) < 0) {
		gantry_error(err, EAGAIN, "cannot start a thread");
		goto out;
	}
	{
		struct sandbox_stdio io = {
			.in = devnull, .out = po_[1], .err = pe[1], .signal_fd = -1
		};

		rc = sandbox_exec(name, &po, &io, cancel, res, err);
	}
out:
	close_fd(&po_[1]); /* the readers see their end */
	close_fd(&pe[1]);
	drain_join(&o);
	drain_join_line(&e);
	close_fd(&po_[0]);
	close_fd(&pe[0]);
	close_fd(&devnull);
	if (rc == 0 && o.over)
		rc = gantry_error(err, EFBIG, "sandbox `%s`: its process list is over %u bytes",
				  name, SANDBOX_PROCS_OUT_MAX);
	if (rc < 0) {
		free(buf);
		return -1;
	}
	*out = buf;
	*len = o.len;
	return 0;
}

static int parse(const char *name, const char *buf, size_t len, struct sandbox_proc **out,
		 size_t *n, gantry_error_t *err)
{
	struct sandbox_proc *v = NULL;
	struct files_record r;
	const char *why = NULL;
	size_t off = 0, count = 0;
	int k;

	while ((k = files_next(buf, len, &off, &r, &why)) == 1) {
		if (r.kind != 'p') {
			why = "a record that is no process";
			break;
		}
		v = xrealloc(v, (count + 1) * sizeof(*v));
		v[count] = (struct sandbox_proc){ .pid = r.pid,
						  .ppid = r.ppid,
						  .uid = r.uid,
						  .state = r.state,
						  .rss_kib = r.rss_kib,
						  .command = xstrndup(r.path, r.path_len) };
		text_sanitize(v[count].command, 0);
		count++;
	}
	if (k != 0) {
		sandbox_processes_free(v, count);
		return gantry_error(err, EPROTO, "sandbox `%s`: its process list is malformed: %s",
				    name, why);
	}
	*out = v;
	*n = count;
	return 0;
}

int sandbox_processes(const char *name, const struct gantry_cancel *cancel,
		      struct sandbox_proc **out, size_t *n, gantry_error_t *err)
{
	char why[PROCS_WHY_MAX + 1] = "", *buf = NULL;
	struct agent_result res = { 0 };
	size_t len = 0;
	int ret = -1;

	*out = NULL;
	*n = 0;
	if (run_ps(name, cancel, &buf, &len, &res, why, err) < 0)
		goto out;
	if (res.error || (!res.signaled && (res.code == 126 || res.code == 127)))
		gantry_error(err, ENOTSUP,
			     "sandbox `%s`: its guest has no process helper (started by an older "
			     "Gantry: stop and resume it)",
			     name);
	else if (res.signaled || res.code != 0)
		gantry_error(err, EIO, "sandbox `%s`: its process list failed: %s", name,
			     why[0]	    ? why
			     : res.signaled ? "killed"
					    : "no reason given");
	else
		ret = parse(name, buf, len, out, n, err);
out:
	free(buf);
	agent_result_free(&res);
	return ret;
}

void sandbox_processes_free(struct sandbox_proc *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].command);
	free(v);
}

int sandbox_processes_json(const char *name, const struct gantry_cancel *cancel, json_t **out,
			   gantry_error_t *err)
{
	struct sandbox_proc *v;
	json_t *a;
	size_t n;

	if (sandbox_processes(name, cancel, &v, &n, err) < 0)
		return -1;
	a = json_array();
	for (size_t i = 0; i < n; i++) {
		char state[2] = { v[i].state, '\0' };

		/* A command that is not UTF-8 is shown with its bytes replaced. */
		json_array_append_new(
			a, json_pack("{s:I,s:I,s:I,s:s,s:I,s:s}", "pid", (json_int_t)v[i].pid,
				     "ppid", (json_int_t)v[i].ppid, "uid", (json_int_t)v[i].uid,
				     "state", state, "rssKiB", (json_int_t)v[i].rss_kib, "command",
				     text_sanitize_utf8(v[i].command)));
	}
	sandbox_processes_free(v, n);
	*out = json_pack("{s:o}", "processes", a);
	return 0;
}
