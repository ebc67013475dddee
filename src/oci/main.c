/* gantry-oci: the runc command line, each container one microVM (the
 * sandbox lifecycle's, its root the bundle's rootfs served over
 * virtio-fs). The process model (docs/oci.md):
 *
 *   create  checks config.json, makes ROOT/ID and forks the holder, which
 *           boots the sandbox and listens on ROOT/ID/holder.sock; create
 *           writes the holder's pid to --pid-file and exits.
 *   start   tells the holder to run config.json's process: a session in
 *           the container with the holder's stdio (create's caller's fds
 *           0-2, untouched), the signals it gets forwarded to it.
 *   ...     the holder exits with the process's status (128+n for a
 *           signal) once the VM is off: conmon and the runc shim wait on
 *           that pid.
 *
 * Every error is one line on stderr and, with --log, a JSON line there
 * ({"level","msg","time"}, which containerd's go-runc reads). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/files.h"
#include "common/json.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/text.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "oci/oci.h"
#include "sandbox/lifecycle.h"

#define DEFAULT_ROOT	 "/run/gantry-oci"
#define GANTRY_SUBDIR	 ".gantry" /* GANTRY_HOME: the sandboxes, one per container */

struct oci_globals {
	const char *root, *log, *log_format;
	bool debug;
};

static struct oci_globals g;

/* --- errors ---------------------------------------------------------- */

static void log_json(const char *level, const char *msg)
{
	char stamp[64];
	struct timespec ts;
	struct tm tm;
	json_t *j;
	char *line;
	int fd;

	if (g.log == NULL)
		return;
	fd = open(g.log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (g.log_format && strcmp(g.log_format, "json") == 0) {
		j = json_pack("{s:s,s:s,s:s}", "level", level, "msg", msg, "time", stamp);
		line = json_dumps(j, JSON_COMPACT);
		json_decref(j);
	} else {
		xasprintf(&line, "time=\"%s\" level=%s msg=\"%s\"", stamp, level, msg);
	}
	if (line) {
		dprintf(fd, "%s\n", line);
		free(line);
	}
	close(fd);
}

/* One line on stderr and in --log, sanitised as every log line is
 * (common/text.h): an error's text may quote a bundle's or a guest's. */
static void emit(const char *level, char *msg)
{
	const char *m = msg ? text_sanitize_lines(msg, LOG_MSG_MAX) : "out of memory";

	fprintf(stderr, "gantry-oci: %s%s\n", strcmp(level, "error") ? "warning: " : "", m);
	log_json(level, m);
}

int oci_fail(const char *fmt, ...)
{
	cleanup_free char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	emit("error", msg);
	return 1;
}

static int fail_err(gantry_error_t *err)
{
	int r = oci_fail("%s", gantry_error_str(*err));

	gantry_error_free(err);
	return r;
}

static void warn_err(gantry_error_t *err)
{
	cleanup_free char *msg = xstrdup(gantry_error_str(*err));

	emit("warning", msg);
	gantry_error_free(err);
}

/* --- flags: runc's, as urfave/cli reads them (-x, --x, --x=v) --------- */

struct oflag {
	const char *name;
	const char **value; /* NULL: a switch */
	bool *set;
};

/* Parse argv's flags into fl until the first argument that is none; the
 * index of that argument, or -1 after saying what was wrong. */
static int oflags_parse(const char *verb, struct oflag *fl, int argc, char **argv)
{
	int i;

	for (i = 0; i < argc; i++) {
		const char *a = argv[i], *eq;
		size_t n;
		struct oflag *f = NULL;

		if (strcmp(a, "--") == 0)
			return i + 1;
		if (a[0] != '-' || a[1] == '\0')
			return i;
		a += a[1] == '-' ? 2 : 1;
		eq = strchr(a, '=');
		n = eq ? (size_t)(eq - a) : strlen(a);
		for (struct oflag *p = fl; p->name; p++)
			if (strlen(p->name) == n && strncmp(p->name, a, n) == 0)
				f = p;
		if (f == NULL) {
			oci_fail("%s: flag provided but not defined: -%.*s", verb, (int)n, a);
			return -1;
		}
		if (f->value == NULL) {
			if (eq && strcmp(eq + 1, "true") != 0 && strcmp(eq + 1, "false") != 0) {
				oci_fail("%s: -%s takes true or false", verb, f->name);
				return -1;
			}
			if (f->set)
				*f->set = !eq || strcmp(eq + 1, "true") == 0;
			continue;
		}
		if (eq)
			*f->value = eq + 1;
		else if (i + 1 < argc)
			*f->value = argv[++i];
		else {
			oci_fail("%s: flag needs an argument: -%s", verb, f->name);
			return -1;
		}
		if (f->set)
			*f->set = true;
	}
	return i;
}

/* The verb's one ID argument, checked. */
static const char *one_id(const char *verb, int argc, char **argv, int at, bool extra_ok)
{
	if (at >= argc) {
		oci_fail("%s: requires a container id", verb);
		return NULL;
	}
	if (!extra_ok && at + 1 < argc) {
		oci_fail("%s: unexpected argument `%.64s`", verb, argv[at + 1]);
		return NULL;
	}
	if (!oci_id_valid(argv[at])) {
		oci_fail("invalid container id `%.64s`: %s", argv[at], OCI_ID_RULE);
		return NULL;
	}
	return argv[at];
}

/* ROOT/ID's record: 0, 1 when there is none (the caller says runc's
 * "container does not exist", which podman reads as gone), -1 with err. */
static int load(const char *id, char **dir, struct oci_state *st, gantry_error_t *err)
{
	if (oci_state_dir(g.root, id, false, dir, err) < 0)
		return -1;
	if (access(*dir, F_OK) < 0)
		return 1;
	if (oci_state_load(*dir, st, err) < 0) {
		if ((*err)->status != ENOENT)
			return -1;
		gantry_error_free(err);
		return 1;
	}
	return 0;
}

#define NO_CONTAINER "container does not exist"

/* An ID whose container went to crun (delegate.c) goes there again. */
static int delegate(const char *verb, const char *id, int argc, char **argv)
{
	/* crun, as crun hands these to itself; GANTRY_OCI_DELEGATE names
	 * another runc-compatible runtime (runc, where crun cannot run). */
	const char *crun = getenv("GANTRY_OCI_DELEGATE");
	const struct oci_delegation d = { crun && *crun ? crun : "crun", g.root, g.log,
					   g.log_format };

	return oci_delegate(&d, verb, id, argc, argv);
}

static int write_pid_file(const char *path, pid_t pid, gantry_error_t *err)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%d", (int)pid);

	return write_file_atomic(path, buf, (size_t)n, 0644, err);
}

/* --- verbs ------------------------------------------------------------ */

static int cmd_create(int argc, char **argv)
{
	const char *bundle = ".", *pid_file = NULL, *console = NULL, *preserve = NULL;
	bool no_pivot, no_keyring;
	struct oflag fl[] = { { "bundle", &bundle, NULL }, { "b", &bundle, NULL },
			      { "pid-file", &pid_file, NULL }, { "console-socket", &console, NULL },
			      { "no-pivot", NULL, &no_pivot }, { "no-new-keyring", NULL, &no_keyring },
			      { "preserve-fds", &preserve, NULL }, { NULL, NULL, NULL } };
	cleanup_free char *dir = NULL;
	char real[PATH_MAX];
	struct oci_container c = { 0 };
	struct sandbox_opts o;
	struct oci_state st = { 0 };
	gantry_error_t err = NULL;
	int at = oflags_parse("create", fl, argc, argv), slave = -1, r = 1;
	pid_t pid;

	if (at < 0 || (c.id = one_id("create", argc, argv, at, false)) == NULL)
		return 1;
	if (preserve && strcmp(preserve, "0") != 0)
		return oci_fail("create: --preserve-fds: a descriptor cannot cross into a VM");
	if (getenv("LISTEN_FDS"))
		return oci_fail("create: LISTEN_FDS: socket activation cannot cross into a VM");
	if (realpath(bundle, real) == NULL)
		return oci_fail("create: bundle `%s`: %s", bundle, strerror(errno));
	if (oci_spec_load(real, &c.spec, &err) < 0)
		return fail_err(&err);
	if (oci_is_pod_sandbox(c.spec.annotations)) {
		oci_spec_free(&c.spec);
		return delegate("create", c.id, argc, argv);
	}
	if (c.spec.terminal && console == NULL) {
		oci_spec_free(&c.spec);
		return oci_fail("create: process.terminal is set: --console-socket is needed");
	}
	oci_sandbox_opts(&c.spec, c.id, &o, &err);
	if (err || oci_state_dir(g.root, c.id, true, &dir, &err) < 0) {
		sandbox_opts_free(&o);
		oci_spec_free(&c.spec);
		return fail_err(&err);
	}
	c.dir = dir;
	if ((c.spec.terminal && oci_console_make(console, &slave, &err) < 0) ||
	    oci_holder_spawn(&c, &o, slave, &pid, &err) < 0) {
		gantry_error_prefix(&err, "create");
		fail_err(&err);
		goto out;
	}
	st = (struct oci_state){ .id = (char *)c.id,
				 .bundle = real,
				 .root = c.spec.root,
				 .pid = pid,
				 .pid_start = oci_pid_start(pid),
				 .annotations = c.spec.annotations };
	sandbox_time_now(&st.created);
	if (oci_state_save(dir, &st, &err) < 0 ||
	    oci_hooks_run(real, "prestart", &st, &err) < 0 ||
	    oci_hooks_run(real, "createRuntime", &st, &err) < 0 ||
	    (pid_file && write_pid_file(pid_file, pid, &err) < 0)) {
		kill(pid, SIGKILL);
		sandbox_delete(c.id, true, NULL);
		free(st.created);
		fail_err(&err);
		goto out;
	}
	free(st.created);
	r = 0;
out:
	if (slave >= 0)
		close(slave);
	if (r != 0)
		rm_tree(dir);
	sandbox_opts_free(&o);
	oci_spec_free(&c.spec);
	return r;
}

static int cmd_start(int argc, char **argv)
{
	struct oflag fl[] = { { NULL, NULL, NULL } };
	cleanup_free char *dir = NULL;
	struct oci_state st;
	gantry_error_t err = NULL;
	const char *id;
	int at = oflags_parse("start", fl, argc, argv), r;
	char *why;
	bool none;

	if (at < 0 || (id = one_id("start", argc, argv, at, false)) == NULL)
		return 1;
	if (oci_delegated(g.root, id))
		return delegate("start", id, argc, argv);
	if ((r = load(id, &dir, &st, &err)) != 0)
		return r < 0 ? fail_err(&err) : oci_fail(NO_CONTAINER);
	r = 1;
	if (oci_status_of(&st) != OCI_CREATED) {
		oci_fail("cannot start a container that is %s", oci_status_name(oci_status_of(&st)));
		goto out;
	}
	/* Running from the moment the holder may start it. */
	st.started = true;
	if (oci_state_save(dir, &st, &err) < 0) {
		fail_err(&err);
		goto out;
	}
	if (oci_holder_start(dir, &none, &why) < 0) {
		if (why)
			oci_fail("start: %s", why);
		else
			oci_fail("start: the container's holder did not answer: %s",
				 strerror(errno));
		free(why);
		goto out;
	}
	if (none) {
		oci_fail("start: config.json sets no process: nothing to run (the container ends)");
		goto out;
	}
	if (oci_hooks_run(st.bundle, "poststart", &st, &err) < 0)
		warn_err(&err);
	r = 0;
out:
	oci_state_free(&st);
	return r;
}

/* exec's process: the --process file, or the command after ID. */
static int exec_process(const char *file, int argc, char **argv, struct oci_spec *s)
{
	cleanup_free char *text = NULL;
	gantry_error_t err = NULL;
	size_t len;
	json_t *j;

	memset(s, 0, sizeof(*s));
	s->annotations = json_object();
	if (file == NULL) {
		if (argc == 0)
			return oci_fail("exec: give --process FILE or a command after the ID");
		s->args = strv_dup(argv, (size_t)argc);
		s->nargs = (size_t)argc;
		s->env = strv_dup((char *[]){ "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:"
					      "/usr/bin:/sbin:/bin" }, 1);
		s->nr_env = 1;
		s->cwd = xstrdup("/");
		return 0;
	}
	if (argc > 0)
		return oci_fail("exec: unexpected argument `%.64s` beside --process", argv[0]);
	if (read_file_max(file, OCI_CONFIG_MAX, &text, &len, &err) < 0 ||
	    (text == NULL && gantry_error(&err, ENOENT, "--process `%s`", file) < 0))
		return fail_err(&err);
	j = oci_json_load(text, len, "--process", &err);
	if (j == NULL || (!json_is_object(j) && gantry_error(&err, 0, "--process: not a JSON "
								      "object") < 0) ||
	    oci_process_parse(j, s, &err) < 0) {
		json_decref(j);
		return fail_err(&err);
	}
	json_decref(j);
	return 0;
}

static int cmd_exec(int argc, char **argv)
{
	const char *process = NULL, *pid_file = NULL, *console = NULL, *preserve = NULL, *ignored;
	bool detach = false, tty = false, flag;
	struct oflag fl[] = { { "process", &process, NULL },	 { "p", &process, NULL },
			      { "pid-file", &pid_file, NULL },	 { "console-socket", &console, NULL },
			      { "detach", NULL, &detach },	 { "d", NULL, &detach },
			      { "tty", NULL, &tty },		 { "t", NULL, &tty },
			      { "preserve-fds", &preserve, NULL }, { "process-label", &ignored, NULL },
			      { "apparmor", &ignored, NULL },	 { "no-new-privs", NULL, &flag },
			      { "ignore-paused", NULL, &flag },	 { NULL, NULL, NULL } };
	cleanup_free char *dir = NULL;
	struct oci_state st;
	struct oci_spec s;
	gantry_error_t err = NULL;
	const char *id;
	int at = oflags_parse("exec", fl, argc, argv), slave = -1, r;
	pid_t pid;

	if (at < 0 || (id = one_id("exec", argc, argv, at, true)) == NULL)
		return 1;
	if (oci_delegated(g.root, id))
		return delegate("exec", id, argc, argv);
	if (preserve && strcmp(preserve, "0") != 0)
		return oci_fail("exec: --preserve-fds: a descriptor cannot cross into a VM");
	if ((r = load(id, &dir, &st, &err)) != 0)
		return r < 0 ? fail_err(&err) : oci_fail(NO_CONTAINER);
	r = oci_status_of(&st);
	oci_state_free(&st);
	if (r == OCI_PAUSED)
		return oci_fail("cannot exec in a paused container");
	if (r != OCI_RUNNING)
		return oci_fail("cannot exec in a container that is not running");
	if (exec_process(process, argc - at - 1, argv + at + 1, &s) != 0) {
		oci_spec_free(&s);
		return 1;
	}
	s.terminal = s.terminal || tty;
	r = 1;
	if (s.terminal && oci_console_make(console, &slave, &err) < 0) {
		gantry_error_prefix(&err, "exec");
		fail_err(&err);
		goto out;
	}
	if (!detach) {
		/* In the foreground: this process stands for it. */
		if (slave < 0) {
			r = oci_run_process(id, &s, -1, false);
			goto out;
		}
		pid = oci_exec_spawn(id, &s, slave);
		if (pid > 0) {
			int status;

			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
			r = WIFEXITED(status) ? WEXITSTATUS(status) : 255;
		}
		goto out;
	}
	pid = oci_exec_spawn(id, &s, slave);
	if (pid < 0) {
		oci_fail("exec: fork: %s", strerror(errno));
		goto out;
	}
	if (pid_file && write_pid_file(pid_file, pid, &err) < 0) {
		kill(pid, SIGKILL);
		fail_err(&err);
		goto out;
	}
	r = 0;
out:
	if (slave >= 0)
		close(slave);
	oci_spec_free(&s);
	return r;
}

static int cmd_state(int argc, char **argv)
{
	struct oflag fl[] = { { NULL, NULL, NULL } };
	cleanup_free char *dir = NULL, *text = NULL;
	struct oci_state st;
	gantry_error_t err = NULL;
	const char *id;
	int at = oflags_parse("state", fl, argc, argv), r;
	json_t *j;

	if (at < 0 || (id = one_id("state", argc, argv, at, false)) == NULL)
		return 1;
	if (oci_delegated(g.root, id))
		return delegate("state", id, argc, argv);
	if ((r = load(id, &dir, &st, &err)) != 0)
		return r < 0 ? fail_err(&err) : oci_fail(NO_CONTAINER);
	r = 1;
	j = oci_state_json(&st);
	text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(j);
	printf("%s\n", text);
	oci_state_free(&st);
	return 0;
}

static int cmd_kill(int argc, char **argv)
{
	bool all = false;
	struct oflag fl[] = { { "all", NULL, &all }, { "a", NULL, &all }, { NULL, NULL, NULL } };
	cleanup_free char *dir = NULL;
	struct oci_state st;
	gantry_error_t err = NULL;
	const char *id;
	int at = oflags_parse("kill", fl, argc, argv), sig = SIGTERM, r = 1;
	enum oci_status s;

	if (at < 0 || (id = one_id("kill", argc, argv, at, true)) == NULL)
		return 1;
	if (oci_delegated(g.root, id))
		return delegate("kill", id, argc, argv);
	if (at + 2 < argc)
		return oci_fail("kill: unexpected argument `%.64s`", argv[at + 2]);
	if (at + 1 < argc && (sig = oci_signal_parse(argv[at + 1])) == 0)
		return oci_fail("kill: invalid signal `%.32s`", argv[at + 1]);
	if ((r = load(id, &dir, &st, &err)) != 0)
		return r < 0 ? fail_err(&err) : oci_fail(NO_CONTAINER);
	r = 1;
	s = oci_status_of(&st);
	if (!OCI_ALIVE(s)) {
		oci_fail("container not running");
		goto out;
	}
	if (kill(st.pid, sig) < 0) {
		oci_fail("kill: %s", strerror(errno));
		goto out;
	}
	/* The holder is gone without powering off: that is ours to do. */
	if (sig == SIGKILL)
		sandbox_stop(id, NULL);
	r = 0;
out:
	oci_state_free(&st);
	return r;
}

static int cmd_delete(int argc, char **argv)
{
	bool force = false;
	struct oflag fl[] = { { "force", NULL, &force }, { "f", NULL, &force }, { NULL, NULL, NULL } };
	cleanup_free char *dir = NULL;
	struct oci_state st;
	gantry_error_t err = NULL;
	const char *id;
	int at = oflags_parse("delete", fl, argc, argv), r;
	enum oci_status s;

	if (at < 0 || (id = one_id("delete", argc, argv, at, false)) == NULL)
		return 1;
	if (oci_delegated(g.root, id))
		return delegate("delete", id, argc, argv);
	r = load(id, &dir, &st, &err);
	if (r != 0) /* runc: a forced delete of what is not there is done */
		return r < 0 ? fail_err(&err) : force ? 0 : oci_fail(NO_CONTAINER);
	s = oci_status_of(&st);
	if (OCI_ALIVE(s) && !force) {
		oci_state_free(&st);
		return oci_fail("cannot delete container %s that is not stopped: %s", id,
				oci_status_name(s));
	}
	if (OCI_ALIVE(s))
		kill(st.pid, SIGKILL);
	if (sandbox_delete(id, true, &err) < 0) {
		cleanup_free char *sdir = NULL;

		/* One that never was (a create that failed) is no error. */
		if (sandbox_dir(id, &sdir, NULL) < 0 || access(sdir, F_OK) == 0) {
			oci_state_free(&st);
			return fail_err(&err);
		}
		gantry_error_free(&err);
	}
	rm_tree(dir);
	/* After the container is gone; a failure is a warning. */
	st.pid_start = 0;
	if (oci_hooks_run(st.bundle, "poststop", &st, &err) < 0)
		warn_err(&err);
	oci_state_free(&st);
	return 0;
}

/* pause and resume: its VM's vCPUs held still (nothing saved) or let go,
 * as runc freezes and thaws the container's cgroup. */
static int freeze(const char *verb, bool to, int argc, char **argv)
{
	struct oflag fl[] = { { NULL, NULL, NULL } };
	cleanup_free char *dir = NULL;
	struct oci_state st;
	gantry_error_t err = NULL;
	const char *id;
	int at = oflags_parse(verb, fl, argc, argv), r;
	enum oci_status s;

	if (at < 0 || (id = one_id(verb, argc, argv, at, false)) == NULL)
		return 1;
	if (oci_delegated(g.root, id))
		return delegate(verb, id, argc, argv);
	if ((r = load(id, &dir, &st, &err)) != 0)
		return r < 0 ? fail_err(&err) : oci_fail(NO_CONTAINER);
	s = oci_status_of(&st);
	oci_state_free(&st);
	if (to && s != OCI_RUNNING && s != OCI_CREATED)
		return oci_fail("container not running");
	if (!to && s != OCI_PAUSED)
		return oci_fail("container not paused");
	if (sandbox_freeze(id, to, &err) < 0)
		return fail_err(&err);
	return 0;
}

static int cmd_pause(int argc, char **argv)
{
	return freeze("pause", true, argc, argv);
}

static int cmd_resume(int argc, char **argv)
{
	return freeze("resume", false, argc, argv);
}

static int cmd_ps(int argc, char **argv)
{
	const char *format = "table";
	struct oflag fl[] = { { "format", &format, NULL }, { "f", &format, NULL }, { NULL, NULL, NULL } };
	cleanup_free char *dir = NULL;
	struct oci_state st;
	gantry_error_t err = NULL;
	const char *id;
	int at = oflags_parse("ps", fl, argc, argv), r;
	bool alive;

	if (at < 0 || (id = one_id("ps", argc, argv, at, true)) == NULL)
		return 1;
	if (oci_delegated(g.root, id))
		return delegate("ps", id, argc, argv);
	if ((r = load(id, &dir, &st, &err)) != 0)
		return r < 0 ? fail_err(&err) : oci_fail(NO_CONTAINER);
	r = 1;
	/* The guest's pids mean nothing here: the holder stands for them. */
	alive = OCI_ALIVE(oci_status_of(&st));
	if (strcmp(format, "json") == 0)
		alive ? printf("[%d]\n", (int)st.pid) : printf("[]\n");
	else {
		printf("PID\tCMD\n");
		if (alive)
			printf("%d\tgantry-oci holder\n", (int)st.pid);
	}
	oci_state_free(&st);
	return 0;
}

static int cmd_features(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("{\n"
	       "  \"ociVersionMin\": \"1.0.0\",\n"
	       "  \"ociVersionMax\": \"%s\",\n"
	       "  \"hooks\": [\"prestart\", \"createRuntime\", \"poststart\", \"poststop\"],\n"
	       "  \"mountOptions\": [\"bind\", \"rbind\", \"ro\", \"rw\"],\n"
	       "  \"linux\": {\n"
	       "    \"namespaces\": [\"mount\", \"pid\", \"ipc\", \"uts\", \"network\"]\n"
	       "  },\n"
	       "  \"annotations\": {\n"
	       "    \"io.gantry.runtime\": \"microvm\"\n"
	       "  }\n"
	       "}\n",
	       OCI_SPEC_VERSION);
	return 0;
}

static int cmd_version(void)
{
	printf("gantry-oci version %s\ncommit: none\nspec: %s\n", GANTRY_VERSION, OCI_SPEC_VERSION);
	return 0;
}

/* argv[-1] is the verb: oci_main passes what follows it. */
static int refuse(int argc, char **argv)
{
	(void)argc;
	return oci_fail("%s: not supported by gantry-oci (a container is a microVM)", argv[-1]);
}

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: gantry-oci [--root DIR] [--log FILE] [--log-format text|json] COMMAND\n\n"
		"An OCI runtime with runc's command line that runs each container in a\n"
		"Gantry microVM, its root the bundle's rootfs served over virtio-fs.\n\n"
		"Commands:\n"
		"  create --bundle DIR [--pid-file FILE] [--console-socket SOCK] ID\n"
		"                                boot the container's VM\n"
		"  start ID                      run its process\n"
		"  exec [--process FILE] [--detach] [--pid-file FILE] [--tty]\n"
		"       [--console-socket SOCK] ID [CMD...]\n"
		"                                run one more process in it\n"
		"  state ID                      its state as JSON\n"
		"  kill [--all] ID [SIGNAL]      signal its process\n"
		"  delete [--force] ID           remove it\n"
		"  pause ID, resume ID           hold its VM's vCPUs still, let them go\n"
		"  ps [--format json] ID         its process on the host\n"
		"  features                      what this runtime supports\n"
		"  --version                     version and spec\n\n"
		"State lives in --root (default %s).\n",
		DEFAULT_ROOT);
}

int oci_main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} verbs[] = {
		{ "create", cmd_create }, { "start", cmd_start },     { "state", cmd_state },
		{ "kill", cmd_kill },	  { "delete", cmd_delete },   { "ps", cmd_ps },
		{ "features", cmd_features }, { "pause", cmd_pause }, { "resume", cmd_resume },
		{ "update", refuse },	  { "checkpoint", refuse },   { "restore", refuse },
		{ "exec", cmd_exec },	  { "events", refuse },       { "run", refuse },
	};
	const char *cgroup_manager = NULL, *rootless = NULL, *criu = NULL;
	bool systemd = false, help = false, version = false;
	struct oflag fl[] = { { "root", &g.root, NULL },
			      { "log", &g.log, NULL },
			      { "log-format", &g.log_format, NULL },
			      { "debug", NULL, &g.debug },
			      { "systemd-cgroup", NULL, &systemd },
			      { "cgroup-manager", &cgroup_manager, NULL },
			      { "rootless", &rootless, NULL },
			      { "criu", &criu, NULL },
			      { "help", NULL, &help },
			      { "h", NULL, &help },
			      { "version", NULL, &version },
			      { "v", NULL, &version },
			      { NULL, NULL, NULL } };
	cleanup_free char *home = NULL;
	int at;

	log_init("gantry-oci", -1);
	g.root = DEFAULT_ROOT;
	at = oflags_parse("gantry-oci", fl, argc - 1, argv + 1);
	if (at < 0)
		return 1;
	at++;
	if (version)
		return cmd_version();
	if (help || at >= argc) {
		usage(help ? stdout : stderr);
		return help ? 0 : 1;
	}
	if (g.root[0] != '/')
		return oci_fail("--root `%s`: want an absolute path", g.root);
	/* Each container is a sandbox of a Gantry home of the runtime's own;
	 * the supervisors it starts inherit it. */
	xasprintf(&home, "%s/%s", g.root, GANTRY_SUBDIR);
	setenv("GANTRY_HOME", home, 1);
	gantry_settings_load();
	if (strcmp(argv[at], "version") == 0)
		return cmd_version();
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (strcmp(argv[at], verbs[i].name) == 0)
			return verbs[i].fn(argc - at - 1, argv + at + 1);
	return oci_fail("unknown command `%.64s` (see gantry-oci --help)", argv[at]);
}
