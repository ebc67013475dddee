/* config.json's hooks, run on the host as the runtime spec orders them:
 * prestart and createRuntime once create has the container's VM up (a
 * failure destroys it and fails the create), poststart after start and
 * poststop after delete (a failure is logged; the verb goes on). Hooks
 * meant for the container's own namespaces (createContainer,
 * startContainer) would have to run inside the guest: they are not run,
 * and `features` does not list them. Each hook gets the state document on
 * stdin, its args and env as given, and its timeout. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/child.h"
#include "common/files.h"
#include "common/json.h"
#include "common/util.h"
#include "oci/oci.h"

#define HOOK_TIMEOUT_S	 60 /* when the hook sets none */
#define HOOK_STDERR_MAX	 512
#define HOOKS_MAX	 64
/* A longer timeout is taken as this one: its milliseconds fit poll's int. */
#define HOOK_TIMEOUT_MAX_S 86400

extern char **environ;

/* One hook: 0, or -1 with err saying why (its status and stderr). */
static int run_one(json_t *h, const char *state, gantry_error_t *err)
{
	cleanup_free char *path = NULL;
	char **argv = NULL, **envp = NULL, buf[HOOK_STDERR_MAX + 1];
	size_t nargs = 0, nenv = 0, got = 0;
	uint64_t timeout = HOOK_TIMEOUT_S;
	posix_spawn_file_actions_t fa;
	int in[2] = { -1, -1 }, errp[2] = { -1, -1 }, pidfd = -1, status = 0, r = -1;
	uint64_t deadline;
	pid_t pid = -1;

	if (!json_is_object(h) || jsonh_string(h, "path", true, &path, err) < 0 ||
	    jsonh_strv(h, "args", 1024, &argv, &nargs, err) < 0 ||
	    jsonh_strv(h, "env", 1024, &envp, &nenv, err) < 0 ||
	    jsonh_u64(h, "timeout", false, &timeout, err) < 0) {
		if (*err == NULL)
			gantry_error(err, 0, "a hook is not an object");
		goto out;
	}
	if (path[0] != '/') {
		gantry_error(err, 0, "hook `%.64s`: path is not absolute", path);
		goto out;
	}
	if (argv == NULL) {
		argv = xzalloc(2 * sizeof(*argv));
		argv[0] = xstrdup(path);
	}
	if (envp == NULL)
		envp = xzalloc(sizeof(*envp));
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
		gantry_error_errno(err, "pipe");
		goto out;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, errp[1], 1);
	posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
	r = posix_spawn(&pid, path, &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	close_fd(&in[0]);
	close_fd(&errp[1]);
	if (r != 0) {
		gantry_error(err, r, "hook `%.64s`", path);
		r = -1;
		goto out;
	}
	/* Its end, polled once its stderr is closed: a hook may close it
	 * early and run on, and its timeout holds all the same. */
	pidfd = child_pidfd(pid);
	if (pidfd < 0) {
		gantry_error_errno(err, "hook `%.64s`: pidfd_open", path);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		r = -1;
		goto out;
	}
	/* The state is small; a hook that does not read it gets EPIPE. */
	signal(SIGPIPE, SIG_IGN);
	(void)!write_full(in[1], state, strlen(state));
	close_fd(&in[1]);
	timeout = MIN(timeout ? timeout : HOOK_TIMEOUT_S, HOOK_TIMEOUT_MAX_S);
	deadline = now_ms() + timeout * 1000;
	for (;;) {
		struct pollfd pf = { .fd = errp[0] >= 0 ? errp[0] : pidfd, .events = POLLIN };
		uint64_t now = now_ms();
		ssize_t n;

		if (now >= deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			gantry_error(err, 0, "hook `%.64s` ran past its timeout of %llu s", path,
				     (unsigned long long)timeout);
			r = -1;
			goto out;
		}
		if (poll(&pf, 1, (int)(deadline - now)) <= 0)
			continue;
		if (errp[0] < 0)
			break; /* the hook has exited */
		n = read(errp[0], got < HOOK_STDERR_MAX ? buf + got : (char[64]){ 0 },
			 got < HOOK_STDERR_MAX ? HOOK_STDERR_MAX - got : 64);
		if (n <= 0)
			close_fd(&errp[0]);
		else if (got < HOOK_STDERR_MAX)
			got += (size_t)n;
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	buf[got] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		gantry_error(err, 0, "hook `%.64s` failed (%s %d)%s%.200s", path,
			     WIFEXITED(status) ? "status" : "signal",
			     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
			     *buf ? ": " : "", buf);
		r = -1;
		goto out;
	}
	r = 0;
out:
	close_fd(&in[0]);
	close_fd(&in[1]);
	close_fd(&errp[0]);
	close_fd(&errp[1]);
	close_fd(&pidfd);
	strv_free(argv);
	strv_free(envp);
	return r;
}

int oci_hooks_run(const char *bundle, const char *kind, const struct oci_state *st,
		  gantry_error_t *err)
{
	cleanup_free char *path = NULL, *text = NULL, *state = NULL;
	json_t *cfg, *hooks, *list, *h, *sj;
	size_t len, i;
	int r = 0;

	xasprintf(&path, "%s/config.json", bundle);
	if (read_file_max(path, OCI_CONFIG_MAX, &text, &len, err) < 0)
		return -1;
	if (text == NULL)
		return 0; /* a bundle gone by delete: nothing to run */
	cfg = jsonh_load(text, len, "config.json", err);
	if (cfg == NULL)
		return -1;
	hooks = json_object_get(cfg, "hooks");
	list = json_is_object(hooks) ? json_object_get(hooks, kind) : NULL;
	if (!json_is_array(list) || json_array_size(list) == 0) {
		json_decref(cfg);
		return 0;
	}
	if (json_array_size(list) > HOOKS_MAX) {
		json_decref(cfg);
		return gantry_error(err, 0, "config.json: hooks.%s has over %d entries", kind,
				    HOOKS_MAX);
	}
	sj = oci_state_json(st);
	state = json_dumps(sj, JSON_COMPACT);
	json_decref(sj);
	json_array_foreach(list, i, h) {
		if (run_one(h, state, err) < 0) {
			gantry_error_prefix(err, "%s hook %zu", kind, i);
			r = -1;
			break;
		}
	}
	json_decref(cfg);
	return r;
}
