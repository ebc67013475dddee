/* gantry-init as git's credential helper (git-credential(1)) inside the
 * container: `GUEST_HELPER_PATH credential get` reads git's description
 * of the credential it wants on stdin, asks the host's broker (vsock port
 * PROTO_BROKER_PORT) for it in the same format, and prints the answer for
 * git. The broker decides; a credential withheld is a line on stderr and
 * nothing on stdout, so git goes on as if no helper had one. `store` and
 * `erase` do nothing: the host keeps the secret, the guest never does.
 *
 * Only protocol, host, path and username go to the host, at most
 * GUEST_CRED_MAX bytes in all; the answer is read for at most
 * GUEST_CRED_WAIT_MS and at most GUEST_CRED_ANSWER_MAX bytes. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "guest/guest.h"

#define GUEST_CRED_MAX	      4096
#define GUEST_CRED_ANSWER_MAX (96 * 1024)
#define GUEST_CRED_WAIT_MS    15000 /* the host may run a command for 10 s */

static char request[GUEST_CRED_MAX + 1], answer[GUEST_CRED_ANSWER_MAX + 1];

/* git's description, its keys for the host kept: the request's length, or
 * -1 when it is too long or malformed. */
static ssize_t read_request(void)
{
	char line[GUEST_CRED_MAX + 2];
	size_t len = 0;

	while (fgets(line, sizeof(line), stdin)) {
		size_t n = strlen(line);

		if (n && line[n - 1] != '\n' && !feof(stdin))
			return -1; /* longer than all we send */
		if (line[0] == '\n' || line[0] == '\0')
			break;
		if (strncmp(line, "protocol=", 9) && strncmp(line, "host=", 5) &&
		    strncmp(line, "path=", 5) && strncmp(line, "username=", 9))
			continue;
		if (line[n - 1] != '\n')
			line[n++] = '\n';
		if (len + n > GUEST_CRED_MAX - 1)
			return -1;
		memcpy(request + len, line, n);
		len += n;
	}
	request[len++] = '\n';
	return (ssize_t)len;
}

/* The broker's answer, up to its blank line: its length, or -1. */
static ssize_t read_answer(int fd)
{
	uint64_t deadline = guest_now_ms(CLOCK_MONOTONIC) + GUEST_CRED_WAIT_MS;
	size_t len = 0;

	while (len < GUEST_CRED_ANSWER_MAX) {
		uint64_t now = guest_now_ms(CLOCK_MONOTONIC);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (now >= deadline || poll(&p, 1, (int)(deadline - now)) <= 0)
			return -1;
		n = read(fd, answer + len, GUEST_CRED_ANSWER_MAX - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		answer[len] = '\0';
		if (strstr(answer, "\n\n"))
			break;
	}
	answer[len] = '\0';
	return memchr(answer, '\0', len) ? -1 : (ssize_t)len;
}

int guest_credential_main(int argc, char **argv)
{
	struct guest_config cfg = { 0 };
	ssize_t n;
	char *end;
	int fd;

	if (argc < 1) {
		fprintf(stderr, "usage: %s credential get|store|erase\n", GUEST_HELPER_PATH);
		return 2;
	}
	if (strcmp(argv[0], "get") != 0)
		return 0;
	n = read_request();
	if (n < 0) {
		fprintf(stderr, "gantry: the credential asked for is too long\n");
		return 1;
	}
	fd = link_dial(&cfg, PROTO_BROKER_PORT);
	if (fd < 0) {
		fprintf(stderr, "gantry: no credential broker: %s\n", strerror(errno));
		return 0;
	}
	if (guest_write_all(fd, request, (size_t)n) < 0 || (n = read_answer(fd)) < 0) {
		fprintf(stderr, "gantry: the credential broker did not answer\n");
		close(fd);
		return 0;
	}
	close(fd);
	end = strstr(answer, "\n\n");
	if (end)
		end[1] = '\0';
	if (strncmp(answer, "error=", 6) == 0) {
		/* The host's reason, already one sanitised line. */
		fprintf(stderr, "gantry: %s", answer + 6);
		return 0;
	}
	explicit_bzero(request, sizeof(request));
	n = guest_write_all(STDOUT_FILENO, answer, strlen(answer));
	explicit_bzero(answer, sizeof(answer));
	return n < 0 ? 1 : 0;
}
