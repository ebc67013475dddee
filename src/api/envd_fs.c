/* envd's files as the E2B SDK reaches them (e2b.h): GET and POST /files
 * (a file's bytes, and an upload as multipart/form-data or raw), and the
 * filesystem service's Stat, ListDir, MakeDir, Remove and Move. Each runs
 * gantry-init's file helper in the container (proto/files.h), as any
 * session runs there, so it needs nothing of the image; paths and data
 * travel as its arguments and stdin, and its records are read with
 * files_next(). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/e2b.h"
#include "api/job.h"
#include "common/util.h"
#include "proto/agent.h"
#include "proto/files.h"

/* ---- a command, to its end ---- */

int envd_run(struct api_server *s, const char *box, char *const *argv, const void *in,
	     size_t in_len, size_t max, int conn_fd, struct envd_ran *ran, gantry_error_t *err)
{
	struct api_reply busy = { 0 };
	struct api_job j = { .name = box,
			     .x = { .argv = (char **)argv, .raw = true },
			     .in = in ? in : "",
			     .in_len = in_len,
			     .max = max,
			     .deadline = now_ms() + ENVD_RUN_MS,
			     .conn_fd = conn_fd };
	int ret = -1;

	*ran = (struct envd_ran){ 0 };
	while (argv[j.x.argc])
		j.x.argc++;
	if (!api_exec_slot(s, true, &busy)) {
		json_decref(busy.json);
		return gantry_error(err, EBUSY, "%d commands under way already", API_EXECS_MAX);
	}
	if (api_job_run(s, &j, err) < 0)
		goto out;
	switch (j.end) {
	case API_JOB_DONE:
		if (j.ret < 0) {
			*err = steal_pointer(&j.e);
			break;
		}
		ran->status = j.res.exit_code;
		ran->out = steal_pointer(&j.out);
		ran->err = steal_pointer(&j.err);
		ran->out_len = j.out_len;
		ran->err_len = j.err_len;
		ret = 0;
		break;
	case API_JOB_OVER:
		gantry_error(err, EFBIG, "over %zu bytes", max);
		break;
	case API_JOB_TIMEOUT:
		gantry_error(err, ETIMEDOUT, "no end in %d s", ENVD_RUN_MS / 1000);
		break;
	default:
		gantry_error(err, ECANCELED, "cancelled: %s",
			     j.end == API_JOB_GONE ? "the client went away"
						   : "the server is stopping");
	}
	api_job_free(&j);
out:
	api_exec_slot(s, false, NULL);
	return ret;
}

void envd_ran_free(struct envd_ran *ran)
{
	free(ran->out);
	free(ran->err);
	*ran = (struct envd_ran){ 0 };
}

/* ---- the file helper ---- */

/* The helper's argv for op, its arguments after it. */
#define HELPER_ARGV(op, ...)                                                                       \
	(char *[])                                                                                 \
	{                                                                                          \
		PROTO_HELPER_PATH, PROTO_FILES_ARG, PROTO_FILES_VERSION, op, __VA_ARGS__, NULL     \
	}

/* The Connect status and code of the helper's exit status. */
void envd_helper_status(int status, unsigned *http, const char **code)
{
	switch (status) {
	case PROTO_FILES_NOENT:
		*http = 404, *code = "not_found";
		break;
	case PROTO_FILES_DENIED:
		*http = 403, *code = "permission_denied";
		break;
	case PROTO_FILES_EXIST:
		*http = 409, *code = "already_exists";
		break;
	case PROTO_FILES_NOTDIR:
	case PROTO_FILES_ISDIR:
	case PROTO_FILES_USAGE:
		*http = 400, *code = "invalid_argument";
		break;
	case PROTO_FILES_NOSPACE:
		*http = 507, *code = "resource_exhausted";
		break;
	default:
		*http = 500, *code = "internal";
	}
}

/* Its one line on stderr, or a word when it said nothing (a helper that
 * could not run at all: crun's 126 and 127 say so). */
static const char *helper_why(struct envd_ran *ran)
{
	if (ran->err && *ran->err) {
		ran->err[strcspn(ran->err, "\n")] = '\0';
		return ran->err;
	}
	if (ran->status == 126 || ran->status == 127)
		return "the sandbox's file helper cannot run (a sandbox started by an older "
		       "Gantry: restart it)";
	return "failed";
}

/* Run the helper; 0 with *ran its output when it exited 0, else -1 with
 * r filled (envd's shape, or E2B's when plain). */
static int helper(struct api_server *s, const char *box, char *const *argv, const void *in,
		  size_t in_len, size_t max, int conn_fd, bool plain, struct envd_ran *ran,
		  struct api_reply *r)
{
	gantry_error_t err = NULL;
	const char *code;
	unsigned http;

	if (envd_run(s, box, argv, in, in_len, max, conn_fd, ran, &err) < 0) {
		http = err->status == EFBIG ? 400 : 500;
		if (plain)
			e2b_error(r, http, "%s", gantry_error_str(err));
		else
			envd_error(r, http, http == 400 ? "invalid_argument" : "internal", "%s",
				   gantry_error_str(err));
		gantry_error_free(&err);
		return -1;
	}
	if (ran->status == 0)
		return 0;
	envd_helper_status(ran->status, &http, &code);
	if (plain)
		e2b_error(r, http, "%.400s", helper_why(ran));
	else
		envd_error(r, http, code, "%.400s", helper_why(ran));
	envd_ran_free(ran);
	return -1;
}

static const char *file_type(char t)
{
	return t == 'd' ? "FILE_TYPE_DIRECTORY" : t == 'l' ? "FILE_TYPE_SYMLINK" : "FILE_TYPE_FILE";
}

static void permissions(unsigned mode, bool dir, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";

	out[0] = dir ? 'd' : '-';
	for (int i = 0; i < 9; i++)
		out[i + 1] = (mode >> (8 - i)) & 1 ? rwx[i] : '-';
	out[10] = '\0';
}

/* One entry record as an EntryInfo; NULL for one JSON cannot carry (a
 * path that is not UTF-8) or a time a calendar does not hold. */
static json_t *entry(const struct files_record *f)
{
	char perm[11], ts[40], owner[16], group[16], size[24];
	cleanup_free char *path = xstrndup(f->path, f->path_len);
	const char *name = strrchr(path, '/');
	time_t t = (time_t)f->mtime;
	struct tm tm;

	if (gmtime_r(&t, &tm) == NULL || strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		return NULL;
	permissions(f->mode, f->type == 'd', perm);
	snprintf(owner, sizeof(owner), "%u", f->uid);
	snprintf(group, sizeof(group), "%u", f->gid);
	snprintf(size, sizeof(size), "%llu", (unsigned long long)f->size);
	/* json_pack fails (NULL) on a string that is not UTF-8. */
	return json_pack("{s:s,s:s,s:s,s:s,s:I,s:s,s:s,s:s,s:s}", "name",
			 name && name[1] ? name + 1 : "/", "type", file_type(f->type), "path", path,
			 "size", size, "mode", (json_int_t)f->mode, "permissions", perm, "owner",
			 *f->owner ? f->owner : owner, "group", *f->group ? f->group : group,
			 "modifiedTime", ts);
}

/* The helper's records as EntryInfos; *missing: a path was not there,
 * *notdir: a listed one was no directory. NULL when the records are not
 * well formed (r filled). */
static json_t *entries(const struct envd_ran *ran, bool *missing, bool *notdir, struct api_reply *r)
{
	struct files_record f;
	json_t *a = json_array(), *e;
	const char *why = NULL;
	size_t off = 0;
	int k;

	while ((k = files_next(ran->out ? ran->out : "", ran->out_len, &off, &f, &why)) == 1) {
		if (f.kind == 'x')
			*missing = true;
		else if (f.kind == 'n')
			*notdir = true;
		else if ((e = entry(&f)) != NULL)
			json_array_append_new(a, e);
	}
	if (k < 0) {
		json_decref(a);
		envd_error(r, 502, "internal", "the sandbox's file helper: %s", why);
		return NULL;
	}
	return a;
}

/* The one entry the helper's records name: 0 with *out, 1 when its path
 * is not there, -1 (r filled). */
static int one_entry(const struct envd_ran *ran, json_t **out, struct api_reply *r)
{
	bool missing = false, notdir = false;
	json_t *a = entries(ran, &missing, &notdir, r);

	if (a == NULL)
		return -1;
	if (missing || json_array_size(a) != 1) {
		json_decref(a);
		if (!missing)
			envd_error(r, 502, "internal", "the sandbox's file helper named no entry");
		return missing ? 1 : -1;
	}
	*out = json_incref(json_array_get(a, 0));
	json_decref(a);
	return 0;
}

/* A helper op that answers one entry (stat 0, mkdir, move): the reply. */
static void entry_reply(struct api_server *s, const char *box, char *const *argv, int conn_fd,
			const char *path, struct api_reply *r)
{
	struct envd_ran ran;
	json_t *e = NULL;
	int k;

	if (helper(s, box, argv, NULL, 0, 1 << 16, conn_fd, false, &ran, r) < 0)
		return;
	k = one_entry(&ran, &e, r);
	envd_ran_free(&ran);
	if (k == 1)
		envd_error(r, 404, "not_found", "%.200s: no such file or directory", path);
	else if (k == 0)
		api_reply_json(r, 200, json_pack("{s:o}", "entry", e));
}

/* A path from the request: absolute, no NUL (JSON may carry one). */
static const char *path_of(json_t *m, const char *key, struct api_reply *r)
{
	json_t *v = json_object_get(m, key);
	const char *p = json_string_value(v);

	if (p == NULL || *p != '/' || strlen(p) != json_string_length(v) ||
	    strlen(p) > PROTO_FILES_PATH_MAX) {
		envd_error(r, 400, "invalid_argument", "%s: want an absolute path", key);
		return NULL;
	}
	return p;
}

static void list_dir(struct api_server *s, const char *box, json_t *m, const char *path,
		     int conn_fd, struct api_reply *r)
{
	json_t *d = json_object_get(m, "depth"), *a;
	bool missing = false, notdir = false;
	struct envd_ran ran;
	char depth[16];

	snprintf(depth, sizeof(depth), "%d",
		 json_is_integer(d) && json_integer_value(d) > 0 &&
				 json_integer_value(d) <= PROTO_FILES_DEPTH_MAX
			 ? (int)json_integer_value(d)
			 : 1);
	if (helper(s, box, HELPER_ARGV("stat", depth, (char *)path), NULL, 0, 16 << 20, conn_fd,
		   false, &ran, r) < 0)
		return;
	a = entries(&ran, &missing, &notdir, r);
	envd_ran_free(&ran);
	if (a == NULL)
		return;
	if (notdir || missing) {
		json_decref(a);
		envd_error(r, notdir ? 400 : 404, notdir ? "invalid_argument" : "not_found",
			   "%.200s: %s", path, notdir ? "not a directory" : "not there");
		return;
	}
	api_reply_json(r, 200, json_pack("{s:o}", "entries", a));
}

void envd_filesystem(struct api_server *s, const struct api_request *req, const char *box,
		     const char *method, struct api_reply *r)
{
	json_error_t je;
	json_t *m = json_loadb(req->body ? req->body : "{}", req->len ? req->len : 2, 0, &je);
	const char *path, *dst;
	struct envd_ran ran;

	if (strcmp(method, "WatchDir") == 0) {
		json_decref(m);
		return envd_watch(s, req, box, r);
	}
	if (!json_is_object(m)) {
		json_decref(m);
		return envd_error(r, 400, "invalid_argument", "the message is not a JSON object");
	}
	if ((path = path_of(m, strcmp(method, "Move") == 0 ? "source" : "path", r)) == NULL)
		goto out;
	if (strcmp(method, "Stat") == 0) {
		entry_reply(s, box, HELPER_ARGV("stat", "0", (char *)path), req->conn_fd, path, r);
	} else if (strcmp(method, "ListDir") == 0) {
		list_dir(s, box, m, path, req->conn_fd, r);
	} else if (strcmp(method, "MakeDir") == 0) {
		entry_reply(s, box, HELPER_ARGV("mkdir", (char *)path), req->conn_fd, path, r);
	} else if (strcmp(method, "Remove") == 0) {
		if (helper(s, box, HELPER_ARGV("remove", (char *)path), NULL, 0, 1 << 16,
			   req->conn_fd, false, &ran, r) == 0) {
			envd_ran_free(&ran);
			api_reply_json(r, 200, json_object());
		}
	} else if (strcmp(method, "Move") == 0) {
		if ((dst = path_of(m, "destination", r)) == NULL)
			goto out;
		entry_reply(s, box, HELPER_ARGV("move", (char *)path, (char *)dst), req->conn_fd,
			    dst, r);
	} else {
		envd_error(r, 501, "unimplemented", "filesystem.%.64s: not yet", method);
	}
out:
	json_decref(m);
}

/* ---- /files ---- */

/* The next part named "file" of a multipart/form-data body, from *at:
 * its bytes and the filename it gives (malloc()ed, or NULL); *at moves
 * past it. false when there is none left. */
static bool next_part(const char *delim, const char *body, size_t len, const char **at,
		      const char **data, size_t *n, char **filename)
{
	size_t dl = strlen(delim);
	const char *p, *end, *hdr_end, *fn;

	for (p = memmem(*at, (size_t)(body + len - *at), delim, dl); p; p = end) {
		p += dl;
		if ((size_t)(body + len - p) < 2 || memcmp(p, "--", 2) == 0)
			return false;
		hdr_end = memmem(p, (size_t)(body + len - p), "\r\n\r\n", 4);
		if (hdr_end == NULL)
			return false;
		/* The delimiter ends the part only after a CRLF. */
		end = hdr_end + 4;
		while ((end = memmem(end, (size_t)(body + len - end), delim, dl)) != NULL &&
		       (end - 2 < hdr_end + 4 || memcmp(end - 2, "\r\n", 2) != 0))
			end += dl;
		if (end == NULL)
			return false;
		*at = end;
		if (memmem(p, (size_t)(hdr_end - p), "; name=\"file\"", 13) == NULL)
			continue;
		*data = hdr_end + 4;
		*n = (size_t)(end - 2 - *data);
		fn = memmem(p, (size_t)(hdr_end - p), "; filename=\"", 12);
		*filename = fn ? xstrndup(fn + 12, strcspn(fn + 12, "\"\r\n")) : NULL;
		return true;
	}
	return false;
}

/* "--BOUNDARY" of a multipart type, into delim; false without one. */
static bool boundary(const char *type, char delim[256])
{
	const char *b = strstr(type, "boundary=");
	size_t dl;

	if (b == NULL)
		return false;
	b += 9;
	if (*b == '"')
		b++, dl = strcspn(b, "\"");
	else
		dl = strcspn(b, "; ");
	if (dl == 0 || dl > 200)
		return false;
	snprintf(delim, 256, "--%.*s", (int)dl, b);
	return true;
}

static void read_file(struct api_server *s, const char *box, const char *path, int conn_fd,
		      struct api_reply *r)
{
	struct envd_ran ran;

	if (helper(s, box, HELPER_ARGV("read", (char *)path), NULL, 0, E2B_FILE_MAX, conn_fd, true,
		   &ran, r) < 0)
		return;
	/* The bytes stay with the reply until it is sent (r->owned). */
	r->status = 200;
	r->type = "application/octet-stream";
	r->owned = ran.out ? ran.out : xstrdup("");
	r->bytes = r->owned;
	r->len = ran.out_len;
	free(ran.err);
}

/* One file's bytes into path (its directories made). 0, or -1 with r. */
static int put(struct api_server *s, const char *box, const char *path, const char *data, size_t n,
	       int conn_fd, struct api_reply *r)
{
	struct envd_ran ran;

	if (path == NULL || *path != '/' || strlen(path) > PROTO_FILES_PATH_MAX)
		return e2b_error(r, 400, "path `%.200s`: want an absolute path", path ?: ""), -1;
	if (helper(s, box, HELPER_ARGV("write", (char *)path), data, n, 1 << 16, conn_fd, true,
		   &ran, r) < 0)
		return -1;
	envd_ran_free(&ran);
	return 0;
}

static void write_file(struct api_server *s, const struct api_request *req, const char *box,
		       const char *path, struct api_reply *r)
{
	const char *type = req->lookup(req, false, "Content-Type");
	const char *enc = req->lookup(req, false, "Content-Encoding");
	const char *body = req->body ? req->body : "", *at = body, *data;
	json_t *written = json_array();
	char delim[256];
	size_t n;

	if (enc && strcasecmp(enc, "identity") != 0) {
		json_decref(written);
		return e2b_error(r, 400,
				 "Content-Encoding `%.40s`: not taken; send the bytes as they are",
				 enc);
	}
	if (type == NULL || strncasecmp(type, "multipart/form-data", 19) != 0) {
		/* application/octet-stream: the body is the file. */
		if (put(s, box, path, body, req->len, req->conn_fd, r) == 0)
			json_array_append_new(written, json_pack("{s:s,s:s,s:s}", "name",
								 strrchr(path, '/') + 1, "type",
								 "file", "path", path));
	} else if (!boundary(type, delim)) {
		e2b_error(r, 400, "multipart/form-data without a boundary");
	} else {
		char *fn = NULL;

		/* Each part named "file": to the path, or to its filename. */
		while (r->status == 0 && next_part(delim, body, req->len, &at, &data, &n, &fn)) {
			const char *to = path ? path : fn;

			if (put(s, box, to, data, n, req->conn_fd, r) == 0)
				json_array_append_new(written,
						      json_pack("{s:s,s:s,s:s}", "name",
								strrchr(to, '/') + 1, "type",
								"file", "path", to));
			free(fn);
			fn = NULL;
		}
		if (r->status == 0 && json_array_size(written) == 0)
			e2b_error(r, 400, "no part named `file` in the form");
	}
	if (r->status == 0)
		api_reply_json(r, 200, written);
	else
		json_decref(written);
}

void envd_files(struct api_server *s, const struct api_request *req, const char *box,
		struct api_reply *r)
{
	const char *path = req->lookup(req, true, "path");

	if (strcmp(req->method, "GET") == 0) {
		if (path == NULL || *path != '/')
			return e2b_error(r, 400, "path: want an absolute path");
		read_file(s, box, path, req->conn_fd, r);
	} else if (strcmp(req->method, "POST") == 0) {
		write_file(s, req, box, path, r);
	} else {
		e2b_error(r, 405, "/files takes GET and POST");
		r->allow = "GET, POST";
	}
}
