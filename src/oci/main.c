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
#include "common/unixsock.h"
#include "common/util.h"
#include "oci/oci.h"
#include "sandbox/lifecycle.h"

#define HOLDER_SOCK	 "holder.sock"
#define HOLDER_START_MS	 10000
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

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	cleanup_free char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	fprintf(stderr, "gantry-oci: %s\n", msg ? msg : "out of memory");
	log_json("error", msg ? msg : "out of memory");
	return 1;
}

static int fail_err(gantry_error_t *err)
{
	int r = fail("%s", gantry_error_str(*err));

	gantry_error_free(err);
	return r;
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
			fail("%s: flag provided but not defined: -%.*s", verb, (int)n, a);
			return -1;
		}
		if (f->value == NULL) {
			if (eq && strcmp(eq + 1, "true") != 0 && strcmp(eq + 1, "false") != 0) {
				fail("%s: -%s takes true or false", verb, f->name);
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
			fail("%s: flag needs an argument: -%s", verb, f->name);
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
		fail("%s: requires a container id", verb);
		return NULL;
	}
	if (!extra_ok && at + 1 < argc) {
		fail("%s: unexpected argument `%.64s`", verb, argv[at + 1]);
		return NULL;
	}
	if (!oci_id_valid(argv[at])) {
		fail("invalid container id `%.64s`: want letters, digits, '.', '_' and '-', at most "
		     "64, not starting with '.' or '-'",
		     argv[at]);
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

static int write_pid_file(const char *path, pid_t pid, gantry_error_t *err)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%d", (int)pid);

	return write_file_atomic(path, buf, (size_t)n, 0644, err);
}

/* --- the holder ------------------------------------------------------- */

static int sig_pipe[2] = { -1, -1 };

static void on_signal(int sig)
{
	unsigned char b = (unsigned char)sig;
	int e = errno;

	if (write(sig_pipe[1], &b, 1) < 0) {
		/* full: the signal is dropped, as a pending one would be */
	}
	errno = e;
}

/* Every signal a process can be sent and catch goes to the container's
 * process (kill ID SIG reaches the holder); SIGKILL ends the holder, and
 * `kill` then powers the VM off. */
static int catch_all(void)
{
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };

	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	sigemptyset(&sa.sa_mask);
	for (int sig = 1; sig < 32; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP || sig == SIGCHLD || sig == SIGSEGV ||
		    sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGABRT ||
		    sig == SIGTTIN || sig == SIGTTOU || sig == SIGTSTP)
			continue;
		if (sig == SIGPIPE) {
			signal(SIGPIPE, SIG_IGN);
			continue;
		}
		sigaction(sig, &sa, NULL);
	}
	return 0;
}

struct container {
	const char *id, *dir;
	struct oci_spec spec;
};

static void process_opts(const struct oci_spec *s, struct sandbox_process_opts *po, char *user,
			 size_t user_len)
{
	snprintf(user, user_len, "%u:%u", s->uid, s->gid);
	*po = (struct sandbox_process_opts){ .args = s->args,
					     .nargs = s->nargs,
					     .env = s->env,
					     .nr_env = s->nr_env,
					     .workdir = s->cwd,
					     .user = user };
}

/* The process in the container, with this process's stdio; its status as
 * a shell gives it (128+n for a signal). */
static int run_process(const char *id, const struct oci_spec *s)
{
	struct sandbox_stdio io = { .in = STDIN_FILENO,
				    .out = STDOUT_FILENO,
				    .err = STDERR_FILENO,
				    .signal_fd = sig_pipe[0] };
	struct sandbox_process_opts po;
	struct agent_result res = { 0 };
	gantry_error_t err = NULL;
	char user[32];
	int status;

	process_opts(s, &po, user, sizeof(user));
	if (sandbox_exec(id, &po, &io, NULL, &res, &err) < 0) {
		fail_err(&err);
		return 255;
	}
	if (res.error)
		fail("exec: %s", res.message ? res.message : "cannot run the process");
	status = agent_result_status(&res);
	agent_result_free(&res);
	return status;
}

/* Wait for `start` on ls (or a signal, which ends the container before
 * it ran: 128+n); 0 once told to start. */
static int wait_start(int ls)
{
	for (;;) {
		struct pollfd pf[2] = { { .fd = ls, .events = POLLIN },
					{ .fd = sig_pipe[0], .events = POLLIN } };
		unsigned char sig;
		char line[16];
		int c;
		ssize_t n;

		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 255;
		}
		if ((pf[1].revents & POLLIN) && read(sig_pipe[0], &sig, 1) == 1) {
			if (sig == SIGWINCH || sig == SIGURG || sig == SIGCONT)
				continue;
			return 128 + sig;
		}
		if (!(pf[0].revents & POLLIN))
			continue;
		c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		struct timeval tv = { .tv_sec = 5 };
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		n = read(c, line, sizeof(line) - 1);
		if (n > 0 && strncmp(line, "start\n", 6) == 0) {
			(void)!write(c, "ok\n", 3);
			close(c);
			return 0;
		}
		close(c);
	}
}

/* The holder: boot the sandbox, say so on ready_fd ("ok\n" or the
 * error), wait for start, run the process, power off, exit with its
 * status. Never returns. */
static __attribute__((noreturn)) void holder(struct container *c, const struct sandbox_opts *o,
					      int ready_fd)
{
	char sock[128];
	gantry_error_t err = NULL;
	int ls = -1, status, dfd;

	if (catch_all() < 0 || sandbox_create(o, NULL, &err) < 0) {
		if (err == NULL)
			gantry_error_errno(&err, "pipe");
		dprintf(ready_fd, "error: %s\n", gantry_error_str(err));
		_exit(1);
	}
	/* Through the directory's fd: sun_path holds only 108 bytes. */
	dfd = open(c->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	snprintf(sock, sizeof(sock), "/proc/self/fd/%d/%s", dfd, HOLDER_SOCK);
	if ((ls = unix_listen(sock, 4, &err)) < 0) {
		dprintf(ready_fd, "error: %s\n", gantry_error_str(err));
		sandbox_delete(c->id, true, NULL);
		_exit(1);
	}
	(void)!write(ready_fd, "ok\n", 3);
	close(ready_fd);
	status = wait_start(ls);
	close(ls);
	unlinkat(dfd, HOLDER_SOCK, 0);
	close(dfd);
	if (status == 0)
		status = run_process(c->id, &c->spec);
	sandbox_stop(c->id, NULL);
	_exit(status);
}

/* --- verbs ------------------------------------------------------------ */

static void sandbox_from_spec(const struct oci_spec *s, const char *id, struct sandbox_opts *o,
			      gantry_error_t *err)
{
	sandbox_opts_init(o);
	o->name = id;
	o->root = s->root;
	o->writable = false;
	if (s->cpus)
		o->cpus = s->cpus;
	if (s->mem_mib)
		o->mem_mib = s->mem_mib;
	for (size_t i = 0; i < s->nr_binds && !*err; i++) {
		cleanup_free char *v = NULL;

		xasprintf(&v, "%s:%s:%s", s->binds[i].source, s->binds[i].destination,
			  s->binds[i].ro ? "ro" : "rw");
		sandbox_opts_volume(o, v, err);
	}
}

static int cmd_create(int argc, char **argv)
{
	const char *bundle = ".", *pid_file = NULL, *console = NULL, *preserve = NULL;
	bool no_pivot, no_keyring;
	struct oflag fl[] = { { "bundle", &bundle, NULL }, { "b", &bundle, NULL },
			      { "pid-file", &pid_file, NULL }, { "console-socket", &console, NULL },
			      { "no-pivot", NULL, &no_pivot }, { "no-new-keyring", NULL, &no_keyring },
			      { "preserve-fds", &preserve, NULL }, { NULL, NULL, NULL } };
	cleanup_free char *dir = NULL;
	char real[PATH_MAX], buf[4096];
	struct container c = { 0 };
	struct sandbox_opts o;
	struct oci_state st = { 0 };
	gantry_error_t err = NULL;
	int at = oflags_parse("create", fl, argc, argv), p[2], r = 1;
	ssize_t n;
	size_t got = 0;
	pid_t pid;

	if (at < 0 || (c.id = one_id("create", argc, argv, at, false)) == NULL)
		return 1;
	if (preserve && strcmp(preserve, "0") != 0)
		return fail("create: --preserve-fds: a descriptor cannot cross into a VM");
	if (getenv("LISTEN_FDS"))
		return fail("create: LISTEN_FDS: socket activation cannot cross into a VM");
	if (realpath(bundle, real) == NULL)
		return fail("create: bundle `%s`: %s", bundle, strerror(errno));
	if (oci_spec_load(real, &c.spec, &err) < 0)
		return fail_err(&err);
	if (c.spec.terminal) {
		oci_spec_free(&c.spec);
		return fail("create: process.terminal: a terminal is not supported yet");
	}
	sandbox_from_spec(&c.spec, c.id, &o, &err);
	if (err || oci_state_dir(g.root, c.id, true, &dir, &err) < 0) {
		sandbox_opts_free(&o);
		oci_spec_free(&c.spec);
		return fail_err(&err);
	}
	c.dir = dir;
	if (pipe2(p, O_CLOEXEC) < 0) {
		fail("create: pipe: %s", strerror(errno));
		goto out;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		fail("create: fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		close(p[0]);
		holder(&c, &o, p[1]);
	}
	close(p[1]);
	while (got < sizeof(buf) - 1 && (n = read(p[0], buf + got, sizeof(buf) - 1 - got)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		got += (size_t)n;
	}
	close(p[0]);
	buf[got] = '\0';
	if (strncmp(buf, "ok\n", 3) != 0) {
		int status;

		waitpid(pid, &status, 0);
		buf[strcspn(buf, "\n")] = '\0';
		fail("create: %s", strncmp(buf, "error: ", 7) == 0 ? buf + 7 : "the holder died");
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
	if (r != 0)
		rm_tree(dir);
	sandbox_opts_free(&o);
	oci_spec_free(&c.spec);
	return r;
}

static int holder_connect(const char *dir, int *out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	cleanup_close int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC), fd = -1;

	if (dfd < 0)
		return -1;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dfd, HOLDER_SOCK);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -1;
	*out = steal_fd(&fd);
	return 0;
}

static int cmd_start(int argc, char **argv)
{
	struct oflag fl[] = { { NULL, NULL, NULL } };
	cleanup_free char *dir = NULL;
	struct oci_state st;
	gantry_error_t err = NULL;
	const char *id;
	int at = oflags_parse("start", fl, argc, argv), fd, r = 1;
	char line[16] = "";

	if (at < 0 || (id = one_id("start", argc, argv, at, false)) == NULL)
		return 1;
	if ((r = load(id, &dir, &st, &err)) != 0)
		return r < 0 ? fail_err(&err) : fail(NO_CONTAINER);
	r = 1;
	if (oci_status_of(&st) != OCI_CREATED) {
		fail("cannot start a container that is %s", oci_status_name(oci_status_of(&st)));
		goto out;
	}
	if (holder_connect(dir, &fd) < 0) {
		fail("start: the container's holder: %s", strerror(errno));
		goto out;
	}
	{
		struct timeval tv = { .tv_sec = HOLDER_START_MS / 1000 };

		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	if (write_full(fd, "start\n", 6) < 0 || read(fd, line, sizeof(line) - 1) <= 0 ||
	    strncmp(line, "ok\n", 3) != 0) {
		close(fd);
		fail("start: the container's holder did not answer");
		goto out;
	}
	close(fd);
	st.started = true;
	if (oci_state_save(dir, &st, &err) < 0) {
		fail_err(&err);
		goto out;
	}
	r = 0;
out:
	oci_state_free(&st);
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
	if ((r = load(id, &dir, &st, &err)) != 0)
		return r < 0 ? fail_err(&err) : fail(NO_CONTAINER);
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
	if (at + 2 < argc)
		return fail("kill: unexpected argument `%.64s`", argv[at + 2]);
	if (at + 1 < argc && (sig = oci_signal_parse(argv[at + 1])) == 0)
		return fail("kill: invalid signal `%.32s`", argv[at + 1]);
	if ((r = load(id, &dir, &st, &err)) != 0)
		return r < 0 ? fail_err(&err) : fail(NO_CONTAINER);
	r = 1;
	s = oci_status_of(&st);
	if (s != OCI_CREATED && s != OCI_RUNNING) {
		fail("container not running");
		goto out;
	}
	if (kill(st.pid, sig) < 0) {
		fail("kill: %s", strerror(errno));
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
	r = load(id, &dir, &st, &err);
	if (r != 0) /* runc: a forced delete of what is not there is done */
		return r < 0 ? fail_err(&err) : force ? 0 : fail(NO_CONTAINER);
	s = oci_status_of(&st);
	if (s == OCI_RUNNING && !force) {
		oci_state_free(&st);
		return fail("cannot delete container %s that is not stopped: running", id);
	}
	if (s == OCI_CREATED || s == OCI_RUNNING)
		kill(st.pid, SIGKILL);
	oci_state_free(&st);
	if (sandbox_delete(id, true, &err) < 0 && err->status != ENOENT) {
		return fail_err(&err);
	}
	gantry_error_free(&err);
	rm_tree(dir);
	return 0;
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
	if ((r = load(id, &dir, &st, &err)) != 0)
		return r < 0 ? fail_err(&err) : fail(NO_CONTAINER);
	r = 1;
	/* The guest's pids mean nothing here: the holder stands for them. */
	alive = oci_status_of(&st) == OCI_RUNNING || oci_status_of(&st) == OCI_CREATED;
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
	       "  \"hooks\": [],\n"
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

static int refuse(int argc, char **argv)
{
	(void)argc;
	return fail("%s: not supported by gantry-oci (a container is a microVM)", argv[-1]);
}

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: gantry-oci [--root DIR] [--log FILE] [--log-format text|json] COMMAND\n\n"
		"An OCI runtime with runc's command line that runs each container in a\n"
		"Gantry microVM, its root the bundle's rootfs served over virtio-fs.\n\n"
		"Commands:\n"
		"  create --bundle DIR [--pid-file FILE] ID   boot the container's VM\n"
		"  start ID                                   run its process\n"
		"  state ID                                   its state as JSON\n"
		"  kill [--all] ID [SIGNAL]                   signal its process\n"
		"  delete [--force] ID                        remove it\n"
		"  ps [--format json] ID                      its process on the host\n"
		"  features                                   what this runtime supports\n"
		"  --version                                  version and spec\n\n"
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
		{ "features", cmd_features }, { "pause", refuse },    { "resume", refuse },
		{ "update", refuse },	  { "checkpoint", refuse },   { "restore", refuse },
		{ "exec", refuse },	  { "events", refuse },       { "run", refuse },
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
		return fail("--root `%s`: want an absolute path", g.root);
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
	return fail("unknown command `%.64s` (see gantry-oci --help)", argv[at]);
}
