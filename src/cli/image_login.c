/* `gantry image login|logout|credentials`: credentials for registries.
 * A password comes from stdin (--password-stdin) or a terminal prompt,
 * never from a flag, and is checked against the registry before it is
 * stored in Gantry's own credentials file (see image/creds.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "cli/image.h"
#include "common/json.h"
#include "common/util.h"
#include "image/creds.h"
#include "sandbox/lifecycle.h"

/* Longer secrets are not passwords anyone types or pipes. */
#define LOGIN_SECRET_MAX 8192

static char *trim_newline(char *s)
{
	s[strcspn(s, "\r\n")] = '\0';
	return s;
}

/* One line from fd; NULL on EOF or error. */
static char *read_line(int fd)
{
	char *buf = xzalloc(LOGIN_SECRET_MAX + 1);
	size_t n = 0;

	while (n < LOGIN_SECRET_MAX) {
		ssize_t r = read(fd, buf + n, 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = '\0';
	if (n == 0) {
		free(buf);
		return NULL;
	}
	return trim_newline(buf);
}

/* Ask on the terminal; echo off for secrets. */
static char *prompt(const char *what, bool secret)
{
	cleanup_close int fd = open("/dev/tty", O_RDWR | O_CLOEXEC);
	struct termios old, quiet;
	bool restore = false;
	char *line;

	if (fd < 0)
		return NULL;
	dprintf(fd, "%s: ", what);
	if (secret && tcgetattr(fd, &old) == 0) {
		quiet = old;
		quiet.c_lflag &= ~(tcflag_t)ECHO;
		restore = tcsetattr(fd, TCSAFLUSH, &quiet) == 0;
	}
	line = read_line(fd);
	if (restore) {
		tcsetattr(fd, TCSAFLUSH, &old);
		dprintf(fd, "\n");
	}
	return line;
}

static int login_secret(bool from_stdin, const char **user, char **user_buf, char **pass,
			gantry_error_t *err)
{
	if (*user == NULL) {
		*user_buf = from_stdin ? NULL : prompt("Username", false);
		if (*user_buf == NULL)
			return gantry_error(err, 0, "image login: no user name: give -u USER");
		*user = *user_buf;
	}
	*pass = from_stdin ? read_line(STDIN_FILENO) : prompt("Password", true);
	if (*pass == NULL)
		return gantry_error(err, 0,
				    "image login: no password: pipe it to --password-stdin, or run "
				    "on a terminal");
	return 0;
}

int image_login(int argc, char **argv)
{
	cleanup_free char **pos = NULL;
	cleanup_free char *reg = NULL, *user_buf = NULL, *path = NULL;
	char *pass = NULL;
	const char *user = NULL;
	gantry_error_t err = NULL;
	bool help = false, from_stdin = false, insecure = false;
	int npos, ret;
	const struct flag flags[] = {
		{ "u", FLAG_STRING, &user, NULL, "USER", "user name (default: asked on the terminal)", 0 },
		{ "username", FLAG_STRING, &user, NULL, "USER", "the same as -u", 0 },
		{ "password-stdin", FLAG_BOOL, &from_stdin, NULL, NULL,
		  "read the password (one line) from stdin", 0 },
		{ "insecure", FLAG_BOOL, &insecure, NULL, NULL, "plain HTTP to this registry", 0 },
		IMAGE_HELP_FLAG(&help),
		{ 0 },
	};

	ret = image_args("image login", "login REGISTRY [-u USER] [--password-stdin]",
			 "Check credentials against REGISTRY and store them (0600) in\n"
			 "$GANTRY_HOME/credentials.json (default ~/.gantry). There is no password\n"
			 "flag: the password comes from stdin or a terminal prompt.",
			 flags, argc, argv, 1, 1, &pos, &npos);
	if (ret)
		return ret < 0 ? 0 : ret;
	if (login_secret(from_stdin, &user, &user_buf, &pass, &err) == 0 &&
	    sandbox_registry_login(pos[0], user, pass, insecure, &reg, &path, &err) == 0)
		printf("logged in to %s (credentials in %s)\n", reg, path);
	if (pass) {
		explicit_bzero(pass, strlen(pass));
		free(pass);
	}
	if (err == NULL)
		return 0;
	gantry_error_prefix(&err, "image login");
	return image_fail(&err);
}

int image_logout(int argc, char **argv)
{
	cleanup_free char **pos = NULL;
	gantry_error_t err = NULL;
	bool help = false;
	int npos, ret, status = 0;
	const struct flag flags[] = { IMAGE_HELP_FLAG(&help), { 0 } };

	ret = image_args("image logout", "logout REGISTRY...",
			 "Remove REGISTRY's credentials from Gantry's credentials file (Docker's\n"
			 "config and its helpers are left as they are).",
			 flags, argc, argv, 1, -1, &pos, &npos);
	if (ret)
		return ret < 0 ? 0 : ret;
	for (int i = 0; i < npos; i++) {
		cleanup_free char *reg = NULL;

		if (sandbox_registry_logout(pos[i], &reg, &err) == 0) {
			printf("logged out of %s\n", reg);
			continue;
		}
		gantry_error_prefix(&err, "image logout");
		status = image_fail(&err);
	}
	return status;
}

int image_credentials(int argc, char **argv)
{
	cleanup_free char **pos = NULL;
	gantry_error_t err = NULL;
	char **regs = NULL;
	bool help = false;
	size_t n = 0;
	int npos, ret, status = 0;
	const struct flag flags[] = { IMAGE_HELP_FLAG(&help), { 0 } };

	ret = image_args("image credentials", "credentials [REGISTRY...]",
			 "Say which source would give each registry's credentials: Docker's\n"
			 "credential helpers or config.json, then Gantry's credentials file.\n"
			 "Values are never shown. Without REGISTRY: every registry any source\n"
			 "names.",
			 flags, argc, argv, 0, -1, &pos, &npos);
	if (ret)
		return ret < 0 ? 0 : ret;
	if (npos == 0 && creds_registries(&regs, &n, &err) < 0)
		return image_fail(&err);
	for (size_t i = 0; i < (npos ? (size_t)npos : n); i++) {
		cleanup_free char *reg = NULL, *source = NULL;

		if (sandbox_registry_source(npos ? pos[i] : regs[i], &reg, &source, &err) < 0) {
			gantry_error_prefix(&err, "image credentials");
			status = image_fail(&err);
			continue;
		}
		printf("%-32s %s\n", reg, source ? source : "none (anonymous)");
	}
	strv_free(regs);
	return status;
}
