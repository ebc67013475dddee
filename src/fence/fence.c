/* The fence's processes (see fence.h). The fence, the process the caller
 * started, unshares the namespaces, mounts the guards and stays outside
 * the new PID namespace to wait; its one child is that namespace's PID 1,
 * our init, which runs CMD, reaps whatever is left to it and hands CMD's
 * wait status back. When the init exits the kernel kills everything else
 * in the namespace, daemons included. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/child.h"
#include "common/files.h"
#include "common/log.h"
#include "common/util.h"
#include "fence/fence.h"

/* Passed on to CMD when sent to the fence. The terminal's own (Ctrl-C, a
 * resize, a hangup: si_code SI_KERNEL) reach CMD in its process group
 * without us, so passing them on would deliver them twice. */
static const int fence_forwarded[] = {
	SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH
};

struct fence {
	sigset_t caller_mask; /* CMD gets the caller's mask and SIGCHLD back */
	struct sigaction caller_chld;
	sigset_t mask;	/* fence_forwarded and SIGCHLD: blocked, read from a signalfd */
	bool own_group; /* no controlling terminal: CMD gets a process group of its own */
	int parent;	/* pidfd of the fence's parent, or -1 */
	int life[2];	/* the init sees POLLHUP on life[0] once the fence is gone */
	int result[2];	/* the init writes CMD's wait status to result[1] */
};

/* The fence's parent is watched through a pidfd, which polls readable when
 * its whole process is gone (PR_SET_PDEATHSIG fires when the thread that
 * started us ends, which a threaded parent's may well do early). */
static int fence_watch_parent(struct fence *f, gantry_error_t *err)
{
	pid_t ppid = getppid();

	if (ppid == 1)
		return 0;
	/* 0: the parent is outside our PID namespace, where no pidfd reaches. */
	f->parent = ppid > 0 ? child_pidfd(ppid) : -1;
	if (f->parent < 0 && ppid > 0 && errno != ENOSYS)
		return gantry_error_errno(err, "fence: pidfd_open of the parent (pid %d)", ppid);
	if (f->parent < 0 && prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		return gantry_error_errno(err, "fence: PR_SET_PDEATHSIG");
	if (getppid() != ppid)
		return gantry_error(err, 0, "fence: the parent (pid %d) is gone", ppid);
	return 0;
}

/* The tty_nr of /proc/self/stat: this process's controlling terminal,
 * whether or not /dev/tty could be opened by it. */
static bool has_ctty(void)
{
	char buf[1024];
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC), tty = 0;
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	const char *end;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return true; /* cannot tell: keep the terminal's group, as CMD would be */
	buf[n] = '\0';
	end = strrchr(buf, ')');
	if (end == NULL || sscanf(end + 1, " %*c %*d %*d %*d %d", &tty) != 1)
		return true;
	return tty != 0;
}

static long read_sysctl(const char *path)
{
	char buf[32] = "";
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? strtol(buf, NULL, 10) : -1;
}

/* One line that says what the host refuses, with errno from the failure. */
static int fence_userns_refused(gantry_error_t *err, const char *what)
{
	int e = errno;

	if (read_sysctl("/proc/sys/kernel/unprivileged_userns_clone") == 0)
		return gantry_error(err, e,
				    "fence: cannot %s: unprivileged user namespaces are off "
				    "(sysctl kernel.unprivileged_userns_clone=0)",
				    what);
	if (read_sysctl("/proc/sys/user/max_user_namespaces") == 0)
		return gantry_error(err, e,
				    "fence: cannot %s: user namespaces are off "
				    "(sysctl user.max_user_namespaces=0)",
				    what);
	if (read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1)
		return gantry_error(
			err, e,
			"fence: cannot %s: AppArmor restricts unprivileged user "
			"namespaces (sysctl kernel.apparmor_restrict_unprivileged_userns=1)",
			what);
	return gantry_error(err, e, "fence: cannot %s", what);
}

static int write_proc(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int r;

	if (fd < 0)
		return -1;
	r = write_full(fd, text, strlen(text));
	close(fd);
	return r;
}

static int fence_unshare(gantry_error_t *err)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	char map[64];

	/* Root needs no user namespace, and so keeps its powers on the host. */
	if (uid == 0 && unshare(CLONE_NEWNS | CLONE_NEWPID) == 0)
		return 0;
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) < 0)
		return fence_userns_refused(err, "create a user namespace");
	/* Only our own ids are mapped: CMD keeps its uid and gid, and no
	 * capability survives its execve. */
	if (write_proc("/proc/self/setgroups", "deny") < 0 && errno != ENOENT)
		return fence_userns_refused(err, "deny setgroups in the user namespace");
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	if (write_proc("/proc/self/uid_map", map) < 0)
		return fence_userns_refused(err, "map the user id into the user namespace");
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	if (write_proc("/proc/self/gid_map", map) < 0)
		return fence_userns_refused(err, "map the group id into the user namespace");
	return 0;
}

/* The flags a read-only remount must repeat: in a user namespace the
 * kernel refuses to drop nosuid, nodev, noexec or the atime mode of a
 * mount that came from the host. */
static unsigned long mount_kept_flags(const char *path)
{
	struct statvfs st;
	unsigned long f = 0;

	if (statvfs(path, &st) < 0)
		return 0;
	if (st.f_flag & ST_NOSUID)
		f |= MS_NOSUID;
	if (st.f_flag & ST_NODEV)
		f |= MS_NODEV;
	if (st.f_flag & ST_NOEXEC)
		f |= MS_NOEXEC;
	if (st.f_flag & ST_NOATIME)
		f |= MS_NOATIME;
	else if (st.f_flag & ST_RELATIME)
		f |= MS_RELATIME;
	else
		f |= MS_STRICTATIME;
	if (st.f_flag & ST_NODIRATIME)
		f |= MS_NODIRATIME;
	return f;
}

static int bind_self(const char *path, gantry_error_t *err)
{
	if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) < 0)
		return gantry_error_errno(err, "fence: bind %s", path);
	return 0;
}

static int guard_mount(const char *dir, gantry_error_t *err)
{
	for (const char *const *name = fence_writable; *name; name++) {
		cleanup_free char *path = NULL;
		struct stat st;

		xasprintf(&path, "%s/%s", dir, *name);
		/* A symlink leads elsewhere, which the guard leaves as it is. */
		if (lstat(path, &st) < 0 || !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
			continue;
		if (bind_self(path, err) < 0)
			return -1;
	}
	/* The recursive bind takes those binds (and any mount below) along;
	 * the read-only remount is of its top alone. */
	if (bind_self(dir, err) < 0)
		return -1;
	if (mount(NULL, dir, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | mount_kept_flags(dir), NULL) <
	    0)
		return gantry_error_errno(err, "fence: make %s read-only", dir);
	return 0;
}

static int fence_mounts(struct fence_guards *g, const char *cwd, gantry_error_t *err)
{
	/* Nothing mounted here reaches the host; the host's new mounts still
	 * show here. */
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		return gantry_error_errno(err, "fence: make the mount namespace private");
	fence_guards_order(g);
	for (size_t i = 0; i < g->n; i++)
		if (guard_mount(g->dirs[i], err) < 0)
			return -1;
	/* The working directory still points below the new mounts: look it
	 * up again, through them. */
	if (chdir(cwd) < 0)
		return gantry_error_errno(err, "fence: chdir %s", cwd);
	return 0;
}

/* name is a file in some directory of $PATH (a shell's 126, not 127,
 * when it cannot be run). */
static bool in_path(const char *name)
{
	cleanup_free char *file = path_find(name);

	return file != NULL;
}

/* In CMD's process, forked from the init. */
__attribute__((noreturn)) static void fence_exec(struct fence *f, char *const *argv)
{
	int e;

	if (f->own_group)
		setpgid(0, 0);
	sigaction(SIGCHLD, &f->caller_chld, NULL);
	sigprocmask(SIG_SETMASK, &f->caller_mask, NULL);
	execvp(argv[0], argv);
	e = errno;
	/* execvp says EACCES for a directory of $PATH it may not search. */
	if (e == EACCES && strchr(argv[0], '/') == NULL && !in_path(argv[0]))
		e = ENOENT;
	log_error("fence: cannot run `%s`: %s", argv[0], strerror(e));
	_exit(e == ENOENT ? 127 : 126);
}

/* Reap whatever has ended: true with *status once cmd has. */
static bool init_reap(pid_t cmd, int *status)
{
	bool done = false;
	pid_t pid;
	int ws;

	while ((pid = waitpid(-1, &ws, WNOHANG)) > 0) {
		if (pid == cmd) {
			*status = ws;
			done = true;
		}
	}
	return done;
}

static bool fd_hung_up(int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };

	return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR));
}

/* PID 1 of the namespace. */
__attribute__((noreturn)) static void fence_init(struct fence *f, char *const *argv)
{
	struct signalfd_siginfo si;
	int sfd, status;
	pid_t cmd;

	/* The fence's death kills the init, and the namespace with it. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	close_fd(&f->life[1]);
	close_fd(&f->result[0]);
	close_fd(&f->parent);
	if (fd_hung_up(f->life[0]))
		_exit(FENCE_FAILED);
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		log_warn("fence: cannot mount /proc for the PID namespace (%s): ps shows "
			 "the host's processes",
			 strerror(errno));
	sfd = signalfd(-1, &f->mask, SFD_CLOEXEC);
	if (sfd < 0 || (cmd = fork()) < 0) {
		log_error("fence: cannot start the command: %s", strerror(errno));
		_exit(FENCE_FAILED);
	}
	if (cmd == 0)
		fence_exec(f, argv);
	/* Out of CMD's process group: a signal sent to the group reaches CMD
	 * itself, not again through us. */
	setpgid(0, 0);
	for (;;) {
		struct pollfd p[2] = { { sfd, POLLIN, 0 }, { f->life[0], POLLIN, 0 } };

		if (poll(p, 2, -1) < 0)
			continue;
		if (p[1].revents)
			_exit(FENCE_FAILED);
		if (read(sfd, &si, sizeof(si)) != sizeof(si))
			continue;
		if (si.ssi_signo != SIGCHLD) {
			if (si.ssi_code != SI_KERNEL)
				kill(cmd, (int)si.ssi_signo);
		} else if (init_reap(cmd, &status)) {
			write_full(f->result[1], &status, sizeof(status));
			_exit(0);
		}
	}
}

/* In the fence: pass signals on to the init until it ends, or kill it
 * when the fence's parent is gone. */
static int fence_wait(struct fence *f, pid_t init, int *status, gantry_error_t *err)
{
	struct signalfd_siginfo si;
	int sfd = signalfd(-1, &f->mask, SFD_CLOEXEC);
	int ws, cmd_status;

	if (sfd < 0) {
		kill(init, SIGKILL);
		waitpid(init, NULL, 0);
		return gantry_error_errno(err, "fence: signalfd");
	}
	for (;;) {
		struct pollfd p[2] = { { sfd, POLLIN, 0 }, { f->parent, POLLIN, 0 } };

		if (poll(p, f->parent >= 0 ? 2 : 1, -1) < 0)
			continue;
		if (f->parent >= 0 && p[1].revents) {
			kill(init, SIGKILL);
			waitpid(init, NULL, 0);
			close(sfd);
			*status = SIGKILL; /* the wait status of a SIGKILL death */
			return 0;
		}
		if (read(sfd, &si, sizeof(si)) != sizeof(si))
			continue;
		if (si.ssi_signo != SIGCHLD) {
			if (si.ssi_code != SI_KERNEL)
				kill(init, (int)si.ssi_signo);
		} else if (waitpid(init, &ws, WNOHANG) == init) {
			break;
		}
	}
	close(sfd);
	/* Without CMD's status the init's own says what went wrong. */
	*status = read_full(f->result[0], &cmd_status, sizeof(cmd_status)) == 0 ? cmd_status : ws;
	return 0;
}

static int fence_start(struct fence *f, struct fence_guards *guards, char *const *argv, int *status,
		       gantry_error_t *err)
{
	cleanup_free char *cwd = getcwd(NULL, 0);
	pid_t init;

	if (cwd == NULL)
		return gantry_error_errno(err, "fence: the current directory");
	if (fence_watch_parent(f, err) < 0)
		return -1;
	if (pipe2(f->life, O_CLOEXEC) < 0 || pipe2(f->result, O_CLOEXEC) < 0)
		return gantry_error_errno(err, "fence: pipe");
	if (fence_unshare(err) < 0 || fence_mounts(guards, cwd, err) < 0)
		return -1;
	init = fork();
	if (init < 0)
		return gantry_error_errno(err, "fence: fork");
	if (init == 0)
		fence_init(f, argv);
	close_fd(&f->life[0]);
	close_fd(&f->result[1]);
	return fence_wait(f, init, status, err);
}

int fence_run(struct fence_guards *guards, char *const *argv, int *status, gantry_error_t *err)
{
	struct fence f = { .parent = -1, .life = { -1, -1 }, .result = { -1, -1 } };
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	int r;

	sigemptyset(&f.mask);
	for (size_t i = 0; i < ARRAY_SIZE(fence_forwarded); i++)
		sigaddset(&f.mask, fence_forwarded[i]);
	sigaddset(&f.mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &f.mask, &f.caller_mask);
	/* Waiting needs SIGCHLD's default: under SIG_IGN the kernel reaps. */
	sigaction(SIGCHLD, &dfl, &f.caller_chld);
	/* With a terminal CMD stays in the caller's process group, the one
	 * the terminal's job control knows, so it can read the terminal. */
	f.own_group = !has_ctty();
	r = fence_start(&f, guards, argv, status, err);
	close_fd(&f.parent);
	close_fd(&f.life[0]);
	close_fd(&f.life[1]);
	close_fd(&f.result[0]);
	close_fd(&f.result[1]);
	return r;
}

void fence_exit(int status)
{
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		sigset_t one;

		fflush(NULL);
		/* CMD dumped its own core where the host wants one; ours would
		 * only be noise. */
		prctl(PR_SET_DUMPABLE, 0);
		signal(sig, SIG_DFL);
		sigemptyset(&one);
		sigaddset(&one, sig);
		sigprocmask(SIG_UNBLOCK, &one, NULL);
		kill(getpid(), sig);
		_exit(128 + sig);
	}
	exit(WIFEXITED(status) ? WEXITSTATUS(status) : FENCE_FAILED);
}
