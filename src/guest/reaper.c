/* `gantry-guest init -- CMD ARG...` (PROTO_INIT_ARG): a small init for a
 * container whose process should behave as a plain child (gantry wrap).
 * The container's PID 1 ignores every signal it has no handler for, even
 * a fatal one sent to itself; so CMD runs as PID 1's child instead. PID 1
 * forwards the signals it gets to CMD, reaps whatever is left to it, and
 * exits with CMD's status, 128+N for a signal N (it cannot die of the
 * signal itself). Its exit ends the PID namespace: everything CMD left
 * running dies with it, daemons included. With a terminal, CMD gets a
 * process group of its own in the foreground, so the terminal's Ctrl-C
 * reaches it once. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest/guest.h"

int guest_reaper_main(int argc, char **argv)
{
	sigset_t all, old;
	pid_t child;
	bool tty = isatty(STDIN_FILENO);

	if (argc > 0 && strcmp(argv[0], "--") == 0)
		argc--, argv++;
	if (argc == 0) {
		fprintf(stderr, "gantry-guest init: no command\n");
		return 125;
	}
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	child = fork();
	if (child < 0) {
		fprintf(stderr, "gantry-guest init: fork: %s\n", strerror(errno));
		return 125;
	}
	if (child == 0) {
		if (tty) {
			setpgid(0, 0);
			signal(SIGTTOU, SIG_IGN);
			tcsetpgrp(STDIN_FILENO, getpid());
			signal(SIGTTOU, SIG_DFL);
		}
		sigprocmask(SIG_SETMASK, &old, NULL);
		execvp(argv[0], argv);
		fprintf(stderr, "%s: %s\n", argv[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&all, &si), status;
		pid_t pid;

		if (sig < 0)
			continue;
		if (sig != SIGCHLD) {
			/* A terminal's own signals reached CMD's group already. */
			if (!(tty && si.si_code == SI_KERNEL))
				kill(child, sig);
			continue;
		}
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
			if (pid != child)
				continue;
			if (WIFSIGNALED(status))
				return 128 + WTERMSIG(status);
			return WEXITSTATUS(status);
		}
	}
}
