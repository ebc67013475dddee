/* A secret's source read (see source.h): a file, or a command run
 * without a shell under a deadline, its value into the secret arena. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/json.h"
#include "common/util.h"
#include "secret/source.h"
#include "secret/store.h"

/* Where a command's argv0 without a '/' is looked for, and its PATH. */
#define CMD_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* A value read or made ends without its trailing newline. */
static size_t chomp(const char *v, size_t len)
{
	if (len && v[len - 1] == '\n')
		len--;
	if (len && v[len - 1] == '\r')
		len--;
	return len;
}

/* =@PATH read into buf (SECRET_VALUE_MAX + 1 bytes of the arena): its
 * length, one trailing newline dropped, or -1. No lock held. */
ssize_t secret_read_file(const struct secret_spec *sp, char *buf, gantry_error_t *err)
{
	cleanup_close int fd = open(sp->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat s;
	ssize_t n;

	if (fd < 0)
		return gantry_error_errno(err, "secret `%s`: open `%s`", sp->name, sp->path);
	if (fstat(fd, &s) < 0 || !S_ISREG(s.st_mode))
		return gantry_error(err, 0, "secret `%s`: `%s` is not a regular file", sp->name,
				    sp->path);
	if (s.st_size > SECRET_VALUE_MAX)
		return gantry_error(err, 0, "secret `%s`: `%s` is larger than %u KiB", sp->name,
				    sp->path, SECRET_VALUE_MAX >> 10);
	do
		n = pread(fd, buf, SECRET_VALUE_MAX + 1, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return gantry_error_errno(err, "secret `%s`: read `%s`", sp->name, sp->path);
	if (n > SECRET_VALUE_MAX)
		return gantry_error(err, 0, "secret `%s`: `%s` grew past %u KiB", sp->name,
				    sp->path, SECRET_VALUE_MAX >> 10);
	return (ssize_t)chomp(buf, (size_t)n);
}

/* argv0 as the command runs it: itself with a '/', else found on CMD_PATH. */
static char *cmd_path(const char *argv0)
{
	const char *dir = CMD_PATH;

	if (strchr(argv0, '/'))
		return xstrdup(argv0);
	while (*dir) {
		size_t n = strcspn(dir, ":");
		char *p;

		xasprintf(&p, "%.*s/%s", (int)n, dir, argv0);
		if (access(p, X_OK) == 0)
			return p;
		free(p);
		dir += n + (dir[n] == ':');
	}
	return NULL;
}

/* Read the command's stdout until its end, SECRET_VALUE_MAX + 1 bytes or
 * the deadline: the bytes read, or -1 (timed out: ETIMEDOUT). */
static ssize_t read_until(int fd, char *buf, size_t cap, uint64_t deadline)
{
	size_t got = 0;

	while (got < cap) {
		uint64_t now = now_ms();
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;
		int r;

		if (now >= deadline) {
			errno = ETIMEDOUT;
			return -1;
		}
		r = poll(&p, 1, (int)(deadline - now));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			continue;
		n = read(fd, buf + got, cap - got);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return n < 0 ? -1 : (ssize_t)got;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* The command's environment: PATH, LC_ALL, and the user's HOME, USER and
 * XDG_RUNTIME_DIR (from the password file and /run/user), for tools such
 * as pass and its gpg-agent. */
static char **cmd_env(void)
{
	struct passwd pw, *res = NULL;
	char buf[4096], run[64];
	char **env = xzalloc(6 * sizeof(*env));
	size_t n = 0;

	env[n++] = xstrdup("PATH=" CMD_PATH);
	env[n++] = xstrdup("LC_ALL=C");
	if (getpwuid_r(getuid(), &pw, buf, sizeof(buf), &res) == 0 && res) {
		xasprintf(&env[n++], "HOME=%s", pw.pw_dir);
		xasprintf(&env[n++], "USER=%s", pw.pw_name);
	}
	snprintf(run, sizeof(run), "/run/user/%u", (unsigned)getuid());
	if (access(run, X_OK) == 0)
		xasprintf(&env[n++], "XDG_RUNTIME_DIR=%s", run);
	return env;
}

/* The command in a process group of its own (so that a timeout ends what
 * it started too), default signals and none blocked, no fd of ours but
 * its stdout. */
static pid_t cmd_spawn(const char *name, char *path, char **argv, int out, gantry_error_t *err)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, all;
	char **envp = cmd_env();
	pid_t pid;
	int r;

	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
						POSIX_SPAWN_SETPGROUP);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out, 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	r = posix_spawn(&pid, path, &fa, &attr, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	strv_free(envp);
	if (r != 0) {
		errno = r;
		return gantry_error_errno(err, "secret `%s`: run `%s`", name, argv[0]);
	}
	return pid;
}

/* Reap pid by the deadline, else end its group and reap it: 0 with its
 * status, or -1 when it ran too long or was not ours to reap. */
static int cmd_reap(pid_t pid, uint64_t deadline, int *status)
{
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -1;
		if (now_ms() >= deadline) {
			kill(-pid, SIGKILL);
			while ((r = waitpid(pid, status, 0)) < 0 && errno == EINTR)
				;
			errno = ETIMEDOUT;
			return -1;
		}
		usleep(2000);
	}
}

/* ='!ARGV' run, no shell, its stdout the value, into buf (SECRET_VALUE_MAX
 * + 1 bytes of the arena): at most SECRET_VALUE_MAX bytes, exit status 0,
 * all within SECRET_CMD_TIMEOUT_MS. Its length, one trailing newline
 * dropped, or -1. No lock held. */
ssize_t secret_run_cmd(const struct secret_spec *sp, char *buf, gantry_error_t *err)
{
	cleanup_free char *path = cmd_path(sp->argv[0]);
	uint64_t deadline = now_ms() + SECRET_CMD_TIMEOUT_MS;
	const char *name = sp->name;
	int pipefd[2], status = 0, read_errno = 0, reaped;
	ssize_t n, r = -1;
	pid_t pid;

	if (path == NULL)
		return gantry_error(err, 0, "secret `%s`: command `%s` not found", name,
				    sp->argv[0]);
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return gantry_error_errno(err, "secret `%s`: pipe", name);
	pid = cmd_spawn(name, path, sp->argv, pipefd[1], err);
	close(pipefd[1]);
	if (pid < 0)
		goto out;
	n = read_until(pipefd[0], buf, SECRET_VALUE_MAX + 1, deadline);
	if (n < 0)
		read_errno = errno;
	if (n < 0 || n > SECRET_VALUE_MAX)
		deadline = 0; /* ended at once */
	reaped = cmd_reap(pid, deadline, &status);
	if ((n < 0 && read_errno == ETIMEDOUT) ||
	    (reaped < 0 && errno == ETIMEDOUT && n >= 0 && n <= SECRET_VALUE_MAX))
		gantry_error(err, 0, "secret `%s`: its command took more than %d s", name,
			     SECRET_CMD_TIMEOUT_MS / 1000);
	else if (n < 0)
		gantry_error(err, read_errno, "secret `%s`: read its command's output", name);
	else if (n > SECRET_VALUE_MAX)
		gantry_error(err, 0, "secret `%s`: its command printed more than %u KiB", name,
			     SECRET_VALUE_MAX >> 10);
	else if (reaped < 0)
		gantry_error(err, 0, "secret `%s`: its command's status is unknown", name);
	else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		gantry_error(err, 0, "secret `%s`: its command failed (%s %d)", name,
			     WIFEXITED(status) ? "status" : "signal",
			     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	else
		r = (ssize_t)chomp(buf, (size_t)n);
out:
	close(pipefd[0]);
	return r;
}
