/* hostile: a workload that tries to stall the host from inside a sandbox's
 * container (tests/e2e/test_hostile.py). The container shares the guest's
 * vsock, so any process in it can dial the host's agent ports.
 *
 *   hostile dial PORT COUNT
 *
 * keeps COUNT connections to the host's vsock PORT (1026: the stdio port)
 * open and never writes a byte on them. A connection the host closes is
 * dialled again, at most every REDIAL_MS, so the host cannot wait them out.
 * Once COUNT are connected it prints "dialled COUNT", then it runs until it
 * is killed; what arrives on them is read and dropped. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#define MAX_DIALS 64
#define REDIAL_MS 200

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int dial(unsigned int port)
{
	struct sockaddr_vm sa = {
		.svm_family = AF_VSOCK,
		.svm_cid = VMADDR_CID_HOST,
		.svm_port = port,
	};
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static int usage(void)
{
	fprintf(stderr, "usage: hostile dial PORT COUNT (COUNT at most %d)\n", MAX_DIALS);
	return 2;
}

static int silent_dials(unsigned int port, int count)
{
	struct pollfd fds[MAX_DIALS];
	uint64_t redial_at[MAX_DIALS] = { 0 };
	int connected = 0;
	char buf[4096];

	for (int i = 0; i < count; i++) {
		fds[i] = (struct pollfd){ .fd = dial(port), .events = POLLIN };
		if (fds[i].fd < 0) {
			fprintf(stderr, "hostile: dial vsock port %u: %s\n", port, strerror(errno));
			return 1;
		}
		connected++;
	}
	printf("dialled %d\n", connected);
	fflush(stdout);
	for (;;) {
		uint64_t now = now_ms(), wake = UINT64_MAX;
		int timeout = -1;

		for (int i = 0; i < count; i++) {
			if (fds[i].fd >= 0)
				continue;
			if (now >= redial_at[i]) {
				fds[i].fd = dial(port);
				redial_at[i] = now + REDIAL_MS;
			}
			if (fds[i].fd < 0 && redial_at[i] < wake)
				wake = redial_at[i];
		}
		if (wake != UINT64_MAX)
			timeout = (int)(wake - now);
		if (poll(fds, (nfds_t)count, timeout) < 0 && errno != EINTR)
			return 1;
		for (int i = 0; i < count; i++) {
			if (fds[i].fd < 0 || !fds[i].revents)
				continue;
			if (read(fds[i].fd, buf, sizeof(buf)) > 0)
				continue;
			close(fds[i].fd);
			fds[i].fd = -1;
		}
	}
}

int main(int argc, char **argv)
{
	char *end;
	long port, count;

	if (argc != 4 || strcmp(argv[1], "dial") != 0)
		return usage();
	port = strtol(argv[2], &end, 10);
	if (*end || port <= 0 || port > UINT32_MAX)
		return usage();
	count = strtol(argv[3], &end, 10);
	if (*end || count <= 0 || count > MAX_DIALS)
		return usage();
	return silent_dials((unsigned int)port, (int)count);
}
