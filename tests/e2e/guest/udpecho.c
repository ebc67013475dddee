/* udpecho: a UDP echo server for the network end-to-end tests, run in a
 * sandbox's container, where busybox's nc has no UDP. `udpecho PORT` sends
 * every datagram that reaches PORT back to its sender, until it is killed. */
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_in addr = { .sin_family = AF_INET };
	static char buf[65536];
	long port;
	int fd;

	port = argc == 2 ? strtol(argv[1], NULL, 10) : 0;
	if (port <= 0 || port > 65535) {
		fprintf(stderr, "usage: udpecho PORT\n");
		return 2;
	}
	addr.sin_port = htons((uint16_t)port);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		perror("udpecho");
		return 1;
	}
	for (;;) {
		struct sockaddr_in peer;
		socklen_t len = sizeof(peer);
		ssize_t n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&peer, &len);

		if (n >= 0)
			sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&peer, len);
	}
}
