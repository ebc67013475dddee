/* envd's files as the E2B SDK reaches them (e2b.h): GET and POST /files
 * (a file's bytes, and an upload as multipart/form-data or raw), and the
 * filesystem service's Stat, ListDir, MakeDir, Remove and Move. Each is a
 * command in the container, as `gantry cp` runs the container's tar:
 * cat, mkdir, rm, mv and a small sh script around stat(1) and find(1),
 * so the image needs those (busybox has them). Paths and data travel as
 * arguments and stdin, never inside a script. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "api/e2b.h"
#include "common/util.h"

/* ---- a command, to its end ---- */

struct ran_job {
	struct api_server *s;
	const char *box;
	struct api_exec x;
	int in, out, err, sig;
	struct gantry_cancel cancel;
	struct api_exec_result res;
	gantry_error_t e;
	int ret;
};

static void *ran_thread(void *arg)
{
	struct ran_job *j = arg;

	j->ret = j->s->b->exec(j->box, &j->x, j->in, j->out, j->err, j->sig, &j->cancel, &j->res,
			       &j->e);
	close_fd(&j->in);
	close_fd(&j->out);
	close_fd(&j->err);
	return NULL;
}

static bool take(int fd, char **buf, size_t *len, size_t max)
{
	char chunk[65536];
	ssize_t n = read(fd, chunk, sizeof(chunk));

	if (n <= 0)
		return n == 0 || (errno != EAGAIN && errno != EINTR) ? false : true;
	if (*len + (size_t)n <= max) {
		*buf = xrealloc(*buf, *len + (size_t)n + 1);
		memcpy(*buf + *len, chunk, (size_t)n);
	}
	*len += (size_t)n;
	return true;
}

int envd_run(struct api_server *s, const char *box, char *const *argv, const void *in,
	     size_t in_len, size_t max, int conn_fd, struct envd_ran *ran, gantry_error_t *err)
{
	struct api_reply busy = { 0 };
	uint64_t until = now_ms() + ENVD_RUN_MS;
	struct ran_job j = { .s = s, .box = box, .in = -1, .out = -1, .err = -1, .sig = -1 };
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 };
	size_t done = 0, argc = 0;
	pthread_t t;
	int ret = -1;

	*ran = (struct envd_ran){ 0 };
	j.cancel.fd = -1;
	while (argv[argc])
		argc++;
	if (!api_exec_slot(s, true, &busy)) {
		json_decref(busy.json);
		return gantry_error(err, EBUSY, "%d commands under way already", API_EXECS_MAX);
	}
	j.x = (struct api_exec){ .argv = (char **)argv, .argc = argc };
	if (pipe2(pin, O_CLOEXEC) < 0 || pipe2(pout, O_CLOEXEC) < 0 || pipe2(perr, O_CLOEXEC) < 0 ||
	    cancel_init(&j.cancel, err) < 0) {
		gantry_error_errno(err, "pipe");
		goto out;
	}
	fcntl(pin[1], F_SETFL, O_NONBLOCK);
	fcntl(pout[0], F_SETFL, O_NONBLOCK);
	fcntl(perr[0], F_SETFL, O_NONBLOCK);
	j.in = steal_fd(&pin[0]);
	j.out = steal_fd(&pout[1]);
	j.err = steal_fd(&perr[1]);
	if (pthread_create(&t, NULL, ran_thread, &j) != 0) {
		close_fd(&j.in), close_fd(&j.out), close_fd(&j.err);
		gantry_error(err, EAGAIN, "cannot start a thread");
		goto cancel;
	}
	while (pout[0] >= 0 || perr[0] >= 0) {
		struct pollfd p[5] = { { pout[0], POLLIN, 0 },
				       { perr[0], POLLIN, 0 },
				       { pin[1], POLLOUT, 0 },
				       { cancel_fd(&s->cancel), POLLIN, 0 },
				       { conn_fd, POLLRDHUP, 0 } };

		if (pin[1] >= 0 && done == in_len)
			close_fd(&pin[1]);
		p[2].fd = pin[1];
		if (cancel_fired(&j.cancel))
			p[3].fd = p[4].fd = -1;
		if (poll(p, 5, 1000) < 0 && errno != EINTR)
			cancel_fire(&j.cancel);
		if (p[3].revents || (p[4].revents & (POLLRDHUP | POLLHUP | POLLERR)) ||
		    now_ms() >= until)
			cancel_fire(&j.cancel);
		if (pin[1] >= 0 && (p[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t n =
				write(pin[1], (const char *)in + done, MIN(in_len - done, 65536));

			if (n > 0)
				done += (size_t)n;
			else if (errno != EAGAIN && errno != EINTR)
				close_fd(&pin[1]);
		}
		for (int i = 0; i < 2; i++) {
			int *fd = i ? &perr[0] : &pout[0];

			if (*fd >= 0 && (p[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
			    !take(*fd, i ? &ran->err : &ran->out, i ? &ran->err_len : &ran->out_len,
				  max))
				close_fd(fd);
		}
		if (ran->out_len > max || ran->err_len > max)
			cancel_fire(&j.cancel);
	}
	pthread_join(t, NULL);
	if (j.ret < 0) {
		*err = j.e;
		j.e = NULL;
	} else if (ran->out_len > max || ran->err_len > max) {
		gantry_error(err, EFBIG, "over %zu bytes", max);
	} else {
		ran->status = j.res.exit_code;
		ret = 0;
	}
	gantry_error_free(&j.e);
cancel:
	cancel_destroy(&j.cancel);
out:
	api_exec_slot(s, false, NULL);
	for (int i = 0; i < 2; i++)
		close_fd(&pin[i]), close_fd(&pout[i]), close_fd(&perr[i]);
	if (ret < 0)
		envd_ran_free(ran);
	if (ran->out)
		ran->out[ran->out_len] = '\0';
	if (ran->err)
		ran->err[ran->err_len] = '\0';
	return ret;
}

void envd_ran_free(struct envd_ran *ran)
{
	free(ran->out);
	free(ran->err);
	*ran = (struct envd_ran){ 0 };
}

/* ---- entries ---- */

/* For each path after $1 (a depth, for find) one line: type, size, octal
 * mode, owner, group, mtime (seconds), path; `-|PATH` for a path that is
 * not there, `!|PATH` for one to list that is no directory. An entry that
 * went away between find and stat is left out, as is a name with a
 * newline (its pieces name nothing). */
static const char stat_script[] =
	"d=$1; shift\n"
	"one() { stat -c '%F|%s|%a|%U|%G|%Y|%n' -- \"$1\" 2>/dev/null; }\n"
	"for p in \"$@\"; do\n"
	"  if [ \"$d\" = 0 ]; then one \"$p\" || printf '%s\\n' \"-|$p\"; continue; fi\n"
	"  [ -d \"$p\" ] || { [ -e \"$p\" ] && printf '%s\\n' \"!|$p\" ||\n"
	"                     printf '%s\\n' \"-|$p\"; continue; }\n"
	"  find \"$p\" -mindepth 1 -maxdepth \"$d\" | while IFS= read -r q; do one \"$q\"; done\n"
	"done\n";

static const char *file_type(const char *f)
{
	if (strcmp(f, "directory") == 0)
		return "FILE_TYPE_DIRECTORY";
	if (strcmp(f, "symbolic link") == 0)
		return "FILE_TYPE_SYMLINK";
	return strstr(f, "regular") ? "FILE_TYPE_FILE" : NULL;
}

static void permissions(unsigned mode, bool dir, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";

	out[0] = dir ? 'd' : '-';
	for (int i = 0; i < 9; i++)
		out[i + 1] = (mode >> (8 - i)) & 1 ? rwx[i] : '-';
	out[10] = '\0';
}

static bool digits(const char *s, size_t max)
{
	size_t n = strspn(s, "0123456789");

	return n > 0 && n <= max && s[n] == '\0';
}

/* One stat line as an EntryInfo; NULL for one to leave out. */
static json_t *entry(char *line)
{
	char *f[7], *save = NULL, *tok = line, perm[11], ts[40];
	const char *type;
	struct tm tm;
	time_t t;
	unsigned mode;
	const char *name;
	int i;

	for (i = 0; i < 6; i++) {
		f[i] = strtok_r(tok, "|", &save);
		tok = NULL;
		if (f[i] == NULL)
			return NULL;
	}
	f[6] = save; /* the path: the rest, '|' and all */
	if (f[6] == NULL || *f[6] != '/' || (type = file_type(f[0])) == NULL)
		return NULL;
	/* The guest's words: numbers must be numbers, a time one a calendar holds. */
	if (!digits(f[1], 20) || !digits(f[2], 7) || !digits(f[5], 12))
		return NULL;
	mode = (unsigned)strtoul(f[2], NULL, 8) & 07777;
	permissions(mode, strcmp(type, "FILE_TYPE_DIRECTORY") == 0, perm);
	t = (time_t)strtoll(f[5], NULL, 10);
	if (gmtime_r(&t, &tm) == NULL || strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		return NULL;
	name = strrchr(f[6], '/') + 1;
	return json_pack("{s:s,s:s,s:s,s:s,s:I,s:s,s:s,s:s,s:s}", "name", *name ? name : "/",
			 "type", type, "path", f[6], "size", f[1], "mode", (json_int_t)mode,
			 "permissions", perm, "owner", f[3], "group", f[4], "modifiedTime", ts);
}

/* Entries of the stat script's output; *missing: a path was not there,
 * *notdir: a listed one was no directory. */
static json_t *entries(char *out, bool *missing, bool *notdir)
{
	json_t *a = json_array(), *e;
	char *save = NULL;

	for (char *l = strtok_r(out ? out : (char[]){ 0 }, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		if (strncmp(l, "-|", 2) == 0)
			*missing = true;
		else if (strncmp(l, "!|", 2) == 0)
			*notdir = true;
		else if ((e = entry(l)) != NULL)
			json_array_append_new(a, e);
	}
	return a;
}

/* Stat of path in box: 0 with *out the entry, 1 when it is not there,
 * -1 (r filled). */
static int stat_one(struct api_server *s, const char *box, const char *path, int conn_fd,
		    json_t **out, struct api_reply *r)
{
	char *argv[] = { "/bin/sh", "-c", (char *)stat_script, "sh", "0", (char *)path, NULL };
	gantry_error_t err = NULL;
	bool missing = false, notdir = false;
	struct envd_ran ran;
	json_t *a;

	if (envd_run(s, box, argv, NULL, 0, 1 << 20, conn_fd, &ran, &err) < 0) {
		envd_error(r, 500, "internal", "%s", gantry_error_str(err));
		gantry_error_free(&err);
		return -1;
	}
	a = entries(ran.out, &missing, &notdir);
	envd_ran_free(&ran);
	if (missing || json_array_size(a) == 0) {
		json_decref(a);
		return 1;
	}
	*out = json_incref(json_array_get(a, 0));
	json_decref(a);
	return 0;
}

/* A path from the request: absolute, no NUL (JSON may carry one). */
static const char *path_of(json_t *m, const char *key, struct api_reply *r)
{
	json_t *v = json_object_get(m, key);
	const char *p = json_string_value(v);

	if (p == NULL || *p != '/' || strlen(p) != json_string_length(v) || strlen(p) > 4096) {
		envd_error(r, 400, "invalid_argument", "%s: want an absolute path", key);
		return NULL;
	}
	return p;
}

/* A command whose failure is the answer; 0 when it ran and exited 0. */
static int simple(struct api_server *s, const char *box, char *const *argv, int conn_fd,
		  struct api_reply *r)
{
	gantry_error_t err = NULL;
	struct envd_ran ran;
	int ret = 0;

	if (envd_run(s, box, argv, NULL, 0, 1 << 16, conn_fd, &ran, &err) < 0) {
		envd_error(r, 500, "internal", "%s", gantry_error_str(err));
		gantry_error_free(&err);
		return -1;
	}
	if (ran.status != 0) {
		envd_error(r, strstr(ran.err ?: "", "No such file") ? 404 : 400,
			   strstr(ran.err ?: "", "No such file") ? "not_found"
								 : "failed_precondition",
			   "%s: %.300s", argv[0], ran.err && *ran.err ? ran.err : "failed");
		ret = -1;
	}
	envd_ran_free(&ran);
	return ret;
}

void envd_filesystem(struct api_server *s, const struct api_request *req, const char *box,
		     const char *method, struct api_reply *r)
{
	json_error_t je;
	json_t *m = json_loadb(req->body ? req->body : "{}", req->len ? req->len : 2, 0, &je);
	json_t *e = NULL;
	const char *path, *dst;

	if (!json_is_object(m)) {
		json_decref(m);
		return envd_error(r, 400, "invalid_argument", "the message is not a JSON object");
	}
	if ((path = path_of(m, strcmp(method, "Move") == 0 ? "source" : "path", r)) == NULL)
		goto out;
	if (strcmp(method, "Stat") == 0) {
		int k = stat_one(s, box, path, req->conn_fd, &e, r);

		if (k == 1)
			envd_error(r, 404, "not_found", "%.200s: no such file or directory", path);
		else if (k == 0)
			api_reply_json(r, 200, json_pack("{s:o}", "entry", e));
	} else if (strcmp(method, "ListDir") == 0) {
		json_t *d = json_object_get(m, "depth");
		char depth[16];
		char *argv[] = { "/bin/sh",    "-c", (char *)stat_script, "sh", depth,
				 (char *)path, NULL };
		gantry_error_t err = NULL;
		bool missing = false, notdir = false;
		struct envd_ran ran;
		json_t *a;

		snprintf(depth, sizeof(depth), "%d",
			 json_is_integer(d) && json_integer_value(d) > 0 &&
					 json_integer_value(d) < 32
				 ? (int)json_integer_value(d)
				 : 1);
		if (envd_run(s, box, argv, NULL, 0, 16 << 20, req->conn_fd, &ran, &err) < 0) {
			envd_error(r, 500, "internal", "%s", gantry_error_str(err));
			gantry_error_free(&err);
			goto out;
		}
		a = entries(ran.out, &missing, &notdir);
		envd_ran_free(&ran);
		if (notdir || missing) {
			json_decref(a);
			envd_error(r, notdir ? 400 : 404, notdir ? "invalid_argument" : "not_found",
				   "%.200s: %s", path, notdir ? "not a directory" : "not there");
		} else {
			api_reply_json(r, 200, json_pack("{s:o}", "entries", a));
		}
	} else if (strcmp(method, "MakeDir") == 0) {
		char *argv[] = { "mkdir", "-p", "--", (char *)path, NULL };

		if (stat_one(s, box, path, req->conn_fd, &e, r) == 0) {
			json_decref(e);
			envd_error(r, 409, "already_exists", "%.200s exists", path);
		} else if (r->status == 0 && simple(s, box, argv, req->conn_fd, r) == 0 &&
			   stat_one(s, box, path, req->conn_fd, &e, r) == 0) {
			api_reply_json(r, 200, json_pack("{s:o}", "entry", e));
		}
	} else if (strcmp(method, "Remove") == 0) {
		char *argv[] = { "rm", "-rf", "--", (char *)path, NULL };

		if (simple(s, box, argv, req->conn_fd, r) == 0)
			api_reply_json(r, 200, json_object());
	} else if (strcmp(method, "Move") == 0) {
		char *argv[] = { "mv", "--", (char *)path, NULL, NULL };

		if ((dst = path_of(m, "destination", r)) == NULL)
			goto out;
		argv[3] = (char *)dst;
		if (simple(s, box, argv, req->conn_fd, r) == 0 &&
		    stat_one(s, box, dst, req->conn_fd, &e, r) == 0)
			api_reply_json(r, 200, json_pack("{s:o}", "entry", e));
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
	char *argv[] = { "cat", "--", (char *)path, NULL };
	gantry_error_t err = NULL;
	struct envd_ran ran;

	if (envd_run(s, box, argv, NULL, 0, E2B_FILE_MAX, conn_fd, &ran, &err) < 0) {
		e2b_error(r, err->status == EFBIG ? 400 : 500, "%s", gantry_error_str(err));
		gantry_error_free(&err);
		return;
	}
	if (ran.status != 0) {
		e2b_error(r, strstr(ran.err ?: "", "No such file") ? 404 : 400, "%.300s: %.300s",
			  path, ran.err && *ran.err ? ran.err : "cannot be read");
		envd_ran_free(&ran);
		return;
	}
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
	static const char script[] = "mkdir -p -- \"$(dirname -- \"$1\")\" && cat > \"$1\"";
	char *argv[] = { "/bin/sh", "-c", (char *)script, "sh", (char *)path, NULL };
	gantry_error_t err = NULL;
	struct envd_ran ran;
	int ret = 0;

	if (path == NULL || *path != '/' || strlen(path) > 4096)
		return e2b_error(r, 400, "path `%.200s`: want an absolute path", path ?: ""), -1;
	if (envd_run(s, box, argv, data, n, 1 << 16, conn_fd, &ran, &err) < 0) {
		e2b_error(r, 500, "%s", gantry_error_str(err));
		gantry_error_free(&err);
		return -1;
	}
	if (ran.status != 0) {
		e2b_error(r, 400, "%.300s: %.300s", path,
			  ran.err && *ran.err ? ran.err : "cannot be written");
		ret = -1;
	}
	envd_ran_free(&ran);
	return ret;
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
