/* A worker's confinement, the spawner's side: the isolation mode, and the
 * fork into new namespaces whose outcome the worker is told (see
 * confine.h; the worker's side is confine.c). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/settings.h"
#include "common/util.h"
#include "confine/confine.h"

/* --- the mode --------------------------------------------------------------------------- */

static const char *const mode_names[] = {
	[CONFINE_OFF] = "off", [CONFINE_AUTO] = "auto", [CONFINE_REQUIRED] = "required"
};

const char *confine_mode_name(enum confine_mode m)
{
	return mode_names[m];
}

int confine_mode_parse(const char *s, enum confine_mode *m, gantry_error_t *err)
{
	for (size_t i = 0; i < ARRAY_SIZE(mode_names); i++) {
		if (strcmp(s, mode_names[i]) == 0) {
			*m = (enum confine_mode)i;
			return 0;
		}
	}
	return gantry_error(err, 0, "process isolation `%s`: want auto, required or off", s);
}

bool confine_seccomp_log(void)
{
	const char *s = gantry_setting(CONFINE_SECCOMP_ENV);

	return s && strcmp(s, "log") == 0;
}

int confine_mode_from_env(enum confine_mode *m, gantry_error_t *err)
{
	const char *s = gantry_setting(CONFINE_MODE_ENV);

	*m = CONFINE_AUTO;
	if (s == NULL || *s == '\0')
		return 0;
	if (confine_mode_parse(s, m, err) < 0)
		return gantry_error_prefix(err, "%s", CONFINE_MODE_ENV);
	return 0;
}

/* --- the spawn ---------------------------------------------------------------------------- */

static bool write_all(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return false;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text);
}

/* A root caller's child, in its own user namespace, waits on sync for
 * its maps (only root may map it to another uid, so the caller writes
 * them) and then becomes that namespace's root: no group left of the
 * caller's, and uid and gid CONFINE_UNPRIVILEGED_UID outside. */
static bool map_unprivileged(pid_t pid)
{
	char path[64], map[32];

	snprintf(map, sizeof(map), "0 %u 1\n", CONFINE_UNPRIVILEGED_UID);
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
	if (!write_all(path, map))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
	return write_all(path, map);
}

/* Raw system calls: the child of a raw clone() has one thread, but the C
 * library still counts its parent's, and its setgroups() and setres*id()
 * would wait forever for them to change their credentials too. */
static bool become_mapped_root(int sync)
{
	char ok = 0;

	return read(sync, &ok, 1) == 1 && ok == 1 && syscall(SYS_setgroups, 0, NULL) == 0 &&
	       syscall(SYS_setresgid, 0, 0, 0) == 0 && syscall(SYS_setresuid, 0, 0, 0) == 0;
}

pid_t confine_fork(enum confine_mode mode, unsigned long extra_ns, struct confine_spawn *sp)
{
	bool root = geteuid() == 0;
	bool unpriv = root && (extra_ns & CONFINE_ROOT_UNPRIVILEGED);
	unsigned long ns = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
			   (extra_ns & ~CONFINE_ROOT_UNPRIVILEGED);
	char uid_map[32], gid_map[32];
	int sync[2] = { -1, -1 };
	pid_t pid;

	*sp = (struct confine_spawn){ 0 };
	if (mode == CONFINE_OFF)
		return fork();
	/* Root keeps its identity and needs no user namespace for the
	 * others, unless asked to give it up; an ordinary user is root of
	 * its own, mapped to itself. */
	if (!root || unpriv)
		ns |= CLONE_NEWUSER;
	if (unpriv && pipe2(sync, O_CLOEXEC) < 0)
		return -1;
	snprintf(uid_map, sizeof(uid_map), "0 %u 1\n", (unsigned)geteuid());
	snprintf(gid_map, sizeof(gid_map), "0 %u 1\n", (unsigned)getegid());
	sp->ns = ns | (unpriv ? CONFINE_ROOT_UNPRIVILEGED : 0); /* both sides' copy */
	pid = (pid_t)syscall(SYS_clone, ns | SIGCHLD, NULL, NULL, NULL, 0);
	if (pid < 0 && unpriv) {
		/* No user namespace for root's worker: root's others still. */
		int e = errno;

		close(sync[0]);
		close(sync[1]);
		unpriv = false;
		ns &= ~(unsigned long)CLONE_NEWUSER;
		sp->ns = ns | CONFINE_ROOT_UNPRIVILEGED; /* asked for: its report says refused */
		pid = (pid_t)syscall(SYS_clone, ns | SIGCHLD, NULL, NULL, NULL, 0);
		sp->userns_errno = e;
	}
	if (pid < 0) {
		/* Refused (a sysctl, a policy, a limit): without namespaces. */
		*sp = (struct confine_spawn){ .userns_errno = errno };
		return fork();
	}
	if (pid > 0) {
		if (unpriv) {
			char ok = map_unprivileged(pid);

			/* Not mapped: the child ends (126), the caller sees why. */
			(void)!write(sync[1], &ok, 1);
			close(sync[0]);
			close(sync[1]);
		}
		return pid;
	}
	if (unpriv) {
		close(sync[1]);
		if (!become_mapped_root(sync[0]))
			_exit(126);
		close(sync[0]);
	} else if (!root && (!write_all("/proc/self/setgroups", "deny") ||
			     !write_all("/proc/self/uid_map", uid_map) ||
			     !write_all("/proc/self/gid_map", gid_map))) {
		_exit(126);
	}
	return 0;
}

/* Decimal or hex digits of v into buf (size >= 24), async-signal-safe. */
static void format_ulong(char *buf, unsigned long v, unsigned base)
{
	char tmp[24];
	size_t n = 0, o = 0;

	do {
		tmp[n++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v && n < sizeof(tmp));
	if (base == 16) {
		buf[o++] = '0';
		buf[o++] = 'x';
	}
	while (n)
		buf[o++] = tmp[--n];
	buf[o] = '\0';
}

void confine_spawn_format(const struct confine_spawn *sp, char ns[24], char userns[24])
{
	format_ulong(ns, sp->ns, 16);
	format_ulong(userns, (unsigned long)sp->userns_errno, 10);
}
