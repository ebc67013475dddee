/* The guest's ends of the OAuth services of a one-shot run (the host's
 * sandbox/oneshot_oauth.h), small clients that hold nothing and parse
 * nothing:
 *
 * `gantry-guest oauth login|token PROVIDER` (PROTO_OAUTH_ARG), custody's:
 * one request line to the host's PROTO_CUSTODY_PORT, and its answer, a
 * JSON line (the access token, its refresh token a sentinel) printed on
 * stdout, or why not on stderr. A login waits for the user to finish it in
 * a browser on the host; the host bounds that wait. A sandbox's host sends
 * the login's URL first ("open URL"), for this tool to show. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guest/guest.h"

/* The answer's lines as they come: a login's "open URL" shown at once
 * (a sandbox's host has no terminal to show it on), then the answer. */
static int read_answer(int fd, const char *provider, char *answer)
{
	size_t got = 0;
	ssize_t n;

	for (;;) {
		char *nl = memchr(answer, '\n', got);

		if (nl && got > 5 && strncmp(answer, "open ", 5) == 0) {
			*nl = '\0';
			fprintf(stderr, "gantry: to log in to %s, open %s in a browser on the host\n",
				provider, answer + 5);
			got -= (size_t)(nl + 1 - answer);
			memmove(answer, nl + 1, got);
			continue;
		}
		if (nl || got == PROTO_CUSTODY_ANSWER_MAX)
			break;
		n = read(fd, answer + got, PROTO_CUSTODY_ANSWER_MAX - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	answer[got] = '\0';
	answer[strcspn(answer, "\n")] = '\0';
	if (answer[0] != '{') {
		fprintf(stderr, "gantry: %s\n", answer[0] ? answer : "the host gave no answer");
		return 1;
	}
	puts(answer);
	return fflush(stdout) == 0 ? 0 : 1;
}

int guest_oauth_main(int argc, char **argv)
{
	static const struct guest_config cfg = { 0 };
	char *answer = malloc(PROTO_CUSTODY_ANSWER_MAX + 1), line[128];
	int fd, r;

	if (argc != 2 || (strcmp(argv[0], "login") != 0 && strcmp(argv[0], "token") != 0) ||
	    strlen(argv[1]) == 0 || strlen(argv[1]) > 32 || strpbrk(argv[1], " \n") ||
	    answer == NULL) {
		fprintf(stderr, "usage: %s %s login|token PROVIDER\n", GUEST_HELPER_PATH,
			PROTO_OAUTH_ARG);
		return 2;
	}
	fd = link_dial(&cfg, PROTO_CUSTODY_PORT);
	if (fd < 0) {
		fprintf(stderr, "gantry: no OAuth custody here (run with -oauth-custody): %s\n",
			strerror(errno));
		return 1;
	}
	if (strcmp(argv[0], "login") == 0)
		fprintf(stderr, "gantry: log in to %s in a browser on the host: open the URL "
				"Gantry shows\n",
			argv[1]);
	snprintf(line, sizeof(line), "%s %s\n", argv[0], argv[1]);
	if (guest_write_all(fd, line, strlen(line)) < 0)
		return 1;
	r = read_answer(fd, argv[1], answer);
	close(fd);
	free(answer);
	return r;
}

/* `gantry-guest open-url URL` (PROTO_OPEN_URL_ARG), the guest's BROWSER
 * under gantry wrap: the URL a login tool would open goes to the host,
 * which shows it to the user and, for a loopback callback, bridges the
 * browser's answer back in (the host's OAuth bridge). */
int guest_open_url_main(int argc, char **argv)
{
	static const struct guest_config cfg = { 0 };
	char answer[256];
	size_t len;
	ssize_t n;
	int fd;

	if (argc != 1 || (len = strlen(argv[0])) == 0 || len > PROTO_OAUTH_URL_MAX ||
	    strchr(argv[0], '\n')) {
		fprintf(stderr, "usage: %s %s URL\n", GUEST_HELPER_PATH, PROTO_OPEN_URL_ARG);
		return 2;
	}
	fd = link_dial(&cfg, PROTO_OAUTH_PORT);
	if (fd < 0) {
		fprintf(stderr, "gantry: cannot reach the host to open %s: %s\n", argv[0],
			strerror(errno));
		return 1;
	}
	if (guest_write_all(fd, argv[0], len) < 0 || guest_write_all(fd, "\n", 1) < 0)
		return 1;
	n = read(fd, answer, sizeof(answer) - 1);
	close(fd);
	if (n <= 0)
		return 1;
	answer[n] = '\0';
	answer[strcspn(answer, "\n")] = '\0';
	if (strcmp(answer, "ok") != 0) {
		fprintf(stderr, "gantry: %s\n", answer);
		return 1;
	}
	return 0;
}
