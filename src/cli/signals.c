/* Forwarding the CLI's signals to a session (see signals.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <unistd.h>

#include "cli/signals.h"
#include "sandbox/lifecycle.h"
#include "common/util.h"

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH };
static int sig_pipe[2] = { -1, -1 };
static struct sigaction old[ARRAY_SIZE(forwarded)];
static bool taken;

static void sig_handler(int signo)
{
	int saved = errno;
	unsigned char b = (unsigned char)signo;

	(void)!write(sig_pipe[1], &b, 1);
	errno = saved;
}

static struct gantry_cancel *cancel_token;

static void cancel_handler(int signo)
{
	int saved = errno;

	(void)signo;
	cancel_fire(cancel_token);
	errno = saved;
}

int cli_signals_cancel(struct gantry_cancel *c, gantry_error_t *err)
{
	static const int ending[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa = { .sa_handler = cancel_handler, .sa_flags = SA_RESTART };

	if (cancel_init(c, err) < 0)
		return -1;
	cancel_token = c;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < ARRAY_SIZE(ending); i++)
		if (sigaction(ending[i], &sa, NULL) < 0)
			return gantry_error_errno(err, "sigaction");
	return 0;
}

int cli_signals_fd(gantry_error_t *err)
{
	if (sig_pipe[0] < 0 && pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return gantry_error_errno(err, "cannot create the signal pipe");
	return sig_pipe[0];
}

int cli_signals_catch(bool on, gantry_error_t *err)
{
	struct sigaction sa = { .sa_handler = sig_handler, .sa_flags = SA_RESTART };
	unsigned char drain[64];

	if (!on) {
		for (size_t i = 0; taken && i < ARRAY_SIZE(forwarded); i++)
			sigaction(forwarded[i], &old[i], NULL);
		taken = false;
		return 0;
	}
	if (taken)
		return gantry_error(err, EBUSY, "signals are already forwarded to a session");
	if (cli_signals_fd(err) < 0)
		return -1;
	while (read(sig_pipe[0], drain, sizeof(drain)) > 0)
		;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < ARRAY_SIZE(forwarded); i++)
		sigaction(forwarded[i], &sa, &old[i]);
	taken = true;
	return 0;
}

int cli_session_stdio(struct sandbox_stdio *io, gantry_error_t *err)
{
	*io = (struct sandbox_stdio){ .in = STDIN_FILENO,
				      .out = STDOUT_FILENO,
				      .err = STDERR_FILENO,
				      .tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO),
				      .catch_signals = cli_signals_catch };
	io->signal_fd = cli_signals_fd(err);
	return io->signal_fd < 0 ? -1 : 0;
}
