/* Re-executing the gantry binary in a hidden role (see child.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/child.h"
#include "common/settings.h"
#include "common/util.h"

int child_fd_above(int fd, int floor)
{
	int hi;

	if (fd < 0 || fd >= floor)
		return fd;
	hi = fcntl(fd, F_DUPFD_CLOEXEC, floor);
	close(fd);
	return hi;
}

static void say(const char *msg)
{
	(void)!write(STDERR_FILENO, msg, strlen(msg));
}

void child_fail(const char *what, const char *why)
{
	say("gantry: cannot start the ");
	say(what);
	say(": ");
	say(why);
	say("\n");
	_exit(127);
}

void child_exec_self_env(char *const argv[], char *const envp[], const char *what)
{
	sigset_t none;

	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execve(CHILD_SELF_EXE, argv, envp);
	child_fail(what, "execve " CHILD_SELF_EXE " failed");
}

void child_exec_self(char *const argv[], const char *what)
{
	child_exec_self_env(argv, environ, what);
}

char **child_env_only(const char *const *names)
{
	size_t n = 0;
	char **env;

	while (names[n])
		n++;
	env = xzalloc((n + 1) * sizeof(*env));
	n = 0;
	for (size_t i = 0; names[i]; i++) {
		/* The front end's settings, as it resolved them. */
		const char *v = gantry_setting_known(names[i]) ? gantry_setting(names[i])
							       : getenv(names[i]);

		if (v)
			xasprintf(&env[n++], "%s=%s", names[i], v);
	}
	return env;
}

void child_describe_status(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "signal %d", WTERMSIG(status));
	else
		snprintf(buf, len, "wait status %d", status);
}

bool child_reap_within(pid_t pid, int ms, int *status)
{
	uint64_t deadline = now_ms() + (uint64_t)ms;

	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid || (r < 0 && errno != EINTR))
			return true;
		if (now_ms() >= deadline)
			return false;
		usleep(5000);
	}
}

int child_pidfd(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}
