/* Starting the gantry binary again in a hidden role (a sandbox's
 * supervisor, the network worker): the pieces both spawners share. The
 * child side runs between fork and exec, so it uses only async-signal-safe
 * calls. */
#ifndef GANTRY_COMMON_CHILD_H
#define GANTRY_COMMON_CHILD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define CHILD_SELF_EXE "/proc/self/exe"

/* fd itself when it is negative or at least floor; else a close-on-exec
 * duplicate at floor or above, fd closed. Keeps the parent's fds clear of
 * the low numbers the child's dup2()s write. */
int child_fd_above(int fd, int floor);

/* In the child: "gantry: cannot start the WHAT: WHY" on stderr, exit 127. */
__attribute__((noreturn)) void child_fail(const char *what, const char *why);

/* In the child, its fds in place: default signal dispositions, nothing
 * blocked, then this binary with argv; child_fail() if that fails. */
__attribute__((noreturn)) void child_exec_self(char *const argv[], const char *what);
/* The same with envp for its environment. */
__attribute__((noreturn)) void child_exec_self_env(char *const argv[], char *const envp[],
						   const char *what);
/* An environment of only these of ours (a NULL-terminated list of
 * names), for a worker: made before the fork. strv_free() it. */
char **child_env_only(const char *const *names);

/* Reap pid within ms (its wait status in *status); false when it has not
 * ended by then. */
bool child_reap_within(pid_t pid, int ms, int *status);

/* A pidfd for pid (pidfd_open(2), Linux 5.3), readable once it ends;
 * -1 with errno. */
int child_pidfd(pid_t pid);

/* How a waited-for process ended: "status N", "signal N". */
void child_describe_status(int status, char *buf, size_t len);

#endif
