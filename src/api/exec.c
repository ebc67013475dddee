/* POST /v1/sandboxes/{name}/exec: a command in a running sandbox, its
 * stdin from the request, its output (stdout and stderr as they came)
 * gathered up to the request's limit, within its timeout (job.h): ended
 * on a timeout (408), on output past the limit (413), when its client
 * goes, or at the server's end (503). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_priv.h"
#include "api/fields.h"
#include "api/job.h"
#include "common/text.h"
#include "common/util.h"

static const struct api_field exec_fields[] = {
	API_REQUIRED("argv", API_STRINGS),
	API_FIELD("cwd", API_STRING),
	API_FIELD("env", API_STRINGS),
	API_FIELD("stdin", API_STRING),
	API_RANGE("timeoutSeconds", 1, API_TIMEOUT_MAX),
	API_RANGE("maxOutputBytes", 1, API_OUTPUT_MAX),
	API_FIELDS_END,
};

static char **strv_of(json_t *a, size_t *n)
{
	char **v = xzalloc((json_array_size(a) + 1) * sizeof(*v));
	size_t i;
	json_t *e;

	json_array_foreach(a, i, e) v[i] = (char *)json_string_value(e);
	*n = json_array_size(a);
	return v;
}

/* What is not UTF-8 in the output becomes U+FFFD, for a JSON string. */
static json_t *text(const char *p, size_t n)
{
	size_t len;
	cleanup_free char *t = text_utf8_replaced(p, n, &len);
	json_t *j = json_stringn(t, len);

	return j ? j : json_string("");
}

static void answer(struct api_server *s, struct api_job *j, uint64_t timeout, struct api_reply *r)
{
	switch (j->end) {
	case API_JOB_TIMEOUT:
		return api_reply_error(r, 408, "the command ran past its %llus timeout",
				       (unsigned long long)timeout);
	case API_JOB_OVER:
		return api_reply_error(r, 413, "the command's output went past %zu bytes", j->max);
	case API_JOB_GONE: /* nobody to tell */
		return api_reply_error(r, 400, "the client went away");
	case API_JOB_STOPPING:
		return api_reply_error(r, 503, "the server is stopping");
	case API_JOB_DONE:
		break;
	}
	if (j->ret < 0 && cancel_fired(&s->cancel))
		return api_reply_error(r, 503, "the server is stopping");
	if (j->ret < 0)
		return api_reply_failure(r, j->e, 409);
	api_reply_json(r, 200,
		       json_pack("{s:i,s:o,s:o}", "exitCode", j->res.exit_code, "signal",
				 j->res.signal ? json_integer(j->res.signal) : json_null(),
				 "output", text(j->out ? j->out : "", j->out_len)));
}

void api_exec(struct api_server *s, const char *name, const char *body, size_t len, int conn_fd,
	      struct api_reply *r)
{
	json_t *req = api_body_object(body, len, r), *argv, *env, *in;
	struct api_job j = {
		.name = name, .merge = true, .max = API_OUTPUT_DEFAULT, .conn_fd = conn_fd, .in = ""
	};
	uint64_t timeout = API_TIMEOUT_DEFAULT;
	gantry_error_t err = NULL;

	if (req == NULL || !api_fields_check(req, exec_fields, r))
		goto out;
	argv = json_object_get(req, "argv");
	env = json_object_get(req, "env");
	in = json_object_get(req, "stdin");
	if (json_array_size(argv) == 0 || json_array_size(argv) > API_ARGV_MAX) {
		api_reply_error(r, 400, "field `argv` must hold 1 to %d strings", API_ARGV_MAX);
		goto out;
	}
	if (in && json_string_length(in) > API_STDIN_MAX) {
		api_reply_error(r, 413, "field `stdin` is over %u bytes", API_STDIN_MAX);
		goto out;
	}
	if (json_object_get(req, "timeoutSeconds"))
		timeout = (uint64_t)json_integer_value(json_object_get(req, "timeoutSeconds"));
	if (json_object_get(req, "maxOutputBytes"))
		j.max = (size_t)json_integer_value(json_object_get(req, "maxOutputBytes"));
	if (in) {
		j.in = json_string_value(in);
		j.in_len = json_string_length(in);
	}
	j.x.argv = strv_of(argv, &j.x.argc);
	if (env)
		j.x.env = strv_of(env, &j.x.nr_env);
	j.x.cwd = json_string_value(json_object_get(req, "cwd"));
	if (!api_exec_slot(s, true, r))
		goto out;
	j.deadline = now_ms() + timeout * 1000;
	if (api_job_run(s, &j, &err) < 0) {
		api_reply_error(r, 500, "exec: %s", gantry_error_str(err));
		gantry_error_free(&err);
	} else {
		answer(s, &j, timeout, r);
	}
	api_job_free(&j);
	api_exec_slot(s, false, NULL);
out:
	free(j.x.argv);
	free(j.x.env);
	json_decref(req);
}
