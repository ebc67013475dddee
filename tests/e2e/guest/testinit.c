/* testinit: PID 1 of the end-to-end test guests. It mounts the pseudo
 * filesystems, prints GANTRY-TEST-BOOTED, runs the `gantry.test=ACTION`
 * parameters of the kernel command line in order, prints one line per action
 * for the host to check, and ends the VM with guest_poweroff() (or a reset).
 *
 * A parameter with a dot is not handed to init, so the actions are read from
 * /proc/cmdline. Actions:
 *   smp                      cpus-online: <sysfs cpu/online>
 *   write:DEV:OFFSET:TEXT    pwrite TEXT at OFFSET on /dev/DEV, fsync; "wrote"
 *   read:DEV:OFFSET:LEN      read: <text> (non-printable bytes as '.')
 *   rng                      rng: ok (32 bytes of /dev/hwrng, not all zero)
 *   ro:DEV                   ro: <errno name of the refused write, or ok>
 *   serial:DEV               serial: <sysfs block/DEV/serial>
 *   share:TAG                mount virtiofs gantry-shares; share: <TAG/in.txt>,
 *                            then TAG/out.txt written with "from-guest"
 *   hold-share:TAG           mount the hub, make /mnt/TAG the working directory and
 *                            keep held.txt there open for appending; "hold-share: ok"
 *   held:TEXT                TEXT and a newline through that open file, then in.txt
 *                            read by its relative path: held: <in.txt, or the errno>
 *   vsock:PORT               dial host port PORT (CID 2), send "from-guest\n";
 *                            vsock: <the host's first line>
 *   tcp:PORT                 eth0 192.168.127.2/24 up, dial 192.168.127.254:PORT
 *                            (the host's loopback through -net), send
 *                            "from-guest\n"; tcp: <the host's first line>
 *   period:MS                the gap between count's lines (default 200 ms)
 *   count:N                  N lines "count: K TOKEN", TOKEN drawn once
 *   hold:N                   wait N seconds (at most 600), the VM left running
 *   exit:N                   the final status (default 0; 1 if an action failed)
 *   reset                    end with reboot(RB_AUTOBOOT), not the exit port
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/vm_sockets.h>
#include <net/if.h>
#include <netinet/in.h>

#include "guest/poweroff.h"

#define TEST_PARAM	"gantry.test="
#define CMDLINE_MAX	4096
#define RNG_BYTES	32
#define READ_MAX	512
#define SYSFS_VALUE_MAX 256

struct run_state {
	int exit_status;
	bool exit_given;
	bool failed;
	bool reset;
};

static int fail(struct run_state *s, const char *what, const char *detail)
{
	printf("testinit: %s: %s\n", what, detail);
	s->failed = true;
	return -1;
}

static void mount_one(const char *source, const char *target, const char *type)
{
	if (mkdir(target, 0755) < 0 && errno != EEXIST && errno != EROFS)
		printf("testinit: mkdir %s: %s\n", target, strerror(errno));
	/* The kernel has already mounted devtmpfs when it mounted a root disk. */
	if (mount(source, target, type, MS_NOSUID | MS_NOEXEC, NULL) < 0 && errno != EBUSY)
		printf("testinit: mount %s: %s\n", target, strerror(errno));
}

/* An initramfs without dev/console leaves init with no fds 0-2. */
static void console_open(void)
{
	int fd;

	if (fcntl(STDOUT_FILENO, F_GETFD) >= 0)
		return;
	fd = open("/dev/console", O_RDWR | O_NOCTTY);
	if (fd < 0)
		return;
	for (int i = 0; i <= 2; i++) {
		if (fd != i)
			dup2(fd, i);
	}
	if (fd > 2)
		close(fd);
}

/* Read a small text file, without its trailing newline. */
static int read_text(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\0'))
		n--;
	buf[n] = '\0';
	return 0;
}

static bool parse_num(const char *s, unsigned long long *out)
{
	char *end;

	if (*s == '\0')
		return false;
	errno = 0;
	*out = strtoull(s, &end, 0);
	return errno == 0 && *end == '\0';
}

/* Split "DEV:OFFSET:REST" in place; REST keeps any further colons. */
static bool split3(char *arg, char **dev, unsigned long long *off, char **rest)
{
	char *c1 = strchr(arg, ':'), *c2;

	if (c1 == NULL)
		return false;
	*c1 = '\0';
	c2 = strchr(c1 + 1, ':');
	if (c2 == NULL)
		return false;
	*c2 = '\0';
	*dev = arg;
	*rest = c2 + 1;
	return **dev != '\0' && parse_num(c1 + 1, off);
}

static void dev_path(char *buf, size_t size, const char *dev)
{
	snprintf(buf, size, "/dev/%s", dev);
}

static int action_smp(struct run_state *s)
{
	char online[SYSFS_VALUE_MAX];

	if (read_text("/sys/devices/system/cpu/online", online, sizeof(online)) < 0)
		return fail(s, "smp", strerror(errno));
	printf("cpus-online: %s\n", online);
	return 0;
}

static int action_write(struct run_state *s, char *arg)
{
	unsigned long long off;
	char *dev, *text, path[64];
	size_t len;
	int fd;

	if (!split3(arg, &dev, &off, &text))
		return fail(s, "write", "want write:DEV:OFFSET:TEXT");
	dev_path(path, sizeof(path), dev);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(s, "write", strerror(errno));
	len = strlen(text);
	if (pwrite(fd, text, len, (off_t)off) != (ssize_t)len || fsync(fd) < 0) {
		fail(s, "write", strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	printf("wrote\n");
	return 0;
}

static int action_read(struct run_state *s, char *arg)
{
	unsigned long long off, len;
	char *dev, *len_s, path[64], buf[READ_MAX + 1];
	ssize_t n;
	int fd;

	if (!split3(arg, &dev, &off, &len_s) || !parse_num(len_s, &len) || len > READ_MAX)
		return fail(s, "read", "want read:DEV:OFFSET:LEN (LEN at most 512)");
	dev_path(path, sizeof(path), dev);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(s, "read", strerror(errno));
	n = pread(fd, buf, (size_t)len, (off_t)off);
	close(fd);
	if (n < 0)
		return fail(s, "read", strerror(errno));
	for (ssize_t i = 0; i < n; i++) {
		if (buf[i] < 0x20 || buf[i] > 0x7e)
			buf[i] = '.';
	}
	buf[n] = '\0';
	printf("read: %s\n", buf);
	return 0;
}

static int action_rng(struct run_state *s)
{
	unsigned char buf[RNG_BYTES] = { 0 };
	size_t got = 0;
	bool nonzero = false;
	int fd = open("/dev/hwrng", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return fail(s, "rng", strerror(errno));
	while (got < sizeof(buf)) {
		ssize_t n = read(fd, buf + got, sizeof(buf) - got);

		if (n <= 0) {
			fail(s, "rng", n < 0 ? strerror(errno) : "end of file");
			close(fd);
			return -1;
		}
		got += (size_t)n;
	}
	close(fd);
	for (size_t i = 0; i < sizeof(buf); i++)
		nonzero |= buf[i] != 0;
	printf("rng: %s\n", nonzero ? "ok" : "all zero");
	return 0;
}

/* The name of the first refusal (open, write or fsync), or "ok". */
static void action_ro(const char *dev)
{
	static const char probe[] = "gantry-ro-probe";
	char path[64];
	const char *result = "ok";
	int fd;

	dev_path(path, sizeof(path), dev);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		result = strerrorname_np(errno);
	} else {
		if (pwrite(fd, probe, sizeof(probe) - 1, 0) < 0 || fsync(fd) < 0)
			result = strerrorname_np(errno);
		close(fd);
	}
	printf("ro: %s\n", result ? result : "unknown errno");
}

static int action_serial(struct run_state *s, const char *dev)
{
	char path[128], serial[SYSFS_VALUE_MAX];

	snprintf(path, sizeof(path), "/sys/block/%s/serial", dev);
	if (read_text(path, serial, sizeof(serial)) < 0)
		return fail(s, "serial", strerror(errno));
	printf("serial: %s\n", serial);
	return 0;
}

/* gantry run -share: the hub holds the share as a directory named TAG. */
static int action_share(struct run_state *s, const char *tag)
{
	static const char reply[] = "from-guest";
	char path[256], text[READ_MAX];
	int fd;

	if (mkdir("/mnt", 0755) < 0 && errno != EEXIST)
		return fail(s, "share", strerror(errno));
	if (mount("gantry-shares", "/mnt", "virtiofs", 0, NULL) < 0 && errno != EBUSY)
		return fail(s, "share", strerror(errno));
	snprintf(path, sizeof(path), "/mnt/%s/in.txt", tag);
	if (read_text(path, text, sizeof(text)) < 0)
		return fail(s, "share", strerror(errno));
	printf("share: %s\n", text);
	snprintf(path, sizeof(path), "/mnt/%s/out.txt", tag);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return fail(s, "share", strerror(errno));
	if (write(fd, reply, sizeof(reply) - 1) != sizeof(reply) - 1 || close(fd) < 0)
		return fail(s, "share", strerror(errno));
	return 0;
}

/* hold-share and held: a working directory and an open file on a share,
 * across a snapshot and restore between the two. */
static int held_fd = -1;

static int action_hold_share(struct run_state *s, const char *tag)
{
	char path[256];

	if (mkdir("/mnt", 0755) < 0 && errno != EEXIST)
		return fail(s, "hold-share", strerror(errno));
	if (mount("gantry-shares", "/mnt", "virtiofs", 0, NULL) < 0 && errno != EBUSY)
		return fail(s, "hold-share", strerror(errno));
	snprintf(path, sizeof(path), "/mnt/%s", tag);
	if (chdir(path) < 0 ||
	    (held_fd = open("held.txt", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0)
		return fail(s, "hold-share", strerror(errno));
	printf("hold-share: ok\n");
	return 0;
}

static int action_held(struct run_state *s, const char *text)
{
	char line[READ_MAX];
	size_t n = strlen(text);

	if (held_fd < 0 || write(held_fd, text, n) != (ssize_t)n || write(held_fd, "\n", 1) != 1 ||
	    read_text("in.txt", line, sizeof(line)) < 0)
		return fail(s, "held", strerror(errno));
	printf("held: %s\n", line);
	return 0;
}

/* Connect fd to sa, send "from-guest\n", print "WHAT: " and the first line
 * the host sends back; fd is closed. */
static int dial_and_greet(struct run_state *s, const char *what, int fd, const struct sockaddr *sa,
			  socklen_t len)
{
	static const char hello[] = "from-guest\n";
	char line[READ_MAX];
	size_t got = 0;

	if (fd < 0 || connect(fd, sa, len) < 0 ||
	    write(fd, hello, sizeof(hello) - 1) != sizeof(hello) - 1) {
		if (fd >= 0)
			close(fd);
		return fail(s, what, strerror(errno));
	}
	while (got < sizeof(line) - 1) {
		ssize_t n = read(fd, line + got, 1);

		if (n <= 0 || line[got] == '\n')
			break;
		got++;
	}
	line[got] = '\0';
	close(fd);
	printf("%s: %s\n", what, line);
	return 0;
}

/* gantry run -vsock DIR: a guest dial to host port P reaches DIR/P.sock. */
static int action_vsock(struct run_state *s, unsigned int port)
{
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_HOST,
				  .svm_port = port };
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);

	return dial_and_greet(s, "vsock", fd, (struct sockaddr *)&sa, sizeof(sa));
}

/* count:N: N lines "count: K TOKEN" 200 ms apart (period:MS before it
 * sets another gap), K and TOKEN (drawn once, at the start) held in this
 * process's memory: a VM saved and restored in between goes on counting
 * with the same token. */
static unsigned int count_period_ms = 200;

static void action_count(unsigned long long n)
{
	struct timespec t;
	unsigned long long token;

	clock_gettime(CLOCK_MONOTONIC, &t);
	token = (unsigned long long)t.tv_nsec * 2654435761ULL % 1000000007ULL;
	for (unsigned long long k = 1; k <= n; k++) {
		printf("count: %llu %llu\n", k, token);
		usleep(count_period_ms * 1000);
	}
}

/* gantry run -net -allow-local-net: eth0 at 192.168.127.2/24, then a TCP
 * dial to the host's loopback (192.168.127.254) port P, a line each way. */
static int action_tcp(struct run_state *s, unsigned int port)
{
	struct sockaddr_in host = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct ifreq ifr = { 0 };
	struct sockaddr_in *in = (struct sockaddr_in *)&ifr.ifr_addr;
	int ctl = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "eth0");
	in->sin_family = AF_INET;
	inet_pton(AF_INET, "192.168.127.2", &in->sin_addr);
	if (ctl < 0 || ioctl(ctl, SIOCSIFADDR, &ifr) < 0)
		return fail(s, "tcp", "eth0 address");
	inet_pton(AF_INET, "255.255.255.0", &in->sin_addr);
	if (ioctl(ctl, SIOCSIFNETMASK, &ifr) < 0 || ioctl(ctl, SIOCGIFFLAGS, &ifr) < 0)
		return fail(s, "tcp", "eth0 netmask");
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(ctl, SIOCSIFFLAGS, &ifr) < 0)
		return fail(s, "tcp", "eth0 up");
	close(ctl);
	inet_pton(AF_INET, "192.168.127.254", &host.sin_addr);
	return dial_and_greet(s, "tcp", socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0),
			      (struct sockaddr *)&host, sizeof(host));
}

static void action_run(struct run_state *s, char *action)
{
	char *colon = strchr(action, ':');
	char *arg = colon ? colon + 1 : NULL;
	unsigned long long n;

	if (colon)
		*colon = '\0';
	if (strcmp(action, "smp") == 0 && arg == NULL) {
		action_smp(s);
	} else if (strcmp(action, "write") == 0 && arg) {
		action_write(s, arg);
	} else if (strcmp(action, "read") == 0 && arg) {
		action_read(s, arg);
	} else if (strcmp(action, "rng") == 0 && arg == NULL) {
		action_rng(s);
	} else if (strcmp(action, "ro") == 0 && arg && *arg) {
		action_ro(arg);
	} else if (strcmp(action, "serial") == 0 && arg && *arg) {
		action_serial(s, arg);
	} else if (strcmp(action, "share") == 0 && arg && *arg && !strchr(arg, '/')) {
		action_share(s, arg);
	} else if (strcmp(action, "hold-share") == 0 && arg && *arg && !strchr(arg, '/')) {
		action_hold_share(s, arg);
	} else if (strcmp(action, "held") == 0 && arg && *arg) {
		action_held(s, arg);
	} else if (strcmp(action, "vsock") == 0 && arg && parse_num(arg, &n) && n <= UINT32_MAX) {
		action_vsock(s, (unsigned int)n);
	} else if (strcmp(action, "tcp") == 0 && arg && parse_num(arg, &n) && n > 0 && n <= 65535) {
		action_tcp(s, (unsigned int)n);
	} else if (strcmp(action, "hold") == 0 && arg && parse_num(arg, &n) && n <= 600) {
		sleep((unsigned int)n);
		printf("hold: %llu\n", n);
	} else if (strcmp(action, "count") == 0 && arg && parse_num(arg, &n) && n <= 1000000) {
		action_count(n);
	} else if (strcmp(action, "period") == 0 && arg && parse_num(arg, &n) && n >= 1 && n <= 10000) {
		count_period_ms = (unsigned int)n;
	} else if (strcmp(action, "exit") == 0 && arg && parse_num(arg, &n) && n <= 255) {
		s->exit_status = (int)n;
		s->exit_given = true;
	} else if (strcmp(action, "reset") == 0 && arg == NULL) {
		s->reset = true;
	} else {
		if (colon)
			*colon = ':';
		fail(s, "unknown action", action);
	}
}

/* Walk the command line as the kernel splits it: spaces separate parameters
 * except inside double quotes, and the quotes themselves are dropped. */
static void cmdline_run(struct run_state *s, char *p)
{
	while (*p) {
		char param[CMDLINE_MAX];
		size_t len = 0;
		bool quoted = false;

		while (*p == ' ' || *p == '\n' || *p == '\t')
			p++;
		for (; *p && (quoted || (*p != ' ' && *p != '\n' && *p != '\t')); p++) {
			if (*p == '"')
				quoted = !quoted;
			else if (len < sizeof(param) - 1)
				param[len++] = *p;
		}
		param[len] = '\0';
		if (strncmp(param, TEST_PARAM, strlen(TEST_PARAM)) == 0)
			action_run(s, param + strlen(TEST_PARAM));
	}
}

int main(void)
{
	struct run_state s = { 0 };
	char cmdline[CMDLINE_MAX];

	setvbuf(stdout, NULL, _IOLBF, 0);
	mount_one("devtmpfs", "/dev", "devtmpfs");
	console_open();
	mount_one("proc", "/proc", "proc");
	mount_one("sysfs", "/sys", "sysfs");
	printf("GANTRY-TEST-BOOTED\n");

	if (read_text("/proc/cmdline", cmdline, sizeof(cmdline)) < 0)
		fail(&s, "/proc/cmdline", strerror(errno));
	else
		cmdline_run(&s, cmdline);

	/* write() returns once the tty holds the text, not once the UART has
	 * sent it: wait for the console, or ending the VM cuts the output. */
	fflush(stdout);
	tcdrain(STDOUT_FILENO);
	if (s.reset) {
		sync();
		reboot(RB_AUTOBOOT);
	}
	guest_poweroff(s.exit_given ? s.exit_status : s.failed ? 1 : 0);
}
