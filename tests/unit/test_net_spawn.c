/* Starting and ending the network worker (net/spawn.h). The worker's role
 * is played by this test binary itself, executed as `__net-worker` the way
 * net_worker_start executes gantry, behaving as GANTRY_TEST_WORKER says: it
 * checks what it was given (fds 3 and 4 SEQPACKET, nothing else open, its
 * arguments) and says so in its log, then logs each publish and the socket
 * beside it, or fails to start in each of the ways a worker can. The real worker's own behaviour is
 * tested with it (src/net/worker.c). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/settings.h"
#include "common/util.h"
#include "net/net.h"
#include "net/spawn.h"
#include "worker/worker.h"

#define MODE_ENV "GANTRY_TEST_WORKER"

/* The worker keeps only the variables it is given: this one among them. */
static const char *const test_env[] = { MODE_ENV, NULL };

static bool is_seqpacket(int fd)
{
	int type = 0;
	socklen_t len = sizeof(type);

	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_SEQPACKET;
}

/* A control request with the socket that came beside it, in the log:
 * `publish SPEC fd=TYPE` (stream listening, dgram, or none); answered ok
 * with its id. Returns false when the socket closed. */
static bool play_request(void)
{
	char buf[1024], ans[128], cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) - 1 };
	struct msghdr m = { .msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	const char *type = "none", *spec, *id;
	int fd = -1, t = 0, on = 0;
	socklen_t l = sizeof(int);
	ssize_t n = recvmsg(3, &m, 0);

	if (n <= 0)
		return false;
	buf[n] = '\0';
	cm = CMSG_FIRSTHDR(&m);
	if (cm && cm->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	if (fd >= 0 && getsockopt(fd, SOL_SOCKET, SO_TYPE, &t, &l) == 0) {
		l = sizeof(int);
		getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &l);
		type = t == SOCK_DGRAM ? "dgram" : on ? "listening" : "stream";
		close(fd);
	}
	spec = strstr(buf, "\"spec\":\"");
	id = strstr(buf, "\"id\":");
	fprintf(stderr, "worker: publish %.*s fd=%s\n", spec ? (int)strcspn(spec + 8, "\"") : 0,
		spec ? spec + 8 : "", type);
	snprintf(ans, sizeof(ans), "{\"ok\":true,\"id\":%ld}", id ? strtol(id + 5, NULL, 10) : 0L);
	return send(3, ans, strlen(ans), 0) > 0;
}

/* The worker's side: what net.h says a worker gets, checked. */
static int play_worker(int argc, char **argv)
{
	const char *mode = getenv(MODE_ENV);
	char msg[512], buf[2048];
	int open_fds = 0;
	ssize_t n;

	if (mode == NULL)
		return 2;
	fprintf(stderr, "worker: mode %s\n", mode);
	if (strcmp(mode, "exit") == 0)
		return 3;
	if (strcmp(mode, "silent") == 0) {
		pause();
		return 0;
	}
	if (strcmp(mode, "error") == 0) {
		static const char e[] = "{\"op\":\"error\",\"ok\":false,\"error\":\"port "
					"127.0.0.1:1/tcp: address in use\\u001b[2J\"}";

		(void)!send(3, e, sizeof(e) - 1, 0);
		return 1;
	}
	for (int fd = 5; fd < 256; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			open_fds++;
	/* What it was given, in its log, where the test reads it. */
	fprintf(stderr, "worker: frame=%d ctl=%d stdin=%s others=%d args=", is_seqpacket(4),
		is_seqpacket(3), isatty(0) ? "tty" : "file", open_fds);
	for (int i = 1; i < argc; i++)
		fprintf(stderr, "%s%s", argv[i], i + 1 < argc ? " " : "\n");
	if (strcmp(mode, "stubborn") == 0)
		signal(SIGTERM, SIG_IGN);
	snprintf(msg, sizeof(msg), "{\"op\":\"ready\",\"ok\":true}");
	if (send(3, msg, strlen(msg), 0) < 0)
		return 1;
	if (strcmp(mode, "stubborn") == 0)
		for (;;)
			pause();
	/* Answer requests, and echo frames back until the frame socket closes. */
	for (;;) {
		struct pollfd p[2] = { { .fd = 3, .events = POLLIN },
				       { .fd = 4, .events = POLLIN } };

		if (poll(p, 2, -1) < 0)
			return 1;
		if ((p[0].revents & POLLIN) && !play_request())
			p[0].fd = -1;
		if (p[1].revents & (POLLIN | POLLHUP)) {
			if ((n = recv(4, buf, sizeof(buf), 0)) <= 0)
				return 0;
			(void)!send(4, buf, (size_t)n, 0);
		}
	}
}

static int log_fd(char *path)
{
	int fd;

	strcpy(path, "/tmp/gantry-spawntest.XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	return fd;
}

static bool alive(pid_t pid)
{
	return kill(pid, 0) == 0;
}

static void test_start_and_stop(void **state)
{
	char *ports[] = { "127.0.0.1:0:80", "127.0.0.1:0:53/udp" };
	struct net_worker w;
	gantry_error_t err = NULL;
	char path[64], buf[1024];
	int log = log_fd(path), fd;
	pid_t pid;
	ssize_t n = -1;

	(void)state;
	setenv(MODE_ENV, "ok", 1);
	gantry_settings_load();
	if (net_worker_start(
		    &w, &(struct net_worker_opts){ .ports = ports, .nr_ports = 2, .env = test_env },
		    log, &err) < 0)
		fail_msg("%s", gantry_error_str(err));
	assert_true(w.pid > 0 && w.vmm_fd >= 0 && w.ctl_fd >= 0);
	assert_true(fcntl(w.vmm_fd, F_GETFL) & O_NONBLOCK);
	assert_true(fcntl(w.vmm_fd, F_GETFD) & FD_CLOEXEC);
	assert_true(fcntl(w.ctl_fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(send(w.vmm_fd, "frame", 5, 0), 5);
	for (int i = 0; i < 200 && (n = recv(w.vmm_fd, buf, sizeof(buf), 0)) < 0; i++)
		usleep(10000);
	assert_int_equal(n, 5);
	pid = w.pid;
	net_worker_stop(&w);
	assert_int_equal(w.pid, -1);
	assert_int_equal(w.vmm_fd, -1);
	assert_false(alive(pid)); /* reaped, not a zombie */
	/* Its fds 3 and 4 were the socketpairs, nothing else was open, its
	 * stdin was not the caller's, and each port came in a publish with its
	 * host socket bound by the caller. */
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = read(fd, buf, sizeof(buf) - 1);
	assert_true(n > 0);
	buf[n] = '\0';
	close(fd);
	assert_non_null(strstr(buf,
			       "worker: frame=1 ctl=1 stdin=file others=0 args=" NET_WORKER_ROLE
			       " --frame-fd 4 --ctl-fd 3 --isolation off --ns 0x0 "
			       "--userns-errno 0\n"));
	assert_non_null(strstr(buf, ":80 fd=listening\nworker: publish 127.0.0.1:"));
	assert_non_null(strstr(buf, ":53/udp fd=dgram\n"));
	close(log);
	unlink(path);
}

/* Its one-line error, sanitised; it is reaped. */
static void test_worker_refuses(void **state)
{
	struct net_worker w;
	gantry_error_t err = NULL;
	char path[64];
	int log = log_fd(path);

	(void)state;
	setenv(MODE_ENV, "error", 1);
	gantry_settings_load();
	assert_int_equal(
		net_worker_start(&w, &(struct net_worker_opts){ .env = test_env }, log, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "port 127.0.0.1:1/tcp: address in use"));
	assert_null(strchr(gantry_error_str(err), '\x1b'));
	assert_int_equal(w.pid, -1);
	assert_int_equal(w.ctl_fd, -1);
	gantry_error_free(&err);
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1); /* no child left */
	close(log);
	unlink(path);
}

/* Exits without a word: said so, with its status; its stderr is the log. */
static void test_worker_exits(void **state)
{
	struct net_worker w;
	gantry_error_t err = NULL;
	char path[64], text[256] = "";
	int log = log_fd(path), fd;

	(void)state;
	setenv(MODE_ENV, "exit", 1);
	gantry_settings_load();
	assert_int_equal(
		net_worker_start(&w, &(struct net_worker_opts){ .env = test_env }, log, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "exited (status 3) before it was ready"));
	gantry_error_free(&err);
	fd = open(path, O_RDONLY);
	assert_true(read(fd, text, sizeof(text) - 1) > 0);
	assert_non_null(strstr(text, "worker: mode exit"));
	close(fd);
	close(log);
	unlink(path);
}

/* Silent: killed at the deadline. */
static void test_worker_silent(void **state)
{
	struct net_worker w;
	gantry_error_t err = NULL;
	char path[64];
	int log = log_fd(path);
	uint64_t t0 = now_ms();

	(void)state;
	setenv(MODE_ENV, "silent", 1);
	gantry_settings_load();
	assert_int_equal(
		net_worker_start(&w, &(struct net_worker_opts){ .env = test_env }, log, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "not ready in 10 s"));
	assert_true(now_ms() - t0 < NET_WORKER_READY_MS + 3000);
	gantry_error_free(&err);
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	close(log);
	unlink(path);
}

/* One that ignores EOF and SIGTERM is killed after 2 s. */
static void test_stop_stubborn(void **state)
{
	struct net_worker w;
	gantry_error_t err = NULL;
	char path[64];
	int log = log_fd(path);
	uint64_t t0;
	pid_t pid;

	(void)state;
	setenv(MODE_ENV, "stubborn", 1);
	gantry_settings_load();
	if (net_worker_start(&w, &(struct net_worker_opts){ .env = test_env }, log, &err) < 0)
		fail_msg("%s", gantry_error_str(err));
	pid = w.pid;
	t0 = now_ms();
	net_worker_stop(&w);
	assert_true(now_ms() - t0 >= WORKER_STOP_MS - 100);
	assert_true(now_ms() - t0 < 2 * WORKER_STOP_MS + 1000);
	assert_false(alive(pid));
	close(log);
	unlink(path);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_start_and_stop), cmocka_unit_test(test_worker_refuses),
		cmocka_unit_test(test_worker_exits),   cmocka_unit_test(test_worker_silent),
		cmocka_unit_test(test_stop_stubborn),
	};

	if (argc > 1 && strcmp(argv[1], NET_WORKER_ROLE) == 0)
		return play_worker(argc, argv);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
