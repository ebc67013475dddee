/* api-stub-server SOCKET: the manager API's server (src/api/) over a stub
 * backend that keeps sandboxes in memory and runs no VM, for the contract
 * tests (tests/e2e/test_api.py): every status and limit of /v1 without
 * KVM. It prints "ready" once listening and serves until SIGTERM or
 * SIGINT. GANTRY_API_KEEPALIVE_MS sets the events' keepalive.
 *
 * Create: "image": "slow" takes 2 s, "fail" fails. Exec: echo ARGS, cat
 * (stdin), pwd (cwd), exit N, sleep S, yes N (N bytes), kill SIG, and
 * gantry-init's own file helper (proto/files.h, src/guest/files.c) in a
 * child chrooted to GANTRY_STUB_ROOT, every sandbox's one root (in a user
 * namespace of its own when not root); any other command is not found
 * (127). */
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "common/util.h"
#include "proto/agent.h"
#include "proto/files.h"

int guest_files_main(int argc, char **argv); /* src/guest/files.c */

#define STUB_MAX 64

struct stub_sandbox {
	bool used;
	char name[65];
	char image[256];
	bool running;
};

static struct stub_sandbox boxes[STUB_MAX];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static struct stub_sandbox *find(const char *name)
{
	for (size_t i = 0; i < STUB_MAX; i++)
		if (boxes[i].used && strcmp(boxes[i].name, name) == 0)
			return &boxes[i];
	return NULL;
}

static json_t *box_json(const struct stub_sandbox *b)
{
	return json_pack("{s:s,s:s,s:I,s:s,s:n,s:i,s:i,s:i,s:b,s:b,s:[],s:[],s:[],s:s,s:n}", "name",
			 b->name, "state", b->running ? "running" : "stopped", "pid",
			 (json_int_t)(b->running ? getpid() : 0), "image", b->image, "imageDigest",
			 "cpus", 1, "memoryMiB", 512, "diskSizeMiB", 512, "writable", 1, "net", 1,
			 "ports", "shares", "secrets", "created", "2026-01-01T00:00:00Z", "reason");
}

static int list(json_t **out, gantry_error_t *err)
{
	struct stub_sandbox *sorted[STUB_MAX];
	size_t n = 0;

	(void)err;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < STUB_MAX; i++)
		if (boxes[i].used)
			sorted[n++] = &boxes[i];
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && strcmp(sorted[j - 1]->name, sorted[j]->name) > 0; j--) {
			struct stub_sandbox *t = sorted[j];

			sorted[j] = sorted[j - 1];
			sorted[j - 1] = t;
		}
	*out = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(*out, box_json(sorted[i]));
	pthread_mutex_unlock(&lock);
	return 0;
}

static int get(const char *name, json_t **out, gantry_error_t *err)
{
	struct stub_sandbox *b;
	int ret = 0;

	pthread_mutex_lock(&lock);
	b = find(name);
	if (b)
		*out = box_json(b);
	else
		ret = gantry_error(err, ENOENT, "no sandbox `%s`", name);
	pthread_mutex_unlock(&lock);
	return ret;
}

static int create(json_t *req, const struct gantry_cancel *cancel, gantry_error_t *err)
{
	const char *name = json_string_value(json_object_get(req, "name"));
	const char *image = json_string_value(json_object_get(req, "image"));
	struct stub_sandbox *b = NULL;

	if (image && strcmp(image, "slow") == 0) {
		for (int i = 0; i < 20 && !cancel_fired(cancel); i++)
			usleep(100000);
		if (cancel_check(cancel, err) < 0)
			return -1;
	}
	if (image && strcmp(image, "fail") == 0)
		return gantry_error(err, 0, "image `fail`: the stub fails it");
	pthread_mutex_lock(&lock);
	if (find(name)) {
		pthread_mutex_unlock(&lock);
		return gantry_error(err, EEXIST, "sandbox name `%s` is taken", name);
	}
	for (size_t i = 0; i < STUB_MAX && b == NULL; i++)
		if (!boxes[i].used)
			b = &boxes[i];
	if (b) {
		*b = (struct stub_sandbox){ .used = true, .running = true };
		snprintf(b->name, sizeof(b->name), "%s", name);
		snprintf(b->image, sizeof(b->image), "%s", image ? image : "(built-in)");
	}
	pthread_mutex_unlock(&lock);
	return b ? 0 : gantry_error(err, 0, "the stub holds %d sandboxes at most", STUB_MAX);
}

static int set_running(const char *name, bool running, gantry_error_t *err)
{
	struct stub_sandbox *b;
	int ret = 0;

	pthread_mutex_lock(&lock);
	b = find(name);
	if (b)
		b->running = running;
	else
		ret = gantry_error(err, ENOENT, "no sandbox `%s`", name);
	pthread_mutex_unlock(&lock);
	return ret;
}

static int start(const char *name, const struct gantry_cancel *cancel, gantry_error_t *err)
{
	(void)cancel;
	return set_running(name, true, err);
}

static int stop(const char *name, gantry_error_t *err)
{
	return set_running(name, false, err);
}

static int remove_(const char *name, gantry_error_t *err)
{
	struct stub_sandbox *b;
	int ret = 0;

	pthread_mutex_lock(&lock);
	b = find(name);
	if (b)
		*b = (struct stub_sandbox){ 0 };
	else
		ret = gantry_error(err, ENOENT, "no sandbox `%s`", name);
	pthread_mutex_unlock(&lock);
	return ret;
}

/* As root, or as the one root of a user namespace made for it. */
static int enter_root(const char *root)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	char map[64];
	int fd;

	if (uid != 0) {
		if (unshare(CLONE_NEWUSER) < 0)
			return -1;
		if ((fd = open("/proc/self/setgroups", O_WRONLY)) >= 0)
			(void)!write(fd, "deny", 4), close(fd);
		snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
		if ((fd = open("/proc/self/uid_map", O_WRONLY)) < 0 ||
		    write(fd, map, strlen(map)) < 0)
			return -1;
		close(fd);
		snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
		if ((fd = open("/proc/self/gid_map", O_WRONLY)) < 0 ||
		    write(fd, map, strlen(map)) < 0)
			return -1;
		close(fd);
	}
	return chroot(root) < 0 || chdir("/") < 0 ? -1 : 0;
}

/* The file helper, as a container's session runs it: killed when the
 * call is cancelled, or by a signal the caller sends. */
static void helper(const struct api_exec *x, int in, int out, int err_fd, int sig,
		   const struct gantry_cancel *cancel, struct api_exec_result *res)
{
	const char *root = getenv("GANTRY_STUB_ROOT");
	unsigned char signo;
	int status = 0;
	pid_t pid;

	if (root == NULL) {
		dprintf(err_fd, "stub: no GANTRY_STUB_ROOT for the file helper\n");
		res->exit_code = 127;
		return;
	}
	pid = fork();
	if (pid == 0) {
		/* Forked, not executed: the server's descriptors (its end of
		 * this stdin among them) are closed as an exec would. (glibc
		 * makes malloc and stdio safe in the child of a threaded
		 * process; the helper needs both.) */
		if (dup2(in < 0 ? open("/dev/null", O_RDONLY) : in, 0) < 0 || dup2(out, 1) < 0 ||
		    dup2(err_fd, 2) < 0 || close_range(3, ~0u, 0) < 0 || enter_root(root) < 0) {
			dprintf(2, "stub: enter %s: %s\n", root, strerror(errno));
			_exit(125);
		}
		umask(022);
		_exit(guest_files_main((int)x->argc - 2, x->argv + 2));
	}
	for (pid_t w = 0; pid > 0 && (w == 0 || (w < 0 && errno == EINTR));
	     w = waitpid(pid, &status, WNOHANG)) {
		if (cancel_fired(cancel) || read(sig, &signo, 1) == 1)
			kill(pid, SIGKILL);
		usleep(2000);
	}
	if (pid > 0 && WIFSIGNALED(status)) {
		res->signal = WTERMSIG(status);
		res->exit_code = 128 + res->signal;
	} else {
		res->exit_code = pid > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : 125;
	}
}

/* 0 when sandbox name runs, else -1 with err. */
static int running(const char *name, gantry_error_t *err)
{
	struct stub_sandbox *b;
	bool yes;

	pthread_mutex_lock(&lock);
	b = find(name);
	yes = b && b->running;
	pthread_mutex_unlock(&lock);
	return yes ? 0 : gantry_error(err, 0, "sandbox `%s` is not running", name);
}

static int exec(const char *name, const struct api_exec *x, int in, int out, int err_fd, int sig,
		const struct gantry_cancel *cancel, struct api_exec_result *res,
		gantry_error_t *err)
{
	const char *cmd = x->argv[0], *arg = x->argc > 1 ? x->argv[1] : "0";
	char buf[65536];
	ssize_t n;

	if (running(name, err) < 0)
		return -1;
	*res = (struct api_exec_result){ 0 };
	if (strcmp(cmd, PROTO_HELPER_PATH) == 0 && x->argc >= 2 &&
	    strcmp(x->argv[1], PROTO_FILES_ARG) == 0) {
		helper(x, in, out, err_fd, sig, cancel, res);
	} else if (strcmp(cmd, "echo") == 0) {
		for (size_t i = 1; i < x->argc; i++)
			dprintf(out, "%s%s", i > 1 ? " " : "", x->argv[i]);
		dprintf(out, "\n");
	} else if (strcmp(cmd, "cat") == 0) {
		unsigned char signo = 0;

		/* Its input to its end, or until a signal or the cancel. */
		for (;;) {
			struct pollfd p[3] = { { in, POLLIN, 0 },
					       { sig, POLLIN, 0 },
					       { cancel_fd(cancel), POLLIN, 0 } };

			if (poll(p, 3, 1000) < 0 && errno != EINTR)
				break;
			/* SIGWINCH is a terminal's new size, as the agent takes it. */
			if ((p[1].revents & POLLIN) && read(sig, &signo, 1) == 1 &&
			    signo != SIGWINCH) {
				res->signal = signo;
				res->exit_code = 128 + signo;
				break;
			}
			if (p[2].revents)
				return cancel_check(cancel, err);
			if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if ((n = read(in, buf, sizeof(buf))) <= 0 ||
			    write_full(out, buf, (size_t)n) < 0)
				break;
		}
	} else if (strcmp(cmd, "pwd") == 0) {
		dprintf(out, "%s\n", x->cwd ? x->cwd : "/");
	} else if (strcmp(cmd, "exit") == 0) {
		res->exit_code = atoi(arg);
	} else if (strcmp(cmd, "sleep") == 0) {
		unsigned char signo = 0;

		/* Ends early on a signal (a byte on sig), as a process would. */
		for (double t = atof(arg); t > 0 && !cancel_fired(cancel) && signo == 0;
		     t -= 0.05) {
			usleep(50000);
			if (read(sig, &signo, 1) != 1)
				signo = 0;
		}
		if (cancel_check(cancel, err) < 0)
			return -1;
		if (signo) {
			res->signal = signo;
			res->exit_code = 128 + signo;
		}
	} else if (strcmp(cmd, "yes") == 0) {
		memset(buf, 'y', sizeof(buf));
		for (size_t i = 1; i < sizeof(buf); i += 2)
			buf[i] = '\n';
		for (long left = atol(arg); left > 0 && !cancel_fired(cancel);
		     left -= (long)sizeof(buf))
			if (write_full(out, buf, (size_t)MIN(left, (long)sizeof(buf))) < 0)
				break;
		if (cancel_check(cancel, err) < 0)
			return -1;
	} else if (strcmp(cmd, "kill") == 0) {
		res->signal = atoi(arg);
		res->exit_code = 128 + res->signal;
	} else {
		dprintf(err_fd, "stub: %s: not found\n", cmd);
		res->exit_code = 127;
	}
	return 0;
}

/* Not the guest's: the stub's own process, in the shape the lifecycle
 * gives (the real list is tested in a VM). */
static int processes(const char *name, const struct gantry_cancel *cancel, json_t **out,
		     gantry_error_t *err)
{
	(void)cancel;
	if (running(name, err) < 0)
		return -1;
	*out = json_pack("{s:[{s:i,s:i,s:i,s:s,s:i,s:s}]}", "processes", "pid", (int)getpid(),
			 "ppid", (int)getppid(), "uid", (int)getuid(), "state", "S", "rssKiB", 0,
			 "command", "api-stub-server");
	return 0;
}

static const struct api_backend stub = {
	.list = list,
	.get = get,
	.create = create,
	.start = start,
	.stop = stop,
	.remove = remove_,
	.exec = exec,
	.processes = processes,
};

int main(int argc, char **argv)
{
	const char *ka = getenv("GANTRY_API_KEEPALIVE_MS");
	struct api_serve_opts o = { .ready_line = "ready" };
	gantry_error_t err = NULL;
	sigset_t set;

	if (argc != 2) {
		fprintf(stderr, "usage: api-stub-server SOCKET\n");
		return 2;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	/* Blocked on every thread; the server's stop is their signalfd. */
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	o.socket = argv[1];
	o.stop_fd = signalfd(-1, &set, SFD_CLOEXEC);
	o.keepalive_ms = ka ? (unsigned)atoi(ka) : 0;
	if (api_serve(&o, &stub, &err) < 0) {
		gantry_error_print(&err);
		return 1;
	}
	return 0;
}
